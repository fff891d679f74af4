"""Drawing an online run's instance pool (`selfplay-gen init --num-train 4096`): one process against
`games.seeded`'s worker processes, same seeds, side by side. Prints a table and writes
OUT/instance_pool.{json,md}.

    python bench/instance_pool.py [--out DIR] [--quick] [--seeds 4096]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one core a process in both methods

import time

import click
from benchmark import out_option, quick_option, write

from selfplay_gen import games

# The online trainers' pool starts at this seed (offline_gpu/gpu_rl.sh), clear of the evaluation splits.
FIRST_SEED = 1_000_000


@click.command(help=__doc__)
@click.option("--seeds", type=click.IntRange(min=1), default=4096, show_default=True, help="Instances drawn.")
@click.option("--game", type=click.Choice(games.names()), default="matching", show_default=True)
@out_option
@quick_option
def main(seeds: int, game: str, out, quick: bool) -> None:
    count = games.PARALLEL_SEEDS if quick else seeds
    pool = range(FIRST_SEED, FIRST_SEED + count)
    from_seed = games.get(game).instance_type.from_seed
    from_seed(0)  # warm up (the sampler's index tables)
    start = time.perf_counter()
    serial = [from_seed(seed) for seed in pool]
    one = time.perf_counter() - start
    start = time.perf_counter()
    pooled = games.seeded(game, pool)
    many = time.perf_counter() - start
    if pooled != serial:
        raise RuntimeError("the worker processes drew other instances than one process did")
    rows = [
        {"method": "one process", "seconds": one, "instances_per_s": count / one, "ratio": 1.0},
        {"method": "games.seeded (a process per CPU)", "seconds": many, "instances_per_s": count / many},
    ]
    rows[1]["ratio"] = one / many
    lines = ["| method | instances | seconds | instances/s | speed-up |", "|---|---|---|---|---|"]
    for r in rows:
        speed = f"{r['instances_per_s']:.0f} | {r['ratio']:.2f}x"
        lines.append(f"| {r['method']} | {count} | {r['seconds']:.2f} | {speed} |")
    table = "\n".join(lines)
    print(table)
    note = (
        "Both draw the same seeds in the same order and are checked equal. The worker processes are spawned, "
        "so their start (importing the game) is inside the measured time."
    )
    settings = {"seeds": count, "first_seed": FIRST_SEED, "game": game}
    paths = write("instance_pool", out, "Drawing an online run's instance pool", settings, {"rows": rows}, table, note)
    click.echo(f"wrote {paths[0]} and {paths[1]}")


if __name__ == "__main__":
    main()
