"""`servers.placement=ray` as a cluster runs it: two Ray nodes on this host (a head and a worker, as Ray's
own multi-node tests start them), each offering one GPU (a logical one: Ray hands out GPU ids without
a device), the stand-in SGLang server launched on each by the placement's actors in place of
`sglang.launch_server`, and the real sglang_router here in front of both. Games through the router
reach both nodes' servers, a checkpoint's weights reach both, and no process outlives the slot."""

import json
import os
import re
import urllib.request

import pytest
from click.testing import CliRunner
from fake_sglang import free_port, launcher

from selfplay_gen import models
from selfplay_gen.cli import main
from selfplay_gen.iterate import placement
from selfplay_gen.iterate.config import ServerSettings
from selfplay_gen.iterate.placement import Node, Place, PlacementError
from selfplay_gen.iterate.server import WORKER_PORT_STEP, Slots
from selfplay_gen.iterate.shell import Shell
from selfplay_gen.records import read_games

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node, one GPU each; the placement connects through RAY_ADDRESS."""
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    nodes.add_node(num_cpus=1, num_gpus=1)
    nodes.wait_for_nodes()
    try:
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_spread_takes_a_node_each_first_and_says_what_is_missing():
    nodes = [Node("a" * 16, "10.0.0.1", 2), Node("b" * 16, "10.0.0.2", 1)]
    assert placement.spread(nodes, 3, 1) == [
        Place("10.0.0.1", 0, "a" * 16), Place("10.0.0.2", 0, "b" * 16), Place("10.0.0.1", 1, "a" * 16)
    ]  # fmt: skip
    assert placement.spread(nodes, 1, 2) == [Place("10.0.0.1", 0, "a" * 16)]  # TP stays within a node
    with pytest.raises(ValueError, match=r"servers.dp=2 .* servers.tp=2 .* room for 1 \(10.0.0.1 \(aaaaaaaa\): 2"):
        placement.spread(nodes, 2, 2)


def test_a_server_started_again_keeps_the_earlier_ones_log(tmp_path):
    log = tmp_path / "gen" / "sglang.worker0.log"
    for said in ("first", "second", "third"):
        process = placement.popen(["echo", said], log)
        assert process.wait(timeout=30) == 0
    assert log.read_text() == "third\n"
    assert (tmp_path / "gen" / "sglang.worker0.1.log").read_text() == "first\n"
    assert (tmp_path / "gen" / "sglang.worker0.2.log").read_text() == "second\n"


def test_servers_on_both_nodes_take_games_and_weights_and_stop(cluster, monkeypatch, tmp_path, local_model_dir):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    ports = [WORKER_PORT_STEP * step for step in range(4)]
    settings = ServerSettings(
        python=launcher(tmp_path), port=free_port(ports), dp=2, timeout_s=120, placement="ray",
        router_args="--policy round_robin",  # turns alternate between the workers, so two games reach both
    )  # fmt: skip
    with Slots(settings, Shell()) as slots:
        started = slots.serve(0, local_model_dir, tmp_path / "sglang.log")
        server = slots._servers[0][1]
        workers, router = server.processes[:2], server.processes[2]
        nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
        assert len(nodes) == 2 and {worker.node for worker in workers} == nodes  # one server on each node
        assert router.node is None and started.url == f"http://127.0.0.1:{settings.port}"  # the router here
        if os.geteuid() == 0:  # lowering a niceness needs root's privilege: servers run at 0, not at Ray's 15
            assert {os.getpriority(os.PRIO_PROCESS, worker.pid) for worker in workers} == {0}

        out = tmp_path / "games.jsonl"
        args = ["--backend", "sglang", "--base-url", started.url, "-n", "2", "-k", "1", "--max-moves", "2"]
        played = CliRunner().invoke(main, [*args, "--max-new-tokens", "8", "--out", str(out), "-q"])
        assert played.exit_code == 0, played.output
        games = list(read_games(out))
        assert len(games) == 2 and not [game["failure"] for game in games if game["failure"]]
        logs = [tmp_path / f"sglang.worker{i}.log" for i in (0, 1)]
        assert all(re.search(r'"POST /generate', log.read_text()) for log in logs)  # games on both nodes

        warm = models.resolve(models.DEFAULT_MODEL)
        pids = [process.pid for process in server.processes]
        swapped = slots.serve(0, warm, tmp_path / "sglang.log")
        assert [process.pid for process in server.processes] == pids and swapped.url == started.url
        assert all(get(f"{url}/get_model_info")["model_path"] == warm for url in server.worker_urls())
        actors = [worker.actor for worker in workers]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    states = ray._private.state.actors()
    assert all(states[actor._actor_id.hex()]["State"] == "DEAD" for actor in actors)


def test_more_servers_than_the_cluster_has_gpus_fail_saying_so(cluster, monkeypatch, tmp_path, local_model_dir):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    settings = ServerSettings(python=launcher(tmp_path), port=free_port(), dp=3, placement="ray")
    with Slots(settings, Shell()) as slots, pytest.raises(PlacementError, match=r"servers.dp=3 .* room for 2"):
        slots.serve(0, local_model_dir, tmp_path / "sglang.log")
