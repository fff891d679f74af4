"""Trainers by name, as verl registers agent loops: a trainer is one class and one registry line.
Each says how an iteration gets its training data and trains the current model on it; its settings,
with their measured defaults, are its own section of the run's configuration (`config.Trainers`).

    @register("my-trainer")
    class MyTrainer(Trainer):
        section = "my_trainer"  # a field of config.Trainers
        def train(self, run, stage): ...
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from .config import Iteration, PolicyLoss, TrainerSettings, TrainJob, number
from .verl_jobs import ROLLOUT_N_UNKNOWN

if TYPE_CHECKING:
    from .loop import Run, Stage


@dataclass(frozen=True)
class Resolved:
    """A trainer's settings for one run: its section of the configuration (`trainers.<section>`), with
    the rows of a PPO update worked out where the section leaves them to the trainer."""

    games_per_iter: int
    epochs: int
    lr: str
    batch_size: int
    mini_batch_size: int
    lora_rank: int


@dataclass(frozen=True)
class Export:
    """A trained model to evaluate: its label in the reports, its directory, its evaluation's directory."""

    label: str
    model: str
    eval_dir: Path


_TRAINERS: dict[str, type[Trainer]] = {}


def register(name: str):
    """Class decorator: make a Trainer subclass available as TRAINER=`name`."""

    def add(cls: type[Trainer]) -> type[Trainer]:
        if name in _TRAINERS and _TRAINERS[name] is not cls:
            raise ValueError(f"trainer {name!r} is already registered as {_TRAINERS[name].__name__}")
        cls.name = name
        _TRAINERS[name] = cls
        return cls

    return add


def names() -> list[str]:
    return sorted(_TRAINERS)


def get(name: str) -> type[Trainer]:
    if name not in _TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; known trainers: {', '.join(names())}")
    return _TRAINERS[name]


class Trainer(abc.ABC):
    name: ClassVar[str]
    section: ClassVar[str]  # its settings: this field of config.Trainers

    def __init__(self, cfg: Iteration):
        self.cfg = cfg
        self.own = getattr(cfg.trainers, type(self).section)
        self.settings = resolve(self.own, self.mini_batch)

    def mini_batch(self, batch: int) -> int:
        """Rows per PPO update where the section sets none, from rows per step: all of them."""
        return batch

    def loss(self) -> PolicyLoss:
        """The run's GRPO settings, with the trainer's LoRA rank (its section's lora_rank) on the actor."""
        rank = self.settings.lora_rank
        return self.cfg.loss if rank == 0 else _with_lora(self.cfg.loss, rank)

    @abc.abstractmethod
    def train(self, run: Run, stage: Stage) -> list[Export]:
        """Make the training data of `stage` with `run.model` (the current model), train on it into
        stage.dir/train, and return the trained models to evaluate, the iteration's model last
        (its evaluation comes with the next iteration's games, on the same server)."""

    def job(self, stage: Stage, mode: str, model: str, **changes) -> TrainJob:
        s = self.settings
        gen = stage.dir / "gen"
        fields = dict(
            mode=mode,
            model=model,
            train_files=str(gen / "train.parquet"),
            val_files=str(gen / "val.parquet"),
            out_dir=stage.dir / "train",
            experiment=stage.dir.name,
            lr=s.lr,
            batch_size=s.batch_size,
            mini_batch_size=s.mini_batch_size,
            epochs=s.epochs,
            lora_rank=s.lora_rank,
            overrides=self.cfg.overrides,
        )
        fields.update(changes)
        return TrainJob(**fields)  # type: ignore[arg-type]


def resolve(own: TrainerSettings, mini_batch: Callable[[int], int]) -> Resolved:
    """A trainer's section, with the rows of a PPO update its own rule gives where the section sets none."""
    batch = own.batch_size
    return Resolved(
        games_per_iter=own.games_per_iter,
        epochs=own.epochs,
        lr=own.lr,
        batch_size=batch,
        mini_batch_size=own.mini_batch_size or mini_batch(batch),
        lora_rank=own.lora_rank,
    )


def half(batch: int) -> int:
    """Two PPO updates per step, so the second is clipped: measured to learn where one did not."""
    return (batch + 1) // 2


@register("grpo")
class OfflineGRPO(Trainer):
    """Offline GRPO on whole groups: the current model's games, replayed by verl (agent
    selfplay_replay), one row per group of games_per_instance games. Full fine-tuning needs lr 1e-5 or
    more: the merged model is bf16 and smaller steps round away (bench/results/learning/)."""

    section = "grpo"

    def mini_batch(self, batch: int) -> int:
        return half(batch)

    def train(self, run: Run, stage: Stage) -> list[Export]:
        baseline = ["--baseline", self.cfg.league.baseline] if self.cfg.league.baseline != "group" else []
        rounds = max(1, self.cfg.verl.filter_groups)
        run.play(stage, self.settings.games_per_iter, [*run.limits(), *baseline], rounds=rounds)
        # a row replays one group: the games_per_instance games of one instance and seat, so verl's group size
        job = self.job(
            stage,
            "offline",
            run.model,
            val_files=run.val_file(stage.dir / "gen"),
            rollout_n=self.cfg.games_per_instance,
        )
        run.train(stage, job, self.loss())
        return [Export(stage.label, str(stage.model_dir), stage.dir / "eval")]


@register("filtered-bc")
class FilteredBC(Trainer):
    """Filtered behaviour cloning (expert iteration): SFT on the best top_fraction of each group's
    games, a LoRA adapter folded in after each iteration. Measured: lr 1e-3 on the best of 8 games of
    4,096 gained +0.042 on held-out instances in 3 iterations (2,048: +0.034; 2e-3 or 5e-4: less)."""

    section = "filtered_bc"

    def train(self, run: Run, stage: Stage) -> list[Export]:
        convert = ["--format", "sft", "--top-fraction", number(self.own.top_fraction), *run.limits()]
        run.play(stage, self.settings.games_per_iter, convert)
        job = self.job(stage, "sft", run.model, val_files=run.val_file(stage.dir / "gen"))
        run.train(stage, job)
        return [Export(stage.label, str(stage.model_dir), stage.dir / "eval")]


@register("grpo-online")
class OnlineGRPO(Trainer):
    """verl's online self-play loop (agent selfplay_online): games played inside verl by its rollout
    engine, strictly on-policy, `steps` steps per iteration in one verl process. It validates
    on the first `test_instances` development instances (seeds from 10**9) every `test_freq`
    steps, and every checkpoint it saves (verl.save_freq) is merged and evaluated as any other stage's model."""

    section = "grpo_online"

    def mini_batch(self, batch: int) -> int:
        return half(batch)

    def train(self, run: Run, stage: Stage) -> list[Export]:
        run.evaluate_current()
        steps, batch = self.own.steps, self.settings.batch_size
        gen = stage.dir / "gen"
        # two rows (one per seat) an instance; filtered groups draw new rows, up to verl.filter_groups batches a step
        instances = math.ceil(steps * batch * max(1, self.cfg.verl.filter_groups) / 2)
        run.shell.run(
            "online: init data",
            [*run.cfg.tools.gen, "init", *run.game_args, "--num-train", str(instances),
             "--num-test", str(self.own.test_instances), "--seed", str(stage.seed), "--out-dir", str(gen),
             "--overwrite"],
        )  # fmt: skip
        overrides = (f"trainer.test_freq={self.own.test_freq}", *self.cfg.overrides)
        job = self.job(
            stage, "online", run.model, train_files=str(gen / "train.parquet"), val_files=str(gen / "test.parquet"),
            total_steps=steps, rollout_n=self.cfg.games_per_instance, overrides=overrides,
        )  # fmt: skip
        return run.train(stage, job, self.loss(), every_checkpoint=True)


@register("dpo")
class DPO(Trainer):
    """Direct preference optimisation (TRL's DPOTrainer, `selfplay_gen.train.dpo`) on each (instance,
    seat) group's best game against its worst (`selfplay-convert --format dpo`); in a league only the
    trained seat's pairs (seat 0), a game it won against the group's opponent paired with one it lost.
    A LoRA adapter of its lora_rank is folded in, as filtered BC does."""

    section = "dpo"

    def train(self, run: Run, stage: Stage) -> list[Export]:
        pairs = ["--dpo-pairs", self.own.pairs, "--dpo-pairs-per-group", str(self.own.pairs_per_group)]
        run.play(stage, self.settings.games_per_iter, ["--format", "dpo", *pairs, *run.limits()])
        out = stage.model_dir
        s = self.settings
        run.shell.run(
            f"{stage.name}: train (dpo)",
            [run.cfg.tools.trl(), "-m", "selfplay_gen.train.dpo", "--model", run.model,
             "--pairs", str(stage.dir / "gen" / "train.parquet"), "--out", str(out), "--lora-rank", str(s.lora_rank),
             "--lr", s.lr, "--epochs", str(s.epochs), "--batch-size", str(s.batch_size)],
        )  # fmt: skip
        return [Export(stage.label, str(out), stage.dir / "eval")]


def _with_lora(loss: PolicyLoss, rank: int) -> PolicyLoss:
    """GRPO with a LoRA adapter of `rank` (the section's lora_rank) on the actor."""
    return replace(loss, lora_rank=rank)


def rollout_n(summary: Path, dry_run: bool) -> str:
    """verl's rollout.n for replayed games: the games per group the converter wrote (convert_summary.json)."""
    if not summary.exists():
        if dry_run:
            return ROLLOUT_N_UNKNOWN
        raise FileNotFoundError(f"{summary}: no conversion summary, so no rollout_n (convert the games first)")
    try:
        return str(int(json.loads(summary.read_text())["rollout_n"]))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{summary}: field rollout_n missing or not a number ({error})") from error
