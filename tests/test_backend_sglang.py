"""The sglang backend against a stand-in SGLang server driven by the real embedded model."""

import asyncio
import json
import math
import zlib

import pandas as pd
import pytest
from click.testing import CliRunner
from fake_sglang import FakeSGLang, free_port

from convert.cli import main as convert_main
from selfplay_gen.backends.base import BackendError, BackendOptions, SamplingParams, backend_class
from selfplay_gen.cli import main
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games

pytestmark = pytest.mark.slow
GAME = GameConfig(limits=Limits(max_moves=4, max_invalid=2))


def sglang(*urls, **options):
    from selfplay_gen import models

    opts = {"max_retries": 2, "retry_backoff_s": 0.01, "timeout_s": 120.0, **options}
    return backend_class("sglang")(BackendOptions(base_urls=urls, **opts), models.load_tokenizer())


def greedy(tokenizer, max_new_tokens=32):
    return SamplingParams(0.0, 1.0, max_new_tokens, (tokenizer.eos_token_id,))


async def play(backend, tokenizer, path, num_games=2):
    """Greedy self-play of `num_games` games of one instance; the records."""
    params = greedy(tokenizer)

    def seat(spec, s, game, start):
        return LLMPlayer(s, start.system[s], backend, tokenizer, params, session=f"{spec.game_id}/{s}")

    with GameWriter(path) as writer:
        summary = await run_games(
            plan_games([Instance.from_seed(1)], num_games, num_games),
            (seat, seat),
            GAME,
            writer,
            concurrency=num_games,
            settings={"backend": "sglang"},
            progress=False,
        )
    return summary, list(read_games(path))


async def test_turns_fit_the_context_length_the_server_states_at_v1_models(tokenizer, local_model_dir, tmp_path):
    """SGLang's /get_server_info names no context length unless one was given at launch, and it refuses
    (HTTP 400) a turn whose prompt and max_new_tokens exceed the model's: the backend reads the model's
    length from /v1/models, so turns near the end of the context are shortened and the game ends on
    `context_length`, not on a backend error."""
    async with FakeSGLang(tokenizer, local_model_dir, context_length=None) as fake:
        async with sglang(fake.url) as backend:
            _, records = await play(backend, tokenizer, tmp_path / "probe.jsonl", num_games=1)
    first_prompt = records[0]["players"][0]["turns"][0]["prompt_len"]
    limit = first_prompt + 40  # the first turn fits only shortened (32 new tokens a turn), later ones not at all
    async with FakeSGLang(tokenizer, local_model_dir, context_length=limit) as fake:
        async with sglang(fake.url) as backend:
            assert backend.context_length == limit
            _, records = await play(backend, tokenizer, tmp_path / "games.jsonl")
    assert all(r["failure"] is None for r in records)
    assert {r["outcome"]["termination"] for r in records} == {"context_length"}
    assert max(len(p) for p in fake.prompts) < limit


def prompt_ids(tokenizer, text="Reply with one word: yes or no?"):
    return list(
        tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)[
            "input_ids"
        ]
    )


async def test_games_end_to_end(tokenizer, local_model_dir, tmp_path):
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=6, context_length=8192) as fake:
        async with sglang(fake.url) as backend:
            assert (backend.model, backend.capacity, backend.context_length) == (local_model_dir, 6, 8192)
            assert backend.max_concurrency == 12  # games in flight: a queue that refills each freed batch slot
            summary, records = await play(backend, tokenizer, tmp_path / "games.jsonl")
    assert summary.games == len(records) == 2
    eot = tokenizer.eos_token_id
    multi_turn = 0
    for record in records:
        assert record["failure"] is None or record["failure"]["reason"] != "backend_error"
        for seat in record["players"]:
            ids, turns = seat["token_ids"], seat["turns"]
            assert seat["invariant_ok"] and seat["backend"] == "sglang" and seat["model"] == local_model_dir
            for turn in turns:
                out = turn["output_ids"]
                assert ids[turn["prompt_len"] : turn["prompt_len"] + len(out)] == out
                assert len(turn["logprobs"]) == len(out) and all(
                    math.isfinite(lp) and lp <= 0 for lp in turn["logprobs"]
                )
                assert turn["cached_tokens"] <= turn["prompt_len"]
                if turn["finish_reason"] == "stop":
                    assert out[-1] == eot
            for before, after in zip(turns, turns[1:]):
                multi_turn += 1
                context = before["prompt_len"] + len(before["output_ids"])
                assert after["prompt_len"] > context and after["cached_tokens"] >= context
    assert multi_turn, "greedy play of seed 1 makes seat 0 move twice (invalid, then again)"
    # every turn names its game's depth as its priority at the server, so a long game's later turns run
    # before the first turns of new games (on a server with priority scheduling)
    assert all(isinstance(priority, int) for priority in fake.priorities)
    for record in records:
        for seat in record["players"]:
            seen = [fake.priorities[fake.prompts.index(seat["token_ids"][: t["prompt_len"]])] for t in seat["turns"]]
            assert seen == sorted(seen) and len(set(seen)) == len(seen), seen
            assert not seen or seen[0] >= 2  # the system prompt and the opening move at least


async def test_retries_429_and_5xx_then_succeeds(tokenizer, local_model_dir):
    async with FakeSGLang(tokenizer, local_model_dir) as fake, sglang(fake.url) as backend:
        fake.fail_next = [500, 429]
        gen = await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 8), session="s")
        assert gen.output_ids and fake.generate_requests == 3 and backend.stats.retries == 2
        fake.fail_next = [503, 503, 503]
        with pytest.raises(BackendError, match="after 3 attempts: HTTP 503"):
            await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 8), session="s")


async def test_client_errors_and_malformed_answers_fail_at_once(tokenizer, local_model_dir):
    async with FakeSGLang(tokenizer, local_model_dir) as fake, sglang(fake.url) as backend:
        fake.fail_next = [400]
        with pytest.raises(BackendError, match="HTTP 400"):
            await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 8), session="s")
        fake.malformed_next = 1
        with pytest.raises(BackendError, match="missing field 'output_ids'"):
            await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 8), session="s")
        assert fake.generate_requests == 2 and backend.stats.retries == 0


async def test_timeouts_are_retried(tokenizer, local_model_dir):
    # the retry's answer comes from a real model on shared CPU cores: 15 s leaves it room, and the stall outlasts it
    async with FakeSGLang(tokenizer, local_model_dir) as fake, sglang(fake.url, timeout_s=15.0) as backend:
        fake.stall_next = [60.0]
        await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 1), session="s")
        assert backend.stats.errors["SocketTimeoutError"] == 1 and fake.answered == 1


async def test_server_dying_mid_run_ends_games_as_backend_errors(tokenizer, local_model_dir, tmp_path):
    async with FakeSGLang(tokenizer, local_model_dir) as fake, sglang(fake.url) as backend:
        fake.die_after = 1  # the server is gone after its first answer; every game needs two
        summary, records = await play(backend, tokenizer, tmp_path / "games.jsonl")
    assert summary.games == 2 and summary.terminations == {"backend_error": 2}
    for record in records:
        assert (
            record["failure"]["reason"] == "backend_error" and "failed after 3 attempts" in record["failure"]["detail"]
        )
        assert len(record["players"][0]["turns"]) <= 1


async def test_the_server_has_work_before_every_game_is_set_up(tokenizer, local_model_dir, tmp_path):
    """Setting up a game renders and tokenizes its first prompt, so a run of thousands of games that set
    up every game before sending anything leaves the server idle meanwhile
    (bench/results/client_start_cpu_2026-11-26/). The first request reaches the server while most games
    are still to be set up. (The server refuses every request, so each game ends at once as a recorded
    backend error.)"""
    set_up: list[str] = []
    seen_at_first_request: list[int] = []

    class Watching(FakeSGLang):
        async def _generate(self, request):
            seen_at_first_request[:] = seen_at_first_request or [len(set_up)]
            return await super()._generate(request)

    def seat(spec, s, game, start):
        if s == 0:
            set_up.append(spec.game_id)
        return LLMPlayer(s, start.system[s], backend, tokenizer, greedy(tokenizer), session=f"{spec.game_id}/{s}")

    path, games = tmp_path / "games.jsonl", 64
    async with Watching(tokenizer, local_model_dir) as fake, sglang(fake.url) as backend:
        fake.fail_next = [400] * games
        with GameWriter(path) as writer:
            specs = plan_games([Instance.from_seed(i) for i in range(8)], 8, games)
            summary = await run_games(specs, (seat, seat), GAME, writer, games, {}, progress=False)
    assert summary.games == len(list(read_games(path))) == len(set_up) == games == fake.generate_requests
    assert summary.terminations == {"backend_error": games}
    assert seen_at_first_request and seen_at_first_request[0] < games // 2, seen_at_first_request


async def test_stop_id_left_out_by_the_server_is_restored(tokenizer, local_model_dir):
    async with FakeSGLang(tokenizer, local_model_dir) as fake, sglang(fake.url) as backend:
        fake.trim_stop = True
        gen = await backend.generate(prompt_ids(tokenizer), greedy(tokenizer, 8), session="s")
    assert gen.finish_reason == "stop" and gen.output_ids[-1] == tokenizer.eos_token_id
    assert len(gen.logprobs) == len(gen.output_ids) and gen.logprobs[-1] < 0  # its real logprob, from the triples


async def test_unreachable_server_fails_fast():
    backend = sglang(f"http://127.0.0.1:{free_port()}", unreachable_s=0.3, health_timeout_s=60)
    with pytest.raises(BackendError, match="cannot reach SGLang at http://127.0.0.1"):
        await asyncio.wait_for(backend.start(), timeout=10)
    await backend.close()


async def test_start_waits_for_health(tokenizer, local_model_dir):
    async with FakeSGLang(tokenizer, local_model_dir) as fake:
        fake.unhealthy_polls = 3
        async with sglang(fake.url):
            assert fake.health_polls == 4
        fake.health_polls, fake.unhealthy_polls = 0, 10**6
        with pytest.raises(BackendError, match="not healthy after 0.2 s"):
            async with sglang(fake.url, health_timeout_s=0.2):
                pass


async def test_each_session_sticks_to_one_server(tokenizer, local_model_dir, tmp_path):
    async with FakeSGLang(tokenizer, local_model_dir) as one, FakeSGLang(tokenizer, local_model_dir) as two:
        async with sglang(one.url, two.url) as backend:
            assert (backend.capacity, backend.max_concurrency) == (16, 32)
            _, records = await play(backend, tokenizer, tmp_path / "games.jsonl", num_games=3)
    servers = (one, two)
    for record in records:
        for s, seat in enumerate(record["players"]):
            home = servers[zlib.crc32(f"{record['game_id']}/{s}".encode()) % 2]
            for turn in seat["turns"]:
                assert seat["token_ids"][: turn["prompt_len"]] in home.prompts
    assert one.prompts and two.prompts


async def play_command(fake: FakeSGLang, fail_next: list[int], *args: str):
    """`selfplay-gen --backend sglang` against `fake` as a user runs it (in a thread: the fake serves
    on this loop), with the first requests answered by the statuses of `fail_next`."""
    fake.fail_next = fail_next
    return await asyncio.to_thread(
        CliRunner().invoke, main, ["--backend", "sglang", "--base-url", fake.url, "-n", "2", "-k", "2", *args, "-q"]
    )


async def test_play_command_against_the_server(tokenizer, local_model_dir, tmp_path):
    """The model and limits come from the server, a 500 is retried, and the summary reports it."""
    out = tmp_path / "games.jsonl"
    async with FakeSGLang(tokenizer, local_model_dir) as fake:
        result = await play_command(
            fake, [500], "--max-moves", "2", "--max-new-tokens", "16", "--temperature", "0", "--out", str(out)
        )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "games.summary.json").read_text())
    assert summary["games"] == 2 and summary["output_tokens"] > 0
    (stats,) = summary["backends"].values()
    assert stats["retries"] == 1 and stats["errors"] == {"http_500": 1}
    for record in read_games(out):
        assert record["settings"]["seat0"]["model"] == local_model_dir
        assert all(seat["kind"] == "llm" and seat["turns"] for seat in record["players"][:1])


async def test_a_scripted_partner_is_no_seat_of_the_served_model(tokenizer, local_model_dir, tmp_path):
    """Against a scripted partner the record names no model for its seat, so a league's convert with
    `--seats-of MODEL` trains only the seat the model played."""
    out = tmp_path / "games.jsonl"
    async with FakeSGLang(tokenizer, local_model_dir) as fake:
        result = await play_command(
            fake, [], "--game", "negotiation", "--model", local_model_dir, "--partner-backend", "scripted",
            "--max-moves", "2", "--max-new-tokens", "16", "--out", str(out),
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    for record in read_games(out):
        assert record["settings"]["seat0"]["model"] == local_model_dir
        assert record["settings"]["seat1"]["model"] is None and record["players"][1]["kind"] == "scripted"
    args = [str(out), "--out-dir", str(tmp_path / "grpo"), "--val-fraction", "0", "--keep-constant-groups"]
    converted = CliRunner().invoke(convert_main, [*args, "--seats-of", local_model_dir])
    assert converted.exit_code == 0, converted.output
    players = pd.read_parquet(tmp_path / "grpo" / "train.parquet")["extra_info"].map(lambda e: e["player"])
    assert set(players) == {0}


async def test_play_command_says_on_stderr_when_games_failed(tokenizer, local_model_dir, tmp_path):
    async with FakeSGLang(tokenizer, local_model_dir) as fake:  # every attempt of every request fails
        result = await play_command(
            fake, [500] * 1000, "--max-new-tokens", "8", "--max-retries", "1", "--out", str(tmp_path / "games.jsonl")
        )
    assert "2 of 2 games failed (backend_error: 2)" in result.stderr, result.output
    assert '"failures": {\n    "backend_error": 2\n  }' in result.stdout


async def test_play_command_stops_when_every_server_is_gone(tokenizer, local_model_dir, tmp_path):
    """The server dies after a few answers: the run stops early (no game waits out its retries),
    says why, exits 1, and --resume would play the rest: no game is in the file twice."""
    out = tmp_path / "games.jsonl"
    async with FakeSGLang(tokenizer, local_model_dir, max_running_requests=2) as fake:
        fake.die_after = 3
        result = await play_command(fake, [], "-n", "64", "--max-new-tokens", "8", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "stopped early: sglang " in result.stderr and "every server refused" in result.stderr
    summary = json.loads((tmp_path / "games.summary.json").read_text())
    assert "they are gone" in summary["stopped"] and summary["games"] < 64
    ids = [r["game_id"] for r in read_games(out)]
    assert len(ids) == len(set(ids)) == summary["games"]
