"""SGLang's launch settings for the install at hand: its own defaults, a fallback only for a missing part."""

import json
import sys

from selfplay_gen import serving


def test_an_install_without_the_optional_kernels_falls_back_and_keeps_cuda_graphs():
    choice = serving.choose({})
    assert choice.sglang_args() == [
        "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none"
    ]  # fmt: skip
    assert "actor_rollout_ref.rollout.enforce_eager=False" in choice.verl_overrides()
    assert any("xgrammar" in reason for reason in choice.reasons)


def test_a_full_install_gets_sglangs_own_defaults():
    everything = {name: True for name in serving.PROBED}
    assert serving.choose(everything).sglang_args() == []
    assert serving.choose(everything).verl_overrides() == ["actor_rollout_ref.rollout.enforce_eager=False"]
    # FlashAttention-3 alone keeps SGLang's attention choice; sampling still needs prebuilt flashinfer
    fa3 = serving.choose({"sgl_kernel.flash_ops": True, "xgrammar": True})
    assert fa3.sglang_args() == ["--sampling-backend", "pytorch"]


def test_cuda_graphs_off_only_when_asked():
    choice = serving.choose({}, cuda_graphs=False)
    assert choice.sglang_args()[-1] == "--disable-cuda-graph"
    assert "actor_rollout_ref.rollout.enforce_eager=True" in choice.verl_overrides()


def test_priority_scheduling_only_when_asked_and_never_preempts():
    """The servers run waiting requests by the players' priority (their game's depth) only when asked;
    a running turn is never evicted for a deeper one, and requests without a priority rank as 0."""
    assert not any("priority" in a for a in serving.choose({}).sglang_args())
    args = serving.choose({}, priority_scheduling=True).sglang_args()
    assert args[args.index("--enable-priority-scheduling") :][:4] == [
        "--enable-priority-scheduling", "--disable-priority-preemption", "--default-priority-value", "0"
    ]  # fmt: skip
    assert not any("priority" in kv for kv in serving.choose({}, priority_scheduling=True).verl_overrides())
    from click.testing import CliRunner

    done = CliRunner().invoke(serving.main, ["sglang-args", "--priority-scheduling"])
    assert done.exit_code == 0, done.output
    assert "--enable-priority-scheduling --disable-priority-preemption" in done.stdout
    assert "scheduling: a game's later turns first" in done.stderr


def test_the_probe_asks_the_named_python():
    found = serving.probe(sys.executable)
    assert set(found) == set(serving.PROBED) and not found["sgl_kernel.flash_ops"]  # no sglang in the test env


def _checkpoint(path, vocab_size: int) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2", "vocab_size": vocab_size}))
    return str(path)


def test_the_pytorch_sampler_caps_running_requests_for_a_large_vocabulary(tmp_path, local_model_dir):
    """A 152k-token vocabulary (Qwen2.5's) gets a cap well under SGLang's 4,096 running requests; the
    embedded model's 49,152 tokens keep SGLang's own ceiling."""
    fallback = serving.choose({}).sglang_args()
    qwen = _checkpoint(tmp_path / "qwen", 151_936)
    assert serving.model_args(fallback, qwen) == ["--max-running-requests", "1280"]
    assert serving.model_args(fallback, local_model_dir) == []  # the embedded SmolLM2: 49,152 tokens
    # flashinfer's sampler does not sort; a cap the user set stands; an unknown vocabulary gets none
    assert serving.model_args(serving.choose({"flashinfer_cubin": True}).sglang_args(), qwen) == []
    assert serving.model_args([*fallback, "--max-running-requests", "3000"], qwen) == []
    assert serving.model_args(fallback, "Qwen/Qwen2.5-Coder-1.5B-Instruct") == []
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    assert serving.model_args(fallback, str(tmp_path / "broken")) == []


def test_cuda_graphs_reach_the_batch_of_every_game_in_flight_unless_the_arguments_choose():
    """A server that runs more games at once than SGLang's own largest CUDA graph (256) captures graphs up to
    them, at most SGLang's ceiling of running requests; arguments that choose the graphs go first."""
    assert serving.graph_batch(256) == 0 and serving.graph_batch(64) == 0  # SGLang's own suffices
    assert serving.graph_batch(1286) == 1286
    assert serving.graph_batch(20_000) == serving.SGLANG_MAX_RUNNING
    assert serving.graph_args(["--dtype", "bfloat16"], 1286) == ["--cuda-graph-max-bs", "1286"]
    assert serving.graph_args([], 0) == []
    for own in (["--disable-cuda-graph"], ["--cuda-graph-max-bs", "512"], ["--cuda-graph-bs=1,2,4"]):
        assert serving.graph_args(own, 1286) == []


def test_an_option_is_taken_out_with_its_value_and_a_valueless_one_alone():
    mem, share = "--mem-fraction-static", ["--mem-fraction-static", "0.1"]
    assert serving.with_own_args(["--tp", "1", mem, "0.3", "--dtype=half"], share) == [
        "--tp",
        "1",
        "--dtype=half",
        *share,
    ]
    assert serving.with_own_args([f"{mem}=0.3", "--x"], share) == ["--x", *share]
    assert serving.with_own_args([mem, "--cuda-graph-max-bs", "512"], share) == ["--cuda-graph-max-bs", "512", *share]


def test_servers_sharing_a_gpu_split_one_servers_memory_behind_the_router(tmp_path):
    """`servers.workers_per_gpu=2`: two SGLang servers on each GPU group, behind sglang_router, started one
    after the other, each with half the memory share one server there would have (the one given, else
    serving.LONE_MEM_FRACTION: SGLang takes a share of the memory free at its start, so the second asks for half of
    what the first left), and CUDA graphs up to its own share of the games at once."""
    from selfplay_gen.iterate.config import ServerSettings
    from selfplay_gen.iterate.server import SGLangServer, memory_split
    from selfplay_gen.iterate.shell import Shell

    model = _checkpoint(tmp_path / "m", 49_152)
    two_gpus = ServerSettings(dp=2, workers_per_gpu=2)
    shared = SGLangServer(model, 31000, tmp_path / "b.log", two_gpus, Shell(dry_run=True), None)
    assert [p.base_gpu for p in shared.places()] == [0, 0, 1, 1]
    mem = "--mem-fraction-static"
    option_value = serving.option_value
    assert option_value(["--tp", "1", mem, "0.3"], mem) == "0.3" and option_value([f"{mem}=0.2"], mem) == "0.2"
    assert option_value([mem, "--tp", "1"], mem) is None
    assert memory_split(["--tp", "1"], 2, 0) == ["--tp", "1", mem, f"{serving.LONE_MEM_FRACTION / 2:.4g}"]
    assert memory_split(["--tp", "1"], 2, 1)[-1] == f"{0.4 / 0.6:.4g}"  # 0.4 of the GPU, of the 0.6 left free
    assert [memory_split([mem, "0.15", "--tp", "1"], 3, k) for k in (0, 2)] == [
        ["--tp", "1", mem, "0.05"],
        ["--tp", "1", mem, f"{0.05 / 0.9:.4g}"],
    ]

    settings = ServerSettings(port=31000, workers_per_gpu=2, extra_args=f"{mem} 0.15").for_games(1286)
    assert settings.workers == 2 and settings.cuda_graph_max_bs == 643
    server = SGLangServer(model, 31000, tmp_path / "a.log", settings, Shell(dry_run=True), None)
    first, second, (router,) = server.stages()  # the GPU's second server starts once the first is up
    workers = first + second
    assert [w.url for w in workers] == ["http://127.0.0.1:32000", "http://127.0.0.1:33000"]
    assert server.worker_urls() == [w.url for w in workers]
    for worker, share in zip(workers, ("0.075", f"{0.075 / 0.925:.4g}")):
        command = worker.command
        assert command[command.index("--base-gpu-id") + 1] == "0"
        assert [a for a in command if a == mem] == [mem] and command[command.index(mem) + 1] == share
        assert command[command.index("--cuda-graph-max-bs") + 1] == "643"
    assert router.url == server.url == "http://127.0.0.1:31000" and router.workers == tuple(w.url for w in workers)
    beside = SGLangServer(server.model, 31000, tmp_path / "b.log", settings, Shell(dry_run=True), 0.3).stages()[0][0]
    assert beside.command[beside.command.index(mem) + 1] == "0.15"  # the share beside training, split
    assert ServerSettings(dp=2).for_games(1286).cuda_graph_max_bs == 643  # DP workers: each its share too


def test_sglang_args_names_the_cap_and_why(tmp_path):
    from click.testing import CliRunner

    qwen = _checkpoint(tmp_path / "qwen", 151_936)
    done = CliRunner().invoke(serving.main, ["sglang-args", "--model", qwen])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip().endswith("--sampling-backend pytorch --grammar-backend none --max-running-requests 1280")
    assert "running requests: 1280 (the pytorch sampler sorts 151936 tokens for each)" in done.stderr
    plain = CliRunner().invoke(serving.main, ["sglang-args"])
    assert "--max-running-requests" not in plain.stdout


def test_an_iteration_server_gets_the_cap_for_its_model(tmp_path):
    from selfplay_gen.iterate.config import ServerSettings
    from selfplay_gen.iterate.server import SGLangServer
    from selfplay_gen.iterate.shell import Shell

    qwen = _checkpoint(tmp_path / "qwen", 151_936)
    settings = ServerSettings(port=31000, dp=2, extra_args="--sampling-backend pytorch")
    stages = SGLangServer(qwen, 31000, tmp_path / "a.log", settings, Shell(dry_run=True), None).stages()
    workers = [" ".join(launch.command) for launch in stages[0]]
    assert len(workers) == 2 and all("--sampling-backend pytorch --max-running-requests 1280 " in c for c in workers)


def test_a_users_server_arguments_add_to_the_installs_fallbacks():
    """A memory share for a GPU several runs share keeps the fallbacks an install without FA3 needs to
    start; an option the user gives replaces the install's."""
    install = serving.choose({}).sglang_args()
    assert "--attention-backend" in install
    added = serving.with_own_args(install, ["--mem-fraction-static", "0.12"])
    assert added == [*install, "--mem-fraction-static", "0.12"]
    replaced = serving.with_own_args(install, ["--attention-backend=flashinfer", "--disable-cuda-graph"])
    assert "triton" not in replaced and replaced[-2:] == ["--attention-backend=flashinfer", "--disable-cuda-graph"]
    assert replaced[:-2] == serving.with_own_args(install, ["--attention-backend", "x"])[:-2]
    kwargs = serving.choose({}).engine_kwargs()
    own = serving.with_own_kwargs(kwargs, ["attention_backend=fa3", "mem_fraction_static=0.1"])
    assert own[-2:] == ["attention_backend=fa3", "mem_fraction_static=0.1"]
    assert not any(kv.startswith("attention_backend=") for kv in own[:-2]) and len(own) == len(kwargs) + 1


def test_a_port_that_answers_before_the_server_starts_stops_the_start(tmp_path, monkeypatch):
    """Another run's server on this run's port would answer /health while this one loads its model, and the
    run would play its games with that other model: the start stops before launching anything."""
    import functools
    import socket

    import pytest

    from selfplay_gen.iterate import server as servers
    from selfplay_gen.iterate.config import ServerSettings
    from selfplay_gen.iterate.shell import Shell, StepFailed

    monkeypatch.setattr(servers, "_answering", functools.partial(servers._answering, wait_s=0))
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        settings = ServerSettings(python=str(tmp_path / "not-run"), port=port, timeout_s=5)
        server = servers.SGLangServer("/m", port, tmp_path / "a.log", settings, Shell(), None)
        with pytest.raises(StepFailed, match=f"http://127.0.0.1:{port} answers already"):
            server.__enter__()
    assert not (tmp_path / "a.log").exists() and not server.processes
    assert not servers._answering(f"http://127.0.0.1:{port}", wait_s=0)  # closed: free again
