"""Which reviewer each line of a seat's attempted proposals names, against the seat's own table.

    python bench/analysis/proposal_picks.py LABEL=GAMES.jsonl [LABEL=GAMES.jsonl ...]

A model that has not learned the game yet makes few valid proposals, so the valid ones alone say little about
how it chooses. This reads every boxed `[propose]` a response ends with, valid or not, and counts its
`<paper>: <reviewer>` lines three ways: the reviewer with the highest value the seat sees for that paper (a
greedy pick of its own view), the first reviewer it sees for that paper in the table's order (the lowest-numbered
one: copying the by-reviewer table down a column), and the reviewer of the paper's own number (the identity
assignment, the papers and reviewers both in the table's order). A paper whose whole column is hidden from the
seat counts toward the identity only.

A proposal whose lines make a whole matching (every paper and reviewer once) is also valued as the seat can value
it: on the table it sees, every hidden cell guessed at the game's HIDDEN_VALUE, as a share of the best it could plan
alone on that table (the no-talk plan; 1 for that plan), beside what a uniformly random matching is expected to
reach there. A model that learns to use its own table moves this share up before the shared reward shows it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selfplay_gen.games import move_formats
from selfplay_gen.games.base import InvalidMove
from selfplay_gen.games.matching.instance import REVIEWERS, Instance
from selfplay_gen.games.matching.moves import paper_named, proposal_lines
from selfplay_gen.stats.report import markdown_table


def reviewer_of(text: str) -> int | None:
    """The reviewer whose full name `text` starts with (a line may carry a pasted value after it)."""
    return next((r for r, name in enumerate(REVIEWERS) if text.strip().lower().startswith(name.lower())), None)


def lines_of(move: str) -> list[tuple[int, int]]:
    """(paper, reviewer) of each line of a boxed `[propose]` move that names both, as the game splits its lines."""
    try:
        lines = proposal_lines(move.removeprefix("[propose]"))
    except InvalidMove:
        return []
    named = [
        (paper_named(paper), reviewer_of(reviewer)) for paper, _, reviewer in (line.rpartition(":") for line in lines)
    ]
    return [(paper, reviewer) for paper, reviewer in named if paper is not None and reviewer is not None]


def own_plan_shares(instance: Instance, seat: int, lines: list[tuple[int, int]]) -> tuple[float, float] | None:
    """A whole matching's `Instance.own_plan_share`, and a uniformly random matching's expected one; None where the
    lines are not a whole matching."""
    if len(lines) != 8 or len({p for p, _ in lines}) != 8 or len({r for _, r in lines}) != 8:
        return None
    return instance.own_plan_share(seat, [(r, p) for p, r in lines]), instance.random_plan_share(seat)


def count(games: Path) -> dict[str, float]:
    """Attempted proposals and their lines' picks, over every seat's responses in `games`."""
    counts = dict.fromkeys(("proposals", "lines", "highest", "first in table order", "identity"), 0.0)
    counts.update(dict.fromkeys(("whole", "own plan", "random"), 0.0))
    for line in games.read_text().splitlines():
        game = json.loads(line)
        instance = Instance.from_dict(game["instance"])  # as played: a seeded instance or a human one
        for seat, player in enumerate(game["players"]):
            view = instance.view(seat)
            for message in player["messages"]:
                move = move_formats.boxed(message["content"]) if message["role"] == "assistant" else None
                if not move or not move.startswith("[propose]"):
                    continue
                counts["proposals"] += 1
                lines = lines_of(move)
                shares = own_plan_shares(instance, seat, lines)
                if shares is not None:
                    counts["whole"] += 1
                    counts["own plan"] += shares[0]
                    counts["random"] += shares[1]
                for paper, reviewer in lines:
                    seen = [(view[r][paper], r) for r in range(len(REVIEWERS)) if view[r][paper] is not None]
                    counts["lines"] += 1
                    counts["highest"] += bool(seen) and reviewer == max(seen)[1]
                    counts["first in table order"] += bool(seen) and reviewer == seen[0][1]
                    counts["identity"] += reviewer == paper
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", metavar="LABEL=GAMES.jsonl")
    args = parser.parse_args()
    rows = []
    for given in args.inputs:
        label, _, path = given.partition("=")
        if not path:
            parser.error(f"{given!r}: give each file as LABEL=GAMES.jsonl")
        c = count(Path(path))
        picks = [
            f"{c[k]:.0f} ({c[k] / c['lines']:.0%})" if c["lines"] else "–"
            for k in ("highest", "first in table order", "identity")
        ]
        plan = f"{c['own plan'] / c['whole']:.3f} ({c['random'] / c['whole']:.3f})" if c["whole"] else "–"
        rows.append([label, f"{c['proposals']:.0f}", f"{c['lines']:.0f}", *picks, f"{c['whole']:.0f}", plan])
    header = ["games", "attempted proposals", "lines", "highest it sees", "first in table order", "identity's"]
    header += ["whole matchings", "own-plan share (random)"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
