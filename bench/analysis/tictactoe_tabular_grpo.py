"""GRPO self-play on TicTacToe with a table for a policy: how many steps the loop itself needs for issue 63's
TicTacToe target, before any model.

The GPU runs train on `textarena:TicTacToe-v0` with online GRPO for 16 to 40 steps. This plays the same loop
with a policy that is a table of logits, one row per position and mark to move (4,520 reachable positions, illegal
cells masked): groups of 8 self-play games (TicTacToe's instances all start from the empty board), each mark's
rewards (win 1, draw 0, loss -1) normalized within its group, 16 groups a step, one on-policy update a step, Adam
on the logits, and optionally an entropy bonus (`--kl`: a KL loss to random legal play, which the format warm
start plays, has the same gradient). With `--cell-weight W` each logit is a term shared by every position of a
mark for that cell plus W times the position's own, as a language model's cell tokens are shared across boards
(`kuhn_tabular_grpo.py --card-weight` is the same idea for Kuhn Poker's cards).

    python bench/analysis/tictactoe_tabular_grpo.py --steps 1000 --lr 0.1 --seeds 3 > table.md

prints, at each recorded step and averaged over seeds, the policy's wins against random play and non-losing games
against minimax in each seat (`tictactoe_filtered_imitation.scores`; seat 0 moves first), the target's measures.
"""

from __future__ import annotations

import random

import click
import numpy as np
from kuhn_tabular_grpo import adam_step
from tictactoe_filtered_imitation import EMPTY, FIRST, Policy, play, scores

from selfplay_gen.games.textarena.scripted import free_cells, other_mark, place, won
from selfplay_gen.stats.report import markdown_table

GROUP, BATCH = 8, 16


def positions() -> dict[tuple[str, str], int]:
    """Every position reachable from the empty board with a move to make, and its row in the table."""
    index: dict[tuple[str, str], int] = {}
    stack = [(EMPTY, FIRST)]
    while stack:
        cells, mark = stack.pop()
        if (cells, mark) in index or won(cells) or not free_cells(cells):
            continue
        index[cells, mark] = len(index)
        stack += [(place(cells, cell, mark), other_mark(mark)) for cell in free_cells(cells)]
    return index


INDEX = positions()
LEGAL = np.zeros((len(INDEX), 9), dtype=bool)
for (_cells, _), _row in INDEX.items():
    LEGAL[_row, free_cells(_cells)] = True
SECOND = np.array([mark != FIRST for _, mark in INDEX])  # the rows where the second mark moves


def softmax(logits: np.ndarray) -> np.ndarray:
    """Each row's move probabilities over its free cells."""
    z = np.where(LEGAL, logits, -np.inf)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sampler(probs: np.ndarray) -> Policy:
    """The table as a policy of `tictactoe_filtered_imitation`: a cell drawn from its position's row."""
    rows = dict(zip(INDEX, probs, strict=True))
    return lambda cells, mark, rng: rng.choices(range(9), rows[cells, mark])[0]


def train(
    steps: int, lr: float, kl: float, seed: int, record_at: list[int], cell_weight: float | None = None
) -> dict[int, dict[str, float]]:
    """{step: the policy's scores} at each step of `record_at`."""
    rng, eval_rng = random.Random(seed), random.Random(seed + 10**6)
    own, shared = np.zeros((len(INDEX), 9)), np.zeros((2, 9))  # shared: per mark (first, second), per cell
    moments = [[np.zeros_like(own), np.zeros_like(own)], [np.zeros_like(shared), np.zeros_like(shared)]]

    def logits() -> np.ndarray:
        return own if cell_weight is None else shared[SECOND.astype(int)] + cell_weight * own

    kept = {}
    for step in range(1, steps + 1):
        probs = softmax(logits())
        policy = sampler(probs)
        grad, decisions = np.zeros_like(own), 0
        for _ in range(BATCH):
            games = [play(policy, policy, rng) for _ in range(GROUP)]
            for mark in (FIRST, other_mark(FIRST)):
                rewards = np.array([0.0 if winner is None else 1.0 if winner == mark else -1.0 for winner, _ in games])
                if rewards.std() == 0:
                    continue  # a group with one reward teaches nothing
                advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
                for advantage, (_, moves) in zip(advantages, games, strict=True):
                    for cells, mover, cell in moves:
                        if mover == mark:
                            row = INDEX[cells, mover]
                            p = probs[row]
                            grad[row] -= advantage * p
                            grad[row, cell] += advantage
                            if kl:  # the entropy's gradient over the free cells
                                logp = np.log(np.where(LEGAL[row], p, 1.0))
                                grad[row] -= kl * p * (logp - (p * logp).sum())
                            decisions += 1
        grad /= max(decisions, 1)
        if cell_weight is None:
            updates = [(own, grad, moments[0])]
        else:  # the chain rule through logits()
            shared_grad = np.stack([grad[~SECOND].sum(0), grad[SECOND].sum(0)])
            updates = [(own, cell_weight * grad, moments[0]), (shared, shared_grad, moments[1])]
        for param, g, (m, v) in updates:
            adam_step(param, g, m, v, step, lr)
        if step in record_at:
            kept[step] = scores(sampler(softmax(logits())), 1000, eval_rng)
    return kept


@click.command(help=__doc__)
@click.option("--steps", default=1000, show_default=True)
@click.option("--lr", default=0.1, show_default=True, help="Adam's step on the logits.")
@click.option("--kl", default=0.0, show_default=True, help="Entropy bonus (a KL loss to random legal play).")
@click.option(
    "--cell-weight",
    type=float,
    help="A term shared by every position of a mark for each cell, plus W times the position's own.",
)
@click.option("--seeds", default=3, show_default=True)
def main(steps: int, lr: float, kl: float, cell_weight: float | None, seeds: int) -> None:
    record_at = sorted({s for s in (32, steps // 8, steps // 4, steps // 2, steps) if 0 < s <= steps})  # 32: a GPU run
    runs = [train(steps, lr, kl, seed, record_at, cell_weight) for seed in range(seeds)]
    header = ["step", *runs[0][record_at[0]], "wins vs random, both seats"]
    rows = []
    for step in record_at:
        mean = {key: float(np.mean([run[step][key] for run in runs])) for key in runs[0][step]}
        pooled = (mean["win vs random, seat 0"] + mean["win vs random, seat 1"]) / 2
        rows.append([str(step), *(f"{v:.3f}" for v in mean.values()), f"{pooled:.3f}"])
    click.echo(markdown_table(header, rows))


if __name__ == "__main__":
    main()
