"""Evaluation of a TextArena game (the module `TextArenaGame.evaluation` names): the generic
evaluation (rewards per seat, moves, endings, wording) and, since these games are won and lost,
who wins: per seat order and pooled, each model's win, draw and loss rates against each other
model (counted by `stats.metrics`, as every game's wins are: a draw is a `tie` in metrics.json), and
Bradley–Terry ratings from those games.

A game is won by the seat with the higher reward (the environment's own: 1 and -1 for most, a
draw 0 and 0); a seat that hits a limit by itself loses it, and a game cut short by another
limit is scored 0 and 0, a draw (`TextArenaGame`). Failed games say nothing
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
from ...stats.metrics import head_to_head, side_results, win_counts, win_rates
from ...stats.ratings import rate_wins
from ...stats.report import format_interval, markdown_table, report_head

SCHEMA = "selfplay-gen-eval-textarena/1"
WIN_NOTE = (
    "Agreement, in these games: played out by their rules (not ended by an invalid move or a limit). "
    "A game is won by the seat with the higher reward (the environment's; a seat that hits a limit by itself, "
    "invalid moves or a move cut at the token limit, loses; a game cut short by another limit is a draw). "
    "Rates are the first model's, with it in seat 0, in seat 1 and both pooled; decided: its wins / "
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
    """Games from `model`'s side (seat 0 where it sits in both): its reward, its chips a hand and
    win, draw (`tie`) or loss (`stats.metrics.side_results`)."""
    return side_results(games, model, "reward", own=("chips",))


def wins(results: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Win, draw (`tie`) and loss rates and the mean reward of one side of some games, and its
    chips a hand (`chips_per_hand`) in a game of chips."""
    chips = results["chips"].notna().all()
    means = ("reward", "chips_per_hand") if chips else ("reward",)
    return win_rates(results.rename(columns={"chips": "chips_per_hand"}), resamples, rng, means)


def evaluate(games: pd.DataFrame, models: list[str], resamples: int, seed: int) -> dict:
    """The generic metrics, with self-play's seat-0 wins, cross-play's wins and ratings."""
    metrics = generic.evaluate(games, models, resamples, seed)
    rng = np.random.default_rng(seed + 1)
    played = games[~games["failed"]] if len(games) else games
    for model, summary in metrics["models"].items():
        selfplay = played[(played["seat0"] == model) & (played["seat1"] == model)]
        summary["seat0_wins"] = wins(results_of(selfplay, model), resamples, rng) if len(selfplay) else None
    crossed = head_to_head(played, models, lambda g, a: wins(results_of(g, a), resamples, rng)) if len(played) else []
    metrics.update(
        schema=SCHEMA,
        wins=crossed,
        ratings=rate_wins(win_counts(played, models, "reward"), models, resamples, rng) if crossed else {},
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
            format_interval(r["tie"], percent=True),
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
        + [format_interval(w["tie"], percent=True), format_interval(w["loss"], percent=True)]
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
