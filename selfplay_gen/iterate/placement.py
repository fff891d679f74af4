"""Where a run's SGLang servers run (`servers.placement`): on this machine (`local`), each DP worker on
GPUs apart (`--base-gpu-id`), or across the nodes of a Ray cluster (`ray`): each worker started by a Ray
actor pinned to its node, on that node's GPUs, listening on the node's address, and the router on this
machine in front of all of them. The cluster is the one `ray start` made (RAY_ADDRESS, else the one
running on this machine), the same one verl's training runs on.

Servers take no Ray resources, as servers on one machine take none from verl: with `keep_servers` they
stay up while verl trains on the same GPUs, their memory released. Workers spread over the nodes
first (worker i on the (i mod nodes)-th node while it has GPUs left), so `dp` workers on `dp` nodes
take one node each. Every node must read the checkpoints a server loads at the same path (a run
directory on a shared filesystem): a worker checks before it starts and before it loads new weights.

Ray is imported only here, and only when a server is placed on a cluster."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import click

from .. import environments

PLACEMENTS = ("local", "ray")
LOCAL_HOST = "127.0.0.1"
STOP_WAIT_S = 60.0  # SIGTERM, then SIGKILL


class PlacementError(click.ClickException):
    """No cluster to place servers on, too little room on it, or a checkpoint a node cannot read."""


@dataclass(frozen=True)
class Place:
    """Where one server runs: the address it listens on and is reached at, its first GPU among those its
    node makes visible, and the Ray node (None: this machine)."""

    host: str
    base_gpu: int
    node: str | None = None


@dataclass(frozen=True)
class Node:
    """A Ray node that has GPUs: its id, its address and how many GPUs it offers."""

    id: str
    address: str
    gpus: int


def local(dp: int, tp: int) -> list[Place]:
    """`dp` servers of `tp` GPUs each on this machine, GPUs apart."""
    return [Place(LOCAL_HOST, i * tp) for i in range(dp)]


def spread(nodes: Sequence[Node], dp: int, tp: int) -> list[Place]:
    """`dp` servers of `tp` GPUs each on `nodes`: one server on each node in turn, then a second on each
    node with GPUs left, and so on. A ValueError, saying what the cluster has, when it has too few."""
    free = {node.id: node.gpus // tp for node in nodes}
    places: list[Place] = []
    for k in range(max(free.values(), default=0)):
        places += [Place(node.address, k * tp, node.id) for node in nodes if k < free[node.id]]
    if len(places) < dp:
        have = ", ".join(f"{node.address} ({node.id[:8]}): {node.gpus}" for node in nodes) or "no node with GPUs"
        raise ValueError(
            f"servers.dp={dp} servers of servers.tp={tp} GPUs need {dp} nodes' groups of {tp} GPUs; the Ray "
            f"cluster has room for {len(places)} ({have})"
        )
    return places[:dp]


def connect() -> Any:
    """The `ray` module, connected to the cluster at RAY_ADDRESS, else to the one `ray start` runs on this
    machine; a ClickException saying how to start one when there is none."""
    try:
        import ray
    except ImportError:
        raise PlacementError(
            f"servers.placement=ray: ray is not importable in {sys.executable}; run selfplay-gen with the Python "
            f"whose ray started the cluster (the training environment: {environments.verl_python()} -m "
            "selfplay_gen.cli iterate ...)"
        ) from None
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        try:
            ray.init(address=address or "auto", log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError) as err:  # none running, or another Ray version's
            where = f"at RAY_ADDRESS={address}" if address else "on this machine (RAY_ADDRESS is not set)"
            raise PlacementError(
                f"servers.placement=ray: cannot join a Ray cluster {where}: {err}. Start one with "
                "`ray start --head` on the first node and `ray start --address=FIRST:6379` on each other "
                "node, or set RAY_ADDRESS"
            ) from None
    return ray


def gpu_nodes(ray: Any) -> list[Node]:
    """The cluster's live nodes that have GPUs, this machine's first, then by address."""
    here = ray.util.get_node_ip_address()
    nodes = [
        Node(node["NodeID"], node["NodeManagerAddress"], int(node["Resources"].get("GPU", 0)))
        for node in ray.nodes()
        if node["Alive"] and node["Resources"].get("GPU", 0) >= 1
    ]
    return sorted(nodes, key=lambda node: (node.address != here, node.address, node.id))


def on_ray(dp: int, tp: int) -> list[Place]:
    """`dp` servers of `tp` GPUs each across the cluster's nodes (`spread`)."""
    try:
        return spread(gpu_nodes(connect()), dp, tp)
    except ValueError as err:
        raise PlacementError(str(err)) from None


# -- the processes ---------------------------------------------------------------------------------


class Process(Protocol):
    """A started server process, wherever it runs."""

    pid: int
    node: str | None

    def poll(self) -> int | None: ...

    def stop(self) -> None: ...

    def reads(self, path: str) -> bool: ...


def _as_a_server() -> None:
    """In a server's process before exec: SIGTERM when the actor that started it dies (Linux's
    PR_SET_PDEATHSIG), so a server does not outlive it; and the scheduling priority of a process started by
    hand, where allowed (Ray starts its workers at niceness 15, RAY_worker_niceness, which the SGLang
    scheduler's CPU work would inherit)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:  # lowering the niceness needs CAP_SYS_NICE
        pass


def keep_earlier(log: Path) -> None:
    """Move an earlier process's `log` to the first free NAME.N.log: a server started again in its place (after
    it stopped, or found too little memory) must not erase what said why."""
    if not log.exists() or log.stat().st_size == 0:
        return
    n = 1
    while (kept := log.with_name(f"{log.stem}.{n}{log.suffix}")).exists():
        n += 1
    log.rename(kept)


def popen(command: Sequence[str], log: Path, on_node: bool = False) -> subprocess.Popen:
    """`command` in its own process group, its output into `log` (an earlier one's kept: `keep_earlier`);
    `on_node`: started by a Ray actor (`_as_a_server`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    keep_earlier(log)
    with log.open("w") as sink:
        return subprocess.Popen(
            list(command), stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_as_a_server if on_node else None,
        )  # fmt: skip


def stop_group(process: subprocess.Popen) -> None:
    """Stop `process`'s process group: SIGTERM, then SIGKILL after `STOP_WAIT_S`."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class LocalProcess:
    """A server process on this machine."""

    node: str | None = None

    def __init__(self, command: Sequence[str], log: Path):
        self.process = popen(command, log)
        self.pid = self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        stop_group(self.process)

    def reads(self, path: str) -> bool:
        return True


class NodeServer:
    """The Ray actor that runs one server process on its node: started with the node's environment (its
    CUDA_VISIBLE_DEVICES as `ray start` had it), stopped with the actor."""

    process: subprocess.Popen | None = None

    def start(self, command: Sequence[str], log: str) -> int:
        self.process = popen(command, Path(log), on_node=True)
        return self.process.pid

    def poll(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process)

    def reads(self, path: str) -> bool:
        return Path(path).is_dir()


class RayProcess:
    """A server process on a Ray node, run by a `NodeServer` actor pinned there (no resources taken). The
    actor's class travels by value, so a node needs Ray, not this package."""

    def __init__(self, command: Sequence[str], log: Path, node: str, model: str):
        ray = connect()
        from ray import cloudpickle
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        actor = ray.remote(num_cpus=0)(NodeServer).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        )
        self.ray = ray
        self.node: str | None = node
        self.actor = actor.remote()
        unreadable = readable_everywhere([self], model)
        if unreadable is not None:
            ray.kill(self.actor)
            raise PlacementError(unreadable)
        self.pid = ray.get(self.actor.start.remote(list(command), str(log)))

    def poll(self) -> int | None:
        return self.ray.get(self.actor.poll.remote())

    def stop(self) -> None:
        try:
            self.ray.get(self.actor.stop.remote())
        finally:
            self.ray.kill(self.actor)

    def reads(self, path: str) -> bool:
        return self.ray.get(self.actor.reads.remote(path))


def start(command: Sequence[str], log: Path, place: Place, model: str) -> Process:
    """`command`, a server of `model`, at `place`, its output into `log` (on the node it runs on)."""
    if place.node is None:
        return LocalProcess(command, log)
    return RayProcess(command, log, place.node, model)


def readable_everywhere(processes: Sequence[Process], path: str) -> str | None:
    """Why `path` (a checkpoint directory here) cannot be loaded by every one of `processes`, or None."""
    if not Path(path).is_dir():
        return None  # not a local checkpoint: the server says what it makes of it
    missing = [process for process in processes if not process.reads(path)]
    if not missing:
        return None
    nodes = ", ".join(sorted({str(process.node) for process in missing}))
    return (
        f"{path} is not readable on Ray node {nodes}: every node must see the run's checkpoints at the same "
        "path (put the run directory on a filesystem every node mounts)"
    )
