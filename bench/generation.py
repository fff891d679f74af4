"""Generation speed, side by side against one server in one run:

  (a) one game at a time, one request at a time (a plain loop over games; with `--sequential-games N`
      N games spread over the set, whose games/s stand for the whole set's: a 1.5B model's games last
      minutes one at a time), after `--warmup-games` untimed games (a fresh server compiles kernels
      for the shapes its first requests bring),
  (b) the concurrent runner with `--concurrency` games in flight,
  (c) for sglang, a saturation reference: the server's output tokens/s on a flood of independent
      `/generate` requests with the prompts and output lengths of (b)'s own turns (`ignore_eos`, with
      logprobs as the runner asks for them), as many in flight as (b) keeps: where (b)'s turns wait on
      each other, the flood's always fill the server's batch and its queue (and tens of thousands of
      connections at once would exhaust the client's ports before the server), from an emptied prefix
      cache as (b) starts from one (each reports its cache hit rate); and the server's own
      single-request speed: (a)'s turns replayed one at a time right after (a), both from an emptied
      prefix cache. A server that dies in these references (e.g. out of memory) is reported as its
      error beside (a) and (b), and games that fail are counted by their error.

Each phase also records how busy the GPUs were meanwhile (`gpu_percent`: nvidia-smi's utilization, the mean over
CUDA_VISIBLE_DEVICES' GPUs where set; none without nvidia-smi): a server's games/s do not say whether its GPU was
kept busy.

Prints a table and writes OUT/generation.json and OUT/generation.md. Example:
  python bench/generation.py --backend sglang --base-url http://127.0.0.1:30000 --num-games 256
  python bench/generation.py --quick     # the embedded model on CPU: 2 games, 2 moves, 16 tokens a turn
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import aiohttp
import click
from benchmark import out_option, quick_option, write

from selfplay_gen import models
from selfplay_gen.backends.base import BackendError, BackendOptions, SamplingParams, backend_class
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.move_formats import MOVE_FORMATS, PLAIN
from selfplay_gen.iterate.gpu_usage import GpuUsage
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import instances_needed, plan_games, run_games
from selfplay_gen.token_context import token_context


async def play(backend, tokenizer, specs, config, params, concurrency: int, workdir: Path, name: str) -> dict:
    def seat(spec, s, game, start):
        return LLMPlayer(s, start.system[s], backend, tokenizer, params, session=f"{name}/{spec.game_id}/{s}")

    path = workdir / f"{name}.jsonl"
    started_at, started = now(), time.perf_counter()
    with GameWriter(path) as writer, GpuUsage() as usage:
        await run_games(specs, (seat, seat), config, writer, concurrency, {"backend": backend.name}, progress=False)
    wall = time.perf_counter() - started
    records = list(read_games(path))
    turns = [t for r in records for p in r["players"] for t in p.get("turns", [])]
    output = sum(len(t["output_ids"]) for t in turns)
    prompt = sum(t["prompt_len"] for t in turns)
    return {
        "started_at": started_at,
        "concurrency": concurrency,
        "games": len(records),
        "turns": len(turns),
        "turns_per_game": len(turns) / len(records) if records else 0.0,
        "wall_s": round(wall, 3),
        "gpu_percent": usage.mean_percent(),  # the GPUs' mean utilization meanwhile (None without nvidia-smi)
        "games_per_s": len(records) / wall,
        "output_tokens": output,
        "output_tokens_per_s": output / wall,
        "cache_hit_rate": sum(t["cached_tokens"] for t in turns) / prompt if prompt else 0.0,
        "terminations": dict(Counter(r["outcome"]["termination"] for r in records)),
        # what ended the games that failed (a backend's error after its retries), by reason and detail
        "failures": dict(Counter(failure(r) for r in records if r.get("failure"))),
        "_turn_shapes": [
            (p["token_ids"][: t["prompt_len"]], len(t["output_ids"]))
            for r in records
            for p in r["players"]
            for t in p.get("turns", [])
        ],
    }


async def saturation(backend, shapes, params, in_flight: int) -> dict:
    """Independent `/generate` requests, each forced to its recorded output length, `in_flight` at a
    time: the runner's number (the flood), or 1 (the server's own single-request speed)."""
    gate = asyncio.Semaphore(max(1, in_flight))

    async def one(prompt_ids, length):
        async with gate:
            body = await send(prompt_ids, length)
        meta = body.get("meta_info", {})
        # the tokens the server says it produced (`ignore_eos` makes them the recorded length), and the
        # prompt tokens its prefix cache held
        return meta.get("completion_tokens", max(1, length)), meta.get("cached_tokens", 0)

    async def send(prompt_ids, length):
        return await backend.request(
            "POST",
            f"{backend.server_for(str(len(prompt_ids)))}/generate",
            {
                "input_ids": prompt_ids,
                "return_logprob": True,  # as the runner's turns ask
                "sampling_params": {
                    "temperature": params.temperature,
                    "top_p": params.top_p,
                    "max_new_tokens": max(1, length),
                    "ignore_eos": True,
                },
            },
        )

    started_at, started = now(), time.perf_counter()
    with GpuUsage() as usage:
        answers = await asyncio.gather(*(one(p, n) for p, n in shapes))
    wall = time.perf_counter() - started
    output = sum(produced for produced, _ in answers)
    prompt = sum(len(p) for p, _ in shapes)
    return {
        "started_at": started_at,
        "requests": len(shapes),
        "in_flight": in_flight,
        "wall_s": round(wall, 3),
        "gpu_percent": usage.mean_percent(),
        "output_tokens": output,
        "output_tokens_per_s": output / wall,
        "cache_hit_rate": sum(cached for _, cached in answers) / prompt if prompt else 0.0,
    }


async def flush_cache(base_urls: list[str]) -> bool:
    """Empty each server's prefix cache (SGLang's /flush_cache), so that the one-at-a-time games and their
    replay start from the same cache; False where a server did not flush (it refuses while busy)."""
    flushed = True
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            for url in base_urls:
                async with session.post(f"{url.rstrip('/')}/flush_cache") as response:
                    flushed &= response.status == 200
    except (aiohttp.ClientError, asyncio.TimeoutError) as err:
        raise BackendError(f"POST /flush_cache failed: {type(err).__name__}: {err}") from None
    return flushed


def failure(record: dict) -> str:
    """A failed game's reason and the start of its detail, as the results count them."""
    return f"{record['failure']['reason']}: {record['failure'].get('detail', '')}"[:300]


def now() -> str:
    """Local wall-clock time as SGLang's log lines stamp theirs, so that a phase maps onto the server's
    log (bench/analysis/server_timeline.py)."""
    return datetime.now().isoformat(sep=" ", timespec="milliseconds")


async def main(args) -> dict:
    tokenizer = models.load_tokenizer(args.model if args.backend == "local" else args.tokenizer)
    options = BackendOptions(
        base_urls=tuple(args.base_url), model=args.model, max_batch=args.concurrency or 16, seed=args.seed
    )
    stop = (token_context(tokenizer).end_of_turn_id,)
    params = SamplingParams(args.temperature, args.top_p, args.max_new_tokens, stop)
    # a model trained in SPIRAL's boxed moves plays them here too (the games and turns it plays in a run)
    config = GameConfig("matching", Limits(max_moves=args.max_moves), {"move_format": args.move_format})
    instances = [
        Instance.from_seed(args.seed + i) for i in range(instances_needed(args.num_games, args.games_per_instance))
    ]
    specs = plan_games(instances, args.games_per_instance, args.num_games)
    references = args.backend == "sglang" and args.flood
    async with backend_class(args.backend)(options, tokenizer) as backend:
        in_flight = args.concurrency or backend.max_concurrency
        with tempfile.TemporaryDirectory() as tmp:
            # a sample spread over the instances, since game lengths differ from instance to instance
            step = max(1, len(specs) // args.sequential_games) if args.sequential_games else 1
            one_by_one = specs[::step][: args.sequential_games or None]
            if args.warmup_games:  # untimed: a fresh server compiles kernels for new shapes on first use
                await play(
                    backend, tokenizer, specs[: args.warmup_games], config, params, in_flight, Path(tmp), "warmup"
                )
            flushed = await flush_cache(args.base_url) if references else None
            sequential = await play(backend, tokenizer, one_by_one, config, params, 1, Path(tmp), "sequential")
            sequential["cache_flushed"] = flushed
            single_shapes = sequential.pop("_turn_shapes")
            single = failed = None
            if references:  # the same turns one request at a time: next in time, from the same empty cache
                try:  # a server gone by now costs the references, not the runner's figures
                    flushed = await flush_cache(args.base_url)
                    single = await saturation(backend, single_shapes, params, in_flight=1) | {"cache_flushed": flushed}
                except BackendError as err:
                    failed = str(err)
            # the runner and the flood each start from an emptied prefix cache: after the runner, the cache
            # holds its contexts, which are the flood's prompts, and would lend the flood hits the runner
            # never had (as much of the workload as the cache can keep)
            flushed = await flush_cache(args.base_url) if references and failed is None else None
            concurrent = await play(backend, tokenizer, specs, config, params, in_flight, Path(tmp), "concurrent")
            concurrent["cache_flushed"] = flushed
        shapes = concurrent.pop("_turn_shapes")
        flood = None
        if references and failed is None:
            try:
                flushed = await flush_cache(args.base_url)
                flood = await saturation(backend, shapes, params, in_flight) | {"cache_flushed": flushed}
            except BackendError as err:
                failed = str(err)
        if failed is not None:
            flood = {"requests": len(shapes), "in_flight": in_flight, "error": failed}
    return {
        "backend": args.backend,
        "model": backend.model,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "quick")},
        "sequential": sequential,
        "concurrent": concurrent,
        "saturation": flood,
        "single_request": single,
        "sequential_vs_single_request": (
            sequential["output_tokens_per_s"] / single["output_tokens_per_s"] if single else None
        ),
        "speedup_games_per_s": concurrent["games_per_s"] / sequential["games_per_s"],
        "speedup_output_tokens_per_s": concurrent["output_tokens_per_s"] / sequential["output_tokens_per_s"],
        "fraction_of_saturation": (
            concurrent["output_tokens_per_s"] / flood["output_tokens_per_s"] if flood and "error" not in flood else None
        ),
    }


def _percent(phase: dict) -> str:
    """A phase's GPU utilization for the table: nvidia-smi's mean, or - where there is no reading (no GPU)."""
    busy = phase.get("gpu_percent")
    return "-" if busy is None else f"{busy:.0f}"


def table(result: dict) -> str:
    rows = [
        ("one game at a time", result["sequential"]),
        (f"runner, {result['concurrent']['concurrency']} in flight", result["concurrent"]),
    ]
    lines = [
        "| mode | games | turns/game | wall s | games/s | output tok/s | cache hit | GPU busy % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {r['games']} | {r['turns_per_game']:.2f} | {r['wall_s']:.1f} | {r['games_per_s']:.3f} "
        f"| {r['output_tokens_per_s']:.1f} | {r['cache_hit_rate']:.2f} | {_percent(r)} |"
        for name, r in rows
    ]
    s = result["saturation"]
    flood = f"saturation flood ({s['requests']} requests, {s['in_flight']} in flight)" if s else ""
    if s and "error" in s:
        lines.append(f"| {flood} | failed: {s['error']} | | | | | | |")
    elif s:
        lines.append(
            f"| {flood} | - | - | {s['wall_s']:.1f} | - | {s['output_tokens_per_s']:.1f} | {s['cache_hit_rate']:.2f} "
            f"| {_percent(s)} |"
        )
    lines.append("")
    lines.append(
        f"runner / one-at-a-time: {result['speedup_games_per_s']:.2f}x games/s, "
        f"{result['speedup_output_tokens_per_s']:.2f}x output tokens/s"
    )
    if result.get("sequential_vs_single_request") is not None:
        lines.append(
            f"one game at a time = {result['sequential_vs_single_request']:.2f} of the server's single-request "
            f"speed ({result['single_request']['output_tokens_per_s']:.1f} output tok/s, the same turns one by one)"
        )
    if result["fraction_of_saturation"] is not None:
        lines.append(f"runner output tokens/s = {result['fraction_of_saturation']:.2f} of the saturation flood")
    return "\n".join(lines)


QUICK = {
    "num_games": 2,
    "games_per_instance": 2,
    "concurrency": 2,
    "max_new_tokens": 16,
    "max_moves": 2,
    "warmup_games": 0,
}


@click.command(help=__doc__)
@click.option("--backend", type=click.Choice(["sglang", "local"]), default="local", show_default=True)
@click.option("--base-url", multiple=True, help="SGLang server (repeat for several).")
@click.option("--model", default=None, help="local: model directory [default: the embedded model].")
@click.option("--tokenizer", default=None, help="sglang: local tokenizer directory [default: the embedded model's].")
@click.option("--num-games", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--games-per-instance", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--concurrency",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Games in flight (0: the backend's default, as selfplay-gen).",
)
@click.option(
    "--sequential-games",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Play N of the games one at a time, spread over the set (0: all).",
)
@click.option(
    "--warmup-games",
    type=click.IntRange(min=0),
    default=8,
    show_default=True,
    help="Games played at once, untimed, before (a): a fresh server's first requests also compile kernels.",
)
@click.option(
    "--flood/--no-flood",
    default=True,
    show_default=True,
    help="sglang: also the saturation flood and the single-request replay (--no-flood: the runner's figures only).",
)
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--max-moves", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--move-format", type=click.Choice(MOVE_FORMATS), default=PLAIN, show_default=True,
    help="How a seat gives its move: plain, or boxed (reasoning, then the move in \\boxed{}, SPIRAL's format).",
)  # fmt: skip
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--top-p", type=float, default=0.95, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@out_option
@quick_option
def cli(**options) -> None:
    args = _namespace(options)
    result = asyncio.run(main(args))
    text = table(result)
    click.echo(text)
    title = f"Generation benchmark ({args.backend}, {result['model']})"
    write("generation", args.out, title, result.pop("settings"), result, text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options of `argv` as `main` takes them."""
    return _namespace(cli.make_context("generation", list(argv or [])).params)


def _namespace(options: dict) -> argparse.Namespace:
    """The command's options, with --quick's settings over them."""
    args = argparse.Namespace(**{**options, **(QUICK if options["quick"] else {})})
    args.base_url = list(args.base_url)
    return args


if __name__ == "__main__":
    cli()
