"""What filtered BC would imitate: the games each seat's best-of-N selection keeps, and what they score.

A selection imitates each seat's best game of a group by its training reward (`selfplay-convert --format sft
--top-fraction 1/N`, the same ranking, `convert.groups.top`). The kept games' mean reward is the ceiling that
imitating them perfectly would reach on those instances; their own-plan share says how far they follow the
table each seat sees, and their own-plan lines (of the agreed proposal's 8, those that are lines of the seat's
best solo plan; a random matching has 1 on average, that plan 8) how consistent a target each line of a kept
proposal is. For random legal play (`selfplay-gen play --backend scripted --scripted-policy random`),
it says how good a format warm start on selected random games could be, before any GPU time:

    selfplay-gen play --backend scripted --scripted-policy random --seed 7 --num-games 4096 \\
        --games-per-instance 64 --out games.jsonl --quiet
    python bench/analysis/selection_ceiling.py games.jsonl --best-of 1,8,16,64 --own-plan-weight 1

The best of N is taken over each instance's first N games in the file, so one file of 64 games an instance gives
every N up to 64 on the same instances.
"""

from __future__ import annotations

import click
import pandas as pd

from convert import groups
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.records import read_games
from selfplay_gen.reward import RewardTerms, own_plan_share, training_reward
from selfplay_gen.stats.report import markdown_table

SEATS = (0, 1)


def own_plan_lines(record: dict, seat: int) -> int:
    """How many lines of the agreed proposal are lines of `seat`'s best solo plan (0 without a deal)."""
    proposal = record["outcome"].get("proposal") if record["outcome"].get("agreed") else None
    if not proposal:
        return 0
    plan = set(Instance.from_dict(record["instance"]).own_plan(seat))
    return sum((int(r), int(p)) in plan for r, p in proposal)


def ledger(path: str, own_plan_weight: float) -> pd.DataFrame:
    """One row per game that did not fail: its instance, its order in the instance, and per seat the training
    reward, the game's reward, the agreed outcome's own-plan share and its own-plan lines."""
    rows, terms = [], RewardTerms(own_plan_weight=own_plan_weight)
    for record in read_games(path):
        if record.get("failure"):
            continue
        rows.append(
            {
                "instance_id": record["instance_id"],
                **{f"train{s}": training_reward(record, s, terms) for s in SEATS},
                **{f"reward{s}": float(record["outcome"]["rewards"][s]) for s in SEATS},
                **{f"own{s}": own_plan_share(record, s) for s in SEATS},
                **{f"lines{s}": own_plan_lines(record, s) for s in SEATS},
            }
        )
    if not rows:
        raise click.ClickException(f"{path}: no games that finished")
    frame = pd.DataFrame(rows)
    frame["order"] = frame.groupby("instance_id").cumcount()
    return frame


def kept(frame: pd.DataFrame, best_of: int) -> dict[str, float]:
    """Per seat, the mean reward, own-plan share and own-plan lines of the games its best-of-`best_of` selection
    keeps, and how many instances had that many games."""
    first = frame[frame["order"] < best_of]
    sizes = first.groupby("instance_id")["order"].transform("size")
    first = first[sizes == best_of]
    row: dict[str, float] = {"best of": best_of, "instances": first["instance_id"].nunique()}
    for s in SEATS:
        chosen = first[groups.top(first[f"train{s}"], first["instance_id"], 1 / best_of)]
        row[f"seat {s}: reward"] = chosen[f"reward{s}"].mean()
        row[f"seat {s}: own-plan share"] = chosen[f"own{s}"].mean()
        row[f"seat {s}: own-plan lines"] = chosen[f"lines{s}"].mean()
    return row


@click.command(help=__doc__)
@click.argument("games", type=click.Path(exists=True, dir_okay=False))
@click.option("--best-of", default="1,8,16,64", show_default=True, help="Comma-separated group sizes N.")
@click.option("--own-plan-weight", default=0.0, show_default=True, help="The training reward's own-plan term.")
def main(games: str, best_of: str, own_plan_weight: float) -> None:
    frame = ledger(games, own_plan_weight)
    sizes = [int(n) for n in best_of.split(",")]
    rows = [kept(frame, n) for n in sizes if (frame["order"] == n - 1).any()]
    if not rows:
        raise click.ClickException(f"{games}: no instance has {min(sizes)} games")
    header = list(rows[0])
    cells = [[f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in header] for row in rows]
    click.echo(markdown_table(header, cells))


if __name__ == "__main__":
    main()
