"""Whether SmolLM2-135M learns the sorted plan's `Order:` line: the reviewers sorted by the highest known
values written just above it.

The 135M warm start on the ranked teacher writes its reviewers in an order unrelated to their values
(bench/results/rl_x2_h100_2026-11-27b/line_order.md). The sorted plan writes each reviewer's highest known
value first, as the last of its records (`Ava Li: Electra 665 < GloVe 772 < SWAG 781`), then the order. This
teaches the raw embedded model, with pick_formats.py's LoRA and steps, to write the order after those lines,
and scores its greedy orders on instances apart from every split by the plan they lead to:

  sorted   `Order: Morgan Reed 878 > Ethan Smith 878 > Ava Li 781 > ...` (the sorted plan's line)
  names    `Order: Morgan Reed > Ethan Smith > Ava Li > ...` (the names alone: is copying the values a help?)
  chains   one line a place, the records over the reviewers not yet placed, in table order, so that the
           place's reviewer is the last record (`1: Ava Li 781 < Morgan Reed 878`, `2: Ava Li 781 < Ethan
           Smith 878`, ...): each step one comparison with the current record, as the pick lines' records

A row is one instance: the proposer's known cells after the first message (both seats' cells). The score of
an order is the records plan's proposal taken in it (reviewer by reviewer, the best paper still free), beside
the same plan in the true order, in table order and in random orders. It runs on the CPU, with two threads:
  python bench/analysis/order_learning.py sorted --seed 0 --out order_learning.jsonl
"""

from __future__ import annotations

import random
import re

import numpy as np
from pick_formats import TEST_SEEDS, TRAIN_SEEDS, greedy_lines, main, train
from scipy.stats import spearmanr

from selfplay_gen.games.matching.instance import REVIEWERS, Instance, score
from selfplay_gen.games.matching.scripted import TeacherPlayer, completed, known_cells, ranked_order

FORMATS = ("sorted", "names", "chains")
NAME = re.compile("|".join(REVIEWERS))


def prefix(known: list[dict[int, int]]) -> str:
    """The sorted and chained plans' working up to their order: each reviewer's highest known value as records."""
    return "\n".join(TeacherPlayer._highest(known)) + "\n"


def ending(known: list[dict[int, int]], fmt: str) -> str:
    """The order the model learns to write: one line, or with `chains` the chained plan's line a place."""
    if fmt == "chains":
        return "".join(line + "\n" for line in TeacherPlayer._places(known))
    line = TeacherPlayer._order_line(known, ranked_order(known, np.zeros(len(REVIEWERS))))
    return (line if fmt == "sorted" else re.sub(r" \d+", "", line)) + "\n"


def read_order(text: str, fmt: str = "sorted") -> list[int]:
    """The order a written order names: an order line's reviewers, or the last reviewer of each chain, each
    once in its first place, then the ones it leaves out in table order: the order the records plan would be
    taken in."""
    if fmt == "chains":
        names = [found[-1] for line in text.splitlines() if (found := NAME.findall(line))]
    else:
        names = NAME.findall(text)
    named = list(dict.fromkeys(REVIEWERS.index(name) for name in names))
    return named + [r for r in range(len(REVIEWERS)) if r not in named]


def plan_reward(instance: Instance, known: list[dict[int, int]], order: list[int]) -> float:
    """The normalized reward of the records plan's proposal with the reviewers taken in `order`."""
    _, picks = TeacherPlayer._by_reviewer(known, records=True, order=order)
    return score(instance, completed(picks)) / instance.best_reward


def run(fmt: str, steps: int, batch: int, lr: float, seed: int, test_rows: int) -> dict:
    rng = random.Random(seed)
    seeds = list(TRAIN_SEEDS)
    rng.shuffle(seeds)
    train_known = [known_cells(Instance.from_seed(s)) for s in seeds[: steps * batch]]
    model, tok, train_s = train([(prefix(k), ending(k, fmt)) for k in train_known], steps, batch, lr, seed)
    tests = [Instance.from_seed(s) for s in range(TEST_SEEDS.start, TEST_SEEDS.start + test_rows)]
    known = [known_cells(instance) for instance in tests]
    places, budget = (7, 256) if fmt == "chains" else (1, 128)  # chains: every place but the last, some 220 tokens
    written = greedy_lines(model, tok, [prefix(k) for k in known], max_new_tokens=budget, lines=places)
    rewards: dict[str, list[float]] = {"model": [], "true order": [], "table order": [], "random order": []}
    exact, first, rho = [], [], []
    for instance, k, text in zip(tests, known, written):
        truth = ranked_order(k, np.zeros(len(REVIEWERS)))
        order = read_order(text, fmt)
        tops = [max(k[r].values(), default=-1) for r in order]
        exact.append(order == truth)
        first.append(tops[0] == max(tops))
        rho.append(spearmanr(range(len(tops)), [-t for t in tops]).statistic)
        rewards["model"].append(plan_reward(instance, k, order))
        rewards["true order"].append(plan_reward(instance, k, truth))
        rewards["table order"].append(plan_reward(instance, k, list(range(len(REVIEWERS)))))
        shuffled = [rng.sample(range(len(REVIEWERS)), len(REVIEWERS)) for _ in range(8)]
        rewards["random order"].append(float(np.mean([plan_reward(instance, k, o) for o in shuffled])))
    return {
        "format": fmt, "seed": seed, "steps": steps, "batch": batch, "lr": lr, "train_rows": steps * batch,
        "test_rows": len(tests), "train_s": round(train_s),
        "exact_order": float(np.mean(exact)), "first_has_the_highest": float(np.mean(first)),
        "rank_correlation": float(np.nanmean(rho)),
        "reward": {name: round(float(np.mean(values)), 4) for name, values in rewards.items()},
        "example": prefix(known[0]) + written[0],
    }  # fmt: skip


if __name__ == "__main__":
    main(__doc__, FORMATS, run, 200, "instances")
