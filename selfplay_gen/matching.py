"""Maximum-weight perfect matchings of 8x8 tables.

A single table goes to scipy's Hungarian solver. Sampling hard instances solves thousands of
tables per accepted instance, so the `batch_*` functions solve a whole stack at once with a
dynamic programme over subsets of papers (row r picks one paper not taken by rows < r), run in
int16 with the batch as the last, contiguous axis.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.optimize import linear_sum_assignment

N = 8
FULL = (1 << N) - 1


def max_matching(table) -> tuple[int, list[tuple[int, int]]]:
    """Best total of `table` and its (reviewer, paper) pairs, by the Hungarian algorithm."""
    table = np.asarray(table)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return int(table[rows, cols].sum()), [(int(r), int(c)) for r, c in zip(rows, cols)]


@lru_cache(maxsize=None)
def _layers():
    """Per row r: for each (r+1)-paper subset, its r+1 predecessor subsets (as positions in
    layer r) and the paper each one adds; plus position of every mask in its own layer."""
    by_size: list[list[int]] = [[] for _ in range(N + 1)]
    for mask in range(1 << N):
        by_size[bin(mask).count("1")].append(mask)
    position = np.zeros(1 << N, dtype=np.int64)
    for layer in by_size:
        for i, mask in enumerate(layer):
            position[mask] = i
    layers = []
    for k in range(1, N + 1):
        papers = np.array([[p for p in range(N) if m >> p & 1] for m in by_size[k]])
        preds = np.array([[position[m ^ (1 << p)] for p in range(N) if m >> p & 1] for m in by_size[k]])
        layers.append((preds, papers))
    return layers, position


# Uninformed preferences that break ties between equally good plans: a fixed pattern, the same
# for every instance, so a player planning alone never picks a tied plan by its true score.
_TIEBREAK = np.random.default_rng(8).integers(0, 8, (N, N))
_SCORE_BITS = 10  # a matching total is at most 8 * 99 < 1024


def _forward(tables_t: np.ndarray) -> np.ndarray:
    """Best matching totals of a (8, 8, B) stack, by DP over the subsets of papers taken so far."""
    layers, _ = _layers()
    values = np.zeros((1, tables_t.shape[2]), dtype=tables_t.dtype)
    for row, (preds, papers) in enumerate(layers):
        values = (values[preds] + tables_t[row][papers]).max(axis=1)
    return values[0]


def _batch_last(tables, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(tables, dtype=dtype).transpose(1, 2, 0))


def batch_best_totals(tables) -> np.ndarray:
    """Best matching total of each table in a (B, 8, 8) stack."""
    return _forward(_batch_last(tables, np.int16)).astype(np.int64)


def batch_planned_totals(plan, score) -> np.ndarray:
    """For each pair of tables: the `score` total of a best matching of `plan`.

    This is what a player who plans on `plan` (its guess of the table) really gets. One DP pass
    maximises the packed key (plan, tie-break, score), whose low bits then hold the score total;
    the score only decides between plans that tie on both plan and tie-break.
    """
    plan, score = np.asarray(plan, dtype=np.int32), np.asarray(score, dtype=np.int32)
    key = ((plan << 6) + _TIEBREAK) << _SCORE_BITS | score
    return (_forward(_batch_last(key, np.int32)) & ((1 << _SCORE_BITS) - 1)).astype(np.int64)
