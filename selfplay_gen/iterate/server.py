"""SGLang servers as context managers: started in their own process group, ready once /health
answers, stopped (the whole group) on every way out. `Slots` keeps at most one server per port and
reuses a server whose model a later step needs again, so the evaluation of a model and the next
iteration's games with it, or two cross-play pairings that share a checkpoint, start it once."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import click

from .config import ServerSettings
from .shell import Shell, StepFailed

NOT_ENOUGH_MEMORY = "Not enough memory"


@dataclass
class Started:
    """A server that is up: where it answers and how long it took to come up."""

    url: str
    model: str
    startup_s: float
    urls: tuple[str, ...] = ()  # every server to spread games over (running servers given by the user)

    def base_url_args(self) -> list[str]:
        return [arg for url in (self.urls or (self.url,)) for arg in ("--base-url", url)]


class SGLangServer:
    """One SGLang server (or a router with DP workers) for `model` on `port`, logging to `log`.

    SGLang sizes its KV cache from the GPU memory free before it loaded the model; when another
    process allocates meanwhile it stops with "Not enough memory", and that start is tried again
    after `retry_wait_s` (up to `start_tries` starts)."""

    def __init__(
        self, model: str, port: int, log: Path, settings: ServerSettings, shell: Shell, mem_fraction: float | None
    ):
        self.model, self.port, self.log, self.settings, self.shell = model, port, log, settings, shell
        self.mem_fraction = mem_fraction
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        s = self.settings
        extra = shlex.split(s.extra_args or "")
        if self.mem_fraction is not None:
            extra += ["--mem-fraction-static", str(self.mem_fraction)]
        where = ["--model-path", self.model, "--host", "127.0.0.1", "--port", str(self.port), "--tp", str(s.tp)]
        if s.dp > 1:
            return [s.python, "-m", "sglang_router.launch_server", *where, "--dp-size", str(s.dp), *extra]
        return [s.python, "-m", "sglang.launch_server", *where, *extra]

    def __enter__(self) -> Started:
        started = time.monotonic()
        for attempt in range(1, self.settings.start_tries + 1):
            self.shell.echo(f"+ {' '.join(self.command())} > {self.log} 2>&1 &")
            self.shell.echo(f"+ wait for {self.url}/health (up to {self.settings.timeout_s:g}s)")
            if self.shell.dry_run:
                return Started(self.url, self.model, 0.0)
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("w") as sink:
                self.process = subprocess.Popen(
                    self.command(), stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
                )
            if self._healthy():
                return Started(self.url, self.model, time.monotonic() - started)
            self._stop()
            if attempt < self.settings.start_tries and NOT_ENOUGH_MEMORY in self.log.read_text(errors="replace"):
                click.echo(
                    f"the SGLang server found too little free GPU memory (try {attempt} of "
                    f"{self.settings.start_tries}); again in {self.settings.retry_wait_s:g}s",
                    err=True,
                )
                time.sleep(self.settings.retry_wait_s)
                continue
            break
        raise StepFailed("start-server", 1, f"the SGLang server exited; see {self.log}")

    def _healthy(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.settings.timeout_s
        while self.process.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self._stop()
                raise StepFailed(
                    "wait-for-health",
                    1,
                    f"no /health from {self.url} after {self.settings.timeout_s:g}s; see {self.log}",
                )
            time.sleep(1)
        return False

    def _stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        click.echo(f"stopping the SGLang server (pid {process.pid})", err=True)
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __exit__(self, *exc: object) -> None:
        self._stop()


class Slots:
    """Servers by port slot (0: the model being played or evaluated, 1: its partner). A slot asked
    for the model it already serves, with the same memory share, keeps its server."""

    def __init__(self, settings: ServerSettings, shell: Shell):
        self.settings, self.shell = settings, shell
        self._servers: dict[int, tuple[tuple[str, float | None], SGLangServer, Started]] = {}

    def serve(self, slot: int, model: str, log: Path, shared: bool = False) -> Started:
        """The server of `slot` for `model`, started unless it runs already. `shared`: two servers
        share the GPU, each with `partner_mem_fraction` of its memory."""
        if slot == 0 and self.settings.urls:
            return Started(self.settings.urls[0], model, 0.0, self.settings.urls)
        key = (model, self.settings.partner_mem_fraction if shared else None)
        held = self._servers.get(slot)
        if held is not None:
            if held[0] == key:
                return Started(held[2].url, model, 0.0)
            self.release(slot)
        server = SGLangServer(model, self.settings.port + slot, log, self.settings, self.shell, key[1])
        started = server.__enter__()
        self._servers[slot] = (key, server, started)
        return started

    def release(self, slot: int | None = None) -> None:
        """Stop the server of `slot`, or every server (before training needs the GPU)."""
        for number in [slot] if slot is not None else list(self._servers):
            held = self._servers.pop(number, None)
            if held is not None:
                held[1].__exit__(None, None, None)

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
