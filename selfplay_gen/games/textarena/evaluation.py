"""Evaluation of a TextArena game (the module `TextArenaGame.evaluation` names): the generic
evaluation (rewards per seat, moves, endings, wording) and, since these games are won and lost,
who wins: per seat order and pooled, each model's win, draw and loss rates against each other
model, and Bradley–Terry ratings from those games.

A game is won by the seat with the higher reward (the environment's own: 1 and -1 for most, a
draw 0 and 0); a game cut short by a limit is scored 0 and 0, a draw. Failed games say nothing
of the players and are left out of wins. Intervals resample instances, as in every report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from ...atomic import write_atomic
from ...records import Record
from ...stats import generic
from ...stats.generic import append_to_run, summary_text
from ...stats.metrics import mean_interval, per_instance, ratio_interval
from ...stats.ratings import rate_wins
from ...stats.report import format_interval, markdown_table, report_head

SCHEMA = "selfplay-gen-eval-textarena/1"
WIN_NOTE = (
    "Agreement, in these games: played out by their rules (not ended by an invalid move or a limit). "
    "A game is won by the seat with the higher reward (the environment's; a game cut short by a limit is a "
    "draw). Rates are the first model's, with it in seat 0, in seat 1 and both pooled; decided: its wins / "
    "(wins + losses). Self-play rows are seat 0's. Ratings: Bradley–Terry on the Elo scale (first model 0) "
    "from cross-play wins, draws as halves. Chips a hand (Kuhn Poker): the first model's chips won a hand, "
    "against Kuhn Poker's value of -1/18 for the first to act, 1/18 for the second, 0 over both seats."
)
ORDERS = {"seat0": "seat 0", "seat1": "seat 1", "both": "both"}

__all__ = ["append_to_run", "evaluate", "game_table", "summary_text", "write_report"]


def game_table(records: Iterable[Record], seats: tuple[str, str]) -> pd.DataFrame:
    """The generic rows, with each seat's chips a hand where the environment keeps chips (Kuhn
    Poker's `chips` and `hands`, `fixes.py`), else NaN."""
    rows = []
    for record in records:
        row, outcome = generic.game_row(record, seats), cast(dict[str, Any], record["outcome"])
        chips, hands = outcome.get("chips"), outcome.get("hands")
        for seat in range(2):
            row[f"chips{seat}"] = chips[seat] / hands if chips and hands else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def results_of(games: pd.DataFrame, model: str) -> pd.DataFrame:
    """Games from `model`'s side (seat 0 where it sits in both): its reward and win, draw, loss."""
    first = games["seat0"] == model
    own = games["reward0"].where(first, games["reward1"])
    other = games["reward1"].where(first, games["reward0"])
    return pd.DataFrame(
        {
            "instance_id": games["instance_id"],
            "reward": own,
            "chips": games["chips0"].where(first, games["chips1"]),
            "win": (own > other).astype(float),
            "draw": (own == other).astype(float),
            "loss": (own < other).astype(float),
        }
    )


def wins(results: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Win, draw and loss rates and the mean reward of one side of some games."""
    rates = {
        c: mean_interval(per_instance(results, c).to_numpy(float), resamples, rng)
        for c in ("win", "draw", "loss", "reward")
    }
    if results["chips"].notna().all():  # a game of chips: what a seat wins a hand
        rates["chips_per_hand"] = mean_interval(per_instance(results, "chips").to_numpy(float), resamples, rng)
    sums = results.groupby("instance_id")[["win", "loss"]].sum()
    return {
        "games": len(results),
        "instances": int(results["instance_id"].nunique()),
        **rates,
        "decided_win_share": ratio_interval(sums["win"], sums["win"] + sums["loss"], resamples, rng),
    }


def head_to_head(games: pd.DataFrame, models: list[str], resamples: int, rng: np.random.Generator) -> list[dict]:
    """For each pair of models that met, in the order of their first game: the first model's
    results in seat 0, in seat 1 and in both."""
    met = games[(games["seat0"] != games["seat1"]) & games["seat0"].isin(models) & games["seat1"].isin(models)]
    pairs: dict[frozenset, tuple[str, str]] = {}
    for a, b in zip(met["seat0"], met["seat1"]):
        pairs.setdefault(frozenset((a, b)), (a, b))
    entries = []
    for a, b in pairs.values():
        orders = {
            "seat0": met[(met["seat0"] == a) & (met["seat1"] == b)],
            "seat1": met[(met["seat0"] == b) & (met["seat1"] == a)],
        }
        both = pd.concat(orders.values())
        entries.append(
            {
                "models": [a, b],
                **{
                    k: wins(results_of(g, a), resamples, rng) if len(g) else None
                    for k, g in {**orders, "both": both}.items()
                },
            }
        )
    return entries


def win_counts(games: pd.DataFrame, models: list[str]) -> np.ndarray:
    """(instances, models, models): cross-play games the row model won against the column model
    on each instance, draws as halves."""
    instances = {i: k for k, i in enumerate(games["instance_id"].unique())}
    index = {m: k for k, m in enumerate(models)}
    counts = np.zeros((len(instances), len(models), len(models)))
    for row in games.itertuples():
        if row.seat0 == row.seat1 or row.seat0 not in index or row.seat1 not in index:
            continue
        a, b, k = index[row.seat0], index[row.seat1], instances[row.instance_id]
        score = 1.0 if row.reward0 > row.reward1 else 0.5 if row.reward0 == row.reward1 else 0.0
        counts[k, a, b] += score
        counts[k, b, a] += 1 - score
    return counts


def evaluate(games: pd.DataFrame, models: list[str], resamples: int, seed: int) -> dict:
    """The generic metrics, with self-play's seat-0 wins, cross-play's wins and ratings."""
    metrics = generic.evaluate(games, models, resamples, seed)
    rng = np.random.default_rng(seed + 1)
    played = games[~games["failed"]] if len(games) else games
    for model, summary in metrics["models"].items():
        selfplay = played[(played["seat0"] == model) & (played["seat1"] == model)]
        summary["seat0_wins"] = wins(results_of(selfplay, model), resamples, rng) if len(selfplay) else None
    crossed = head_to_head(played, models, resamples, rng) if len(played) else []
    metrics.update(
        schema=SCHEMA,
        wins=crossed,
        ratings=rate_wins(win_counts(played, models), models, resamples, rng) if crossed else {},
    )
    return metrics


def wins_table(metrics: dict) -> str:
    head = ["models", "first model sits in", "games", "win [95% CI]", "draw", "loss", "decided: win share", "reward"]
    head += ["chips a hand"]
    rows = [
        [
            f"{e['models'][0]} vs {e['models'][1]}",
            ORDERS[order],
            str(r["games"]),
            format_interval(r["win"], percent=True),
            format_interval(r["draw"], percent=True),
            format_interval(r["loss"], percent=True),
            format_interval(r["decided_win_share"], percent=True),
            format_interval(r["reward"], digits=2),
            format_interval(r["chips_per_hand"], digits=3) if "chips_per_hand" in r else "–",
        ]
        for e in metrics["wins"]
        for order in ORDERS
        if (r := e[order]) is not None
    ]
    rows += [
        [f"{m} (self-play)", "seat 0", str(w["games"]), format_interval(w["win"], percent=True)]
        + [format_interval(w["draw"], percent=True), format_interval(w["loss"], percent=True)]
        + [format_interval(w["decided_win_share"], percent=True), format_interval(w["reward"], digits=2)]
        + [format_interval(w["chips_per_hand"], digits=3) if "chips_per_hand" in w else "–"]
        for m, s in metrics["models"].items()
        if (w := s.get("seat0_wins")) is not None
    ]
    return markdown_table(head, rows)


def ratings_table(metrics: dict) -> str:
    return markdown_table(
        ["model", "rating (Elo) [95% CI]", "wins", "games"],
        [
            [m, format_interval(r, digits=0), f"{r['wins']:g}", f"{r['comparisons']:g}"]
            for m, r in metrics["ratings"].items()
        ],
    )


def write_report(out_dir: Path, metrics: dict, games: pd.DataFrame, inputs: list[dict]) -> list[Path]:
    """metrics.json and report.md: the generic report with wins and ratings; the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [*report_head(f"Evaluation: {metrics['game']}", inputs, metrics), "## Self-play", ""]
    sections += [summary_text(metrics), "", generic.NOTE]
    if metrics["cross_play"]:
        sections += ["", "## Cross-play", "", generic.cross_play_table(metrics)]
    sections += ["", "## Wins", "", wins_table(metrics)]
    if metrics["ratings"]:
        sections += ["", ratings_table(metrics)]
    sections += ["", WIN_NOTE]
    write_atomic(out_dir / "report.md", "\n".join(sections) + "\n")
    write_atomic(out_dir / "metrics.json", json.dumps({**metrics, "inputs": inputs}, indent=1) + "\n")
    return [out_dir / "metrics.json", out_dir / "report.md"]
