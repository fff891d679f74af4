"""llama.cpp's settings for the embedded model on CPU, one `llama_decode` loop each: which
attention kernel, which weight precision, how many threads and sequences decode fastest at the
context a game of the matching game samples at.

One prompt of CONTEXT ids is read into sequence 0 and copied into every other sequence's own KV
stream (what the llamacpp backend does for twin prompts); then every sequence samples STEPS ids
together, one `llama_decode` per step. Rates are given per wall second and per CPU-second of the
process: on cores shared with other work the second is the one that compares settings. The
quantized weights are made from the exported float32 GGUF by llama.cpp's own `llama_model_quantize`
(`gguf_export.quantized`, cached next to it), as the backend makes them.

  python bench/llamacpp_settings.py                        # bench/results/cpu_engines/llamacpp_settings.*
  python bench/llamacpp_settings.py --quick --out data/bench
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmark import RESULTS, write

from selfplay_gen import gguf_export
from selfplay_gen.backends.llama_binding import import_llama_cpp
from selfplay_gen.backends.llamacpp import TOKENS_PER_STEP, TYPICAL_CONTEXT

PRECISIONS = gguf_export.DTYPES


def decode_rate(
    llama_cpp, path: Path, *, sequences: int, context: int, flash_attention: bool, threads: int, steps: int
) -> dict:
    """Ids/s of `sequences` sequences sampling together at `context` ids, and of the prompt read."""
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = (context + steps + 256) * sequences
    params.n_seq_max = sequences
    params.n_batch = params.n_ubatch = TOKENS_PER_STEP
    params.n_threads = params.n_threads_batch = threads
    params.kv_unified = False
    params.flash_attn_type = (
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attention else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    params.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, params)
    batch = llama_cpp.llama_batch_init(max(TOKENS_PER_STEP, sequences), 0, 1)

    def decode(rows: list[tuple[int, range]]) -> None:
        at = 0
        for seq, positions in rows:
            for pos in positions:
                batch.token[at], batch.pos[at], batch.n_seq_id[at], batch.seq_id[at][0] = 1 + pos % 1000, pos, 1, seq
                batch.logits[at] = pos == positions[-1]
                at += 1
        batch.n_tokens = at
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    try:
        decode([(0, range(1))])  # the first call of a shape builds its graph: untimed
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(1, context, TOKENS_PER_STEP):
            decode([(0, range(start, min(context, start + TOKENS_PER_STEP)))])
        read_wall, read_cpu = time.perf_counter() - wall, time.process_time() - cpu
        memory = llama_cpp.llama_get_memory(ctx)
        for seq in range(1, sequences):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        decode([(seq, range(context, context + 1)) for seq in range(sequences)])  # untimed
        wall, cpu = time.perf_counter(), time.process_time()
        for step in range(1, steps + 1):
            decode([(seq, range(context + step, context + step + 1)) for seq in range(sequences)])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
    return {
        "sampled_per_s": round(sequences * steps / wall, 1),
        "sampled_per_cpu_s": round(sequences * steps / cpu, 1),
        "read_per_s": round((context - 1) / read_wall, 1),
        "read_per_cpu_s": round((context - 1) / read_cpu, 1),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| weights | flash attention | threads | sequences | context | sampled ids/s | sampled ids/CPU-s "
        "| prompt ids/s | prompt ids/CPU-s | load (1 min) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['precision']} | {'on' if r['flash_attention'] else 'off'} | {r['threads']} | {r['sequences']} | "
            f"{r['context']} | {r['sampled_per_s']} | {r['sampled_per_cpu_s']} | {r['read_per_s']} | "
            f"{r['read_per_cpu_s']} | {r['load']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help=f"comma-separated, of {PRECISIONS}")
    parser.add_argument("--sequences", default="1,16,32", help="comma-separated counts of sequences sampling")
    parser.add_argument("--threads", default=f"1,{len(os.sched_getaffinity(0))}", help="comma-separated")
    parser.add_argument("--context", type=int, default=TYPICAL_CONTEXT, help="ids each sequence holds")
    parser.add_argument("--steps", type=int, default=16, help="ids each sequence samples, timed")
    parser.add_argument("--out", type=Path, metavar="DIRECTORY", default=RESULTS / "cpu_engines")
    parser.add_argument("--quick", action="store_true", help="one setting of each kind, short (what `make bench` runs)")
    args = parser.parse_args(argv)
    if args.quick:
        args.precisions, args.sequences, args.threads, args.context, args.steps = "f32", "2", "1", 64, 2
    llama_cpp = import_llama_cpp()
    llama_cpp.llama_backend_init()
    rows = []
    for precision in args.precisions.split(","):
        path = gguf_export.gguf_for(None, precision)
        for threads in (int(t) for t in args.threads.split(",")):
            for sequences in (int(n) for n in args.sequences.split(",")):
                for flash_attention in (False, True):
                    rate = decode_rate(
                        llama_cpp,
                        path,
                        sequences=sequences,
                        context=args.context,
                        flash_attention=flash_attention,
                        threads=threads,
                        steps=args.steps,
                    )
                    row = {"precision": precision, "flash_attention": flash_attention, "threads": threads}
                    row |= {"sequences": sequences, "context": args.context, **rate}
                    row["load"] = round(os.getloadavg()[0], 1)
                    print(row, flush=True)
                    rows.append(row)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    settings["llama_cpp_python"] = llama_cpp.__version__
    notes = (
        "Each row: one prompt of `context` ids read into one sequence and copied into the others' KV "
        "streams, then every sequence samples `steps` ids together, one llama_decode per step. "
        "Per CPU-second rates compare settings on shared cores; per wall second is what a user sees."
    )
    write(
        "llamacpp_settings",
        args.out,
        "llama.cpp settings on CPU (embedded model)",
        settings,
        {"rows": rows},
        table(rows),
        notes,
    )
    print(table(rows))


if __name__ == "__main__":
    main()
