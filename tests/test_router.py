"""DP > 1 as users run it: the real `sglang_router` (the Rust router from PyPI) in front of two
stand-in SGLang workers. The runner must size its games in flight from the workers behind the
router, and every game must be played token-exact through it, spread over both workers."""

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner
from fake_sglang import FakeSGLang, free_port

from selfplay_gen.backends.base import BackendOptions, backend_class
from selfplay_gen.cli import main
from selfplay_gen.records import read_games

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def router(*workers: str, log):
    """`sglang_router.launch_router` on a free port in front of `workers`, until /health answers."""
    port = free_port()
    command = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        # cache_aware (the default policy) sends a prompt to the worker holding its prefix unless the
        # loads differ; with a handful of games the thresholds must be low for both to get some
        [*command, "--worker-urls", *workers, "--balance-abs-threshold", "1", "--balance-rel-threshold", "1.0"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the router did not come up"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_games_through_the_router_use_both_workers(tokenizer, local_model_dir, tmp_path):
    async with (
        FakeSGLang(tokenizer, local_model_dir, max_running_requests=3) as one,
        FakeSGLang(tokenizer, local_model_dir, max_running_requests=5) as two,
    ):
        with (tmp_path / "router.log").open("w") as log, router(one.url, two.url, log=log) as url:
            backend = backend_class("sglang")(BackendOptions(base_urls=(url,)), tokenizer)
            async with backend:
                assert backend.capacity == 8  # 3 + 5 behind one URL, not a guess for one server
                assert backend.model == local_model_dir
            out = tmp_path / "games.jsonl"
            args = ["--backend", "sglang", "--base-url", url, "-n", "6", "-k", "2", "--max-moves", "2"]
            args += ["--max-new-tokens", "16", "--temperature", "0.7", "--out", str(out), "-q"]
            result = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert result.exit_code == 0, result.output
        assert one.generate_requests > 0 and two.generate_requests > 0  # the router spread the games
        # the router passes each turn's priority (its game's depth) on to the workers
        assert all(isinstance(p, int) for p in one.priorities + two.priorities)
    records = list(read_games(out))
    assert len(records) == 6
    summary = json.loads((tmp_path / "games.summary.json").read_text())
    assert summary["games"] == 6
    for record in records:
        assert record["failure"] is None, record["failure"]
        for seat in record["players"]:
            assert seat["invariant_ok"]
            for turn in seat["turns"]:
                start = turn["prompt_len"]
                assert seat["token_ids"][start : start + len(turn["output_ids"])] == turn["output_ids"]


def test_dp_workers_start_behind_the_router_and_each_takes_new_weights(tmp_path, local_model_dir):
    """DP=2 as `generate` and `iterate` start it: two stand-in workers on GPUs apart and ports of their
    own, the real router in front on PORT; a like checkpoint's weights go into both workers (no
    restart), and every process stops with the slot."""
    import os

    from fake_sglang import launcher

    from selfplay_gen import models
    from selfplay_gen.backends.sglang import router_workers
    from selfplay_gen.iterate.config import ServerSettings
    from selfplay_gen.iterate.server import WORKER_PORT_STEP, Slots
    from selfplay_gen.iterate.shell import Shell

    def get(url: str) -> dict:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())

    warm = models.resolve(models.DEFAULT_MODEL)
    # both slots' routers, workers and metrics ports
    ports = [WORKER_PORT_STEP * step + slot for step in range(4) for slot in (0, 1)]
    settings = ServerSettings(python=launcher(tmp_path), port=free_port(ports), dp=2, timeout_s=120)
    with Slots(settings, Shell()) as slots:
        started = slots.serve(0, local_model_dir, tmp_path / "sglang.log")
        server = slots._servers[0][1]
        assert started.url == f"http://127.0.0.1:{settings.port}" and len(server.processes) == 3
        workers = server.worker_urls()
        assert workers == [f"http://127.0.0.1:{settings.port + 1000 * i}" for i in (1, 2)]
        assert sorted(router_workers(get(f"{started.url}/workers"))) == sorted(workers)
        assert all(get(f"{url}/get_model_info")["model_path"] == local_model_dir for url in workers)
        assert (tmp_path / "sglang.worker0.log").exists() and (tmp_path / "sglang.worker1.log").exists()
        pids = [process.pid for process in server.processes]
        swapped = slots.serve(0, warm, tmp_path / "sglang.log")
        assert [process.pid for process in server.processes] == pids and swapped.url == started.url
        assert all(get(f"{url}/get_model_info")["model_path"] == warm for url in workers)
        # the partner slot's router runs beside the first one (each has a metrics port of its own)
        partner = slots.serve(1, local_model_dir, tmp_path / "partner.log")
        partner_workers = slots._servers[1][1].worker_urls()
        assert partner.url == f"http://127.0.0.1:{settings.port + 1}"
        assert sorted(router_workers(get(f"{partner.url}/workers"))) == sorted(partner_workers)
        assert sorted(router_workers(get(f"{started.url}/workers"))) == sorted(workers)
        pids += [process.pid for process in slots._servers[1][1].processes]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    # KEEP_SERVERS=True, the two workers sharing one GPU (started one after the other): training's turn releases
    # every worker's memory, and the next checkpoint comes into the same processes; games through the router play
    kept = dataclasses.replace(settings, port=free_port(ports), keep_servers=True, dp=1, workers_per_gpu=2)
    with Slots(kept, Shell()) as slots:
        started = slots.serve(0, local_model_dir, tmp_path / "kept.log")
        server = slots._servers[0][1]
        pids = [process.pid for process in server.processes]
        assert len(server.stages()) == 3 and len(pids) == 3  # one worker, the other, the router
        slots.free_gpu()
        resumed = slots.serve(0, warm, tmp_path / "kept.log")
        assert [process.pid for process in server.processes] == pids and resumed.url == started.url
        assert all(get(f"{url}/get_model_info")["model_path"] == warm for url in server.worker_urls())
        played = CliRunner().invoke(
            main,
            ["--backend", "sglang", "--base-url", resumed.url, "--model", warm, "--num-games", "2", "--max-moves", "2",
             "--max-new-tokens", "8", "--out", str(tmp_path / "kept.jsonl"), "--quiet"],
        )  # fmt: skip
        assert played.exit_code == 0, played.output
        games = list(read_games(tmp_path / "kept.jsonl"))
        assert len(games) == 2 and not [game["failure"] for game in games if game.get("failure")]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


def test_a_kept_worker_gone_while_released_is_replaced_saying_how_it_ended(tmp_path, local_model_dir, capsys):
    """KEEP_SERVERS=True behind the router: a worker that died while its memory was released for training is
    not resumed; the slot starts new servers for the next checkpoint, says how the old worker ended, and keeps
    the old worker's log beside the new one's."""
    import os
    import signal

    from fake_sglang import launcher

    from selfplay_gen import models
    from selfplay_gen.iterate.config import ServerSettings
    from selfplay_gen.iterate.server import WORKER_PORT_STEP, Slots
    from selfplay_gen.iterate.shell import Shell

    warm = models.resolve(models.DEFAULT_MODEL)
    ports = [WORKER_PORT_STEP * step for step in range(4)]
    settings = ServerSettings(python=launcher(tmp_path), port=free_port(ports), dp=2, timeout_s=120, keep_servers=True)
    with Slots(settings, Shell()) as slots:
        slots.serve(0, local_model_dir, tmp_path / "sglang.log")
        kept = slots._servers[0][1]
        worker = kept.processes[0]
        slots.free_gpu()
        os.killpg(worker.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        resumed = slots.serve(0, warm, tmp_path / "sglang.log")
        new = slots._servers[0][1]
        assert new is not kept and all(process.poll() is None for process in new.processes)
        with urllib.request.urlopen(f"{new.worker_urls()[0]}/get_model_info", timeout=10) as answer:
            assert json.loads(answer.read())["model_path"] == warm
        assert resumed.url == f"http://127.0.0.1:{settings.port}"
    said = capsys.readouterr().err
    assert f"the SGLang server (pid {worker.pid}) had exited: killed by SIGKILL" in said
    assert (tmp_path / "sglang.worker0.1.log").exists() and (tmp_path / "sglang.worker0.log").exists()
