"""Where a model's proposals lose reward against the teacher protocol it imitates.

    python bench/analysis/proposer_lines.py GAMES.jsonl [OUT.json]

For every game whose first message states cells and whose partner then proposes with the
teacher's private reasoning (one line per reviewer, `Name: cells -> PICK`), it replays the teacher
on the same dialogue and scores its proposal, and it checks each reasoning line against what the
teacher would write given the model's own earlier picks: cells missing or wrong, taken papers
listed, and picks that are not the largest value of the line's own list. The teacher's score on
the model's own dialogues, beside the model's, tells a slip in the plan from a dialogue that was
already poor.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict

import numpy as np

from selfplay_gen.games.matching import prompts
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance, score
from selfplay_gen.games.matching.moves import InvalidMove, parse_move
from selfplay_gen.games.matching.scripted import TeacherPlayer

# `Name: cells -> PICK`, or with the running maximum's records (by-reviewer-records): `Name: cells | records -> PICK`
LINE = re.compile(r"(?P<name>[A-Z][a-z]+ [A-Z][a-z]+): (?P<cells>[^|]*?)(?: \| (?P<records>.*))? -> (?P<pick>\S+)$")
CELL = re.compile(r"(?:^|, )(\S+) (\d+)")


def check_lines(text: str, own: list[list[int | None]], told: dict[int, dict[int, int]]) -> Counter:
    """Error classes of one proposer turn's reasoning lines (a line may have several)."""
    errors: Counter = Counter()
    taken: set[int] = set()
    for line in text.strip().splitlines():
        m = LINE.match(line.strip())
        if not m or m["name"] not in REVIEWERS:
            errors["unreadable line"] += 1
            continue
        errors["lines"] += 1
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
        errors.update(name for name, failed in checks.items() if failed)
        if pick is not None:
            taken.add(pick)
    return errors


def analyse(path: str) -> dict:
    errors: Counter = Counter()
    model, teacher = [], []
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
        errors += check_lines(turns[0].split("[propose]")[0], instance.view(1), told)
        replay = TeacherPlayer(instance, 1)
        replay.partner_moved(parse_move("[message] " + first["text"]))
        try:
            proposal = parse_move("[propose]" + replay._proposal().split("[propose]", 1)[1])
        except InvalidMove:
            continue
        if record["outcome"]["termination"] == "accepted":
            model.append(record["outcome"]["normalized_reward"] or 0.0)
            teacher.append(score(instance, proposal.pairs) / instance.best_reward)
    lines = errors.pop("lines", 0)
    return {
        "games_with_a_proposal_turn": len(model),
        "model_reward_accepted": float(np.mean(model)) if model else None,
        "teacher_on_same_dialogues": float(np.mean(teacher)) if teacher else None,
        "reasoning_lines": lines,
        "line_errors": {k: {"lines": v, "share": v / lines} for k, v in errors.most_common()} if lines else {},
    }


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    result = json.dumps(analyse(sys.argv[1]), indent=1)
    print(result)
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(result + "\n")
