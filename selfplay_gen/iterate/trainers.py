"""Trainers by name, as verl registers agent loops: a trainer is one class and one registry line.
Each says how an iteration gets its training data and trains the current model on it; its settings,
with their measured defaults, are its own section of the run's configuration (`config.Trainers`). A
trainer sees the run's settings and one stage's `Context`: its paths, the model it trains from, a shell
for its own commands, and the loop's two steps it is built from (games played and converted; a verl job
run and merged). It never sees the run itself.

    @register("my-trainer")
    class MyTrainer(Trainer):
        section = "my_trainer"  # a field of config.Trainers
        def train(self, ctx: Context) -> list[Export]:
            ctx.play(self.settings.games_per_iter, ["--format", "sft", *ctx.limits])
            return ctx.train(self.job(ctx, "sft"))
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Protocol

from .config import Iteration, PolicyLoss, TrainerSettings, TrainJob, number
from .shell import Shell
from .stages import Export, Stage
from .verl_jobs import ROLLOUT_N_UNKNOWN


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


class PlayGames(Protocol):
    def __call__(self, num_games: int, convert_args: list[str], *, rounds: int = 1) -> None:
        """The current model plays `num_games` training games on the stage's instances (self-play, or
        in a league against opponents drawn by rating), converted into stage.dir/gen with `convert_args`;
        with `rounds` > 1, more rounds while too few groups differ in reward. With `overlap` one-step the
        games were played ahead, beside the training before, by the model before (gen/played_by.json)."""


class RunJob(Protocol):
    def __call__(
        self, job: TrainJob, loss: PolicyLoss | None = None, *, every_checkpoint: bool = False
    ) -> list[Export]:
        """Free the GPU, run the verl job, merge its last checkpoint (with `every_checkpoint`, each one)
        and return the merged models, the last one the stage's."""


@dataclass(frozen=True)
class Context:
    """What a trainer gets for one stage: where it lives, the model it trains from, the conversion's
    token limits, a shell for its own commands, the loop's steps of playing games and of running a
    verl training job, and a timer of its own steps (a row of the run's wall-time table)."""

    stage: Stage
    model: str  # the current model, which the stage trains from
    game_args: tuple[str, ...]  # `--game ...` of a command that takes no configuration file (`selfplay-gen init`)
    limits: list[str]  # convert's --max-prompt-tokens and --max-response-tokens, as verl's job takes them
    shell: Shell
    play: PlayGames
    train: RunJob
    timed: Callable[[str], AbstractContextManager[None]]

    @property
    def gen(self) -> Path:
        """The stage's training data: its games and what they were converted into."""
        return self.stage.dir / "gen"


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
    # whether its data is games the current model plays (`Context.play`), whose server evaluates that
    # model alongside; for a trainer that plays none the loop evaluates the model before it trains
    plays_games: ClassVar[bool] = True

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
    def train(self, ctx: Context) -> list[Export]:
        """Make the training data of `ctx.stage` with `ctx.model` (the current model), train on it into
        stage.dir/train, and return the trained models to evaluate, the iteration's model last
        (its evaluation comes with the next iteration's games, on the same server)."""

    def job(self, ctx: Context, mode: str, **changes) -> TrainJob:
        """The verl job of `mode` on the stage's converted games (validation: `val_file`), with this
        trainer's settings; `changes` replace fields."""
        s = self.settings
        fields = dict(
            mode=mode,
            model=ctx.model,
            train_files=str(ctx.gen / "train.parquet"),
            out_dir=ctx.stage.dir / "train",
            experiment=ctx.stage.dir.name,
            lr=s.lr,
            batch_size=s.batch_size,
            mini_batch_size=s.mini_batch_size,
            epochs=s.epochs,
            lora_rank=s.lora_rank,
            overrides=self.cfg.overrides,
        )
        fields.update(changes)
        if "val_files" not in fields:
            fields["val_files"] = val_file(ctx.gen, ctx.shell.dry_run)
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
    selfplay_replay), one row per group of games_per_instance games. Full fine-tuning below lr 1e-5 did
    not learn (bench/results/learning/)."""

    section = "grpo"

    def mini_batch(self, batch: int) -> int:
        return half(batch)

    def train(self, ctx: Context) -> list[Export]:
        baseline = ["--baseline", self.cfg.league.baseline] if self.cfg.league.baseline != "group" else []
        rounds = max(1, self.cfg.verl.filter_groups)
        ctx.play(self.settings.games_per_iter, [*ctx.limits, *baseline], rounds=rounds)
        # a row replays one group: the games_per_instance games of one instance and seat, so verl's group size
        ctx.train(self.job(ctx, "offline", rollout_n=self.cfg.games_per_instance), self.loss())
        return [Export(ctx.stage.label, str(ctx.stage.model_dir), ctx.stage.dir / "eval")]


@register("filtered-bc")
class FilteredBC(Trainer):
    """Filtered behaviour cloning (expert iteration): SFT on the best TOP_FRACTION of each group's
    games (or, with valid_moves, on every seat's own valid moves), a LoRA adapter folded in after each
    iteration. Its defaults (lr 1e-3, the best of 8 games of 4,096) are the ones bench/results/learning/
    found best on held-out instances."""

    section = "filtered_bc"

    def train(self, ctx: Context) -> list[Export]:
        chosen = ["--valid-moves"] if self.own.valid_moves else ["--top-fraction", number(self.own.top_fraction)]
        convert = ["--format", "sft", *chosen, *ctx.limits]
        ctx.play(self.settings.games_per_iter, convert)
        ctx.train(self.job(ctx, "sft"))
        return [Export(ctx.stage.label, str(ctx.stage.model_dir), ctx.stage.dir / "eval")]


@register("grpo-online")
class OnlineGRPO(Trainer):
    """verl's online self-play loop (agent selfplay_online): games played inside verl by its rollout
    engine, strictly on-policy, `steps` steps per iteration in one verl process. It validates
    on the first `test_instances` development instances (seeds from 10**9) every `test_freq`
    steps, and every checkpoint it saves (verl.save_freq) is merged and evaluated as any other stage's model."""

    section = "grpo_online"
    plays_games = False

    def mini_batch(self, batch: int) -> int:
        return half(batch)

    def train(self, ctx: Context) -> list[Export]:
        steps, batch = self.own.steps, self.settings.batch_size
        gen = ctx.gen
        # two rows (one per seat) an instance; filtered groups draw new rows, up to verl.filter_groups batches a step
        instances = math.ceil(steps * batch * max(1, self.cfg.verl.filter_groups) / 2)
        ctx.shell.run(
            "online: init data",
            [*self.cfg.tools.gen, "init", *ctx.game_args, "--num-train", str(instances),
             "--num-test", str(self.own.test_instances), "--seed", str(ctx.stage.seed), "--out-dir", str(gen),
             "--overwrite"],
        )  # fmt: skip
        overrides = (
            f"trainer.test_freq={self.own.test_freq}",
            *(f"+selfplay.{name}={number(value)}" for name, value in self.cfg.reward_terms().named().items()),
            *([f"+selfplay.move_credit={number(self.own.move_credit)}"] if self.own.move_credit else []),
            *self.cfg.overrides,
        )
        job = self.job(
            ctx, "online", val_files=str(gen / "test.parquet"), total_steps=steps,
            rollout_n=self.cfg.games_per_instance, overrides=overrides,
        )  # fmt: skip
        return ctx.train(job, self.loss(), every_checkpoint=True)


@register("dpo")
class DPO(Trainer):
    """Direct preference optimisation (TRL's DPOTrainer, `selfplay_gen.train.dpo`) on each (instance,
    seat) group's best game against its worst (`selfplay-convert --format dpo`); in a league only the
    trained seat's pairs (seat 0), a game it won against the group's opponent paired with one it lost.
    A LoRA adapter of its lora_rank is folded in, as filtered BC does."""

    section = "dpo"

    def train(self, ctx: Context) -> list[Export]:
        pairs = ["--dpo-pairs", self.own.pairs, "--dpo-pairs-per-group", str(self.own.pairs_per_group)]
        ctx.play(self.settings.games_per_iter, ["--format", "dpo", *pairs, *ctx.limits])
        out = ctx.stage.model_dir
        s = self.settings
        with ctx.timed("train (dpo)"):
            ctx.shell.run(
                f"{ctx.stage.name}: train (dpo)",
                [self.cfg.tools.trl(), "-m", "selfplay_gen.train.dpo", "--model", ctx.model,
                 "--pairs", str(ctx.gen / "train.parquet"), "--out", str(out), "--lora-rank", str(s.lora_rank),
                 "--lr", s.lr, "--epochs", str(s.epochs), "--batch-size", str(s.batch_size)],
            )  # fmt: skip
        return [Export(ctx.stage.label, str(out), ctx.stage.dir / "eval")]


def _with_lora(loss: PolicyLoss, rank: int) -> PolicyLoss:
    """GRPO with a LoRA adapter of `rank` (the trainer section's lora_rank) on the actor."""
    return replace(loss, lora_rank=rank)


def val_file(gen: Path, dry_run: bool) -> str:
    """gen/val.parquet, or gen/train.parquet when the split left no validation rows."""
    import pyarrow.parquet as pq

    val = gen / "val.parquet"
    if dry_run or (val.exists() and pq.ParquetFile(val).metadata.num_rows > 0):
        return str(val)
    return str(gen / "train.parquet")


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
