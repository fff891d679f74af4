"""A run's stages on disk and the models they make, apart from the loop that runs them, so that the
trainers and the league, which the loop calls, name them without importing the loop."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..atomic import write_json_atomic
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

    @property
    def number(self) -> int:
        """An iteration stage's i (iter_NNN)."""
        return int(self.name.removeprefix("iter_"))

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


PLAYED_BY_FILE = "played_by.json"  # in a stage's gen/: which model played its training games


@dataclass(frozen=True)
class PlayedBy:
    """Which model played a stage's training games (gen/played_by.json), written before they start and again
    once converted: the checkpoint, the stage whose training they were played beside (`overlap` one-step,
    by the model that stage started from, one policy version before the model the stage trains; None: in their
    own stage, by the model it trains), and whether they were played and converted to the end. The games'
    records name the same model (settings.seat0.model) and carry its log-probs."""

    model: str
    label: str
    made_by: str  # the stage that made the model, where its evaluation lives
    during: str | None = None
    complete: bool = False

    @classmethod
    def of(cls, player: Checkpoint, during: str | None) -> PlayedBy:
        return cls(player.model, player.label, str(player.made_by), during)

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.model, self.label, Path(self.made_by))

    @classmethod
    def read(cls, gen: Path) -> PlayedBy | None:
        """The stage's record, or None where it has none."""
        path = gen / PLAYED_BY_FILE
        if not path.exists():
            return None
        try:
            fields = json.loads(path.read_text())
            return cls(
                str(fields["model"]), str(fields["label"]), str(fields["made_by"]), fields.get("during"),
                bool(fields["complete"]),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a record of who played the games, field {error}") from None

    def write(self, gen: Path) -> None:
        gen.mkdir(parents=True, exist_ok=True)
        write_json_atomic(gen / PLAYED_BY_FILE, asdict(self))
