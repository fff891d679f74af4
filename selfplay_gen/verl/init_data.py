"""`selfplay-gen init`: game-initialization parquet for online training (`selfplay_online`), of
any registered game (`--game`, with its options such as `--reward-mode`).

One row per (instance, seat), so that each instance appears twice, once for each seat (see
`selfplay_loop` for why). Columns are those verl's `RLHFDataset` reads: `prompt` (what the seat
starts from: its system prompt and the first messages the game tells it, e.g. "You move first"
for seat 0; seat 1's first user message is its partner's opening move, known only in play),
`data_source` (`selfplay_<game>`), `ability`, `reward_model` (the instance's optima, `best_*`),
`extra_info` (the game, its options, instance JSON, seat, game id, index) and `agent_name`.
Train instances use seeds SEED, SEED+1, ...; test (validation) instances are the first
development instances (seeds from 10**9, `evaluation.splits.DEV`), the range every setting is chosen
on, so verl's validation curve reads on the instances a run's development evaluation plays, never on
training instances nor on the test split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import pandas as pd

from .. import config_tree, games
from ..evaluation.splits import EvaluationSeedError, check_training_seeds, split_seeds
from ..games import GameConfig
from ..games.base import GameInstance
from ..options import GameChoice, games_from, settings
from . import ONLINE_AGENT, data_source


def initial_messages(game: GameConfig, instance: GameInstance, seat: int) -> list[dict]:
    """The chat `seat` starts from, before any move: what the game shows it when it starts."""
    start = game.new().reset(instance)
    told = [{"role": "user", "content": "\n".join(start.told[seat])}] if start.told[seat] else []
    return [{"role": "system", "content": start.system[seat]}, *told]


def game_of(info: Mapping[str, Any]) -> GameConfig:
    """The game a row of init data plays (rows from before games had names: `games.UNNAMED`)."""
    return GameConfig(info.get("game") or games.UNNAMED, options=json.loads(info.get("game_options") or "{}"))


def init_rows(game: GameConfig, instances: list[GameInstance], first: int = 0) -> pd.DataFrame:
    """Two rows (one a seat) per instance; `first`: the ordinal of the first instance (a mix's later games
    go on from the earlier ones', so every row's index is its own)."""
    played = game.new()
    rows = []
    for ordinal, instance in enumerate(instances, start=first):
        optima = {k: v for k, v in instance.to_dict().items() if k.startswith("best_") and not isinstance(v, list)}
        for seat in range(played.seats):
            rows.append(
                {
                    "prompt": initial_messages(game, instance, seat),
                    "data_source": data_source(game.name),
                    "ability": played.ability,
                    "reward_model": {"style": "rule", "ground_truth": json.dumps(optima)},
                    "extra_info": {
                        "index": played.seats * ordinal + seat,
                        "game": game.name,
                        "game_options": json.dumps(dict(game.options)),
                        "game_id": instance.id,
                        "instance_id": instance.id,
                        "player": seat,
                        "instance": json.dumps(instance.to_dict()),
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
    help="Validation instances: the first development instances (seeds from 10**9).",
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
@config_tree.options(GameChoice)
def init_command(num_train: int, num_test: int, seed: int, out_dir: Path, overwrite: bool, **opts: Any) -> None:
    """Write game-initialization parquet for online self-play training (agent `selfplay_online`)
    of the game `--game` (with its options), which the rows name for the loop that plays them; a mix of
    games (`--game A,B`) writes each game's rows for its even share of the instances, on seeds of its own."""
    # default limits: the trainer's come from +selfplay.max_moves and the like
    mix = {g.name: g for g in games_from(settings(config_tree.resolve(GameChoice, opts)[0]))}
    try:
        check_training_seeds(seed, num_train, "--seed/--num-train")
    except EvaluationSeedError as err:
        raise click.BadParameter(str(err), param_hint="--seed") from None
    splits = {"train": range(seed, seed + num_train), "test": split_seeds("dev", num_test) if num_test else range(0)}
    targets = {name: out_dir / f"{name}.parquet" for name, seeds in splits.items() if seeds}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not overwrite:
        raise click.ClickException(f"{', '.join(existing)} already exist; pass --overwrite to replace them")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, path in targets.items():
        frames, said = [], []
        for part, seeds in games.shares(games.MIX.join(mix), splits[name]):
            instances = games.seeded(part, seeds, desc=f"{name} instances")
            frames.append(init_rows(mix[part], instances, first=seeds.start - splits[name].start))
            said.append(f"{len(instances)} {part} instances (seeds {seeds.start}..{seeds.stop - 1})")
        rows = pd.concat(frames, ignore_index=True)
        write_parquet_atomic(rows, path)
        click.echo(f"{path}: {len(rows)} rows from {', '.join(said)}")
