"""Where the client's time goes: the runner, players and games against an SGLang stand-in that
answers every `/generate` at once, so all time measured is the client's own.

A server runs a batch only as full as the requests it has; a client that spends C seconds of CPU per
turn can send at most 1 / C turns per second from its one event loop. This benchmark measures C
(process CPU time per turn, and wall time per turn at a given concurrency) and, with `--profile`,
the functions it goes to. The stand-in (its own process) replies to each turn with the same
`[message]` of `--reply-tokens` tokens, so games run to `--max-moves` and contexts grow as in long
games. It also notes when its first `/generate` arrives: until then a real server would sit idle while
the client sets games up.

  python bench/client_overhead.py --num-games 256 --concurrency 256 --max-moves 8 --profile [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import multiprocessing
import pstats
import socket
import tempfile
import time
from pathlib import Path

import click
from aiohttp import web
from benchmark import out_option, quick_option, write

from selfplay_gen import models
from selfplay_gen.backends.base import BackendOptions, SamplingParams, backend_class
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter
from selfplay_gen.runner import instances_needed, plan_games, run_games
from selfplay_gen.token_context import token_context


def _serve(port: int, reply_ids: list[int], ready, first_request) -> None:
    """An SGLang stand-in: every `/generate` gets `reply_ids` at once, in SGLang's response shape;
    `first_request` (a shared double) gets the wall-clock time of the first."""

    async def generate(request: web.Request) -> web.Response:
        first_request.value = first_request.value or time.time()
        body = await request.json()
        n = len(body["input_ids"])
        return web.json_response(
            {
                "output_ids": reply_ids,
                "meta_info": {
                    "output_token_logprobs": [[-0.5, i, None] for i in reply_ids],
                    "finish_reason": {"type": "stop", "matched": reply_ids[-1]},
                    "prompt_tokens": n,
                    "cached_tokens": max(0, n - 40),
                },
            }
        )

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="")

    async def model_info(_request: web.Request) -> web.Response:
        return web.json_response({"model_path": "instant-stand-in"})

    async def server_info(_request: web.Request) -> web.Response:
        return web.json_response({"max_running_requests": 4096, "context_length": 8192})

    app = web.Application(client_max_size=64 * 2**20)
    app.add_routes(
        [
            web.post("/generate", generate),
            web.get("/health", health),
            web.get("/get_model_info", model_info),
            web.get("/get_server_info", server_info),
        ]
    )
    ready.set()
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def run(args, url: str, tokenizer, first_request) -> dict:
    options = BackendOptions(base_urls=(url,))
    stop = (token_context(tokenizer).end_of_turn_id,)
    params = SamplingParams(0.7, 0.95, 256, stop)
    instances = [Instance.from_seed(i) for i in range(instances_needed(args.num_games, 4))]
    specs = plan_games(instances, 4, args.num_games)
    async with backend_class("sglang")(options, tokenizer) as backend:

        def seat(spec, s, game, start):
            return LLMPlayer(s, start.system[s], backend, tokenizer, params, session=f"{spec.game_id}/{s}")

        with tempfile.TemporaryDirectory() as tmp, GameWriter(Path(tmp) / "games.jsonl") as writer:
            config = GameConfig("matching", Limits(max_moves=args.max_moves))
            cpu, wall, started = time.process_time(), time.perf_counter(), time.time()
            await run_games(specs, (seat, seat), config, writer, args.concurrency, {}, progress=False)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    turns = backend.stats.requests  # one request a turn
    return {
        "games": args.num_games,
        "turns": turns,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "turns_per_s": turns / wall,
        "cpu_ms_per_turn": 1000 * cpu / turns,
        "first_request_s": round(first_request.value - started, 3),
    }


QUICK = {"num_games": 16, "concurrency": 16, "max_moves": 4}


@click.command(help=__doc__)
@click.option("--num-games", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--max-moves", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--reply-tokens", type=click.IntRange(min=2), default=60, show_default=True)
@click.option("--profile", is_flag=True, help="Add the 25 functions with the most cumulative time.")
@out_option
@quick_option
def cli(**options) -> None:
    args = argparse.Namespace(**{**options, **(QUICK if options["quick"] else {})})
    tokenizer = models.load_tokenizer(None)
    words = " ".join(["Ava Li: GLUE 421"] * args.reply_tokens)
    body = tokenizer.encode("[message] " + words, add_special_tokens=False)[: args.reply_tokens - 1]
    reply = [*body, token_context(tokenizer).end_of_turn_id]
    port = free_port()
    ready, first_request = multiprocessing.Event(), multiprocessing.Value("d", 0.0)
    server = multiprocessing.Process(target=_serve, args=(port, reply, ready, first_request), daemon=True)
    server.start()
    ready.wait(30)
    try:
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        result = asyncio.run(run(args, f"http://127.0.0.1:{port}", tokenizer, first_request))
        if profiler:
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
            result["profile"] = text.getvalue()
    finally:
        server.terminate()
    table = "\n".join(
        [
            "| games | turns | wall s | CPU s | turns/s | CPU ms per turn | first request after s |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {result['games']} | {result['turns']} | {result['wall_s']:.1f} | {result['cpu_s']:.2f} "
            f"| {result['turns_per_s']:.1f} | {result['cpu_ms_per_turn']:.2f} | {result['first_request_s']:.2f} |",
        ]
    )
    click.echo(table)
    if "profile" in result:
        click.echo(result["profile"])
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "quick", "profile")}
    write("client_overhead", args.out, "Client time per turn (instant SGLang stand-in)", settings, result, table)


if __name__ == "__main__":
    cli()
