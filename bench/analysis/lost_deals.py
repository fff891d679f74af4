"""How negotiation games end without a deal, and whether an offer that does not add up costs one.

    python bench/analysis/lost_deals.py LABEL=GAMES.jsonl [LABEL=GAMES.jsonl ...]

The evaluation report gives the agreement rate and the endings; this splits the games without a deal further.
Models state offers in messages in the scripted negotiator's words ("I take 1 book, 0 hats, 2 balls; you take
0 books, 2 hats, 0 balls"). An offer whose two halves do not add up to the pool is a slip: a partner that accepts
its "you take" half and a writer that proposes its "I take" half make proposals that do not match. The scripted
negotiator reads the "I take" half only, so against it a slip costs nothing; against a model it can cost the deal.

Per file: games, deals, and the games without one by cause (move limit, invalid moves, proposals that do not
match after a slipped last offer, after an offer that adds up); then per seat kind (llm, scripted) the offers
stated, the share that slipped, and the share of games with a slip of that kind's seat that still ended in a deal.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from selfplay_gen.games.negotiation.moves import misstates, stated_split
from selfplay_gen.stats.report import markdown_table


def tally(games: Path) -> tuple[collections.Counter[str], dict[str, collections.Counter[str]]]:
    """Endings by cause, and per seat kind its offers, slips and games with a slip (and of those, deals)."""
    endings: collections.Counter[str] = collections.Counter()
    seats: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in games.read_text().splitlines():
        record = json.loads(line)
        counts = tuple(record["instance"]["counts"])
        kinds = [player["kind"] for player in record["players"]]
        outcome = record["outcome"]
        last_slipped, slipped_by = False, set()
        for event in record["events"]:
            if event["kind"] == "propose":
                break
            if event["kind"] != "message" or stated_split(event["text"], counts) is None:
                continue
            kind = kinds[event["player"]]
            seats[kind]["offers"] += 1
            last_slipped = misstates(event["text"], counts)
            if last_slipped:
                seats[kind]["slips"] += 1
                slipped_by.add(kind)
        for kind in slipped_by:
            seats[kind]["games with a slip"] += 1
            seats[kind]["of which deals"] += bool(outcome["agreed"])
        endings["games"] += 1
        if outcome["agreed"]:
            endings["deal"] += 1
        elif outcome["termination"] == "inconsistent":
            endings["unmatched, last offer slipped" if last_slipped else "unmatched, last offer adds up"] += 1
        else:
            endings[outcome["termination"]] += 1
    return endings, seats


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", nargs="+", metavar="LABEL=GAMES.jsonl")
    args = parser.parse_args()
    causes = ["unmatched, last offer slipped", "unmatched, last offer adds up", "max_moves", "max_invalid"]
    ending_rows, seat_rows = [], []
    for item in args.games:
        label, _, path = item.rpartition("=")
        label = label or path
        endings, seats = tally(Path(path))
        n = endings["games"]
        other = n - endings["deal"] - sum(endings[c] for c in causes)
        ending_rows.append(
            [label, str(n), share(endings["deal"], n)] + [str(endings[c]) for c in causes] + [str(other)]
        )
        for kind, c in sorted(seats.items()):
            seat_rows.append(
                [
                    label,
                    kind,
                    str(c["offers"]),
                    share(c["slips"], c["offers"]),
                    str(c["games with a slip"]),
                    share(c["of which deals"], c["games with a slip"]),
                ]
            )
    print(markdown_table(["games", "n", "deal"] + causes + ["other"], ending_rows))
    print()
    print(
        markdown_table(["games", "seat kind", "offers", "slipped", "games with a slip", "of those, a deal"], seat_rows)
    )


if __name__ == "__main__":
    main()
