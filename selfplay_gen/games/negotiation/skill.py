"""Skill levels (novice, intermediate, expert; `prompts.SKILLS`) as strength, and whether a model's
levels are stronger players.

What teaches a level (`league.skill_data`): by default (`quantile`) the games of scripted negotiators
of many strengths (`PLAYER_STRENGTHS`) against fixed references (`REFERENCES`: strengths 0.3, 0.6, 1),
each game given to the level whose quantile of the seat's points against that reference (and in that
seat) it falls in (`quantile_levels`), its prompt told the level (`relabel`): a level is how well the
seat did, not how it played. The former way (`scripted-strength`) imitates the scripted negotiator at
the level's strength (`SKILL_STRENGTHS`).

How a level is judged (`judge_levels`): its win share of the decided games and points against each
reference outside the model (the scripted negotiators at 0.3, 0.6 and 1, and the model unconditioned),
with the cooperation of those games beside every win share (agreement, joint share of the best deal,
Pareto-optimal deals). And, as before (`follows_levels`), the levels against each other: each higher
level should win most decided games against each lower one, in both seat orders, and earn more points.

The measurement plan: label each level's seat by its level, play every pair of levels in both
seat orders on held-out instances (`selfplay-gen eval --game negotiation` cross-play, seats told
their levels with `--skill SEAT0,SEAT1`), then `follows_levels` on the games. The issue's target:
expert beats novice in at least 65% of decided games.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from ...stats.metrics import ORDERS, decided_share, mean_interval, paired_difference, per_instance
from .evaluation import cross_play, game_table, results_of
from .prompts import GOALS, SKILL_STRENGTHS, SKILLS

LEVELS = tuple(SKILL_STRENGTHS)  # lowest first
TARGET = 0.65  # expert's share of the decided games against novice
REFERENCES = (0.3, 0.6, 1.0)  # the scripted negotiators every level is judged against, and quantiled on
PLAYER_STRENGTHS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # the scripted play a level's games are chosen from
UNCONDITIONED = "unconditioned"  # the label of the model asked for no level
COOPERATION = ("agreed", "joint", "pareto_optimal")


def quantile_levels(points: pd.Series, reference: pd.Series, levels: Sequence[str] = LEVELS) -> pd.Series:
    """Per game, the level whose quantile band its `points` fall in among the games against the same
    `reference` (a label: the fixed partner and the seat): the lowest 1/L of them the first level, and so on.
    Equal points are split in file order, so every level gets its share of games."""
    rank = points.groupby(reference.to_numpy()).rank(method="first", pct=True)
    band = np.minimum(np.ceil(rank.to_numpy() * len(levels)).astype(int) - 1, len(levels) - 1)
    return pd.Series([levels[b] for b in band], index=points.index)


def relabel(record: dict, seat: int, level: str) -> dict:
    """`record` with `seat`'s system prompt told `level` (as a game played with that skill would have it),
    for a seat whose turns are re-tokenized from its messages (a scripted seat)."""
    if record["players"][seat].get("turns"):
        raise ValueError(f"game {record['game_id']}: seat {seat} sampled its tokens: only a scripted one")
    goal = GOALS[record["outcome"]["reward_mode"]]
    messages = [dict(m) for m in record["players"][seat]["messages"]]
    if messages[0]["content"].count(goal) != 1 or any(text in messages[0]["content"] for text in SKILLS.values()):
        raise ValueError(f"game {record['game_id']}: seat {seat}'s system prompt is not one without a level")
    messages[0]["content"] = messages[0]["content"].replace(goal, f"{goal} {SKILLS[level]}")
    players = [dict(p) for p in record["players"]]
    players[seat] = {**players[seat], "messages": messages, "skill": level}
    return {**record, "players": players}


def level_games(files: Sequence[tuple[int, Path]], levels: Sequence[str] = LEVELS) -> tuple[list[dict], pd.DataFrame]:
    """The games of `files` (each: the seat the graded player sat in, its partner the reference) with that
    seat relabelled by `quantile_levels`, and a table of them (`game_table`, seats labelled level and
    `scripted@STRENGTH`)."""
    from ...records import read_games

    records: list[tuple[int, Any, str]] = []
    rows = []
    for seat, path in files:
        for record in read_games(path):
            partner = record["settings"]["seat1" if seat == 0 else "seat0"]
            strength = partner.get("strength")
            records.append((seat, record, f"scripted@{strength:g}"))
    table = pd.DataFrame(
        {
            "points": [r["outcome"]["points"][seat] for seat, r, _ in records],
            "reference": [f"{ref}/seat{seat}" for seat, _, ref in records],
        }
    )
    chosen = quantile_levels(table["points"], table["reference"], levels)
    out = []
    for (seat, record, reference), level in zip(records, chosen):
        out.append(relabel(record, seat, level))
        labels = (level, reference) if seat == 0 else (reference, level)
        rows.append(game_table([record], labels))
    return out, pd.concat(rows, ignore_index=True)


def judge_levels(
    games: pd.DataFrame, levels: Sequence[str], partners: Sequence[str], resamples: int = 1000, seed: int = 0
) -> dict[str, dict[str, dict]]:
    """Per level and reference partner (rows as `game_table` makes them, seats labelled by level and
    partner): the level's share of the decided games (None where all were tied) and its points (both seat
    orders pooled), with the
    cooperation of those games beside them: agreement, joint share of the best deal, Pareto-optimal deals."""
    rng = np.random.default_rng(seed)
    judged: dict[str, dict[str, dict]] = {}
    for level in levels:
        for partner in partners:
            met = games[
                ((games["seat0"] == level) & (games["seat1"] == partner))
                | ((games["seat0"] == partner) & (games["seat1"] == level))
            ]
            if not len(met):
                continue
            crossed = {"cross_play": cross_play(met, [level, partner], resamples, rng)}
            share, _ = decided_share(crossed, level, partner, "both")
            own = results_of(met, level)
            judged.setdefault(level, {})[partner] = {
                "games": len(met),
                "win_share": share,
                "points": mean_interval(per_instance(own, "points").to_numpy(), resamples, rng),
                **{k: mean_interval(per_instance(met, k).to_numpy(float), resamples, rng) for k in COOPERATION},
            }
    return judged


def level_steps(
    games: pd.DataFrame, levels: Sequence[str], partners: Sequence[str], resamples: int = 1000, seed: int = 0
) -> list[dict[str, Any]]:
    """Per reference partner, each level against the one below it (rows as `game_table` makes them): the
    difference in win rate (a game's win 1, a tie or loss 0) and in points, paired over the instances both
    levels played against that partner. A scale of levels is ordered where every step's win-rate interval
    lies above zero: each level beats the same partner on the same instances more often than the one below."""
    rng = np.random.default_rng(seed)
    steps = []
    for partner in partners:
        sides = {}
        for level in levels:
            met = games[
                ((games["seat0"] == level) & (games["seat1"] == partner))
                | ((games["seat0"] == partner) & (games["seat1"] == level))
            ]
            if len(met):
                sides[level] = results_of(met, level)
        for lower, higher in zip(levels, levels[1:]):
            if lower in sides and higher in sides:
                high, low = sides[higher], sides[lower]
                differences = {
                    column: paired_difference(per_instance(high, column), per_instance(low, column), resamples, rng)
                    for column in ("win", "points")
                }
                steps.append({"against": partner, "lower": lower, "higher": higher, **differences})
    return steps


def step_up(step: Mapping[str, Any]) -> bool:
    """Whether a `level_steps` step's win-rate interval lies above zero."""
    win = step.get("win")
    return bool(win and win["ci"] is not None and win["ci"][0] > 0)


def steps_table(steps: Sequence[Mapping[str, Any]]) -> str:
    """`level_steps` as a markdown table: a row per reference and step."""
    from ...stats.report import format_interval, markdown_table

    head = ["against", "step", "instances", "win rate: higher − lower", "points: higher − lower", "step up"]
    rows = [
        [s["against"], f"{s['lower']} → {s['higher']}", str((s["win"] or {}).get("instances", 0)),
         format_interval(s["win"], percent=True), format_interval(s["points"]), "yes" if step_up(s) else "no"]
        for s in steps
    ]  # fmt: skip
    return markdown_table(head, rows)


def judged_table(judged: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """`judge_levels` as a markdown table: a row per level and reference."""
    from ...stats.report import format_interval, markdown_table

    head = ["level", "against", "games", "decided: win share", "points", "agreement", "joint", "Pareto"]
    rows = [
        [level, partner, str(r["games"]), format_interval(r["win_share"], percent=True),
         format_interval(r["points"]), *(format_interval(r[k], percent=True) for k in COOPERATION)]
        for level, against in judged.items()
        for partner, r in against.items()
    ]  # fmt: skip
    return markdown_table(head, rows)


def follows_levels(games: pd.DataFrame, levels: Sequence[str] = LEVELS, resamples: int = 1000, seed: int = 0) -> dict:
    """From cross-play games whose `seat0`/`seat1` hold skill levels (rows as
    `evaluation.game_table` makes them): each level's points against the others, and for
    each pair of levels the higher one's share of the decided games per seat order. `follows` is
    true when every higher level's pooled share has its 95% interval above 0.5 and mean points
    rise with the level; `expert_vs_novice` is the pooled share the issue's target reads."""
    unknown = sorted(set(games["seat0"]).union(games["seat1"]) - set(levels))
    if unknown:
        raise ValueError(f"seats labelled {unknown} are not skill levels ({', '.join(levels)})")
    rng = np.random.default_rng(seed)
    crossed = {"cross_play": cross_play(games, list(levels), resamples, rng)}
    met = {frozenset(e["models"]) for e in crossed["cross_play"]}
    pairs: list[dict[str, Any]] = [
        {"higher": high, "lower": low, **{order: decided_share(crossed, high, low, order)[0] for order in ORDERS}}
        for low, high in itertools.combinations(levels, 2)
        if frozenset((low, high)) in met
    ]
    points = {}
    for level in levels:
        played = games[(games["seat0"] != games["seat1"]) & ((games["seat0"] == level) | (games["seat1"] == level))]
        if len(played):
            points[level] = mean_interval(per_instance(results_of(played, level), "points").to_numpy(), resamples, rng)
    means = [points[level]["mean"] for level in levels if level in points]
    pooled: list[dict] = [p["both"] for p in pairs]
    expert: dict | None = next((p["both"] for p in pairs if (p["higher"], p["lower"]) == (levels[-1], levels[0])), None)
    return {
        "pairs": pairs,
        "points": points,
        "follows": bool(pooled)
        and all(s["ci"] is not None and s["ci"][0] > 0.5 for s in pooled)
        and all(a < b for a, b in zip(means, means[1:])),
        "expert_vs_novice": expert,
        "meets_target": expert is not None and expert["mean"] is not None and expert["mean"] >= TARGET,
    }


def strength_of(level: str) -> float:
    """The scripted negotiator's strength whose games teach `level` (`SKILL_STRENGTHS`)."""
    if level not in SKILL_STRENGTHS:
        raise ValueError(f"skill level {level!r} is not one of {', '.join(LEVELS)}")
    return SKILL_STRENGTHS[level]


@click.command("levels")
@click.argument("games", nargs=-1, required=True, metavar="SEAT=FILE...")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The relabelled games.")
@click.option(
    "--levels", default=",".join(LEVELS), show_default=True, help="The levels, lowest first, comma-separated."
)
def levels_command(games: tuple[str, ...], out: Path, levels: str) -> None:
    """Skill levels as strength: give each game of the scripted players in GAMES (SEAT=FILE: the graded
    player sat in SEAT, a reference scripted negotiator in the other) the level whose quantile of the
    graded seat's points against that reference its game falls in, tell that seat's prompt the level,
    and write the games to OUT (what the warm start imitates) with OUT.levels.json: per level and
    reference the win share, points and cooperation of its games (`judge_levels`)."""
    names = tuple(level.strip() for level in levels.split(","))
    unknown = [n for n in names if n not in SKILLS]
    if unknown or len(names) < 2:
        raise click.BadParameter(f"{levels!r}: give two or more of {', '.join(SKILLS)}", param_hint="--levels")
    files = []
    for spec in games:
        seat, _, path = spec.partition("=")
        if seat not in ("0", "1") or not path:
            raise click.BadParameter(f"{spec!r}: write SEAT=FILE, SEAT 0 or 1", param_hint="GAMES")
        files.append((int(seat), Path(path)))
    try:
        records, table = level_games(files, names)
    except (OSError, ValueError, KeyError) as error:
        raise click.ClickException(str(error)) from None
    from ...atomic import write_atomic

    write_atomic(out, "".join(json.dumps(r) + "\n" for r in records))
    references = sorted(set(table["seat0"]).union(table["seat1"]) - set(names))
    judged = judge_levels(table, names, references)
    write_atomic(out.with_suffix(".levels.json"), json.dumps(judged, indent=1, default=float) + "\n")
    click.echo(judged_table(judged))


if __name__ == "__main__":
    levels_command()
