"""Game instances: the hidden score table, what each player sees, and how instances are made.

An instance is plain data (JSON round trip) and is fully determined by its seed: sampling draws
candidates in fixed blocks from one `numpy.random.Generator` and keeps the first hard one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .assignment import batch_best_totals, batch_planned_totals, max_matching

REVIEWERS = (
    "Ava Li",
    "Daniel Nguyen",
    "Sofia Patel",
    "Andrei Petrov",
    "Morgan Reed",
    "Joseph Santos",
    "Ethan Smith",
    "Noah Wilson",
)
PAPERS = ("BLEU", "Electra", "GloVe", "GLUE", "LLaMA", "RoBERTa", "QuAC", "SWAG")
PAPER_TITLES = {
    "BLEU": "BLEU: a Method for Automatic Evaluation of MT",
    "Electra": "Electra: Pre-training Text Encoders as Discriminators",
    "GloVe": "GloVe: Global Vectors for Word Representation",
    "GLUE": "GLUE: A Multi-Task Benchmark and Analysis Platform for NLU",
    "LLaMA": "LLaMA: Open and Efficient Foundation Language Models",
    "RoBERTa": "RoBERTa: A Robustly Optimized BERT Pretraining Approach",
    "QuAC": "QuAC: Question Answering in Context",
    "SWAG": "SWAG: An Adversarial Dataset for Commonsense Inference",
}
HUMAN_GAMES = Path(__file__).parent / "data" / "optimization_human_games.jsonl"  # DialOp's 134 games
VISIBLE_P = 0.4
HIDDEN_VALUE = 50
HARD_FACTOR = 1.25
MAX_TRIES = 100_000
# Candidates drawn per block. Part of the seed -> instance contract: changing it changes instances.
BLOCK = 512
# One draw from 0..2499 per cell gives its score (draw % 100) and who sees it: draw // 100 is
# 5 * a + b with a, b independent and uniform on 0..4; player 0 sees the cell when b < 2, player 1
# when a < 2 (probability 2/5 = VISIBLE_P each). One small-integer draw is the cheapest way to get
# all three exactly.
_CELL_DRAWS = 100 * 5 * 5
_SEEN_BY = np.array([[d % 5 < 2 for d in range(25)], [d // 5 < 2 for d in range(25)]])  # [player, d]

Pairs = Sequence[tuple[int, int]]


def score(instance: Instance, pairs: Pairs) -> int:
    """Raw reward of an assignment: the sum of the unscaled table over its (reviewer, paper) pairs."""
    pairs = list(pairs)
    reviewers, papers = {r for r, _ in pairs}, {p for _, p in pairs}
    if len(pairs) != 8 or reviewers != set(range(8)) or papers != set(range(8)):
        raise ValueError(f"not a perfect matching of 8 reviewers to 8 papers: {pairs}")
    return int(sum(instance.table[r][p] for r, p in pairs))


@dataclass(frozen=True)
class Instance:
    """One game: `table[r][p]` (cells hidden from both already 50), each player's visibility mask
    and display scale, and where it came from (`seed` or a human game)."""

    table: list[list[int]]
    masks: tuple[list[list[int]], list[list[int]]]
    scales: tuple[float, float]
    seed: int | None = None
    hard: bool = False
    source: str = "random"
    best_reward: int = field(init=False)
    best_assignment: Pairs = field(init=False)

    def __post_init__(self):
        table = np.asarray(self.table)
        if table.shape != (8, 8) or any(np.asarray(m).shape != (8, 8) for m in self.masks):
            raise ValueError("an instance needs an 8x8 table and two 8x8 masks")
        if table.min() < 0 or table.max() > 99:
            raise ValueError(f"table scores must lie in 0..99, got {table.min()}..{table.max()}")
        best, pairs = max_matching(table)
        object.__setattr__(self, "best_reward", best)
        object.__setattr__(self, "best_assignment", pairs)

    @property
    def id(self) -> str:
        return f"seed-{self.seed}" if self.seed is not None else self.source

    @classmethod
    def from_seed(cls, seed: int, max_tries: int = MAX_TRIES) -> Instance:
        """The first hard candidate of the seed's stream, or the candidate at `max_tries`
        (recorded as not hard)."""
        table, visible, scales, _, hard = sample(seed, max_tries)
        return cls(
            table.tolist(),
            (visible[0].astype(int).tolist(), visible[1].astype(int).tolist()),
            scales,
            seed=seed,
            hard=hard,
        )

    @classmethod
    def from_human_record(cls, record: dict, source: str = "human") -> Instance:
        """An instance people played, from a line of `optimization_human_games.jsonl`."""
        try:
            return cls(
                record["table"],
                (record["mask1"], record["mask2"]),
                (float(record["scale1"]), float(record["scale2"])),
                source=source,
            )
        except KeyError as err:
            raise ValueError(f"human game record lacks field {err}") from None

    def view(self, player: int) -> list[list[int | None]]:
        """The player's scaled table: floor(value * scale) where visible, None where hidden."""
        mask, scale = self.masks[player], self.scales[player]
        return [[int(self.table[r][p] * scale) if mask[r][p] else None for p in range(8)] for r in range(8)]

    def normalized(self, raw: int) -> float:
        return raw / self.best_reward if self.best_reward else 0.0

    def own_plan_share(self, player: int, pairs: Iterable[Sequence[int]]) -> float:
        """What the (reviewer, paper) `pairs` are worth to `player` as a share of the best it could plan alone:
        both valued on the table it sees, each hidden cell guessed at HIDDEN_VALUE as the hard-instance test
        guesses it. 1 for its no-talk plan; a uniformly random matching averages about 0.7
        (`random_plan_share`). Above that, a seat's proposals use its own table, whatever its partner makes of
        them."""
        guess, best = self._own_plan(player)
        return float(sum(guess[r, p] for r, p in pairs)) / best

    def own_plan_shares(self, pairs: Iterable[Sequence[int]] | None) -> list[float]:
        """Both seats' `own_plan_share` of an agreed matching's `pairs`; 0 each without one (no deal)."""
        agreed = list(pairs or ())
        return [self.own_plan_share(player, agreed) if agreed else 0.0 for player in (0, 1)]

    def own_plan(self, player: int) -> list[tuple[int, int]]:
        """The (reviewer, paper) pairs of the best matching `player` could plan alone (`own_plan_share` 1)."""
        return [(int(r), int(p)) for r, p in max_matching(self.guessed(player))[1]]

    def guessed(self, player: int) -> np.ndarray:
        """The table `player` sees, each hidden cell guessed at HIDDEN_VALUE: what its own plans are valued on."""
        return _guess(np.asarray(self.table), np.asarray(self.masks[player]))

    def random_plan_share(self, player: int) -> float:
        """`own_plan_share`'s expectation over uniformly random matchings: each cell lies in 1/8 of them."""
        guess, best = self._own_plan(player)
        return float(guess.sum()) / 8 / best

    def _own_plan(self, player: int) -> tuple[np.ndarray, int]:
        """The table `player` sees with its hidden cells guessed, and its best total there."""
        guess = self.guessed(player)
        return guess, max_matching(guess)[0]

    def to_dict(self) -> dict:
        return {
            "table": self.table,
            "masks": list(self.masks),
            "scales": list(self.scales),
            "seed": self.seed,
            "hard": self.hard,
            "source": self.source,
            "best_reward": self.best_reward,
            "best_assignment": [list(p) for p in self.best_assignment],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        inst = cls(
            data["table"],
            tuple(data["masks"]),
            tuple(data["scales"]),
            data.get("seed"),
            data.get("hard", False),
            data.get("source", "random"),
        )
        if "best_reward" in data and data["best_reward"] != inst.best_reward:
            raise ValueError(f"stored best_reward {data['best_reward']} != recomputed {inst.best_reward}")
        return inst

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Instance:
        return cls.from_dict(json.loads(text))


def sample(seed: int, max_tries: int = MAX_TRIES) -> tuple[np.ndarray, np.ndarray, tuple[float, float], int, bool]:
    """The seed's instance as arrays: (table, visible (2, 8, 8), scales, candidates tried, hard).

    Candidates come in blocks of BLOCK from one `numpy.random.Generator`; the first hard one is
    kept, so `max_tries` only cuts the stream short and never changes which candidate is first.
    """
    if max_tries < 1:
        raise ValueError(f"max_tries must be at least 1, got {max_tries}")
    rng = np.random.default_rng(seed)
    tried = 0
    while True:
        cells = rng.integers(0, _CELL_DRAWS, (8, 8, BLOCK), dtype=np.int16)  # batch last, as matching wants
        views = cells // 100
        visible = np.take(_SEEN_BY, views, axis=1)  # (2, 8, 8, BLOCK)
        table = _guess(cells - 100 * views, visible[0] | visible[1])
        usable = min(BLOCK, max_tries - tried)
        hits = np.flatnonzero(_hard(table[..., :usable], visible[..., :usable]))
        tried += usable
        if hits.size or tried >= max_tries:
            i = int(hits[0]) if hits.size else usable - 1
            scales = rng.uniform(1, 10, 2)
            return (
                table[..., i],
                visible[..., i],
                (float(scales[0]), float(scales[1])),
                tried - usable + i + 1,
                bool(hits.size),
            )


def _guess(table: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """`table` where `seen`, HIDDEN_VALUE elsewhere (as arithmetic: much faster than np.where)."""
    return HIDDEN_VALUE + (table - HIDDEN_VALUE) * seen


def _hard(table: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Which candidates of an (8, 8, B) stack (`visible`: (2, 8, 8, B)) are hard: both players'
    solo plans (unseen cells guessed as 50) score below best / 1.25. Each test runs only on the
    candidates that passed the ones before it, and the exact best only where a cheap upper bound
    on it (the sum of row or column maxima) leaves hope."""
    hard = np.zeros(table.shape[2], dtype=bool)
    solo0 = batch_planned_totals(_guess(table, visible[0]), table)
    bound = np.minimum(table.max(axis=1).sum(axis=0), table.max(axis=0).sum(axis=0))
    live = np.flatnonzero(solo0 * HARD_FACTOR < bound)
    best = batch_best_totals(table[..., live])
    keep = solo0[live] * HARD_FACTOR < best
    live, best = live[keep], best[keep]
    solo1 = batch_planned_totals(_guess(table[..., live], visible[1][..., live]), table[..., live])
    hard[live[solo1 * HARD_FACTOR < best]] = True
    return hard
