"""A run's stages on disk and the models they make, apart from the loop that runs them, so that the
trainers and the league, which the loop calls, name them without importing the loop."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..evaluation.splits import ITERATION_SEEDS


@dataclass(frozen=True)
class Stage:
    name: str  # its directory's name: base, warm, iter_001
    label: str  # its model's label in the reports: base, warm, iter_1
    dir: Path
    seed: int = 0

    @property
    def done(self) -> bool:
        return (self.dir / "DONE").exists()

    @property
    def model_dir(self) -> Path:
        """Where the stage's trained model goes, merged: the checkpoint that serves and that later stages name."""
        return self.dir / "train" / "hf"

    @classmethod
    def iteration(cls, run_dir: Path, i: int) -> Stage:
        """Iteration i's stage: iter_NNN, its model labelled iter_i, its games on seeds from i x 10**6
        (`evaluation.splits.ITERATION_SEEDS`)."""
        return cls(f"iter_{i:03d}", f"iter_{i}", run_dir / f"iter_{i:03d}", i * ITERATION_SEEDS)


@dataclass(frozen=True)
class Export:
    """A trained model to evaluate: its label in the reports, its directory, its evaluation's directory."""

    label: str
    model: str
    eval_dir: Path


@dataclass(frozen=True)
class Checkpoint:
    model: str  # its model directory (or the initial model's name)
    label: str  # base, warm, iter_1
    made_by: Path  # the stage that made it, where its evaluation lives
