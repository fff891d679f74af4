"""Game instances: the hidden score table, what each player sees, and how instances are made.

An instance is plain data (JSON round trip) and is fully determined by its seed: sampling draws
candidates in fixed blocks from one `numpy.random.Generator` and keeps the first hard one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .matching import batch_best_totals, batch_planned_totals, max_matching

REVIEWERS = ("Ava Li", "Daniel Nguyen", "Sofia Patel", "Andrei Petrov", "Morgan Reed",
             "Joseph Santos", "Ethan Smith", "Noah Wilson")
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
VISIBLE_P = 0.4
HIDDEN_VALUE = 50
HARD_FACTOR = 1.25
MAX_TRIES = 100_000
# Candidates drawn per block. Part of the seed -> instance contract: changing it changes instances.
BLOCK = 512

Pairs = list[tuple[int, int]]


def score(instance: "Instance", pairs: Pairs) -> int:
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
        best, pairs = max_matching(table)
        object.__setattr__(self, "best_reward", best)
        object.__setattr__(self, "best_assignment", pairs)

    @property
    def id(self) -> str:
        return f"seed-{self.seed}" if self.seed is not None else self.source

    @classmethod
    def from_seed(cls, seed: int, max_tries: int = MAX_TRIES) -> "Instance":
        """The first hard candidate of the seed's stream, or the candidate at `max_tries`
        (recorded as not hard)."""
        rng = np.random.default_rng(seed)
        tried = 0
        while True:
            table = rng.integers(0, 100, (BLOCK, 8, 8))
            visible = rng.random((BLOCK, 2, 8, 8)) < VISIBLE_P
            scales = rng.uniform(1, 10, (BLOCK, 2))
            table = np.where(visible.any(axis=1), table, HIDDEN_VALUE)
            hard = _hard(table, visible)
            last = min(BLOCK, max_tries - tried) - 1
            hits = np.flatnonzero(hard[: last + 1])
            tried += last + 1
            if hits.size or tried >= max_tries:
                i = int(hits[0]) if hits.size else last
                return cls(table[i].tolist(), (visible[i, 0].astype(int).tolist(), visible[i, 1].astype(int).tolist()),
                           (float(scales[i, 0]), float(scales[i, 1])), seed=seed, hard=bool(hits.size))

    @classmethod
    def from_human_record(cls, record: dict, source: str = "human") -> "Instance":
        """An instance people played, from a line of `optimization_human_games.jsonl`."""
        try:
            return cls(record["table"], (record["mask1"], record["mask2"]),
                       (float(record["scale1"]), float(record["scale2"])), source=source)
        except KeyError as err:
            raise ValueError(f"human game record lacks field {err}") from None

    def view(self, player: int) -> list[list[int | None]]:
        """The player's scaled table: floor(value * scale) where visible, None where hidden."""
        mask, scale = self.masks[player], self.scales[player]
        return [[int(self.table[r][p] * scale) if mask[r][p] else None for p in range(8)] for r in range(8)]

    def normalized(self, raw: int) -> float:
        return raw / self.best_reward if self.best_reward else 0.0

    def to_dict(self) -> dict:
        return {"table": self.table, "masks": list(self.masks), "scales": list(self.scales), "seed": self.seed,
                "hard": self.hard, "source": self.source, "best_reward": self.best_reward,
                "best_assignment": [list(p) for p in self.best_assignment]}

    @classmethod
    def from_dict(cls, data: dict) -> "Instance":
        inst = cls(data["table"], tuple(data["masks"]), tuple(data["scales"]), data.get("seed"),
                   data.get("hard", False), data.get("source", "random"))
        if "best_reward" in data and data["best_reward"] != inst.best_reward:
            raise ValueError(f"stored best_reward {data['best_reward']} != recomputed {inst.best_reward}")
        return inst

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> "Instance":
        return cls.from_dict(json.loads(text))


def _hard(table: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Which candidates are hard: both players' solo plans (unseen cells guessed as 50) score
    below best / 1.25. The second solo plan is only solved where the first one passes."""
    best = batch_best_totals(table)
    hard = np.zeros(len(table), dtype=bool)
    solo0 = batch_planned_totals(np.where(visible[:, 0], table, HIDDEN_VALUE), table)
    live = np.flatnonzero(solo0 * HARD_FACTOR < best)
    if live.size:
        solo1 = batch_planned_totals(np.where(visible[live, 1], table[live], HIDDEN_VALUE), table[live])
        hard[live[solo1 * HARD_FACTOR < best[live]]] = True
    return hard
