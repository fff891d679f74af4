"""bench/generation.py against a server that follows SGLang's protocol: the saturation flood keeps as
many requests in flight as the runner, and a server that dies in it (as SGLang did, out of memory) costs
the flood's figure, not the runner's."""

import os
from datetime import datetime, timedelta
from functools import partial

import bench_modules
from fake_sglang import FakeSGLang

from selfplay_gen.backends.base import BackendOptions

generation = bench_modules.load("generation.py", "generation_bench")
FLUSHED = ("sequential", "single_request", "concurrent", "saturation")


def arguments(url: str, model_dir: str, concurrency: int, warmup: int = 0):
    return generation.parse_args(
        ["--backend", "sglang", "--base-url", url, "--tokenizer", model_dir, "--num-games", "4"]
        + ["--games-per-instance", "2", "--concurrency", str(concurrency), "--sequential-games", "1"]
        + ["--max-new-tokens", "8", "--max-moves", "2", "--warmup-games", str(warmup)]
    )


async def test_warmup_games_come_first_and_count_in_no_figure(tokenizer, local_model_dir):
    """A fresh server compiles kernels on its first requests: the warm-up games take that cost, untimed,
    and the one-at-a-time games still start from an emptied cache, as their replay does."""
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=8) as fake:
        result = await generation.main(arguments(fake.url, local_model_dir, concurrency=2, warmup=2))
        answered, flushes = fake.answered, fake.flushes
    counted = sum(result[phase]["turns"] for phase in ("sequential", "concurrent"))
    counted += sum(result[phase]["requests"] for phase in ("single_request", "saturation"))
    assert answered > counted  # the warm-up's turns, in no phase's figures
    assert flushes == 4 and all(result[phase]["cache_flushed"] for phase in FLUSHED)
    assert result["settings"]["warmup_games"] == 2 and result["sequential"]["games"] == 1


async def test_the_flood_keeps_as_many_requests_in_flight_as_the_runner(tokenizer, local_model_dir):
    """All of them at once, tens of thousands in a large run, exhausted the client's connections."""
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=8) as fake:
        result = await generation.main(arguments(fake.url, local_model_dir, concurrency=2))
    flood = result["saturation"]
    assert flood["requests"] == result["concurrent"]["turns"] > 2 and flood["in_flight"] == 2
    assert fake.peak_in_flight == 2 and flood["output_tokens_per_s"] > 0
    # every phase starts from an emptied prefix cache: the one-at-a-time games and their replay, and the
    # runner and the flood (the runner leaves the flood's prompts in the cache, hits the runner never had)
    assert fake.flushes == 4 and all(result[phase]["cache_flushed"] for phase in FLUSHED)
    assert 0 < flood["cache_hit_rate"] < 1  # the server's cached_tokens over the prompts sent
    assert result["single_request"]["requests"] == result["sequential"]["turns"]
    # each phase says when it began, in the server log's clock, for bench/analysis/server_timeline.py
    phases = ("sequential", "single_request", "concurrent", "saturation")
    began = [datetime.fromisoformat(result[name]["started_at"]) for name in phases]
    assert began == sorted(began) and all(abs(datetime.now() - t) < timedelta(minutes=10) for t in began)
    text = generation.table(result)
    assert "| saturation flood (" in text and " requests, 2 in flight) |" in text
    # no nvidia-smi here: no GPU figure, and the table says so
    assert result["concurrent"]["gpu_percent"] is None and text.splitlines()[3].endswith("| - |")


async def test_each_phase_says_how_busy_the_gpus_were(tokenizer, local_model_dir, tmp_path, monkeypatch):
    """What a server's games/s do not say: whether its GPU was kept busy (nvidia-smi's samples meanwhile)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/usr/bin/env bash\nwhile true; do echo 55; sleep 0.05; done\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=8) as fake:
        result = await generation.main(arguments(fake.url, local_model_dir, concurrency=2))
    assert result["concurrent"]["gpu_percent"] == 55 and result["saturation"]["gpu_percent"] == 55
    assert "| GPU busy % |" in generation.table(result) and "| 55 |" in generation.table(result)


async def test_a_server_that_dies_in_the_flood_leaves_the_runners_figures(tokenizer, local_model_dir, monkeypatch):
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=4) as fake:
        flood = generation.saturation

        async def dying_flood(backend, shapes, params, in_flight):
            if in_flight > 1:
                fake.die()  # the server is gone when the flood comes (after the one-at-a-time replay)
            return await flood(backend, shapes, params, in_flight)

        monkeypatch.setattr(generation, "saturation", dying_flood)
        result = await generation.main(arguments(fake.url, local_model_dir, concurrency=4))
    assert result["concurrent"]["games"] == 4 and result["sequential"]["games"] == 1
    assert result["saturation"]["requests"] == result["concurrent"]["turns"] > 1
    assert "gone" in result["saturation"]["error"] and result["fraction_of_saturation"] is None
    text = generation.table(result)
    assert "runner, 4 in flight | 4 |" in text and "| saturation flood (" in text and "failed: " in text


async def test_games_that_fail_say_why_in_the_results(tokenizer, local_model_dir, monkeypatch):
    """A run's backend errors are counted by what the backend said, not only as a termination; the
    server gone before the references costs them, not the runner's figures."""
    monkeypatch.setattr(generation, "BackendOptions", partial(BackendOptions, max_retries=1, retry_backoff_s=0.01))
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=4) as fake:
        fake.die_after = 1  # the one-at-a-time game's one turn is answered, then the server is gone
        result = await generation.main(arguments(fake.url, local_model_dir, concurrency=4))
    failed = result["concurrent"]["terminations"]["backend_error"]
    assert failed == 4 and sum(result["concurrent"]["failures"].values()) == failed
    assert all(reason.startswith("backend_error: ") and len(reason) > 20 for reason in result["concurrent"]["failures"])
    assert result["sequential"]["failures"] == {}
    assert result["single_request"] is None and "/flush_cache failed" in result["saturation"]["error"]
    assert "failed: " in generation.table(result)


async def test_a_boxed_model_plays_its_boxed_moves(tokenizer, local_model_dir):
    """`--move-format boxed`: every seat is asked for SPIRAL's boxed moves, as in the runs that train in them."""
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=8) as fake:
        args = arguments(fake.url, local_model_dir, concurrency=2)
        args.move_format, args.flood = "boxed", False
        result = await generation.main(args)
        prompts = [tokenizer.decode(prompt) for prompt in fake.prompts]
    assert result["settings"]["move_format"] == "boxed" and result["concurrent"]["games"] == 4
    assert prompts and all("\\boxed{" in prompt for prompt in prompts)
    plain = generation.parse_args(["--backend", "sglang", "--base-url", "http://x"])
    assert plain.move_format == "plain"
