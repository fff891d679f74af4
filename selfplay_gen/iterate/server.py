"""SGLang servers as context managers: started in their own process group, ready once /health
answers, stopped (the whole group) on every way out. `Slots` keeps at most one server per port and
reuses a server whose model a later step needs again, so the evaluation of a model and the next
iteration's games with it, or two cross-play pairings that share a checkpoint, start it once. A
slot asked for another checkpoint of the same architecture and tokenizer loads its weights into
the running server (SGLang's /update_weights_from_disk, seconds) instead of a restart (minutes of
start-up and CUDA-graph capture); where that is refused, a new server starts. With
`keep_servers`, training does not stop the servers either: each releases its GPU memory
(SGLang's memory saver) and takes it back, with the next checkpoint's weights, when it is needed."""

from __future__ import annotations

import json
import shlex
import signal
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from .. import serving
from ..backends.sglang import router_workers
from . import placement
from .config import ServerSettings
from .placement import Place, Process
from .shell import Shell, StepFailed, logged_since


@dataclass
class Started:
    """A server that is up: where it answers and how long it took to come up."""

    url: str
    model: str
    startup_s: float
    urls: tuple[str, ...] = ()  # every server to spread games over (running servers given by the user)

    def base_url_args(self) -> list[str]:
        return [arg for url in (self.urls or (self.url,)) for arg in ("--base-url", url)]


# DP worker i of the server on PORT listens on PORT + WORKER_PORT_STEP * (i + 1): apart from the partner
# slot's PORT + 1 and its own workers; the router's Prometheus metrics take the next step, since the
# router's own default (29000) lets only one router run on a machine
WORKER_PORT_STEP = 1000


def short_of_memory(log: Path, since: int = 0) -> bool:
    """Whether the part of a server's or a training job's `log` after byte `since` says SGLang stopped at start
    on too little free GPU memory (another process allocated on the GPU while it started): worth starting again."""
    return logged_since(log, since, serving.NOT_ENOUGH_MEMORY)


def wait_to_start_again(who: str, attempt: int, settings: ServerSettings) -> None:
    """Say that `who` stopped short of GPU memory at its start `attempt` of `settings.start_tries`, and wait
    `settings.retry_wait_s` before the next."""
    click.echo(
        f"{who} found too little free GPU memory (try {attempt} of {settings.start_tries}); again in "
        f"{settings.retry_wait_s:g}s",
        err=True,
    )
    time.sleep(settings.retry_wait_s)


def memory_split(args: list[str], servers: int, k: int) -> list[str]:
    """`args` of the `k`-th (from 0) of `servers` servers started one after another on a GPU: an equal part
    of the memory share that `args` give one server (`--mem-fraction-static`, else
    `serving.LONE_MEM_FRACTION`). SGLang takes its share of the memory free when it starts, so the k-th asks
    for its part of what the k before it left."""
    given = serving.option_value(args, "--mem-fraction-static")
    part = (float(given) if given is not None else serving.LONE_MEM_FRACTION) / servers
    return serving.with_own_args(args, ["--mem-fraction-static", f"{part / (1 - k * part):.4g}"])


@dataclass
class Launch:
    """One process of a server: its command, its log, the URL whose /health says it is up, and where it
    runs; a router is up once it also lists its `workers` at /workers (it registers them after its
    /health answers)."""

    command: list[str]
    log: Path
    url: str
    workers: tuple[str, ...] = ()
    place: Place = Place(placement.LOCAL_HOST, 0)

    def shown(self) -> str:
        where = f"[on Ray node {self.place.host}] " if self.place.node is not None else ""
        return f"+ {where}{' '.join(self.command)} > {self.log} 2>&1 &"


class SGLangServer:
    """One SGLang server for `model` on `port`, logging to `log`; with `settings.workers > 1`, that many
    servers (`dp` groups of TP GPUs, GPUs apart, `workers_per_gpu` servers on each) behind sglang_router
    on `port`, whose cache-aware routing sends a game's next turn to the worker holding its prefix. A
    worker logs beside `log` (sglang.worker0.log, ...); workers sharing a GPU split the memory share one
    server there would have. With `settings.placement` ray the servers run across a Ray cluster's
    nodes (`placement`), the router here.

    SGLang sizes its KV cache from the GPU memory free before it loaded the model; when another
    process allocates meanwhile it stops with "Not enough memory", and that start is tried again
    after `retry_wait_s` (up to `start_tries` starts)."""

    def __init__(
        self, model: str, port: int, log: Path, settings: ServerSettings, shell: Shell, mem_fraction: float | None
    ):
        self.model, self.port, self.log, self.settings, self.shell = model, port, log, settings, shell
        self.mem_fraction = mem_fraction
        self.processes: list[Process] = []  # in start order: the workers, then the router
        self._places: list[Place] | None = None

    def places(self) -> list[Place]:
        """Where each worker runs, `workers_per_gpu` of them on each DP group's GPUs (worked out once: on a Ray
        cluster, where it has room; in a dry run there, on nodes named NODE0, NODE1, ...)."""
        if self._places is None:
            s = self.settings
            if s.placement == "local":
                groups = placement.local(s.dp, s.tp)
            elif self.shell.dry_run:
                groups = [Place(f"NODE{i}", 0, f"node{i}") for i in range(s.dp)]
            else:
                groups = placement.on_ray(s.dp, s.tp)
            self._places = [place for place in groups for _ in range(s.workers_per_gpu)]
        return self._places

    @property
    def url(self) -> str:
        """Where games reach the server: the one server, or the router on this machine."""
        if self.settings.workers <= 1:
            return f"http://{self.places()[0].host}:{self.port}"
        return f"http://{placement.LOCAL_HOST}:{self.port}"

    def stages(self) -> list[list[Launch]]:
        """What to start, stage by stage (each stage's processes at once, every one up before the next
        stage): the server; or the DP workers, then the router in front of them."""
        s = self.settings
        extra = shlex.split(s.extra_args or "")
        extra += serving.model_args(extra, self.model)  # the pytorch sampler's cap for a large vocabulary
        extra += serving.graph_args(extra, s.cuda_graph_max_bs or 0)
        if self.mem_fraction is not None:  # a shared GPU's share replaces the lone server's
            extra = serving.with_own_args(extra, ["--mem-fraction-static", str(self.mem_fraction)])
        extra = serving.with_own_args(["--dtype", s.dtype] if s.dtype else [], extra)  # extra_args' goes first
        if s.keep_servers:
            extra += ["--enable-memory-saver"]

        def server(port: int, place: Place, log: Path, k: int = 0) -> Launch:
            """The `k`-th server on its GPU."""
            gpu = ["--base-gpu-id", str(place.base_gpu)] if s.workers > 1 else []
            own = memory_split(extra, s.workers_per_gpu, k) if s.workers_per_gpu > 1 else extra
            command = serving.launch_command(s.python, self.model, port, s.tp, [*gpu, *own], host=place.host)
            return Launch(command, log, f"http://{place.host}:{port}", place=place)

        if s.workers <= 1:
            return [[server(self.port, self.places()[0], self.log)]]
        workers = []
        for i, place in enumerate(self.places()):
            port = self.port + WORKER_PORT_STEP * (i + 1)
            log = self.log.with_name(f"{self.log.stem}.worker{i}{self.log.suffix}")
            workers.append(server(port, place, log, i % s.workers_per_gpu))
        metrics = self.port + WORKER_PORT_STEP * (s.workers + 1)
        router_args = shlex.split(s.router_args or "")
        router = serving.router_command(s.python, self.port, [w.url for w in workers], metrics, router_args)
        # the k-th server of every GPU at once: the servers of one GPU one after another, each sizing its memory
        # from what is free once the one before has taken its own
        per_gpu = [workers[k :: s.workers_per_gpu] for k in range(s.workers_per_gpu)]
        return [*per_gpu, [Launch(router, self.log, self.url, tuple(w.url for w in workers))]]

    def worker_urls(self) -> list[str]:
        """The servers that hold the weights: the one server, or the router's workers."""
        stages = self.stages()
        return [launch.url for stage in stages[: max(1, len(stages) - 1)] for launch in stage]

    def __enter__(self) -> Started:
        started = time.monotonic()
        stages = self.stages()
        launches = [launch for stage in stages for launch in stage]
        for attempt in range(1, self.settings.start_tries + 1):
            for launch in launches:
                self.shell.echo(launch.shown())
            for launch in launches:
                self.shell.echo(f"+ wait for {launch.url}/health (up to {self.settings.timeout_s:g}s)")
            if self.shell.dry_run:
                return Started(self.url, self.model, 0.0)
            try:
                exited = self._start(stages)
            except placement.PlacementError:  # a checkpoint a node cannot read
                self._stop()
                raise
            if exited is None:
                return Started(self.url, self.model, time.monotonic() - started)
            self._stop()
            short = any(short_of_memory(launch.log) for launch in launches if launch.log.exists())
            if attempt < self.settings.start_tries and short:
                wait_to_start_again("the SGLang server", attempt, self.settings)
                continue
            raise StepFailed("start-server", 1, f"the SGLang server exited; see {exited.log}")
        raise AssertionError("unreachable: the last try returns or raises")

    def _start(self, stages: list[list[Launch]]) -> Launch | None:
        """Start every stage; the launch whose process exited before its /health answered, or None. A port that
        answers before its server starts belongs to another process: a server loading its model answers nothing
        for minutes, and meanwhile that other one's /health would pass for its own."""
        for stage in stages:
            running = []
            for launch in stage:
                if _answering(launch.url):
                    raise StepFailed(
                        "start-server", 2, f"{launch.url} answers already, before this run's server started there: "
                        "another run's server? Give each run on a machine its own servers.port",
                    )  # fmt: skip
                process = placement.start(launch.command, launch.log, launch.place, self.model)
                self.processes.append(process)
                running.append((launch, process))
            for launch, process in running:
                if not self._healthy(launch, process):
                    return launch
        return None

    def _healthy(self, launch: Launch, process: Process) -> bool:
        deadline = time.monotonic() + self.settings.timeout_s
        while process.poll() is None:
            try:
                if self._ready(launch):
                    return True
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self._stop()
                raise StepFailed(
                    "wait-for-health",
                    1,
                    f"no /health from {launch.url} after {self.settings.timeout_s:g}s; see {launch.log}",
                )
            time.sleep(1)
        return False

    @staticmethod
    def _ready(launch: Launch) -> bool:
        with urllib.request.urlopen(f"{launch.url}/health", timeout=5) as answer:
            if answer.status != 200:
                return False
        if not launch.workers:
            return True
        with urllib.request.urlopen(f"{launch.url}/workers", timeout=5) as answer:
            return set(launch.workers) <= set(router_workers(json.loads(answer.read())))

    def _stop(self) -> None:
        """Stop the router first, then the workers (each process group, SIGKILL after 60 s); one that had
        exited already is said with how it ended."""
        processes, self.processes = self.processes, []
        for process in reversed(processes):
            where = f" on Ray node {process.node}" if process.node is not None else ""
            code = process.poll()
            if code is None:
                click.echo(f"stopping the SGLang server (pid {process.pid}{where})", err=True)
            else:
                click.echo(f"the SGLang server (pid {process.pid}{where}) had exited: {how_it_ended(code)}", err=True)
            process.stop()

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _on_each_worker(self, route: str, call: Callable[[str], str | None]) -> str | None:
        """Say `POST URL/route` for every worker, then (unless a dry run) `call(URL)` on each in turn:
        the first worker's refusal, or None when every one did it."""
        urls = self.worker_urls()
        for url in urls:
            self.shell.echo(f"+ POST {url}/{route}")
        if self.shell.dry_run:
            return None
        return next((why for why in map(call, urls) if why is not None), None)

    def swap(self, model: str) -> float | None:
        """Load `model`'s weights into this running server (every DP worker): the seconds it took, or
        None, said why, when the server should be restarted for `model` instead."""
        started, timeout = time.monotonic(), self.settings.timeout_s
        unreadable = placement.readable_everywhere(self.processes, model)
        if unreadable is not None:
            raise placement.PlacementError(unreadable)
        refused = self._on_each_worker(
            f"update_weights_from_disk model_path={model}", lambda url: serving.load_weights(url, model, timeout)
        )
        if refused is not None:
            click.echo(f"the server on port {self.port} did not take {model}'s weights ({refused})", err=True)
            return None
        self.model = model
        if self.shell.dry_run:
            return 0.0
        took = time.monotonic() - started
        click.echo(f"the server on port {self.port} took {model}'s weights in {took:.1f}s", err=True)
        return took

    def release_memory(self) -> bool:
        """Release every worker's GPU memory (weights, KV cache, CUDA graphs) while the process stays
        up; False, said why, when a worker did not, and the server should be stopped instead."""
        timeout = self.settings.timeout_s
        refused = self._on_each_worker("release_memory_occupation", lambda url: serving.release_memory(url, timeout))
        if refused is not None:
            click.echo(f"the server on port {self.port} keeps its GPU memory ({refused}); stopping it", err=True)
            return False
        if not self.shell.dry_run:
            click.echo(f"the server on port {self.port} released its GPU memory", err=True)
        return True

    def resume(self, model: str) -> float | None:
        """Take the released memory back and load `model`'s weights (the released ones are gone):
        the seconds it took, or None, said why, when the server should be restarted instead."""
        started, timeout = time.monotonic(), self.settings.timeout_s
        refused = self._on_each_worker("resume_memory_occupation", lambda url: serving.resume_memory(url, timeout))
        if refused is not None:
            click.echo(f"the server on port {self.port} did not resume ({refused})", err=True)
            return None
        took = self.swap(model)
        return None if took is None else time.monotonic() - started


def _answering(url: str, wait_s: float = 10.0) -> bool:
    """Whether something listens at `url`'s host and port, still after `wait_s` (a server this run has just
    stopped lets its port go within seconds)."""
    where = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + wait_s
    while True:
        with socket.socket() as probe:
            probe.settimeout(2)
            if probe.connect_ex((where.hostname or "127.0.0.1", where.port or 80)) != 0:
                return False
        if time.monotonic() > deadline:
            return True
        time.sleep(1)


def how_it_ended(returncode: int) -> str:
    """A process's return code as words: its exit status, or the signal that killed it (a negative code)."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class Slots:
    """Servers by port slot (0: the model being played or evaluated, 1: its partner). A slot asked
    for the model it already serves, with the same memory share, keeps its server; asked for another
    checkpoint that `serving.swap_blocker` allows, with the same memory share, it swaps the server's weights
    (with `settings.swap_weights`; behind a router, each worker's). A slot whose server released its
    memory for training (`free_gpu`) takes it back on its next use, with that use's weights. `mem_fraction`: a
    lone server's share of GPU memory (None: its extra_args' or SGLang's own), less than the whole where it
    plays beside training (`overlap` one-step)."""

    def __init__(self, settings: ServerSettings, shell: Shell, mem_fraction: float | None = None):
        self.settings, self.shell, self.mem_fraction = settings, shell, mem_fraction
        self._servers: dict[int, tuple[tuple[str, float | None], SGLangServer]] = {}
        self._released: set[int] = set()  # slots whose server holds no GPU memory now

    def serve(self, slot: int, model: str, log: Path, shared: bool = False) -> Started:
        """The server of `slot` for `model`, started unless it runs already. `shared`: two servers
        share the GPU, each with `partner_mem_fraction` of its memory."""
        if slot == 0 and self.settings.urls:
            return Started(self.settings.urls[0], model, 0.0, self.settings.urls)
        key = (model, self.settings.partner_mem_fraction if shared else self.mem_fraction)
        held = self._servers.get(slot)
        if held is not None:
            (served, share), server = held
            released, same = slot in self._released, held[0] == key
            self._released.discard(slot)
            if same and not released:
                return Started(server.url, model, 0.0)
            if share == key[1] and (same or self.swappable(served, model)):
                took = server.resume(model) if released else server.swap(model)
                if took is not None:
                    self._servers[slot] = (key, server)
                    return Started(server.url, model, took)
            self.release(slot)
        server = SGLangServer(model, self.settings.port + slot, log, self.settings, self.shell, key[1])
        started = server.__enter__()
        self._servers[slot] = (key, server)
        return started

    def swappable(self, served: str, model: str) -> bool:
        if not self.settings.swap_weights:
            return False
        if self.shell.dry_run:  # the checkpoints do not exist yet; a run swaps where they agree
            return True
        try:
            blocker = serving.swap_blocker(served, model)
        except ValueError as err:
            raise StepFailed("swap-weights", 1, str(err)) from err
        if blocker is not None:
            click.echo(f"a new server for {model}: {blocker}", err=True)
        return blocker is None

    def free_gpu(self) -> None:
        """Before training: with `settings.keep_servers` each server releases its GPU memory and stays
        up (one that cannot is stopped); without, every server stops."""
        for slot, (_, server) in list(self._servers.items()):
            if slot in self._released:
                continue
            if self.settings.keep_servers and server.release_memory():
                self._released.add(slot)
            else:
                self.release(slot)

    def release(self, slot: int | None = None) -> None:
        """Stop the server of `slot`, or every server."""
        for number in [slot] if slot is not None else list(self._servers):
            self._released.discard(number)
            held = self._servers.pop(number, None)
            if held is not None:
                held[1].__exit__(None, None, None)

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
