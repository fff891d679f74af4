"""The CPU engines side by side on the embedded model, the same games (seeds) for each:

  generate     transformers' plain `model.generate`, one call per turn, one game at a time
  local        the `local` backend (transformers, batching the turns in flight), one game at a time
  llamacpp     the `llamacpp` backend (llama.cpp), one game at a time
  llamacpp xN  the `llamacpp` backend with N games in flight (its default: --max-batch)

Every engine plays the warm-started embedded model: transformers in float32, llama.cpp the GGUF
`gguf_export` writes from the same weights, at the precision `--gguf-weights auto` picks (bf16 where
llama.cpp computes in it, float32 elsewhere). Per engine: games, turns, ids sampled and read (prompt ids not in
the cache), wall time, sampled tokens/s, games/s, and how many seats' contexts passed the token
invariant check. The typical game (ids read and sampled per game) is what the llamacpp backend's
estimate before a run assumes. Writes JSON and a markdown table:

  python bench/cpu_engines.py                      # bench/results/cpu_engines/cpu_engines.{json,md}
  python bench/cpu_engines.py --games 2 --batched-games 16 --engines llamacpp,llamacpp-batched
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmark import RESULTS, write

from selfplay_gen import cli, models  # noqa: F401  (cli: OpenMP threads wait passively, set before torch loads)
from selfplay_gen.backends.base import Backend, BackendOptions, BackendStats, Generation, SamplingParams, backend_class
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import instances_needed, plan_games, run_games
from selfplay_gen.token_context import token_context

ENGINES = ("generate", "local", "llamacpp", "llamacpp-batched")


class PlainGenerate(Backend):
    """transformers' `generate` on one sequence per call: the baseline every CPU engine is held to."""

    name = "generate"

    def __init__(self, options: BackendOptions, tokenizer):
        self.options, self.tokenizer, self.stats = options, tokenizer, BackendStats()
        self.model = models.resolve(options.model)

    async def start(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(len(os.sched_getaffinity(0)))
        self._model = AutoModelForCausalLM.from_pretrained(self.model, dtype=torch.float32).eval()
        self.context_length = self._model.config.max_position_embeddings

    async def generate(self, prompt_ids, params: SamplingParams, *, session: str, messages=None) -> Generation:
        gen = await asyncio.to_thread(self._generate, prompt_ids, params)
        self.stats.add(gen)
        return gen

    def _generate(self, prompt_ids, params: SamplingParams) -> Generation:
        import torch

        with torch.inference_mode():
            out = self._model.generate(
                input_ids=torch.tensor([prompt_ids]),
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                max_new_tokens=params.max_new_tokens,
                eos_token_id=list(params.stop_token_ids),
                pad_token_id=params.stop_token_ids[0],
                do_sample=params.temperature > 0,
                temperature=params.temperature or None,
                top_p=params.top_p,
                top_k=None,
                return_dict_in_generate=True,
                output_scores=True,
            )
            logprobs = self._model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        ids = out.sequences[0, len(prompt_ids) :].tolist()
        finish = "stop" if ids and ids[-1] in params.stop_token_ids else "length"
        return Generation(ids, logprobs[0].tolist(), finish, len(prompt_ids))


async def play(engine: str, args, specs, tokenizer, workdir: Path) -> dict:
    batched = engine == "llamacpp-batched"
    concurrency = args.batched_games if batched else 1
    options = BackendOptions(model=models.resolve(None), max_batch=concurrency, seed=args.seed)
    backend = (
        PlainGenerate(options, tokenizer)
        if engine == "generate"
        else backend_class(engine.split("-")[0])(options, tokenizer)
    )
    params = SamplingParams(
        args.temperature, args.top_p, args.max_new_tokens, (token_context(tokenizer).end_of_turn_id,)
    )
    specs = specs[: len(specs) if batched else args.games]

    def seat(spec, s, game, start):
        return LLMPlayer(s, start.system[s], backend, tokenizer, params, session=f"{spec.game_id}/{s}")

    path = workdir / f"{engine}.jsonl"
    async with backend:
        started, cpu_started = time.perf_counter(), time.process_time()
        with GameWriter(path) as writer:
            config = GameConfig("matching", Limits(max_moves=args.max_moves))
            await run_games(specs, (seat, seat), config, writer, concurrency, {"engine": engine}, progress=True)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        # ids sampled per llama_decode: the batch the games in flight kept the engine at
        llama = getattr(backend, "engine", None)
        batch = round(llama.sampled / llama.steps, 1) if llama is not None and llama.steps else None
    records = list(read_games(path))
    seats = [p for r in records for p in r["players"]]
    turns = [t for p in seats for t in p.get("turns", [])]
    output = sum(len(t["output_ids"]) for t in turns)
    read = backend.stats.prompt_tokens - backend.stats.cached_tokens
    return {
        "engine": engine,
        "games_in_flight": concurrency,
        "games": len(records),
        "turns": len(turns),
        "output_tokens": output,
        "prompt_tokens_read": read,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "output_tokens_per_s": round(output / wall, 2),
        "output_tokens_per_cpu_s": round(output / cpu, 2),
        "sampled_per_step": batch,
        "games_per_s": round(len(records) / wall, 4),
        "seats_token_exact": f"{sum(bool(p.get('invariant_ok')) for p in seats)}/{len(seats)}",
        "terminations": _count(r["outcome"]["termination"] for r in records),
    }


def _count(items) -> dict:
    counts: dict = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


async def main(args) -> dict:
    tokenizer = models.load_tokenizer()
    n = max(args.games, args.batched_games)
    instances = [Instance.from_seed(args.seed + i) for i in range(instances_needed(n, args.games_per_instance))]
    specs = plan_games(instances, args.games_per_instance, n)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines:
            print(f"== {engine}", flush=True)
            runs.append(await play(engine, args, specs, tokenizer, Path(tmp)))
            print(json.dumps(runs[-1]), flush=True)
    base = next((r for r in runs if r["engine"] == "generate"), None)
    for run in runs:
        if base:
            run["tokens_per_s_vs_generate"] = round(run["output_tokens_per_s"] / base["output_tokens_per_s"], 2)
            # the same ratio per CPU-second: what the engines compare as on cores shared with other work
            run["tokens_per_cpu_s_vs_generate"] = round(
                run["output_tokens_per_cpu_s"] / base["output_tokens_per_cpu_s"], 2
            )
    batched = next((r for r in runs if r["engine"] == "llamacpp-batched"), None)
    typical = (
        {
            "prompt_tokens": round(batched["prompt_tokens_read"] / batched["games"]),
            "output_tokens": round(batched["output_tokens"] / batched["games"]),
        }
        if batched
        else None
    )
    return {
        "cores": len(os.sched_getaffinity(0)),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "model": models.resolve(None),
        "llama_cpp_python": getattr(sys.modules.get("llama_cpp"), "__version__", None),
        "runs": runs,
        "typical_game": typical,
    }


TITLE = "CPU engines on the embedded model (SmolLM2-135M-Instruct-warm; transformers float32, llama.cpp auto)"


def table(result: dict) -> str:
    """The side-by-side table: wall-time rates, and CPU-time rates that hold up on shared cores."""
    lines = [
        "| engine | games in flight | games | turns | sampled ids | ids read | wall s | tokens/s | vs generate "
        "| CPU s | tokens/CPU-s | vs generate | sampled per step | games/s | token-exact seats |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['engine']} | {r['games_in_flight']} | {r['games']} | {r['turns']} | {r['output_tokens']} | "
            f"{r['prompt_tokens_read']} | {r['wall_s']} | {r['output_tokens_per_s']} | "
            f"{r.get('tokens_per_s_vs_generate', '-')} | {r['cpu_s']} | {r['output_tokens_per_cpu_s']} | "
            f"{r.get('tokens_per_cpu_s_vs_generate', '-')} | {r['sampled_per_step'] or '-'} | {r['games_per_s']} | "
            f"{r['seats_token_exact']} |"
        )
    return "\n".join(lines)


def notes(result: dict, settings: dict) -> str:
    s = settings
    text = (
        f"{result['cores']} cores (load average at the end: "
        f"{', '.join(f'{x:.1f}' for x in result['load_average_at_end'])}); matching game, temperature "
        f"{s['temperature']}, top-p {s['top_p']}, --max-moves {s['max_moves']}, seed {s['seed']}; the same "
        f"games for every engine ({s['games']} one at a time, {s['batched_games']} batched). CPU s is the "
        "process's CPU time while the games played; 'sampled per step' is the mean number of sequences "
        "each llama_decode sampled."
    )
    if result["typical_game"]:
        t = result["typical_game"]
        text += f"\n\nTypical game (batched run): {t['prompt_tokens']} ids read, {t['output_tokens']} sampled."
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    parser.add_argument("--games", type=int, default=2, help="games each engine plays one at a time")
    parser.add_argument("--batched-games", type=int, default=16, help="games llamacpp-batched plays, all in flight")
    parser.add_argument("--games-per-instance", type=int, default=8)
    parser.add_argument("--max-moves", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIRECTORY",
        default=RESULTS / "cpu_engines",
        help="directory for cpu_engines.json and cpu_engines.md (default: bench/results/cpu_engines)",
    )
    parser.add_argument("--quick", action="store_true", help="one short game per engine (what `make bench` runs)")
    args = parser.parse_args(argv)
    if args.quick:
        args.games, args.batched_games, args.max_moves, args.max_new_tokens = 1, 2, 2, 16
    args.engines = args.engines.split(",")
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose of {', '.join(ENGINES)}")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    outcome = asyncio.run(main(arguments))
    settings = {k: v for k, v in vars(arguments).items() if k != "out"}
    write("cpu_engines", arguments.out, TITLE, settings, outcome, table(outcome), notes(outcome, settings))
    print(table(outcome))
