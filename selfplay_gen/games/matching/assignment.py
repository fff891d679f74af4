"""Maximum-weight perfect matchings of 8x8 tables of scores 0..99.

A single table goes to scipy's Hungarian solver. Sampling hard instances solves thousands of
tables per accepted instance, so the `batch_*` functions solve a whole stack at once with a
dynamic programme over subsets of papers (row r picks one paper not taken by rows < r). Stacks
are "batch last", shape (8, 8, B) with `stack[..., i]` the i-th table: every step of the DP then
works on contiguous rows of B values.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy.optimize import linear_sum_assignment

N = 8
MAX_SCORE = 99


def max_matching(table) -> tuple[int, list[tuple[int, int]]]:
    """Best total of `table` and its (reviewer, paper) pairs, by the Hungarian algorithm."""
    table = np.asarray(table)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return int(table[rows, cols].sum()), [(int(r), int(c)) for r, c in zip(rows, cols)]


@cache
def _rows() -> list[tuple[int, np.ndarray, np.ndarray]]:
    """For rows 1..7, how row r completes each of the C(8, r+1) subsets of papers that rows 0..r
    take: r+1 ways, the j-th being predecessor subset `preds[j*n + s]` (a position in layer r)
    plus paper `papers[j*n + s]`. Subsets within a layer are in increasing bitmask order, so
    layer 1 (row 0 alone) is {paper 0}, ..., {paper 7}."""
    by_size: list[list[int]] = [[] for _ in range(N + 1)]
    for mask in range(1 << N):
        by_size[bin(mask).count("1")].append(mask)
    position = {mask: i for layer in by_size for i, mask in enumerate(layer)}
    rows = []
    for size in range(2, N + 1):
        papers = np.array([[p for p in range(N) if m >> p & 1] for m in by_size[size]])
        preds = np.array([[position[m ^ (1 << p)] for p in range(N) if m >> p & 1] for m in by_size[size]])
        rows.append((size, preds.T.ravel(), papers.T.ravel()))
    return rows


def _forward(tables: np.ndarray) -> np.ndarray:
    """Best matching totals of an (8, 8, B) stack: per row, gather every (predecessor, paper)
    way at once, add, and keep the best way per subset. All steps write into buffers allocated
    once, since fresh temporaries of this size cost more (page faults) than the arithmetic."""
    batch = tables.shape[2]
    ways, gains = np.empty((2, 280, batch), tables.dtype)  # the largest rows: 70 subsets x 4 ways, 56 x 5
    layers = np.empty((2, 70, batch), tables.dtype)  # the largest layer: C(8, 4) = 70 subsets
    values = tables[0]
    for row, (size, preds, papers) in enumerate(_rows(), start=1):
        cand, gain = ways[: len(preds)], gains[: len(preds)]
        values.take(preds, axis=0, out=cand, mode="clip")  # "clip": an unbuffered `out`
        tables[row].take(papers, axis=0, out=gain, mode="clip")
        cand += gain
        subsets = len(preds) // size
        values = np.maximum.reduce(cand.reshape(size, subsets, batch), axis=0, out=layers[row % 2, :subsets])
    return values[0].copy()


def _stack(tables, name: str, dtype) -> np.ndarray:
    """`tables` checked to be an (8, 8, B) stack of scores, as a contiguous array of `dtype`."""
    tables = np.asarray(tables)
    if tables.ndim != 3 or tables.shape[:2] != (N, N):
        raise ValueError(f"{name} must be an (8, 8, B) stack of tables, got shape {tables.shape}")
    if not np.issubdtype(tables.dtype, np.integer):
        raise ValueError(f"{name} must hold integer scores, got dtype {tables.dtype}")
    if tables.size and (tables.min() < 0 or tables.max() > MAX_SCORE):
        raise ValueError(f"{name} values must lie in 0..{MAX_SCORE}, got {tables.min()}..{tables.max()}")
    return np.ascontiguousarray(tables, dtype=dtype)


def batch_best_totals(tables) -> np.ndarray:
    """Best matching total of each table of an (8, 8, B) stack."""
    return _forward(_stack(tables, "tables", np.int16)).astype(np.int64)


# Uninformed preferences that break ties between equally good plans: a fixed pattern, the same
# for every instance, so a player planning alone never picks a tied plan by its true score.
_TIEBREAK = np.random.default_rng(8).integers(0, 8, (N, N, 1)).astype(np.int32)
_SCORE_BITS = 10  # a matching total is at most 8 * 99 < 1024; tie-break totals are at most 56 < 64


def batch_planned_totals(plan, score) -> np.ndarray:
    """For each pair of tables of two (8, 8, B) stacks: the `score` total of a best matching of `plan`.

    This is what a player who plans on `plan` (its guess of the table) really gets. One DP pass
    maximises the packed key (plan, tie-break, score), whose low bits then hold the score total;
    the score only decides between plans that tie on both plan and tie-break.
    """
    plan, score = _stack(plan, "plan", np.int32), _stack(score, "score", np.int32)
    if plan.shape != score.shape:
        raise ValueError(f"plan and score stacks differ in shape: {plan.shape} vs {score.shape}")
    key = ((plan << 6) + _TIEBREAK) << _SCORE_BITS | score
    return (_forward(key) & ((1 << _SCORE_BITS) - 1)).astype(np.int64)
