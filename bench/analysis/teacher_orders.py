"""How much the reviewer order of the matching teacher's by-reviewer plan is worth.

    python bench/analysis/teacher_orders.py OUT_DIR [dev|human] [COUNT]

The by-reviewer plans take reviewers one by one, each the best known paper still free, so the order
decides the plan. Per instance (development seeds from 10**9, or the 134 human instances), with what
the proposer knows after the teacher's first message (both views, its own value where both see a
cell): the fixed order the records plan uses, random orders (their mean, and the best of 4 and of 8:
a GRPO group's best), two ordering rules a model could learn (the reviewer with the highest known
value first; the largest gap between a reviewer's best and second-best value first), the best of
every 97th of the 8! orders, and by-score beside them. Writes OUT_DIR/teacher_orders_{dev|human}.{json,md}.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from selfplay_gen.evaluation.metrics import mean_interval
from selfplay_gen.games.matching.game import MatchingGame
from selfplay_gen.games.matching.instance import REVIEWERS, Instance, score
from selfplay_gen.games.matching.scripted import TeacherPlayer, completed

DEV_SEED = 10**9
RESAMPLES = 2000
EVERY_NTH_ORDER = 97  # 416 of the 40,320 orders


def known_cells(instance: Instance) -> list[dict[int, int]]:
    """Per reviewer, paper -> value the proposer (seat 1) knows once seat 0 has stated its cells."""
    views = [instance.view(seat) for seat in (0, 1)]
    return [
        {p: v for p, v in enumerate(row0) if v is not None} | {p: v for p, v in enumerate(row1) if v is not None}
        for row0, row1 in zip(*views)
    ]


def rewards(instance: Instance, rng: np.random.Generator) -> dict[str, float]:
    known = known_cells(instance)

    def by_order(order: Sequence[int]) -> float:
        _, picks = TeacherPlayer._by_reviewer(known, order=order)
        return instance.normalized(score(instance, completed(picks)))

    def ranked(key: Callable[[list[int]], float]) -> float:
        return by_order(sorted(range(len(REVIEWERS)), key=lambda r: -key(sorted(known[r].values(), reverse=True))))

    shuffled = [by_order([int(r) for r in rng.permutation(len(REVIEWERS))]) for _ in range(8)]
    every = itertools.islice(itertools.permutations(range(len(REVIEWERS))), 0, None, EVERY_NTH_ORDER)
    _, by_score = TeacherPlayer._by_score(known)
    return {
        "fixed order (the records plan)": by_order(range(len(REVIEWERS))),
        "random order, mean": float(np.mean(shuffled)),
        "random orders, best of 4": max(shuffled[:4]),
        "random orders, best of 8": max(shuffled),
        "highest known value first": ranked(lambda values: values[0] if values else -1),
        "largest gap to the second-best first": ranked(lambda values: (values + [0, 0])[0] - (values + [0, 0])[1]),
        f"best of every {EVERY_NTH_ORDER}th order": max(by_order(order) for order in every),
        "by-score": instance.normalized(score(instance, completed(by_score))),
    }


def instances(kind: str, count: int | None) -> list[Instance]:
    if kind == "human":
        return [cast(Instance, inst) for inst in MatchingGame.human_instances(count or MatchingGame.human_games)]
    if kind == "dev":
        return [Instance.from_seed(DEV_SEED + i) for i in range(count or 128)]
    raise SystemExit(f"instances {kind!r}: give dev or human")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    out, kind = Path(argv[0]), argv[1] if len(argv) > 1 else "dev"
    played = instances(kind, int(argv[2]) if len(argv) > 2 else None)
    rng = np.random.default_rng(0)
    rows = [rewards(instance, rng) for instance in played]
    results = {
        name: mean_interval(np.array([row[name] for row in rows]), RESAMPLES, np.random.default_rng(1))
        for name in rows[0]
    }
    random_matching = float(np.mean([np.sum(inst.table) / 8 / inst.best_reward for inst in played]))
    lines = [f"{len(played)} {kind} instances; random matching {random_matching:.3f}", ""]
    lines += ["| plan | mean normalized reward [95% CI] |", "|---|---|"]
    lines += [f"| {name} | {r['mean']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] |" for name, r in results.items()]
    out.mkdir(parents=True, exist_ok=True)
    summary = {"instances": kind, "count": len(played), "random_matching": random_matching, "plans": results}
    (out / f"teacher_orders_{kind}.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / f"teacher_orders_{kind}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
