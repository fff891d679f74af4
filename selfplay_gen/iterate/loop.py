"""The self-play loop as stages under RUN_DIR, each skipped once its DONE marker exists, so a stopped
run resumes where it stopped (an iteration stopped after its training, at its models' evaluation):

  base/      the initial model evaluated
  warm/      the warm start on the game's teacher games (when `wants_warm_start`)
  iter_NNN/  games of the current model on instances never used before (seeds NNN x 10**6 on),
             trained on by the trainer (train/, merged model train/hf)
  crossplay/ checkpoints against the initial one and the one before (`crossplay_pairings`)

Every model is evaluated with the server that plays its games (`Slots` keeps it between the two),
into its stage's eval/ and the run-level reports RUN_DIR/report/<set>.

With `overlap` one-step (verl's one-step-off-policy schedule), iteration N+1's games are played while
iteration N trains, in the background (`Ahead`), by the model iteration N started from: the server keeps that
model and its memory share while verl trains beside it. That model's evaluation plays alongside those games,
so a new model is evaluated one iteration later than in the synchronous loop, once the server has its weights
for the games it plays ahead, never by stopping those games to load it: the evaluation leaves the critical
path, and the server holds one model at a time. What must judge a model before the next iteration starts (a
league's promotion match, its opponents' ratings) therefore does not combine with overlap."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import click

from .. import games, serving
from ..atomic import write_atomic
from ..evaluation.splits import TEST
from ..league import SCRIPTED_PREFIX, Member, scripted_member
from ..verl import attention
from ..verl.merge_lora import ADAPTER_DIR
from . import competition, decisions, report
from .ahead import Ahead
from .competition import Competition
from .config import Iteration, PolicyLoss, Sampling, ServerSettings, TrainJob, Verl, number
from .gpu_usage import GpuUsage
from .plays import (
    DEV_SET,
    TEST_SET,
    Part,
    Plays,
    default_game,
    dev_draw,
    environment,
    game_args,
    partner_args,
    played_of,
)
from .resident import STEP, Resident
from .server import Slots, Started, short_of_memory, wait_to_start_again
from .shell import Shell, StepFailed, logged_since
from .stages import Checkpoint, Export, PlayedBy, Stage
from .trainers import Context, Trainer, get, rollout_n, val_file
from .verl_jobs import VERL_READY, merge, ppo_command, saved_steps, sft_command, starts_engine

EMBEDDED_MODEL_DIR = "EMBEDDED_MODEL_DIR"  # a dry run does not convert the embedded model
WARM_SEED = 500_000_000  # the warm start's teacher games, apart from every iteration's instances
# a training stage's file naming the model its LoRA adapter applies to (the model it trained from; the resident
# job's first model, for its one adapter trained through the run): a run carried to another machine as adapters
# alone folds each onto that model (`Run.refold`, `gpu_learning.sh restore`), not onto the stage before
TRAINED_FROM_FILE = "trained_from"
# a training stage's models (`Export`s), written once merged: a run stopped after its iteration's training (or
# carried to another machine and restored) resumes at the evaluation instead of training again
TRAINED_FILE = "trained.json"


class Run:
    """One run of `selfplay-gen iterate`: the current model (the learner, which the next iteration
    trains), the last promoted checkpoint (`kept`: the promotion match's opponent and the run's
    output; the learner too, unless PROMOTION_LEARNER=latest goes on from a checkpoint kept out),
    the promoted checkpoints so far (cross-play's players), the servers, and the stages' shared steps."""

    def __init__(self, cfg: Iteration):
        self.cfg = cfg
        self.shell = Shell(cfg.dry_run, environment())
        game = cfg.game or default_game()
        # a mix of games (`games.mixture`) plays, converts and trains as one and is evaluated game by game
        # (`Plays.parts`); what is decided for its game is decided on its first one (a mix has no league)
        self.game_cls = games.get(games.mixture(game)[0])
        self.game_args = game_args(cfg)
        self.sampling = cfg.sampling_for_run()
        played = played_of(cfg, self.sampling)
        parts = decisions.parts(played, cfg.evaluation.references)
        self.plays = Plays(cfg.tools, played, cfg.evaluation, parts, self.shell)
        self.trainer: Trainer = get(cfg.trainer)(cfg)
        self.overlap = cfg.overlaps()
        # a server that plays beside training (overlap) or beside a trainer that stays up keeps a share of the GPU
        beside = self.overlap or cfg.verl.resident
        servers = cfg.servers.for_games(self.plays.games_at_once(self.trainer.settings.games_per_iter))
        self.slots = Slots(servers, self.shell, cfg.servers.overlap_mem_fraction if beside else None)
        self.ahead = Ahead(self.shell)  # the next iteration's games, played while this one trains
        # offline GRPO's one verl job for the whole run (`verl.resident`)
        self.resident = (
            Resident(self.shell, cfg.run_dir, cfg.num_iterations, cfg.servers) if cfg.verl.resident else None
        )
        self._here = threading.local()  # what each thread of the run is running (`stage`, `during`)
        self.crossplay = decisions.crossplays_by_default(self.game_cls) if cfg.crossplay is None else cfg.crossplay
        self.run_dir = cfg.run_dir
        self.reports = self.run_dir / "report"
        self.learner = self.kept = Checkpoint("", "", self.run_dir / "base")
        self.checkpoints: list[str] = []
        self.labels: list[str] = []
        # the league: opponents by rating, promotion, skill levels (`competition`)
        wanted = cfg.league_size > 0 or cfg.promotes() or bool(cfg.league.skill_levels)
        self.competition = Competition(self) if wanted else None

    @property
    def stage(self) -> Stage | None:
        """The stage this thread is running, whose timings it records: the loop's, or in the background the stage
        whose games are played ahead."""
        return getattr(self._here, "stage", None)

    @stage.setter
    def stage(self, stage: Stage | None) -> None:
        self._here.stage = stage

    @property
    def during(self) -> Stage | None:
        """In the background, the stage whose training this thread's work runs beside; else None."""
        return getattr(self._here, "during", None)

    # -- the loop --------------------------------------------------------------------------------

    def main(self) -> str:
        cfg = self.cfg
        initial = cfg.initial_model or (EMBEDDED_MODEL_DIR if cfg.dry_run else embedded_model())
        if cfg.servers.dtype is None:  # every model of the run served as the initial one is
            self.slots.settings = replace(self.slots.settings, dtype=serving.served_dtype(initial))
        base = Stage("base", "base", self.run_dir / "base")
        self.advance(initial, "base", base.dir)
        with self.slots, self.ahead, self.resident or contextlib.nullcontext():
            if not base.done:
                with self.running(base):
                    self.retention(base, initial)
                    self.evaluate_current()
            warm = Stage("warm", "warm", self.run_dir / "warm", WARM_SEED)
            if decisions.wants_warm_start(cfg.warm.policy, self.base_agreement(), cfg.warm.below):
                if not warm.done:
                    with self.running(warm):
                        self.trains_from(warm)
                        self.warm_start(warm)
                else:
                    self.refold(warm)
                self.advance(str(warm.model_dir), "warm", warm.dir)
            for i in range(1, cfg.num_iterations + 1):
                stage = Stage.iteration(self.run_dir, i)
                promoted = True
                if not stage.done:
                    if not decisions.within_budget(self.run_dir, cfg.time_budget_min):
                        minutes = decisions.iteration_minutes(self.run_dir)
                        self.shell.echo(
                            f"time budget of {cfg.time_budget_min:g} min: {sum(minutes):.1f} min spent, and an "
                            f"iteration as long as the last ({minutes[-1]:.1f} min) would end past it: "
                            f"no iteration from {i} on"
                        )
                        break
                    self.shell.echo(
                        f"=== iteration {i} of {cfg.num_iterations} ({cfg.trainer}): model {self.model} -> {stage.dir}"
                    )
                    with self.running(stage):
                        if self.competition is not None:
                            self.competition.start(i)
                        exports = self.trained(stage)
                        if exports:
                            self.shell.echo(
                                f"iteration {i}: trained already ({stage.dir / TRAINED_FILE}): on to its evaluation"
                            )
                            if self.competition is not None:
                                self.competition.replay(stage)
                            if self.overlap:  # the games it trained on were played ahead, not beside this evaluation
                                self.evaluate_current()
                        else:
                            self.trains_from(stage)
                            if not self.trainer.plays_games:
                                self.evaluate_current()
                            exports = self.trainer.train(self.context(stage))
                            self.save_trained(stage, exports)
                        for export in exports[:-1]:
                            self.evaluate(export.model, export.label, export.eval_dir)
                        self.retention(stage, exports[-1].model)
                        if self.competition is not None and cfg.promotes():
                            promoted = self.competition.decide(stage, exports[-1].model)
                        if self.competition is not None:
                            self.competition.save(stage)
                        if self.ahead.owner == stage:  # the last iteration's evaluation of the model it started from
                            self.wait_ahead(stage)
                else:
                    self.shell.echo(f"iteration {i}: done already ({stage.dir}/DONE), skipped")
                    self.refold(stage)
                    decision = competition.read_promotion(stage.dir) if cfg.promotes() else None
                    promoted = decision is None or bool(decision["promoted"])
                if promoted:
                    self.advance(str(stage.model_dir), stage.label, stage.dir)
                    continue
                if cfg.league.learner == "latest":
                    self.learn(Checkpoint(str(stage.model_dir), stage.label, stage.dir))
                if i == cfg.num_iterations:
                    continue
                if self.model != self.kept.model:
                    self.shell.echo(
                        f"iteration {i + 1} trains on from {stage.label}, which was not promoted; the pool and the "
                        f"run's output keep {self.kept.label} ({self.kept.model})"
                    )
                else:
                    self.shell.echo(f"iteration {i + 1} starts again from {self.label} ({self.model})")
            if self.ahead.owner is not None:  # games played ahead for an iteration the time budget left out
                self.wait_ahead(self.ahead.owner)
            if self.resident is not None:  # its GPU memory back for the final evaluation
                self.resident.close()
            self.learn(self.kept)  # the run's output: its last promoted checkpoint
            self.evaluate_current(final=True)
            self.slots.release()
            shown = [self.reports / part.at(DEV_SET) / "report.md" for part in self.plays.parts]
            if self.crossplay:
                shown += self.cross_play()
        if not cfg.dry_run:
            text = report.write_summary(self.run_dir) if any(self.run_dir.glob(f"*/{report.ROW_FILE}")) else ""
            click.echo(text or _read(self.run_dir / "summary.md"))
            for path in shown:
                click.echo(_read(path))
        self.shell.echo(f"final model: {self.model}")
        return self.model

    def advance(self, model: str, label: str, made_by: Path) -> None:
        """A promoted checkpoint: the learner, the one kept, and the next of cross-play's players."""
        self.kept = Checkpoint(model, label, made_by)
        self.learn(self.kept)
        self.checkpoints.append(model)
        self.labels.append(label)

    def learn(self, checkpoint: Checkpoint) -> None:
        """The model the next iteration trains and plays with, promoted or not."""
        self.learner = checkpoint

    @property
    def model(self) -> str:
        return self.learner.model

    @property
    def label(self) -> str:
        return self.learner.label

    @property
    def eval_for(self) -> Path:
        """The stage that made the current model."""
        return self.learner.made_by

    def trains_from(self, stage: Stage) -> None:
        """Inside `running(stage)`, which made its directory."""
        if not self.cfg.dry_run:
            write_atomic(stage.dir / TRAINED_FROM_FILE, self.model + "\n")

    def refold(self, stage: Stage) -> None:
        """A finished stage that came from another machine as its LoRA adapter alone (`gpu_lease.sh pack` leaves
        models out) gets its model back before anything serves it: the adapter folded onto the model the stage
        trained from (its TRAINED_FROM_FILE where that model is here, else the current one)."""
        hf = stage.model_dir
        if _has_weights(hf):
            return
        if not (hf / ADAPTER_DIR).is_dir():
            if not self.cfg.dry_run:  # said, not raised: a run whose later stages are done serves it no more
                click.echo(
                    f"{stage.dir}/DONE, but {hf} holds neither a model's weights nor a LoRA adapter ({ADAPTER_DIR}/) "
                    f"to fold back: a step that serves it will fail (remove {stage.dir} to run the stage again)",
                    err=True,
                )
            return
        parent = self.model
        with contextlib.suppress(OSError):
            named = (stage.dir / TRAINED_FROM_FILE).read_text().strip()
            parent = named if _has_weights(Path(named)) else parent
        python = self.cfg.tools.python or sys.executable
        self.shell.run(
            f"{stage.name}: refold", [python, "-m", "selfplay_gen.verl.merge_lora", "--onto", parent, f"{hf}"]
        )

    def save_trained(self, stage: Stage, exports: list[Export]) -> None:
        """Record the stage's merged models, the model they were trained from and the one that played their games
        (TRAINED_FILE), so a run stopped before the stage ends goes on from them (`trained`)."""
        if self.cfg.dry_run:
            return
        listed = [{"label": e.label, "model": e.model, "eval_dir": str(e.eval_dir)} for e in exports]
        played = PlayedBy.read(stage.dir / "gen")
        games_from = {"games_played_by": played.model, "games_played_during": played.during} if played else {}
        saved = {"trained_from": self.model, **games_from, "exports": listed}
        write_atomic(stage.dir / TRAINED_FILE, json.dumps(saved, indent=1))

    def trained(self, stage: Stage) -> list[Export]:
        """The models an unfinished stage trained from the current model already (its TRAINED_FILE), when
        each holds its weights; else none, and the stage trains."""
        path = stage.dir / TRAINED_FILE
        if self.cfg.dry_run or not path.exists():
            return []
        try:
            saved = json.loads(path.read_text())
            exports = [Export(e["label"], e["model"], Path(e["eval_dir"])) for e in saved["exports"]]
            trained_from = saved["trained_from"]
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a list of trained models, field exports or trained_from ({error})") from None
        if trained_from != self.model:
            self.shell.echo(f"{path}: trained from {trained_from}, not {self.model}: {stage.name} trains again")
            return []
        missing = [e.model for e in exports if not _has_weights(Path(e.model))]
        if missing:
            self.shell.echo(f"{path}: no weights in {', '.join(missing)}: {stage.name} trains again")
            return []
        return exports

    @contextlib.contextmanager
    def running(self, stage: Stage) -> Iterator[None]:
        """Run a stage: mark it DONE with its summary row once it ends well."""
        started = time.monotonic()
        self.stage = stage
        if not self.cfg.dry_run:
            stage.dir.mkdir(parents=True, exist_ok=True)
        yield
        self.stage = None
        if self.cfg.dry_run:
            return
        games_file = stage.dir / "gen" / "games.jsonl"
        from ..runner import Summary

        summary = Summary.of_file(games_file).to_dict() if games_file.exists() else None
        alike = decisions.games_alike(stage.dir / "gen" / "convert_summary.json")
        report.write_row(stage.dir, decisions.summary_row(stage.label, summary, time.monotonic() - started, alike))
        (stage.dir / "DONE").touch()
        report.write_summary(self.run_dir)

    @contextlib.contextmanager
    def timed(self, step: str, startup_s: float = 0.0) -> Iterator[None]:
        """Record a step's wall time in the running stage's timings (start-up apart where known); between
        stages (the final model's evaluation), in the timings of the stage that made the current model."""
        started = time.monotonic()
        with GpuUsage(enabled=not self.cfg.dry_run) as usage:
            yield
        if not self.cfg.dry_run:
            where = self.stage.dir if self.stage is not None else self.eval_for
            took = time.monotonic() - started
            during = self.during.label if self.during is not None else None
            report.add_timing(where, report.Timing(step, startup_s, took, usage.mean_percent(), during))

    # -- steps the stages and trainers share -----------------------------------------------------

    def serve(self, slot: int, model: str, shared: bool = False) -> Started:
        log_dir = self.stage.dir if self.stage is not None else self.eval_for
        name = "sglang.log" if slot == 0 else "sglang-partner.log"
        return self.slots.serve(slot, model, log_dir / "gen" / name, shared)

    def evaluated(self, eval_for: Path, final: bool = False) -> bool:
        done, tested = eval_for / "eval" / "DONE", eval_for / "eval" / "DONE_TEST"
        # without promotion a model is evaluated once, as the final one where it is (DONE says all); DONE_TEST
        # says the test split was read, so a run resumed with evaluation.test_split on reads its final model's
        reads_test = final and self.cfg.evaluation.test_split and self.cfg.promotes()
        return done.exists() and (not reads_test or tested.exists())

    def evaluate(
        self,
        model: str,
        label: str,
        eval_for: Path,
        final: bool = False,
        shared: bool = False,
        alongside: tuple[str, list[str]] | None = None,
        startup_s: float = 0.0,
    ) -> None:
        """Evaluate `model` as `label` into eval_for/eval (unless done) and the run-level reports; as
        the `final` model also on the test split (unless done), its skill levels too where the run has them; a
        candidate the promotion judged, and so evaluated before, on the test split alone. Its evaluation sets play
        at once, with the (step, command) `alongside` that uses the same server (its training games), in one timed row;
        `startup_s`: the start-up of that server when the caller started it."""
        done, tested = eval_for / "eval" / "DONE", eval_for / "eval" / "DONE_TEST"
        if self.evaluated(eval_for, final):
            return
        skilled = eval_for != self.run_dir / "base"  # the base model never saw a skill level: no levels to judge
        server = self.serve(0, model, shared)
        evaluations = self.plays.evaluations(server, model, label, eval_for / "eval", self.reports, final)
        if done.exists():
            evaluations = [(name, command) for name, command in evaluations if name.split("/")[0] == TEST_SET]
        steps = [(f"{label}: evaluate ({name})", command) for name, command in evaluations]
        row = f"evaluate {label}" + (" + " + alongside[0].split(": ")[-1] if alongside else "")
        with self.timed(row, server.startup_s + startup_s):
            self.shell.run_together([*steps, *([alongside] if alongside else [])])
            if self.cfg.league.skill_levels and self.competition is not None and skilled:
                if not done.exists():
                    self.competition.skill_match(server, model, eval_for / "eval")
                if final and self.cfg.evaluation.test_split:
                    self.competition.skill_test(server, model, eval_for / "eval")
        if not self.cfg.dry_run:
            done.parent.mkdir(parents=True, exist_ok=True)
            done.touch()
            if final and self.cfg.evaluation.test_split:
                tested.touch()

    def evaluate_current(
        self,
        final: bool = False,
        shared: bool = False,
        alongside: tuple[str, list[str]] | None = None,
        startup_s: float = 0.0,
    ) -> None:
        self.evaluate(self.model, self.label, self.eval_for, final, shared, alongside, startup_s)

    def play(self, stage: Stage, num_games: int, convert_args: list[str], league: bool = True, rounds: int = 1) -> None:
        """The current model's server evaluates it (unless done) and plays `num_games` training games
        on the stage's new instances, converted with `convert_args`: self-play, or in a league
        (LEAGUE_SIZE > 0) against opponents drawn by rating with only seat 0 trained (`Competition.play`).
        With `rounds` > 1 (offline GRPO's FILTER_GROUPS), up to that many rounds of `num_games` games, each
        on the instances after the last, while the converted groups are fewer than the games' groups
        (`decisions.needs_another_round`). With `overlap` one-step, the games played ahead for this stage
        (`play_ahead`) are waited for and taken, and the next stage's are started in the background."""
        if league and self.cfg.league_size > 0 and self.competition is not None:
            self.competition.play(stage, num_games, convert_args, rounds)
            return
        if self.ahead.owner == stage:
            self.wait_ahead(stage)
        self.play_games(self.learner, stage, num_games, convert_args, rounds)
        if self.overlap:
            self.play_ahead(stage, num_games, convert_args, rounds)

    def play_ahead(self, stage: Stage, num_games: int, convert_args: list[str], rounds: int) -> None:
        """Start, beside this stage's training, the next iteration's games by the current model (the one this
        stage trains from), its evaluation alongside (unless done); for the last iteration, that evaluation
        alone. The next stage trains on those games one policy version after the model that played them."""
        i = stage.number
        following = Stage.iteration(self.run_dir, i + 1)
        player = self.learner
        if i < self.cfg.num_iterations and not following.done:
            self.shell.echo(
                f"iteration {i + 1}: its games played ahead by {player.label} ({player.model}) while iteration {i} "
                "trains"
            )
            owner: Stage | None = following
        elif self.evaluated(player.made_by):
            return
        else:
            owner = None
        work_stage = owner or stage

        def work() -> None:
            before = self.stage, self.during  # a dry run works in the loop's own thread
            self._here.stage, self._here.during = work_stage, stage
            try:
                choice = None
                if owner is not None:
                    choice = self.play_games(player, owner, num_games, convert_args, rounds, during=stage.label)
                    self.ahead.played[owner.name] = player.label
                if choice in (None, decisions.REUSE):  # else evaluated alongside the games
                    self.evaluate(player.model, player.label, player.made_by)
            finally:
                self._here.stage, self._here.during = before

        self.ahead.start(work_stage, work)

    def wait_ahead(self, stage: Stage) -> None:
        """Wait for the work started for `stage` in the background (`play_ahead`), timed in its stage as the wait
        the loop spent on it."""
        started = time.monotonic()
        self.ahead.join()
        if not self.cfg.dry_run:
            took = time.monotonic() - started
            report.add_timing(stage.dir, report.Timing(report.WAIT_AHEAD, None, took))

    def play_games(
        self, player: Checkpoint, stage: Stage, num_games: int, convert_args: list[str], rounds: int = 1,
        during: str | None = None,
    ) -> str:  # fmt: skip
        """`player` plays the stage's training games (`play`), beside the training of `during` where played ahead;
        games on disk are taken, played on or set aside as `decisions.games_to_play` says (returned), and
        gen/played_by.json says which model played them."""
        i = stage.number
        gen = stage.dir / "gen"
        recorded = None if self.cfg.dry_run else PlayedBy.read(gen)
        by = self.ahead.played.get(stage.name) or (recorded.label if recorded is not None else "")
        if stage.name in self.ahead.played:
            choice = decisions.REUSE
        elif self.cfg.dry_run:  # a plan: nothing on disk is read or moved
            choice = decisions.PLAY
        else:
            producer = recorded is not None and (Path(recorded.model) / "config.json").exists()
            have = (gen / "games.jsonl").exists()
            choice = decisions.games_to_play(recorded, have, player.model, self.overlap, producer)
        if choice == decisions.REUSE:
            self.shell.echo(f"iteration {i}: trains on the games {by} played ahead")
            return choice
        if choice == decisions.CONTINUE and recorded is not None:
            self.shell.echo(f"iteration {i}: its games go on with {recorded.label} ({recorded.model}), their player")
            player, during = recorded.checkpoint, recorded.during
        elif choice == decisions.REPLAY:
            aside = set_aside(gen / "games.jsonl")
            self.shell.echo(f"iteration {i}: the model that played {aside.name} is unknown: set aside, played anew")
        if not self.cfg.dry_run:
            PlayedBy.of(player, during).write(gen)
        server = self.serve(0, player.model)
        skill = self.competition.skill_args(seat0_only=False) if self.competition is not None else []
        wanted = num_games // self.cfg.games_per_instance * 2  # both seats are trained
        for played in range(1, rounds + 1):
            # the same first instance and more games: --resume keeps the earlier rounds' games
            command = self.plays.generate(
                server, player.model, stage.seed, num_games * played, self.cfg.games_per_instance, gen, [], skill
            )
            step = "generate" if played == 1 else f"generate, round {played}"
            if played > 1 or self.evaluated(player.made_by):
                with self.timed(step, server.startup_s if played == 1 else 0.0):
                    self.shell.run(f"iteration {i}: {step}", command)
            else:  # the model's evaluation and its training games share its server's batches
                self.evaluate(
                    player.model, player.label, player.made_by, alongside=(f"iteration {i}: {step}", command),
                    startup_s=server.startup_s,
                )  # fmt: skip
            if not self.convert(i, gen, convert_args, wanted, played, rounds):
                break
        if not self.cfg.dry_run:
            replace(PlayedBy.of(player, during), complete=True).write(gen)
        return choice

    def training_reward(self) -> list[str]:
        """selfplay-convert's options for the terms the run adds to the game's reward, by which it ranks games."""
        terms = self.cfg.reward_terms().named().items()
        return [arg for name, value in terms for arg in (f"--{name.replace('_', '-')}", number(value))]

    def convert(self, iteration: int, gen: Path, args: list[str], wanted: int, played: int, rounds: int) -> bool:
        """Convert the stage's games (gen/games.jsonl) with `args`; then whether to play another round
        (`decisions.needs_another_round`), said in the log once rounds are asked for. With rounds, the
        conversion keeps at most `wanted` groups, the earliest rounds' (DAPO's batch), so an iteration
        trains on as many rows as one whose groups all differed. A round whose groups all got one reward
        leaves no rows (convert's EXIT_NO_ROWS): with rounds left, a reason to play on. A dry run converts
        nothing and shows what the rounds would do."""
        from convert.pipeline import EXIT_NO_ROWS

        args = [*args, *self.training_reward()]
        if rounds > 1:
            args = [*args, "--max-groups", str(wanted)]
        try:
            with self.timed("convert"):
                self.shell.run(f"iteration {iteration}: convert", self.plays.convert(gen, args))
        except StepFailed as failed:
            if failed.code != EXIT_NO_ROWS or played >= rounds:
                raise
            kept = 0
        else:
            if rounds <= 1:
                return False
            if self.cfg.dry_run:
                self.shell.echo(
                    f"iteration {iteration}: up to {rounds - 1} more rounds of games while fewer than {wanted} "
                    "groups differ in reward"
                )
                return False
            kept = decisions.informative_groups(gen / "convert_summary.json")
        more = decisions.needs_another_round(kept, wanted, played, rounds)
        verdict = "another round" if more else ("enough" if kept >= wanted else "no rounds left")
        self.shell.echo(f"iteration {iteration}: round {played}: {kept} of {wanted} groups differ in reward: {verdict}")
        return more

    def context(self, stage: Stage) -> Context:
        """What the trainer gets for `stage`: its paths, the current model and this run's steps it needs."""

        def play(num_games: int, convert_args: list[str], *, rounds: int = 1) -> None:
            self.play(stage, num_games, convert_args, rounds=rounds)

        def train(job: TrainJob, loss: PolicyLoss | None = None, *, every_checkpoint: bool = False) -> list[Export]:
            return self.train(stage, job, loss, every_checkpoint)

        def timed(step: str) -> contextlib.AbstractContextManager[None]:
            return self.timed(step)

        return Context(stage, self.model, self.game_args, self.limits(), self.shell, play, train, timed)

    def limits(self) -> list[str]:
        v = self.cfg.verl
        return ["--max-prompt-tokens", str(v.max_prompt_length), "--max-response-tokens", str(v.max_response_length)]

    def train(
        self, stage: Stage, job: TrainJob, loss: PolicyLoss | None = None, every_checkpoint: bool = False
    ) -> list[Export]:
        """Free the GPU for verl (the servers stop, or release their memory; not while they play ahead), train,
        merge the last checkpoint into train/hf (and, with `every_checkpoint`, each earlier one into
        train/step_N/hf, evaluated as `label@N`). Offline GRPO with `verl.resident`: the run's one job instead."""
        if self.resident is not None and job.mode == "offline":
            return self.train_resident(stage, job, loss or self.cfg.loss)
        beside = None if self.ahead.owner is None else self.slots.mem_fraction
        if beside is None:  # else the server keeps its memory share while it plays ahead beside training
            self.slots.free_gpu()
        started = time.monotonic()
        log = stage.dir / "train" / report.TRAIN_LOG
        with GpuUsage(enabled=not self.cfg.dry_run) as usage:
            startup = train(
                self.shell, job, self.cfg.verl, loss or self.cfg.loss, self.sampling, log, beside, self.cfg.servers
            )
        self.training_timed(stage, f"train ({job.mode})", started, startup, usage)
        hf = job.out_dir / "hf"
        exports = []
        with self.timed("merge"):
            if every_checkpoint and not self.cfg.dry_run:
                for step in saved_steps(job.out_dir / "checkpoints")[:-1]:
                    target = job.out_dir / f"step_{step}" / "hf"
                    merge(self.shell, job, self.cfg.verl, step, target)
                    exports.append(Export(f"{stage.label}@{step}", str(target), job.out_dir / f"step_{step}"))
            merge(self.shell, job, self.cfg.verl, None, hf)
        plot_training_log(stage.dir / "train")
        return [*exports, Export(stage.label, str(hf), stage.dir / "eval")]

    def train_resident(self, stage: Stage, job: TrainJob, loss: PolicyLoss) -> list[Export]:
        """Hand the stage's groups to the run's resident verl job (`Resident`), wait for the checkpoint of its
        last step, and merge that into train/hf; the stage's curves are that job's steps for this iteration."""
        assert self.resident is not None
        verl = self.cfg.verl

        def command(resident_job: TrainJob) -> list[str]:
            return verl_command(self.shell, resident_job, verl, loss, self.sampling)

        started = time.monotonic()
        with GpuUsage(enabled=not self.cfg.dry_run) as usage:
            try:
                trained = self.resident.train(stage.number, job, command, stage.seed)
            except StepFailed as failed:
                if failed.step == STEP and ran_out_of_memory(self.resident.log, self.resident.log_start):
                    advice = memory_advice(job, verl, self.resident.log, self.slots.mem_fraction)
                    raise StepFailed(failed.step, failed.code, advice) from failed
                raise
        self.training_timed(stage, f"train ({job.mode}, resident)", started, trained.startup, usage)
        self.feed_ahead(stage, job)
        hf = job.out_dir / "hf"
        with self.timed("merge"):
            step = trained.step if not self.cfg.dry_run else None
            merge(self.shell, replace(job, out_dir=self.resident.dir), verl, step, hf)
        base = self.resident.base_model()
        if base is not None and not self.cfg.dry_run:  # the adapter is the job's, trained from its first model
            write_atomic(stage.dir / TRAINED_FROM_FILE, base + "\n")
        plot_training_log(stage.dir / "train", self.resident.log, (trained.step - trained.steps, trained.step))
        return [Export(stage.label, str(hf), stage.dir / "eval")]

    def feed_ahead(self, stage: Stage, job: TrainJob) -> None:
        """Hand the resident job the next iteration's groups before this one's merge where they were played ahead
        and converted already (`overlap` one-step): the job trains on through the merge, which is no longer on
        the run's critical path. The next iteration finds its part written (`Resident.feed`); the games after it,
        played ahead by this iteration's model, still wait for the merge."""
        following = Stage.iteration(self.run_dir, stage.number + 1)
        if self.resident is None or stage.number >= self.cfg.num_iterations or following.name not in self.ahead.played:
            return
        train_files = following.dir / "gen" / Path(job.train_files).name
        self.resident.feed(following.number, replace(job, train_files=str(train_files)), following.seed)

    def training_timed(
        self, stage: Stage, step: str, started: float, startup: float | None, usage: GpuUsage
    ) -> None:  # fmt: skip
        """A training job's row of the stage's wall-time table: its start-up apart from its work, and the GPU's
        use past the start-up."""
        if self.cfg.dry_run:
            return
        work = time.monotonic() - started - (startup or 0.0)
        report.add_timing(stage.dir, report.Timing(step, startup, work, usage.mean_percent(after_s=startup or 0.0)))

    def retention(self, stage: Stage, model: str) -> None:
        """`selfplay-gen retention` on the stage's model into RUN_DIR/<stage>/retention.json."""
        if not self.cfg.evaluation.retention:
            return
        out = stage.dir / report.RETENTION_FILE
        if out.exists():
            return
        with self.timed("retention"):
            self.shell.run(
                f"{stage.name}: retention", [*self.cfg.tools.gen, "retention", "--model", model, "--out", str(out)]
            )

    def base_agreement(self) -> float | None:
        """The initial model's agreement on development instances; None where not measured (a dry run) or
        not needed."""
        if self.cfg.dry_run or self.cfg.warm.policy != "auto":
            return None
        evaluations = [self.run_dir / "base" / "eval" / part.at(DEV_SET) / "metrics.json" for part in self.plays.parts]
        agreement = sum(decisions.dev_agreement(path, "base") for path in evaluations) / len(evaluations)
        click.echo(f"initial model: held-out agreement {agreement:.3f}", err=True)
        return agreement

    # -- stages ----------------------------------------------------------------------------------

    def warm_start(self, stage: Stage) -> None:
        """SFT on the game's teacher games (scripted players at full strength), or, for a format warm
        start, on its random legal players' games: the grammar of every move and no strategy. With several
        games an instance and warm.top_fraction below 1, on each seat's best of them by the training reward."""
        cfg, gen = self.cfg, stage.dir / "gen"
        plan = ["--teacher-plan", cfg.warm.teacher_plan] if cfg.warm.teacher_plan else []
        format_start = cfg.warm.policy == "format"
        player = ["--scripted-policy", "random"] if format_start else ["--scripted-policy", "teacher", *plan]
        what = "random games" if format_start else "teacher games"
        with self.timed(what):
            if cfg.league.skill_levels and self.competition is not None and not format_start:
                for command in self.competition.warm_games(stage, plan):
                    self.shell.run(f"warm start: {what}", command)
                self.competition.join_warm_games(stage)
            else:
                self.shell.run(
                    f"warm start: {what}",
                    [*cfg.tools.gen, *self.plays.config(gen), "--backend", "scripted", *player, "--seed",
                     str(stage.seed), "--num-games", str(cfg.warm.games), "--games-per-instance",
                     str(cfg.warm.games_per_instance), "--out",
                     str(gen / "games.jsonl"), "--resume", "--quiet"],
                )  # fmt: skip
        chosen = ["--top-fraction", number(cfg.warm.top_fraction), *self.training_reward()]
        with self.timed("convert"):
            self.shell.run(
                "warm start: convert",
                self.plays.convert(gen, ["--format", "sft", *chosen, "--model", self.checkpoints[0], *self.limits()]),
            )
        job = TrainJob(
            mode="sft", model=self.model, train_files=str(gen / "train.parquet"),
            val_files=val_file(gen, cfg.dry_run), out_dir=stage.dir / "train", experiment=stage.name,
            lr=cfg.warm.learning_rate, batch_size=32,
            epochs=cfg.warm.epochs, lora_rank=cfg.warm.lora_rank, overrides=cfg.overrides,
        )  # fmt: skip
        self.train(stage, job)
        self.retention(stage, str(stage.model_dir))

    def crossplay_pair(
        self, a: str, model: str, b: str, partner: str | None, part: Part | None = None, draw: int = 1,
        split: str = DEV_SET,
    ) -> Path:  # fmt: skip
        """`a` (served `model`) against `b` in both seat orders on held-out instances of the run's game (`part`,
        one game of a mix), with both self-plays, into RUN_DIR/crossplay/[GAME/]A__B/eval (its games/ returned),
        unless DONE there: on the `draw`-th set of development instances (`plays.dev_draw`; a later draw's into
        RUN_DIR/crossplay/[GAME/]draw_N/A__B/eval), or on the test split (`split`, into .../test/A__B/eval). `b` is
        a checkpoint served on the partner slot (`partner`, its model) or a scripted member (None). A run of one
        game has one part (its default)."""
        part = part or self.plays.parts[0]
        where = "test" if split == TEST_SET else f"draw_{draw}" if draw > 1 else ""
        pair = self.run_dir / "crossplay" / part.dir / where / f"{a}__{b}"
        if not (pair / "DONE").exists():
            outside = self.stage is None
            if outside:
                self.stage = Stage("crossplay", "crossplay", self.run_dir / "crossplay")
            server = self.slots.serve(0, model, pair / "sglang.log", shared=True)
            startup = server.startup_s
            if partner is None:
                args = Member(b, "scripted", strength=float(b.removeprefix(SCRIPTED_PREFIX))).partner_args()
            else:
                started = self.slots.serve(1, partner, pair / "sglang-partner.log", shared=True)
                args, startup = partner_args(started), startup + started.startup_s
            what = f"{a} vs {b}" + (f" ({part.dir})" if part.dir else "")
            note = " (test split)" if split == TEST_SET else f" (development draw {draw})" if draw > 1 else ""
            with self.timed(what, startup):
                command = self.plays.crossplay(
                    server, model, a, args, b, pair / "eval", draw=draw, split=split, played=part.played
                )
                self.shell.run(f"crossplay: {what}{note}", command)
            if not self.cfg.dry_run:
                (pair / "DONE").touch()
            if outside:
                self.stage = None
        return pair / "eval" / "games"

    def report_draw(self) -> int:
        """The development draw the run's cross-play report is read on: a second one (`league.report_draw`)
        where promotion matches played the first and chose the checkpoints on it, else the first."""
        return 2 if self.cfg.league.report_draw and self.cfg.promotes() else 1

    def report_source(self) -> str:
        """Where the cross-play report's figures come from, in words (`report_draw`)."""
        draw = self.report_draw()
        where = dev_draw(self.cfg.evaluation, draw)
        if draw > 1:
            return f"{where}, apart from the promotion matches, which chose the checkpoints on development draw 1"
        if self.cfg.promotes():
            return f"{where}: the promotion matches' own games, which chose the checkpoints (league.report_draw off)"
        return f"{where}; no promotion match chose on them"

    def final_pairs(self, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The pairings of the cross-play report that the final model (the last promoted checkpoint) plays on
        the test split too: against the initial checkpoint and the scripted reference, in a league whose
        evaluation reads the test split (evaluation.test_split)."""
        if self.competition is None or not self.cfg.evaluation.test_split:
            return []
        last = len(self.labels) - 1
        first = 1 if len(self.labels) > 1 and self.labels[1] == "warm" else 0
        return [(i, j) for i, j in pairs if i == last and (j == first or j > last)]

    def cross_play(self) -> list[Path]:
        """Each checkpoint from the initial one on against the initial one and the one before it (and,
        in a league, against the scripted negotiator at LEAGUE_EVAL_STRENGTH), both seat orders, then
        one report of every pairing: win rates and ratings (the initial one 0); in a league also the
        progress per checkpoint (RUN_DIR/report/progress.md). A mix of games cross-plays each game apart
        (RUN_DIR/report/crossplay/GAME). Read on the development draw `report_draw` names, so a run with
        promotion reports figures from games that chose nothing; in a league, the final model's pairings also
        on the test split (`final_pairs`, RUN_DIR/report/crossplay_test)."""
        labels, models = list(self.labels), list(self.checkpoints)
        pairs = decisions.crossplay_pairings(labels)
        scripted = self.cfg.league.eval_strength
        if self.competition is not None and scripted is not None and competition.scripted_pool(self.game_cls, [1]):
            first = 1 if len(labels) > 1 and labels[1] == "warm" else 0
            labels.append(scripted_member(scripted).name)
            pairs += [(i, len(labels) - 1) for i in range(first, len(labels) - 1)]
        played: list[list[Path]] = [[] for _ in self.plays.parts]  # per part, each pairing's games
        for i, j in pairs:
            partner = models[j] if j < len(models) else None
            for games_of, part in zip(played, self.plays.parts):
                games_of.append(
                    self.crossplay_pair(labels[i], models[i], labels[j], partner, part, draw=self.report_draw())
                )
        final = self.final_pairs(pairs)
        tested = []
        for i, j in final:
            partner = models[j] if j < len(models) else None
            tested.append(self.crossplay_pair(labels[i], models[i], labels[j], partner, split=TEST_SET))
        self.slots.release()
        if not pairs:
            return []
        shown = []
        self.shell.echo(f"crossplay report: read on {self.report_source()}")
        for games_of, part in zip(played, self.plays.parts):
            out = self.reports / "crossplay" / part.dir
            inputs = decisions.crossplay_inputs(labels, pairs, games_of)
            command = [*self.cfg.tools.gen, "eval", *self.plays.config(out, part.played), *inputs, "--out", str(out)]
            self.shell.run("crossplay: report", command)
            shown.append(out / "report.md")
        if final:
            out_test = self.reports / "crossplay_test"
            inputs = decisions.crossplay_inputs(labels, final, tested)
            e = self.cfg.evaluation
            self.shell.echo(
                f"crossplay report of the final model: read on the test split ({e.test_instances} instances from seed "
                f"{TEST.start:_}), played only to report final models"
            )
            command = [*self.cfg.tools.gen, "eval", *self.plays.config(out_test), *inputs, "--out", str(out_test)]
            self.shell.run("crossplay: report (test split)", command)
            shown.append(out_test / "report.md")
        if self.competition is not None:
            first = 1 if len(self.labels) > 1 and self.labels[1] == "warm" else 0
            out = self.reports / "crossplay"
            written = self.competition.write_progress(
                out / "metrics.json", self.labels[first:], self.labels[first], self.report_source()
            )
            shown += [written] if written else []
        return shown


def train(
    shell: Shell, job: TrainJob, verl: Verl, loss: PolicyLoss, sampling: Sampling, log: Path | None = None,
    beside: float | None = None, starts: ServerSettings | None = None,
) -> float | None:  # fmt: skip
    """One verl training job (`job.mode`: sft, offline or online) into job.out_dir/checkpoints; the
    seconds verl took to start (to its first step), where its output shows them. `beside`: the GPU memory
    share of a server playing ahead beside it (`overlap`), which its advice on running out of memory names.
    `starts`: a job whose rollout server stopped on 'Not enough memory' (another process allocated on the GPU
    while it started) starts again, as the run's own servers do (`start_tries`, `retry_wait_s`); it resumes
    from its last checkpoint, if any."""
    if not shell.dry_run:
        for name in dict.fromkeys((job.train_files, job.val_files)):
            if not Path(name).exists():
                raise StepFailed("setup", 2, f"missing data file {name} (MODE={job.mode})")
        check_steps(job)
        job.out_dir.mkdir(parents=True, exist_ok=True)
    tries = starts.start_tries if starts is not None else 1
    for attempt in range(1, tries + 1):
        written = log.stat().st_size if log is not None and log.exists() else 0
        try:
            return shell.run("train", verl_command(shell, job, verl, loss, sampling), log, VERL_READY)
        except StepFailed as failed:
            if failed.step != "train" or log is None:
                raise
            if ran_out_of_memory(log, written):
                raise StepFailed("train", failed.code, memory_advice(job, verl, log, beside)) from failed
            if attempt == tries or not short_of_memory(log, written):
                raise
            assert starts is not None
            wait_to_start_again("verl's rollout server", attempt, starts)
    raise AssertionError("unreachable: the last try returns or raises")


def verl_command(shell: Shell, job: TrainJob, verl: Verl, loss: PolicyLoss, sampling: Sampling) -> list[str]:
    """The command of a verl training job, in the environment that puts its logs under job.out_dir."""
    where = job_env(verl, job.out_dir)
    if job.mode == "sft":
        return [*where, *sft_command(job, verl)]
    agent_loops = shell.output("locate-plugin", [verl.python, "-m", "selfplay_gen.verl", "--config-path"])
    if job.rollout_n is not None:
        n: str | int = job.rollout_n
    else:
        try:
            n = rollout_n(Path(job.train_files).parent / "convert_summary.json", shell.dry_run)
        except (OSError, ValueError) as error:
            raise StepFailed("read-rollout-n", 2, str(error)) from error
    return [*where, *ppo_command(job, verl, loss, sampling, agent_loops, n)]


# what PyTorch prints when an allocation on the GPU fails (torch.OutOfMemoryError's message)
OUT_OF_MEMORY = "CUDA out of memory"


def ran_out_of_memory(log: Path, since: int) -> bool:
    """Whether the part of `log` written after byte `since` (this job's) reports a GPU out of memory."""
    return logged_since(log, since, OUT_OF_MEMORY)


def memory_advice(job: TrainJob, verl: Verl, log: Path, beside: float | None = None) -> str:
    """What to change when verl ran out of GPU memory, with the settings the job ran with (`beside`: the share of
    a server playing ahead beside the job)."""
    if job.mode == "sft":
        fixes = [f"lower verl.sft_micro_tokens (now {verl.sft_micro_tokens})"]
    else:
        fixes = [f"lower verl.ppo_micro_tokens (now {verl.ppo_micro_tokens})"]
    if starts_engine(job, verl):
        fixes.append(
            f"lower verl.gpu_memory_utilization, the rollout engine's share (now {verl.gpu_memory_utilization})"
        )
    if beside is not None:
        fixes.append(
            f"lower servers.overlap_mem_fraction, the share of the server playing beside training (now {beside})"
        )
    if not verl.gradient_checkpointing:
        fixes.append("set verl.gradient_checkpointing=true")
    return f"the GPU ran out of memory (see {log}): " + ", or ".join(fixes)


def check_steps(job: TrainJob) -> None:
    """Refuse a job whose data cannot fill the steps it asks for, before verl starts: verl's
    dataloaders drop a partial batch and end the run when the data runs out, without saving the
    checkpoint of a last step it never reached, so such a run would train and then lose its work."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.ParquetFile(job.train_files).metadata.num_rows
    except (OSError, pa.ArrowException) as error:
        raise StepFailed("setup", 2, f"{job.train_files}: not a readable parquet file ({error})") from error
    per_epoch = rows // job.batch_size
    steps = per_epoch * job.epochs
    if steps == 0 or (job.total_steps is not None and job.total_steps > steps):
        asked = f"TOTAL_STEPS={job.total_steps}" if job.total_steps is not None else "a step"
        raise StepFailed(
            "setup",
            2,
            f"{job.train_files}: {rows} rows make {per_epoch} whole batches of TRAIN_BATCH_SIZE={job.batch_size} "
            f"an epoch, {steps} steps in EPOCHS={job.epochs}, fewer than {asked}; verl drops a partial batch "
            "and would end without a checkpoint. Lower TOTAL_STEPS or TRAIN_BATCH_SIZE, raise EPOCHS, or "
            "bring more data.",
        )


def job_env(verl: Verl, train_dir: Path) -> list[str]:
    """`env VAR=VALUE...` for a training job, which its workers inherit: the directories that put verl's
    tensorboard events and wandb files under train_dir (verl's own default is a directory under wherever
    it was started), and the attention backend choice (`selfplay_gen.verl.attention`); nothing when
    every setting is verl's and PyTorch's own."""
    dirs = {"tensorboard": ("TENSORBOARD_DIR", report.TENSORBOARD_DIR), "wandb": ("WANDB_DIR", "wandb")}
    chosen = [f"{var}={train_dir / name}" for logger, (var, name) in dirs.items() if logger in verl.logger]
    if not verl.cudnn_attention:
        chosen.append(f"{attention.ENV}={attention.OFF}")
    return ["env", *chosen] if chosen else []


def plot_training_log(train_dir: Path, log: Path | None = None, steps_in: tuple[int, int] | None = None) -> None:
    """train/curves.png from verl's console lines in train/verl.log (or `log`: a resident job's, of which the
    steps after steps_in[0] through steps_in[1] are this stage's), else from its tensorboard events."""
    log, events = log or train_dir / report.TRAIN_LOG, train_dir / report.TENSORBOARD_DIR
    steps = []
    if log.exists():
        with log.open(errors="replace") as lines:
            steps = report.console_metrics(lines)
        if steps_in is not None:
            steps = [row for row in steps if steps_in[0] < row["step"] <= steps_in[1]]
    if not steps and events.is_dir():
        steps = report.tensorboard_metrics(events)
    if steps:
        (train_dir / report.STEPS_FILE).write_text(json.dumps(steps))
        report.plot_curves(steps, train_dir / "curves.png")


def embedded_model() -> str:
    from ..models import resolve

    return str(resolve(None))


def set_aside(games: Path) -> Path:
    """Move a games file out of the way (games.replaced-N.jsonl beside it, N the first free), keeping it."""
    n = 1
    while (aside := games.with_name(f"{games.stem}.replaced-{n}{games.suffix}")).exists():
        n += 1
    games.replace(aside)
    return aside


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _has_weights(model: Path) -> bool:
    """A model directory a server can load: its config and weights (an adapter alone is not one)."""
    return (model / "config.json").exists() and any(model.glob("*.safetensors"))
