"""The Kuhn Poker strategy a warm start's rows teach: the moves of the seats a conversion kept, read exactly.

A selected warm start (`warm.games_per_instance` N, `warm.top_fraction` 1/N) imitates each seat's best match of
N. Whether the model learned what those rows hold is a comparison of two strategies: the kept seats' moves, read
here with the evaluation's own reader (`kuhn_strategy.summarize`: the share of the aggressive move at each of the
twelve information sets, and that strategy's chips a hand against the equilibrium), and the model's moves in its
evaluation report's "Strategy" section. Every move of a kept seat counts, as the conversion trains on every one:

    selfplay-gen play --game textarena:KuhnPoker-v0 --backend scripted --scripted-policy random \\
        --seed 500000000 --num-games 16384 --games-per-instance 16 --out games.jsonl --quiet
    selfplay-convert games.jsonl --out-dir conv --format sft --top-fraction 0.0625 --model MODEL
    python bench/analysis/kuhn_kept_strategy.py games.jsonl conv/train.parquet
"""

from __future__ import annotations

import click
import numpy as np
import pandas as pd

from selfplay_gen.games.textarena import kuhn_strategy
from selfplay_gen.records import read_games
from selfplay_gen.stats.report import markdown_table


def kept_moves(games: str, rows: str) -> pd.DataFrame:
    """The moves (instance_id, node, aggressive) of every (game, seat) that the conversion's rows hold."""
    infos = pd.read_parquet(rows, columns=["extra_info"])["extra_info"]
    kept = {(info["game_id"], int(info["player"])) for info in infos}
    moves = []
    for record in read_games(games):
        for seat, node, aggressive in kuhn_strategy.decisions(record):
            if (record["game_id"], seat) in kept:
                moves.append({"instance_id": record["instance_id"], "node": node, "aggressive": aggressive})
    if not moves:
        raise click.ClickException(f"{rows}: none of its rows is a seat of a game in {games}")
    return pd.DataFrame(moves)


@click.command(help=__doc__)
@click.argument("games", type=click.Path(exists=True, dir_okay=False))
@click.argument("rows", type=click.Path(exists=True, dir_okay=False))
@click.option("--resamples", default=2000, show_default=True, help="Bootstrap resamples over instances.")
def main(games: str, rows: str, resamples: int) -> None:
    summary = kuhn_strategy.summarize(kept_moves(games, rows), resamples, np.random.default_rng(0))
    header = ["information set: move", "the equilibrium's share", "kept rows' share (moves)"]
    cells = [
        [name, f"{equilibrium:.2f}", "–" if kept["share"] is None else f"{kept['share']:.2f} ({kept['moves']})"]
        for (name, kept), equilibrium in zip(summary["shares"].items(), kuhn_strategy.EQUILIBRIUM, strict=True)
    ]
    click.echo(markdown_table(header, cells))
    for key, label in kuhn_strategy.VALUES.items():
        value = summary[key]
        if value["mean"] is not None:
            click.echo(f"{label}: {value['mean']:.3f} [{value['ci'][0]:.3f}, {value['ci'][1]:.3f}]")


if __name__ == "__main__":
    main()
