"""Where a model's proposals lose reward against the teacher protocol it imitates.

    python bench/analysis/proposer_lines.py GAMES.jsonl [OUT.json] [--plan PLAN]

For every game whose first message states cells and whose partner then proposes with the
teacher's private reasoning (one line per reviewer, `Name: cells -> PICK`), it replays the teacher
(`--plan`, the default plan unless given) on the same dialogue and scores its proposal, and it checks
each reasoning line against what the teacher would write given the model's own earlier picks: cells
missing or wrong, taken papers listed, and picks that are not the largest value of the line's own
list. The teacher's score on the model's own dialogues, beside the model's, tells a slip in the plan
from a dialogue that was already poor.

The order of the lines is a choice the plans differ in (the ranked plan takes the reviewer with the
most valuable known cell first), so it is read too: the rank correlation between a line's place and
its reviewer's highest known value, and how often the first line is a reviewer with the highest.
A model that has learned the ranked plan's order shows the teacher's correlation; one that writes
the reviewers in an order of its own shows about zero.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict

import numpy as np
from scipy.stats import spearmanr

from selfplay_gen.games.matching import prompts
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance, score
from selfplay_gen.games.matching.moves import InvalidMove, parse_move
from selfplay_gen.games.matching.scripted import HIGHEST_HEADER, TeacherPlayer

# `Name: cells -> PICK`, or with the running maximum's records (by-reviewer-records): `Name: cells | records -> PICK`
LINE = re.compile(r"(?P<name>[A-Z][a-z]+ [A-Z][a-z]+): (?P<cells>[^|]*?)(?: \| (?P<records>.*))? -> (?P<pick>\S+)$")
# the last lines of the sorted and chained plans' working: `Order: ...`, `3: Ava Li 781 < Morgan Reed 878`
ORDER_LINE = re.compile(r"^(?:Order|\d+): .*$", re.M)
CELL = re.compile(r"(?:^|, )(\S+) (\d+)")


def line_errors(text: str, own: list[list[int | None]], told: dict[int, dict[int, int]]) -> list[set[str]]:
    """The error classes of each of one proposer turn's reasoning lines, in order (a line may have several,
    an unreadable one only that); each check knows the papers the lines before it took."""
    found: list[set[str]] = []
    taken: set[int] = set()
    for line in text.strip().splitlines():
        m = LINE.match(line.strip())
        if not m or m["name"] not in REVIEWERS:
            found.append({"unreadable line"})
            continue
        r = REVIEWERS.index(m["name"])
        known = dict(told[r]) | {p: v for p, v in enumerate(own[r]) if v is not None}
        free = {p: known[p] for p in sorted(known) if p not in taken}  # ties go to the first paper, as the teacher
        listed = {PAPERS.index(p): int(v) for p, v in CELL.findall(m["cells"]) if p in PAPERS}
        pick = PAPERS.index(m["pick"]) if m["pick"] in PAPERS else None
        checks = {
            "misses a free cell": any(p not in listed for p in free),
            "lists a taken paper": any(p in taken for p in listed),
            "lists a cell it does not know": any(p not in known for p in listed),
            "states a wrong value": any(p in free and listed[p] != free[p] for p in listed),
            "picks other than the largest of its list": bool(listed) and pick != max(listed, key=listed.__getitem__),
            "picks other than the best free paper": bool(free) and pick != max(free, key=free.__getitem__),
        }
        found.append({name for name, failed in checks.items() if failed})
        if pick is not None:
            taken.add(pick)
    return found


def count_errors(lines: list[set[str]]) -> Counter:
    """The error classes of `line_errors`' lines counted, with `lines`, the readable lines."""
    errors: Counter = Counter()
    for found in lines:
        errors.update(found)
        errors["lines"] += "unreadable line" not in found
    return errors


def check_lines(text: str, own: list[list[int | None]], told: dict[int, dict[int, int]]) -> Counter:
    """Error classes of one proposer turn's reasoning lines (a line may have several), with `lines`, the
    readable lines."""
    return count_errors(line_errors(text, own, told))


def pick_lines(reasoning: str) -> str:
    """The reviewer lines of a proposer's reasoning: with the sorted or chained plan's working before them
    (its highest values, then its `Order:` line or its numbered places), what follows the working's last line."""
    if not reasoning.lstrip().startswith(HIGHEST_HEADER):
        return reasoning
    ends = list(ORDER_LINE.finditer(reasoning))
    return reasoning[ends[-1].end() :].lstrip("\n") if ends else reasoning


def line_order(text: str, known: list[dict[int, int]]) -> tuple[float, bool] | None:
    """(rank correlation of the lines' places with their reviewers' highest known values, highest
    first; whether the first line's reviewer has the highest), for a turn of at least three lines."""
    lines = (LINE.match(line.strip()) for line in text.strip().splitlines())
    order = [REVIEWERS.index(m["name"]) for m in lines if m and m["name"] in REVIEWERS]
    tops = [max(known[r].values(), default=0) for r in order]
    if len(tops) < 3 or len(set(tops)) < 2:
        return None
    return float(spearmanr(range(len(tops)), [-t for t in tops]).statistic), tops[0] == max(tops)


def analyse(path: str, plan: str = TeacherPlayer.DEFAULT_PLAN, seed: int = 0) -> dict:
    errors: Counter = Counter()
    by_place: defaultdict[int, list[bool]] = defaultdict(list)  # per line's place in its turn: whether it erred
    model, teacher, orders = [], [], []
    rng = np.random.default_rng(seed)  # the replay's draws, for the plans that draw
    for line in open(path):
        record = json.loads(line)
        instance = Instance.from_dict(record["instance"])
        events = [e for e in record["events"] if not e.get("error")]
        first = next((e for e in events if e["kind"] == "message" and e["player"] == 0), None)
        turns = [m["content"] for m in record["players"][1].get("messages", []) if m["role"] == "assistant"]
        if first is None or not turns or "[propose]" not in turns[0]:
            continue
        told: dict[int, dict[int, int]] = defaultdict(dict)
        for r, p, v in prompts.stated_cells(first["text"]):
            told[r][p] = v
        own = instance.view(1)
        reasoning = pick_lines(turns[0].split("[propose]")[0])
        found = line_errors(reasoning, own, told)
        errors += count_errors(found)
        for place, line in enumerate(found):
            by_place[place].append(bool(line))
        known = [dict(told[r]) | {p: v for p, v in enumerate(row) if v is not None} for r, row in enumerate(own)]
        if (order := line_order(reasoning, known)) is not None:
            orders.append(order)
        replay = TeacherPlayer(instance, 1, plan, rng)
        replay.partner_moved(parse_move("[message] " + first["text"]))
        try:
            proposal = parse_move("[propose]" + replay._proposal().split("[propose]", 1)[1])
        except InvalidMove:
            continue
        if record["outcome"]["termination"] == "accepted":
            model.append(record["outcome"]["normalized_reward"] or 0.0)
            teacher.append(score(instance, proposal.pairs) / instance.best_reward)
    lines = errors.pop("lines", 0)
    rho, first_top = zip(*orders) if orders else ((), ())
    return {
        "games_with_a_proposal_turn": len(model),
        "model_reward_accepted": float(np.mean(model)) if model else None,
        "teacher_plan": plan,
        "teacher_on_same_dialogues": float(np.mean(teacher)) if teacher else None,
        "reasoning_lines": lines,
        "line_errors": {k: {"lines": v, "share": v / lines} for k, v in errors.most_common()} if lines else {},
        # the share of lines with any error by their place in the turn: errors that grow along a turn tell a
        # model whose copying degrades with the length of what it has written
        "lines_with_an_error_by_place": {str(p + 1): float(np.mean(by_place[p])) for p in sorted(by_place)},
        "line_order": {
            "turns": len(orders),
            "rank_correlation_with_highest_known_value": float(np.mean(rho)) if orders else None,
            "first_line_has_the_highest_known_value": float(np.mean(first_top)) if orders else None,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", help="a games JSONL file (selfplay-gen play or eval)")
    parser.add_argument("out", nargs="?", help="also write the report to this JSON file")
    parser.add_argument("--plan", choices=TeacherPlayer.PLANS, default=TeacherPlayer.DEFAULT_PLAN,
                        help="the teacher plan replayed on each dialogue [default: %(default)s]")  # fmt: skip
    args = parser.parse_args()
    result = json.dumps(analyse(args.games, args.plan), indent=1)
    print(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(result + "\n")


if __name__ == "__main__":
    main()
