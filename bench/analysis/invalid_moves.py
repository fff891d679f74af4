"""Why a model's turns failed: every refused move and every turn that ran out of tokens, counted by reason.

    python bench/analysis/invalid_moves.py LABEL=GAMES.jsonl [LABEL=GAMES.jsonl ...] [--top 8]

The run report gives the share of valid moves; a model that makes few learns nothing from its own valid moves
alone, and what to change (the rules' wording, the table's layout, the format start) depends on which mistake it
makes. A reason's names and numbers are masked so that one mistake counts once: "unknown reviewer 'Ava Li 421'"
and "unknown reviewer 'Noah Wilson 142'" are both "unknown reviewer 'R N'".
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS
from selfplay_gen.stats.report import markdown_table

_REVIEWER = re.compile("|".join(re.escape(name) for name in sorted(REVIEWERS, key=len, reverse=True)))
_PAPER = re.compile(r"\b(?:" + "|".join(re.escape(paper) for paper in PAPERS) + r")\b")
_LIST = re.compile(r"(?:reviewers|papers) are [^;]*$")  # the rules' list of valid names, the same in every reason


def masked(reason: str) -> str:
    """`reason` with reviewers as R, papers as P and numbers as N."""
    reason = _LIST.sub("...", reason)
    return re.sub(r"\d+", "N", _PAPER.sub("P", _REVIEWER.sub("R", reason)))


def count(games: Path) -> tuple[collections.Counter[str], int]:
    """Failed turns by masked reason, and all turns, over every game in `games` (a turn that ran out of tokens
    ends its game as a `stop` event)."""
    reasons: collections.Counter[str] = collections.Counter()
    turns = 0
    for line in games.read_text().splitlines():
        for event in json.loads(line)["events"]:
            turns += 1
            if event["kind"] in ("invalid", "stop"):
                reasons[masked(event.get("error") or "")] += 1
    return reasons, turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", nargs="+", metavar="LABEL=GAMES.jsonl")
    parser.add_argument("--top", type=int, default=8, help="reasons shown a file (the rest summed) [8]")
    args = parser.parse_args()
    rows: list[list[str]] = []
    for item in args.games:
        label, _, path = item.rpartition("=")
        reasons, turns = count(Path(path))
        failed = sum(reasons.values())
        rows.append([label or path, "all turns", str(turns), "–"])
        rows.append(["", "failed", str(failed), f"{failed / max(turns, 1):.1%}"])
        shown = reasons.most_common(args.top)
        rows += [["", reason, str(n), f"{n / max(turns, 1):.1%}"] for reason, n in shown]
        rest = failed - sum(n for _, n in shown)
        if rest:
            rows.append(["", "other reasons", str(rest), f"{rest / max(turns, 1):.1%}"])
    print(markdown_table(["games", "turns", "count", "of all turns"], rows))


if __name__ == "__main__":
    main()
