"""How much the reviewer order of the matching teacher's by-reviewer plan is worth.

    python bench/analysis/teacher_orders.py OUT_DIR [dev|human] [COUNT]

The by-reviewer plans take reviewers one by one, each the best known paper still free, so the order
decides the plan. Per instance (development seeds from 10**9, or the 134 human instances), with what
the proposer knows after the teacher's first message (both views, its own value where both see a
cell): the fixed order the records plan uses, random orders (their mean, and the best of 4 and of 8:
a GRPO group's best), two ordering rules a model could learn (the reviewer with the highest known
value first, or only the first 1-3 places of that ranking; the largest gap between a reviewer's best
and second-best value first), the best of every 97th of the 8! orders, by-score, and the two plans
drawn with noise (ranked-records, the first rule with noise; sampled-by-score, by-score with noise:
their mean, and the best of 4 and of 8); then each noisy plan over a grid of noise scales.
Writes OUT_DIR/teacher_orders_{dev|human}.{json,md}.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from selfplay_gen.games.matching.game import MatchingGame
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance, score
from selfplay_gen.games.matching.scripted import TeacherPlayer, completed, known_cells, ranked_order
from selfplay_gen.stats.metrics import mean_interval

DEV_SEED = 10**9
RESAMPLES = 2000
EVERY_NTH_ORDER = 97  # 416 of the 40,320 orders


Plan = list[tuple[int, int]]


def ranked_plan(known: list[dict[int, int]], noise: float, rng: np.random.Generator) -> Plan:
    """The ranked-records plan with its noise drawn from `rng` as the teacher draws it."""
    order = ranked_order(known, rng.gumbel(scale=noise, size=len(REVIEWERS)))
    return completed(TeacherPlayer._by_reviewer(known, order=order)[1])


def sampled_by_score_plan(known: list[dict[int, int]], noise: float, rng: np.random.Generator) -> Plan:
    """The sampled-by-score plan with its noise drawn from `rng` as the teacher draws it."""
    shift = rng.gumbel(scale=noise, size=(len(REVIEWERS), len(PAPERS)))
    return completed(TeacherPlayer._by_score(known, shift)[1])


# the plans drawn with noise: how a plan is drawn, the teacher's scale, and the grid it was chosen from
NOISY_PLANS: dict[str, tuple[Callable[[list[dict[int, int]], float, np.random.Generator], Plan], float, tuple]] = {
    "ranked-records": (ranked_plan, TeacherPlayer.RANK_NOISE, (0.0, 20.0, 40.0, 60.0, 80.0, 100.0, 150.0)),
    "sampled-by-score": (sampled_by_score_plan, TeacherPlayer.SCORE_NOISE, (0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 80.0)),
}


def top_first(known: list[dict[int, int]], k: int) -> list[int]:
    """The `k` reviewers of highest known value first (highest first), then the others in table order: how much
    of the ranking's worth lies in its first places, which a plan could write out alone."""
    top = [r for r in ranked_order(known, np.zeros(len(REVIEWERS))) if known[r]][:k]
    return top + [r for r in range(len(REVIEWERS)) if r not in top]


def rewards(
    instance: Instance, rng: np.random.Generator, noise_rngs: dict[str, np.random.Generator]
) -> dict[str, float]:
    """Each plan's normalized reward: random orders from `rng`, each noisy plan's noise from its `noise_rngs`."""
    known = known_cells(instance)

    def by_order(order: Sequence[int]) -> float:
        _, picks = TeacherPlayer._by_reviewer(known, order=order)
        return instance.normalized(score(instance, completed(picks)))

    def ranked(key: Callable[[list[int]], float]) -> float:
        return by_order(sorted(range(len(REVIEWERS)), key=lambda r: -key(sorted(known[r].values(), reverse=True))))

    shuffled = [by_order([int(r) for r in rng.permutation(len(REVIEWERS))]) for _ in range(8)]
    every = itertools.islice(itertools.permutations(range(len(REVIEWERS))), 0, None, EVERY_NTH_ORDER)
    _, by_score = TeacherPlayer._by_score(known)
    row = {
        "fixed order (the records plan)": by_order(range(len(REVIEWERS))),
        "random order, mean": float(np.mean(shuffled)),
        "random orders, best of 4": max(shuffled[:4]),
        "random orders, best of 8": max(shuffled),
        "highest known value first": ranked(lambda values: values[0] if values else -1),
        **{f"the {k} of highest known value first, then table order": by_order(top_first(known, k)) for k in (1, 2, 3)},
        "largest gap to the second-best first": ranked(lambda values: (values + [0, 0])[0] - (values + [0, 0])[1]),
        f"best of every {EVERY_NTH_ORDER}th order": max(by_order(order) for order in every),
        "by-score": instance.normalized(score(instance, completed(by_score))),
    }
    for name, (draw, noise, _) in NOISY_PLANS.items():
        got = [instance.normalized(score(instance, draw(known, noise, noise_rngs[name]))) for _ in range(8)]
        row |= {f"{name} (noise {noise:g}), mean": float(np.mean(got))}
        row |= {f"{name} (noise {noise:g}), best of 4": max(got[:4]), f"{name} (noise {noise:g}), best of 8": max(got)}
    return row


def noise_grid(
    played: list[Instance], plan: str, scales: Sequence[float] | None = None
) -> dict[float, dict[str, float]]:
    """Per noise scale of a noisy `plan`: its mean over 8 draws per instance, the best of the 8 and the
    number of distinct plans among them (the grid its scale was chosen from on development instances)."""
    draw, _, grid_scales = NOISY_PLANS[plan]
    grid = {}
    for noise in grid_scales if scales is None else scales:
        rng = np.random.default_rng(3)
        means, best, distinct = [], [], []
        for instance in played:
            known = known_cells(instance)
            plans = [draw(known, noise, rng) for _ in range(8)]
            got = [instance.normalized(score(instance, plan)) for plan in plans]
            means.append(np.mean(got))
            best.append(max(got))
            distinct.append(len({tuple(sorted(plan)) for plan in plans}))
        grid[noise] = {
            "mean": float(np.mean(means)),
            "best of 8": float(np.mean(best)),
            "distinct": float(np.mean(distinct)),
        }
    return grid


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
    noise_rngs = {name: np.random.default_rng(seed) for name, seed in zip(NOISY_PLANS, (2, 4))}
    rows = [rewards(instance, rng, noise_rngs) for instance in played]
    results = {
        name: mean_interval(np.array([row[name] for row in rows]), RESAMPLES, np.random.default_rng(1))
        for name in rows[0]
    }
    random_matching = float(np.mean([np.sum(inst.table) / 8 / inst.best_reward for inst in played]))
    lines = [f"{len(played)} {kind} instances; random matching {random_matching:.3f}", ""]
    lines += ["| plan | mean normalized reward [95% CI] |", "|---|---|"]
    lines += [f"| {name} | {r['mean']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] |" for name, r in results.items()]
    grids = {plan: noise_grid(played, plan) for plan in NOISY_PLANS}
    for plan, grid in grids.items():
        lines += ["", f"{plan} by the scale of its noise (8 draws per instance):", ""]
        lines += [
            "| noise scale | " + " | ".join(f"{noise:g}" for noise in grid) + " |",
            "|---" * (len(grid) + 1) + "|",
        ]
        lines += ["| mean | " + " | ".join(f"{row['mean']:.3f}" for row in grid.values()) + " |"]
        lines += ["| best of 8 | " + " | ".join(f"{row['best of 8']:.3f}" for row in grid.values()) + " |"]
        lines += ["| distinct plans of 8 | " + " | ".join(f"{row['distinct']:.1f}" for row in grid.values()) + " |"]
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "instances": kind,
        "count": len(played),
        "random_matching": random_matching,
        "plans": results,
        "noise_grids": {plan: {f"{noise:g}": row for noise, row in grid.items()} for plan, grid in grids.items()},
    }
    (out / f"teacher_orders_{kind}.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / f"teacher_orders_{kind}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
