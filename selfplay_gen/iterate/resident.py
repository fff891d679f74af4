"""Offline GRPO's trainer started once per run (`verl.resident`), not once per iteration.

A verl job spends minutes starting (Ray, the workers, the model and optimizer on the GPU) before its first
step, which a per-iteration job pays every iteration. Here one job trains the whole run: its training set is
`ArrivingRows` (selfplay_gen.verl.arriving_rows), one part per iteration, which this side writes once the
iteration's games are converted (`parts.fill`); the job saves a checkpoint at the end of each part's steps
(`trainer.save_freq`), which the loop merges and serves as the iteration's model, as it merges a per-iteration
job's last checkpoint. The trainer waits at the next part's first step while the servers play; with `overlap`
one-step, whose next games are converted while this iteration trains, the next part is written as soon as this
iteration's checkpoint is saved, and the job trains on through the merge (`Run.feed_ahead`).

What carries over between iterations that a per-iteration job starts afresh: the optimizer's state and the
learning-rate schedule (one schedule over the run's steps), the LoRA adapter (one adapter trained through the
run, each iteration's model folding in its state at that point), and the reference model of a KL loss (the
run's first model). Every iteration trains the same number of steps: the first iteration's converted groups,
times the epochs, in whole batches; a later part repeats or cuts its iteration's groups to that size.

The servers keep their memory share while it trains (`servers.overlap_mem_fraction`, the share of a server
beside training), since the trainer holds its own all along. A stopped run starts the job again, which resumes
from its last checkpoint (verl's `resume_mode=auto`, the dataloader's position included), so the parts already
written are trained on once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..atomic import write_atomic
from ..verl import parts
from .config import ServerSettings, TrainJob
from .report import TRAIN_LOG
from .server import short_of_memory, wait_to_start_again
from .shell import Shell, StepFailed, show
from .verl_jobs import VERL_READY

DIR = "resident"  # RUN_DIR/resident: the spec, the parts, the job's checkpoints and log
# RUN_DIR/resident/BASE_FILE: the model the job first started from, which its one LoRA adapter applies to (a job
# started again restores its weights from the checkpoint, whatever model it names)
BASE_FILE = "base_model"
SPEC_FILE = "rows" + parts.SPEC_SUFFIX
STEP = "train (resident)"
POLL_S = 1.0
END_WAIT_S = 600.0  # verl's end after its last checkpoint: the workers' teardown
STEPS_UNKNOWN = "S"  # a dry run's steps per iteration (the first iteration's converted groups decide them)


def overrides(steps_per_part: int | str) -> tuple[str, ...]:
    """verl's settings of the resident job (whose data.train_files is the spec): its rows from the spec, in
    order, a checkpoint at each part's end, a restarted job resuming from the last one (keeping two: the one
    being merged and the next)."""
    return (
        "data.custom_cls.path=pkg://selfplay_gen.verl.arriving_rows",
        "data.custom_cls.name=ArrivingRows",
        "data.shuffle=False",
        "data.filter_overlong_prompts=False",  # a part holds exactly its rows; conversion kept them within limits
        f"trainer.save_freq={steps_per_part}",
        "trainer.resume_mode=auto",
        "trainer.max_actor_ckpt_to_keep=2",
    )


class Resident:
    """The run's one offline GRPO job: `train` hands it an iteration's groups and returns once it has saved the
    checkpoint of that iteration's last step; `close` ends it with the run."""

    def __init__(self, shell: Shell, run_dir: Path, iterations: int, starts: ServerSettings | None = None):
        self.shell, self.dir, self.iterations = shell, run_dir / DIR, iterations
        # a job whose rollout server stopped on 'Not enough memory' starts again, as the run's own servers do
        self.starts = starts or ServerSettings(start_tries=1)
        self.spec_path = self.dir / SPEC_FILE
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._startup: float | None = None  # the running job's seconds to its first step, once its log shows it
        self.log_start = 0  # where the running job's part of the log begins
        self._shown = False  # a dry run's plan shows the job's command once
        self._fed: set[int] = set()  # a dry run's plan shows each part written once

    @property
    def checkpoints(self) -> Path:
        return self.dir / "checkpoints"

    @property
    def log(self) -> Path:
        return self.dir / TRAIN_LOG

    def job(self, job: TrainJob, steps_per_part: int | str) -> TrainJob:
        """The resident job made from an iteration's job: one spec of parts for all iterations, one directory,
        the run's steps; the iteration's own settings otherwise (the first iteration's, as the job starts then)."""
        total = self.iterations * steps_per_part if isinstance(steps_per_part, int) else None
        return replace(
            job, train_files=str(self.spec_path), out_dir=self.dir, experiment=DIR, epochs=1, total_steps=total,
            overrides=(*overrides(steps_per_part), *job.overrides),
        )  # fmt: skip

    def spec(self, job: TrainJob) -> parts.Spec:
        """The run's spec: written at the first iteration from its converted groups, read back after that (with
        the run's iterations, which a restarted run may have changed)."""
        if self.spec_path.exists():
            spec = parts.Spec.read(self.spec_path)
            if spec.rows_per_part % job.batch_size:
                raise StepFailed(
                    "setup", 2,
                    f"{self.spec_path}: the resident job's parts hold {spec.rows_per_part} rows, which batches of "
                    f"{job.batch_size} do not divide; keep the batch size the run began with",
                )  # fmt: skip
            if spec.parts != self.iterations:
                spec = replace(spec, parts=self.iterations)
                spec.write(self.spec_path)
            return spec
        import pyarrow.parquet as pq

        groups = pq.ParquetFile(job.train_files).metadata.num_rows
        steps = groups * job.epochs // job.batch_size
        if steps == 0:
            raise StepFailed(
                "setup", 2,
                f"{job.train_files}: {groups} groups make no whole batch of {job.batch_size} in {job.epochs} "
                "epochs; a resident trainer trains each iteration the first iteration's steps. Lower the batch "
                "size or play more games.",
            )  # fmt: skip
        spec = parts.Spec(str(self.dir / "parts"), self.iterations, steps * job.batch_size)
        self.dir.mkdir(parents=True, exist_ok=True)
        spec.write(self.spec_path)
        return spec

    def train(self, iteration: int, job: TrainJob, command_of: Callable[[TrainJob], list[str]], seed: int) -> Trained:
        """Write iteration `iteration`'s part from `job.train_files` (its converted groups, shuffled by `seed`),
        start the job (its command: `command_of(the resident job)`) where it is not running, and wait for the
        checkpoint of the part's last step."""
        steps = self.feed(iteration, job, seed)
        if self.shell.dry_run:
            if not self._shown:
                self.shell.echo("+ # verl, started once for the run:")
                self.shell.echo(show(command_of(self.job(job, STEPS_UNKNOWN))))
                self._shown = True
            self.shell.echo(f"+ # wait for {self.checkpoints}/global_step_{iteration}x{STEPS_UNKNOWN}")
            return Trained(0, 0, None)
        last = iteration * steps
        started_here = self.saved() < last and not self.running()
        if started_here:
            if not self.saved():
                write_atomic(self.dir / BASE_FILE, job.model + "\n")
            self._start(command_of(self.job(job, steps)))
        starts = 1
        while self.saved() < last:
            if not self.running() and self.saved() < last:  # saved, then ended: the run's last step
                if starts < self.starts.start_tries and self._short_of_memory():
                    wait_to_start_again("verl's rollout server", starts, self.starts)
                    starts += 1
                    self._start(command_of(self.job(job, steps)))
                    started_here = True
                    continue
                self._ended(last)
            time.sleep(POLL_S)
        return Trained(last, steps, self._startup if started_here else 0.0)

    def feed(self, iteration: int, job: TrainJob, seed: int) -> int:
        """Write iteration `iteration`'s part from `job.train_files` (its converted groups, shuffled by `seed`)
        unless it is written: the job trains on it once it reaches the part's first step, which it waits at.
        The optimizer steps a part takes (0 in a dry run)."""
        if self.shell.dry_run:
            if iteration not in self._fed:
                self.shell.echo(f"+ # iteration {iteration}'s groups -> {self.dir / 'parts'}")
                self._fed.add(iteration)
            return 0
        spec = self.spec(job)
        steps = spec.rows_per_part // job.batch_size
        if spec.part(iteration).exists():
            return steps
        last = iteration * steps
        groups = parts.fill(Path(job.train_files), spec, iteration, job.epochs, seed)
        self.shell.echo(
            f"iteration {iteration}: {groups} groups -> {spec.part(iteration)} "
            f"({spec.rows_per_part} rows, steps {last - steps + 1} to {last})"
        )
        return steps

    def base_model(self) -> str | None:
        """The model the job's adapter applies to: the one its first start trained from (None before that)."""
        try:
            return (self.dir / BASE_FILE).read_text().strip() or None
        except OSError:
            return None

    def saved(self) -> int:
        """The step of the job's latest checkpoint (0: none yet)."""
        try:
            return int((self.checkpoints / "latest_checkpointed_iteration.txt").read_text().strip())
        except (OSError, ValueError):  # none yet, or being written
            return 0

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start(self, command: list[str]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._error, self._startup = None, None
        self.log_start = self.log.stat().st_size if self.log.exists() else 0

        def ready(seconds: float) -> None:
            self._startup = seconds

        def body() -> None:
            try:
                self.shell.run(STEP, command, self.log, VERL_READY, ready)
            except BaseException as error:  # raised where the loop waits
                self._error = error

        self._thread = threading.Thread(target=body, name="resident-trainer")
        self._thread.start()

    def _short_of_memory(self) -> bool:
        """Whether the job that ended failed with its rollout server short of GPU memory at start (its part of
        the log says SGLang's 'Not enough memory'); the thread is joined and its error kept for `_ended`."""
        assert self._thread is not None
        self._thread.join()
        failed = isinstance(self._error, StepFailed)
        return failed and self.log.exists() and short_of_memory(self.log, self.log_start)

    def _ended(self, wanted: int) -> None:
        """The job ended before saving step `wanted`: what it raised, or that."""
        assert self._thread is not None
        self._thread.join()
        self._thread, error, self._error = None, self._error, None
        if error is not None:
            raise error
        raise StepFailed(STEP, 1, f"verl ended at step {self.saved()} before saving step {wanted} (see {self.log})")

    def close(self) -> None:
        """End the job with the run: once it saved its last step it ends by itself (waited for); a run that
        ended sooner (its time budget) leaves it waiting for a part that will not come, so it is killed."""
        if not self.running() or self.shell.dry_run:
            self._thread = None
            return
        assert self._thread is not None
        spec = parts.Spec.read(self.spec_path)
        if not spec.part(spec.parts).exists():
            self.shell.kill(STEP)
        self._thread.join(timeout=END_WAIT_S)
        if self._thread.is_alive():
            self.shell.kill(STEP)
            self._thread.join()
        self._thread, self._error = None, None

    def __enter__(self) -> Resident:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None and self.running():
            self.shell.kill(STEP)
        self.close()


@dataclass(frozen=True)
class Trained:
    """What the resident job trained for one iteration: the step of its checkpoint, the steps of the part, and
    the job's start-up where this iteration started it (0.0: it was running; None: unknown)."""

    step: int
    steps: int
    startup: float | None
