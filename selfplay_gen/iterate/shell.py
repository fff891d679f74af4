"""Commands as the stages run them: printed first (`+ cmd`, quoted as bash's `printf %q` quotes, so a
printed line can be pasted into a shell and dry-run output reads the same as the scripts' always did),
then run unless the run is a dry run. A failing command raises `StepFailed` naming its step."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..atomic import write_atomic

# the characters bash's `printf %q` escapes with a backslash anywhere in a word
_SPECIAL = set("|&;()<>!{}*[]?^$`\\\"' \t,")


def quote(word: str) -> str:
    """`word` as bash's `printf %q` writes it: '' for nothing, else each special character escaped
    (`~` and `#` only at the start, where the shell reads them)."""
    if not word:
        return "''"
    out = "".join(f"\\{c}" if c in _SPECIAL else c for c in word)
    return "\\" + out if out[0] in "~#" else out


def show(command: Sequence[str]) -> str:
    return "+ " + " ".join(quote(str(w)) for w in command)


class StepFailed(click.ClickException):
    """A stage's command failed; the message names the step, as the scripts' exit traps did."""

    def __init__(self, step: str, code: int, detail: str = ""):
        super().__init__(f"step '{step}' failed (exit {code}){': ' + detail if detail else ''}")
        self.step, self.code = step, code


@dataclass
class Shell:
    """Runs (or, with `dry_run`, only prints) the commands of one run, in `env` (None: this process's), from
    one thread or several (`ahead`: the next iteration's games beside training)."""

    dry_run: bool = False
    env: Mapping[str, str] | None = None
    running: dict[subprocess.Popen, str] = field(default_factory=dict, repr=False, compare=False)  # now: their steps
    stopped: bool = field(default=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def stop(self) -> None:
        """Kill every command running now, from any thread, and start none after: each one's step fails (a
        run that stops ends what it started in the background too)."""
        with self._lock:
            self.stopped = True
            for process in self.running:
                process.kill()

    def kill(self, step: str) -> None:
        """Kill the commands of `step` running now (a resident trainer no further data will come for)."""
        with self._lock:
            for process, its in self.running.items():
                if its == step:
                    process.kill()

    def _start(self, step: str, command: Sequence[str], **popen: Any) -> subprocess.Popen:
        """Start `command` (with `popen`'s further Popen arguments), listed in `running` (unless the shell was
        stopped: then its step fails); `_ended` takes it off."""
        with self._lock:
            if self.stopped:
                raise StepFailed(step, 130, "the run is stopping")
            try:
                process = subprocess.Popen(list(map(str, command)), env=self.env, **popen)
            except OSError as error:
                raise StepFailed(step, 127, str(error)) from error
            self.running[process] = step
            return process

    def _ended(self, *processes: subprocess.Popen) -> None:
        with self._lock:
            for process in processes:
                self.running.pop(process, None)

    def echo(self, line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    def write(self, path: Path, text: str) -> None:
        """Write a file that the next commands read (a stage's configuration), printed as a shell would write it
        (a here-document), so that a dry run's output stays a script that runs."""
        self.echo(f"+ mkdir -p {quote(str(path.parent))} && cat > {quote(str(path))} <<'EOF'\n{text}EOF")
        if not self.dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)

    def run(
        self, step: str, command: Sequence[str], log: Path | None = None, ready: str | None = None,
        on_ready: Callable[[float], None] | None = None,
    ) -> float | None:  # fmt: skip
        """Print `command`; run it unless this is a dry run, then print how long it took. With `log`,
        its output also goes to that file (the run report reads verl's metrics from it), and the seconds
        until a line first contains `ready` (the end of its start-up) are returned, and handed to `on_ready`
        as soon as that line comes (for a command run in the background); None where unknown."""
        self.echo(show(command))
        if self.dry_run:
            return None
        startup, started = None, time.monotonic()
        try:
            if log is None:
                code = self._call(step, command)
            else:
                code, startup = self._tee(step, command, log, ready, on_ready)
        except OSError as error:  # the log cannot be written
            raise StepFailed(step, 127, str(error)) from error
        self.echo(f"({step}: {time.monotonic() - started:.1f} s)")
        if code != 0:
            raise StepFailed(step, code)
        return startup

    def _call(self, step: str, command: Sequence[str]) -> int:
        """`subprocess.call`, the process listed in `running` while it runs."""
        with self._start(step, command) as process:
            try:
                return process.wait()
            except BaseException:
                process.kill()
                raise
            finally:
                self._ended(process)

    def run_together(self, steps: Sequence[tuple[str, Sequence[str]]]) -> None:
        """Print each (step, command), then run them all at once unless this is a dry run: commands
        that share a server keep it busy through each other's tails (the last few long games). The
        first that fails raises `StepFailed` once all have ended; stopped, the rest stop too."""
        for _, command in steps:
            self.echo(show(command))
        if self.dry_run:
            return
        processes: list[tuple[str, subprocess.Popen]] = []
        try:
            for step, command in steps:
                processes.append((step, self._start(step, command)))
            codes = [(step, process.wait()) for step, process in processes]
        except BaseException:
            for _, process in processes:
                process.kill()
                process.wait()
            raise
        finally:
            self._ended(*(process for _, process in processes))
        for step, code in codes:
            if code != 0:
                raise StepFailed(step, code)

    def _tee(
        self, step: str, command: Sequence[str], log: Path, ready: str | None,
        on_ready: Callable[[float], None] | None,
    ) -> tuple[int, float | None]:  # fmt: skip
        """Run `command`, its output to this process's and appended to `log`: its exit status, and the seconds
        until a line first contained `ready` (None where none did)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        started, startup = time.monotonic(), None
        with (
            log.open("a", buffering=1) as sink,  # line by line: a resident job's log is read while it runs
            self._start(
                step, command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
            ) as process,
        ):
            assert process.stdout is not None
            try:
                for line in process.stdout:  # text mode reads a progress bar's \r as a line end too
                    if startup is None and ready is not None and ready in line:
                        startup = time.monotonic() - started
                        if on_ready is not None:
                            on_ready(startup)
                    sys.stdout.write(line)
                    sink.write(line)
                return process.wait(), startup
            except BaseException:  # stopped (Ctrl-C, SIGTERM): the command stops too, as subprocess.call does
                process.kill()
                raise
            finally:
                self._ended(process)

    def output(self, step: str, command: Sequence[str]) -> str:
        """The standard output of `command`, run even in a dry run (it only reads)."""
        try:
            done = subprocess.run(list(map(str, command)), capture_output=True, text=True)
        except OSError as error:
            raise StepFailed(step, 127, str(error)) from error
        if done.returncode != 0:
            raise StepFailed(step, done.returncode, done.stderr.strip()[-500:])
        return done.stdout.strip()


def logged_since(log: Path, since: int, text: str) -> bool:
    """Whether the part of `log` written after byte `since` (one job's) holds `text`."""
    with log.open("rb") as f:
        f.seek(since)
        return text.encode() in f.read()
