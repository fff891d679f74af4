"""`selfplay-gen init`: game-initialization parquet for online training (`selfplay_online`), of
the matching game (the only one the online loop plays).

One row per (instance, seat), so that each instance appears twice, once for each seat (see
`selfplay_loop` for why). Columns are those verl's `RLHFDataset` reads: `prompt` (what the seat
starts from: the system prompt with its table, plus "You move first" for seat 0; seat 1's first
user message is its partner's opening move, known only in play), `data_source`, `ability`,
`reward_model`, `extra_info` (instance JSON, seat, game id, index) and `agent_name`.
Train instances use seeds SEED, SEED+1, ...; test instances the seeds right after them, so the
two never share an instance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pandas as pd
from tqdm.auto import tqdm

from convert.rows import data_source

from .. import prompts
from ..games.matching import Matching
from ..instance import Instance
from . import ONLINE_AGENT


def initial_messages(instance: Instance, seat: int) -> list[dict]:
    """The chat a seat starts from, before any move."""
    system = [{"role": "system", "content": prompts.system_prompt(instance, seat)}]
    return (system + [{"role": "user", "content": prompts.FIRST_MOVE}]) if seat == 0 else system


def init_rows(instances: list[Instance]) -> pd.DataFrame:
    rows = []
    for ordinal, instance in enumerate(instances):
        for seat in (0, 1):
            rows.append(
                {
                    "prompt": initial_messages(instance, seat),
                    "data_source": data_source(Matching.name),
                    "ability": Matching.ability,
                    "reward_model": {
                        "style": "rule",
                        "ground_truth": json.dumps({"best_reward": instance.best_reward}),
                    },
                    "extra_info": {
                        "index": 2 * ordinal + seat,
                        "game_id": instance.id,
                        "instance_id": instance.id,
                        "player": seat,
                        "instance": instance.to_json(),
                    },
                    "agent_name": ONLINE_AGENT,
                }
            )
    return pd.DataFrame(rows)


def write_parquet_atomic(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)


@click.command("init")
@click.option(
    "--num-train",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Training instances (two rows each, one per seat).",
)
@click.option(
    "--num-test",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Validation instances, from seeds after the training ones.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the first training instance.")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/online"),
    show_default=True,
    help="Where train.parquet and test.parquet go.",
)
@click.option("--overwrite", is_flag=True, help="Replace existing parquet files.")
def init_command(num_train: int, num_test: int, seed: int, out_dir: Path, overwrite: bool) -> None:
    """Write game-initialization parquet for online self-play training (agent `selfplay_online`)."""
    splits = {"train": range(seed, seed + num_train), "test": range(seed + num_train, seed + num_train + num_test)}
    targets = {name: out_dir / f"{name}.parquet" for name, seeds in splits.items() if seeds}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not overwrite:
        raise click.ClickException(f"{', '.join(existing)} already exist; pass --overwrite to replace them")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, path in targets.items():
        instances = [Instance.from_seed(s) for s in tqdm(splits[name], desc=f"{name} instances", unit="inst")]
        write_parquet_atomic(init_rows(instances), path)
        click.echo(
            f"{path}: {2 * len(instances)} rows from {len(instances)} instances "
            f"(seeds {splits[name].start}..{splits[name].stop - 1})"
        )
