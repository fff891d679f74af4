"""The openai backend against a small in-test OpenAI-compatible server (canned answers, no model)."""

import asyncio
import math

import pytest
from aiohttp import web
from click.testing import CliRunner
from fake_sglang import serving

from selfplay_gen.backends.base import BackendError, BackendOptions, SamplingParams, backend_class
from selfplay_gen.cli import main
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games

KEY = "sk-test-0123456789"
MOVE = "[message] Ava Li fits BLEU."


@pytest.fixture
async def server():
    """Serves /v1/models, /v1/completions and /v1/chat/completions; 401 without the right key."""
    seen = []

    def guarded(answer):
        async def handle(request):
            if request.headers.get("Authorization") != f"Bearer {KEY}":
                return web.json_response({"error": "invalid api key"}, status=401)
            seen.append(await request.json() if request.method == "POST" else {})
            return web.json_response(answer(seen[-1]))

        return handle

    def completion(body):
        assert all(isinstance(i, int) for i in body["prompt"])
        return {
            "choices": [{"text": MOVE, "finish_reason": "stop", "logprobs": {"token_logprobs": None}}],
            "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 9},
        }

    def chat(body):
        assert body["messages"][0]["role"] == "system" and body["messages"][-1]["role"] == "user"
        return {
            "choices": [
                {
                    "message": {"role": "assistant", "content": MOVE},
                    "finish_reason": "stop",
                    "logprobs": {"content": [{"token": "x", "logprob": -0.5}] * 99},
                }
            ],
            "usage": {"prompt_tokens": 321, "prompt_tokens_details": {"cached_tokens": 300}},
        }

    app = web.Application()
    app.add_routes(
        [
            web.get("/v1/models", guarded(lambda _: {"data": [{"id": "served-model", "object": "model"}]})),
            web.post("/v1/completions", guarded(completion)),
            web.post("/v1/chat/completions", guarded(chat)),
        ]
    )
    async with serving(app) as url:
        yield url, seen


def openai(url, endpoint, tokenizer):
    options = BackendOptions(
        base_urls=(url,), endpoint=endpoint, api_key_env="TEST_OPENAI_KEY", max_retries=1, retry_backoff_s=0.01
    )
    return backend_class("openai")(options, tokenizer)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_games_through_openai_endpoints(server, tokenizer, tmp_path, monkeypatch, endpoint):
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    url, seen = server
    params = SamplingParams(0.7, 1.0, 48, (tokenizer.eos_token_id,))
    async with openai(url, endpoint, tokenizer) as backend:
        assert backend.model == "served-model"

        def seat(spec, s, game, start):
            return LLMPlayer(s, start.system[s], backend, tokenizer, params, session=f"{spec.game_id}/{s}")

        with GameWriter(tmp_path / "games.jsonl") as writer:
            await run_games(
                plan_games([Instance.from_seed(1)], 1, 1),
                (seat, seat),
                GameConfig(limits=Limits(max_moves=4)),
                writer,
                concurrency=1,
                settings={"backend": "openai"},
                progress=False,
            )
    assert len(seen) == 1 + 4 and all(body["model"] == "served-model" for body in seen[1:])
    text = (tmp_path / "games.jsonl").read_text()
    assert KEY not in text
    [record] = read_games(tmp_path / "games.jsonl")
    assert record["outcome"]["termination"] == "max_moves"
    expected_ids = tokenizer.encode(MOVE, add_special_tokens=False) + [tokenizer.eos_token_id]
    for seat in record["players"]:
        for turn in seat["turns"]:
            assert turn["output_ids"] == expected_ids and turn["retokenized"] and turn["finish_reason"] == "stop"
            assert seat["token_ids"][turn["prompt_len"] : turn["prompt_len"] + len(expected_ids)] == expected_ids
            assert turn["logprobs"] is None  # none sent (completions) or not one per token (chat): dropped
            assert turn["cached_tokens"] == (300 if endpoint == "chat" else 0)


async def test_a_model_whose_eos_is_not_its_end_of_turn_token_plays(server, eos_apart, eos_apart_dir, tmp_path):
    """Most instruct models ship eos <|endoftext|> and close turns with <|im_end|>: `selfplay-gen`
    asks the server to stop on <|im_end|> and closes each turn with it, as the template does (run
    in a thread: the server answers on this loop)."""
    url, seen = server
    out = tmp_path / "games.jsonl"
    args = ["--backend", "openai", "--openai-endpoint", "completions", "--api-key-env", "TEST_OPENAI_KEY"]
    args += ["--base-url", url, "--tokenizer", str(eos_apart_dir), "-n", "1", "--max-moves", "4", "-q"]
    result = await asyncio.to_thread(CliRunner(env={"TEST_OPENAI_KEY": KEY}).invoke, main, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    [record] = read_games(out)
    assert record["failure"] is None and record["outcome"]["termination"] == "max_moves"
    im_end = eos_apart.convert_tokens_to_ids("<|im_end|>")
    assert [body["stop_token_ids"] for body in seen[1:]] == [[im_end]] * 4
    for seat in record["players"]:
        assert [turn["output_ids"][-1] for turn in seat["turns"]] == [im_end] * 2
        # the whole context is the chat template of the conversation (without the last separator)
        context = eos_apart.decode(seat["token_ids"])
        assert context == eos_apart.apply_chat_template(seat["messages"], tokenize=False)[:-1]


async def test_logprobs_kept_when_they_match_the_tokens(server, tokenizer, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    backend = openai(server[0], "chat", tokenizer)
    n = len(tokenizer.encode(MOVE, add_special_tokens=False))
    body = {
        "choices": [
            {"message": {"content": MOVE}, "finish_reason": "stop", "logprobs": {"content": [{"logprob": -0.25}] * n}}
        ],
        "usage": {"prompt_tokens": 10},
    }
    gen = backend._parse(body, SamplingParams(stop_token_ids=(tokenizer.eos_token_id,)), "test")
    assert gen.logprobs == [-0.25] * n + [0.0] and len(gen.output_ids) == n + 1
    assert all(math.isfinite(lp) for lp in gen.logprobs)
    with pytest.raises(BackendError, match="missing field 'usage.prompt_tokens'"):
        backend._parse({"choices": body["choices"]}, SamplingParams(), "test")


async def test_wrong_key_fails_without_revealing_it(server, tokenizer, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY + "-wrong")
    with pytest.raises(BackendError, match="HTTP 401") as failure:
        async with openai(server[0], "completions", tokenizer):
            pass
    assert KEY not in str(failure.value)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_play_command_with_a_served_model_name(server, local_model_dir, tmp_path, monkeypatch, endpoint):
    """`--model` names the served model; the tokenizer comes from `--tokenizer`."""
    import asyncio

    from click.testing import CliRunner

    from selfplay_gen.cli import main

    url, seen = server
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    out = tmp_path / "games.jsonl"
    result = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        [
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            "served-model",
            "--tokenizer",
            local_model_dir,
            "--openai-endpoint",
            endpoint,
            "--api-key-env",
            "TEST_OPENAI_KEY",
            "-n",
            "1",
            "--max-moves",
            "2",
            "--out",
            str(out),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    (record,) = read_games(out)
    assert record["settings"]["seat0"]["model"] == "served-model"
    assert record["outcome"]["termination"] == "max_moves"  # two valid [message] moves
    assert all(turn["retokenized"] for seat in record["players"] for turn in seat["turns"])
    assert len(seen) >= 2 and KEY not in out.read_text()


@pytest.fixture
async def echoing_server():
    """A server that quotes the request's headers in its 400 answers, and sends an undecodable gzip body."""

    async def echo(request):
        return web.Response(status=400, text=f"bad request; headers were {dict(request.headers)}")

    async def broken_gzip(request):
        return web.Response(body=b"not gzip at all", headers={"Content-Encoding": "gzip"})

    app = web.Application()

    async def models(request):
        return web.json_response({"data": [{"id": "served-model"}]})

    async def echo_in_a_field(request):  # the chat reply's content is not text: the headers it was sent
        reply = {"message": {"content": [request.headers["Authorization"]]}, "finish_reason": "stop"}
        return web.json_response({"choices": [reply]})

    app.add_routes(
        [
            web.get("/v1/models", models),
            web.post("/echo", echo),
            web.get("/gzip", broken_gzip),
            web.post("/v1/chat/completions", echo_in_a_field),
        ]
    )
    async with serving(app) as url:
        yield url


async def test_errors_never_carry_the_api_key(echoing_server, tokenizer, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    backend = openai(echoing_server, "completions", tokenizer)
    await backend.start()
    try:
        with pytest.raises(BackendError) as echoed:
            await backend.request("POST", f"{echoing_server}/echo", {"prompt": [1]})
        assert "HTTP 400" in str(echoed.value) and KEY not in str(echoed.value) and "[redacted]" in str(echoed.value)
        # an undecodable body: not retried, not an internal error
        with pytest.raises(BackendError, match="ClientPayloadError") as undecodable:
            await backend.request("GET", f"{echoing_server}/gzip")
        assert backend.stats.retries == 0 and KEY not in str(undecodable.value)
    finally:
        await backend.close()


async def test_a_malformed_field_quoting_the_key_is_redacted(echoing_server, tokenizer, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    async with openai(echoing_server, "chat", tokenizer) as backend:
        with pytest.raises(BackendError, match="field 'message.content' is list") as malformed:
            await backend.generate([1, 2], SamplingParams(), session="s", messages=[{"role": "user", "content": "hi"}])
    assert KEY not in str(malformed.value) and "[redacted]" in str(malformed.value)
