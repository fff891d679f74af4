"""Evaluation of a TextArena game (the module `TextArenaGame.evaluation` names): the generic
evaluation (rewards per seat, moves, endings, wording) and, since these games are won and lost,
who wins: per seat order and pooled, each model's win, draw and loss rates against each other
model (counted by `stats.metrics`, as every game's wins are: a draw is a `tie` in metrics.json), and
Bradley–Terry ratings from those games. In Kuhn Poker, each player's strategy as its moves show it,
and that strategy's exact chips a hand against the equilibrium and a best response (`kuhn_strategy`).

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
from ...stats.report import format_interval, format_number, markdown_table, report_head
from . import kuhn_strategy

SCHEMA = "selfplay-gen-eval-textarena/1"
WIN_NOTE = (
    "Agreement, in these games: played out by their rules (not ended by an invalid move or a limit). "
    "A game is won by the seat with the higher reward (the environment's; a seat that hits a limit by itself, "
    "invalid moves or a move cut at the token limit, loses; a game cut short by another limit is a draw). "
    "Rates are the first model's, with it in seat 0, in seat 1 and both pooled; decided: its wins / "
    "(wins + losses). Self-play rows are seat 0's. Ratings: Bradley–Terry on the Elo scale (first model 0) "
    "from cross-play wins, draws as halves. Chips a hand (Kuhn Poker): the first model's chips won a hand, "
    "against Kuhn Poker's value of -1/18 for the first to act, 1/18 for the second (seat 1 acts first in the "
    "odd-numbered hands: in KuhnPoker-v0's three, -1/54 a hand in seat 1, 1/54 in seat 0), 0 over both seats."
)
ORDERS = {"seat0": "seat 0", "seat1": "seat 1", "both": "both"}

__all__ = ["append_to_run", "evaluate", "game_table", "summary_text", "write_report"]


def game_table(records: Iterable[Record], seats: tuple[str, str]) -> pd.DataFrame:
    """The generic rows, with each seat's chips a hand where the environment keeps chips (Kuhn
    Poker's `chips` and `hands`, `fixes.py`), else NaN, and there each move's information set
    (`kuhn_moves`: `kuhn_strategy.decisions`) and their counts at each set (`kuhn_strategy.move_counts`)."""
    rows = []
    for record in records:
        row, outcome = generic.game_row(record, seats), cast(dict[str, Any], record["outcome"])
        chips, hands = outcome.get("chips"), outcome.get("hands")
        for seat in range(2):
            row[f"chips{seat}"] = chips[seat] / hands if chips and hands else np.nan
        row["kuhn_moves"] = kuhn_strategy.decisions(record) if chips else []
        row.update(kuhn_strategy.move_counts(row["kuhn_moves"]) if chips else {})
        rows.append(row)
    return pd.DataFrame(rows)


def strategies(games: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Each player's Kuhn Poker strategy from its moves in `games` (`kuhn_strategy.summarize`), by label;
    empty for other games."""
    moves = pd.DataFrame(
        [
            (game.instance_id, game.seat0 if seat == 0 else game.seat1, node, aggressive)
            for game in games.itertuples()
            for seat, node, aggressive in game.kuhn_moves
        ],
        columns=["instance_id", "player", "node", "aggressive"],
    )
    return {player: kuhn_strategy.summarize(own, resamples, rng) for player, own in moves.groupby("player", sort=False)}


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
        strategies=strategies(played, resamples, rng) if "kuhn_moves" in played else {},
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


STRATEGY_NOTE = (
    "Strategy: each player's share of the aggressive move (bet, or call facing a bet) at each of a hand's "
    "twelve information sets, pooled over its hands, with the moves it made there. From those shares, exactly "
    "over the six deals: its chips a hand against the equilibrium (the game's value: -1/18 to the first to act, "
    "1/18 to the second) and against the best response to it (the least it can be held to; read from sampled "
    "shares, it also exploits their sampling noise, so it reads low by a few hundredths at a few hundred moves "
    "a set). A share never observed where a value depends on it leaves that value out (–). The intervals "
    "resample instances; the values hold for a player whose play in a hand does not depend on the hands before."
)


def strategy_tables(metrics: dict) -> list[str]:
    players = metrics.get("strategies") or {}
    if not players:
        return []
    values = markdown_table(
        ["player", "moves", *kuhn_strategy.VALUES.values()],
        [
            [player, str(s["moves"]), *(format_interval(s[key]) for key in kuhn_strategy.VALUES)]
            for player, s in players.items()
        ],
    )
    rows = []
    for node, equilibrium in zip(kuhn_strategy.NODES, kuhn_strategy.EQUILIBRIUM, strict=True):
        name = kuhn_strategy.node_name(node)
        seen = [players[p]["shares"][name] for p in players]
        rows.append(
            [name, format_number(equilibrium, 2)]
            + [f"{format_number(s['share'], 2)} ({s['moves']})" if s["moves"] else "–" for s in seen]
        )
    shares = markdown_table(["information set: move", "the equilibrium's share", *players], rows)
    return ["", "## Strategy", "", values, "", shares, "", STRATEGY_NOTE]


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
    sections += ["", WIN_NOTE, *strategy_tables(metrics)]
    write_atomic(out_dir / "report.md", "\n".join(sections) + "\n")
    write_atomic(out_dir / "metrics.json", json.dumps({**metrics, "inputs": inputs}, indent=1) + "\n")
    return [out_dir / "metrics.json", out_dir / "report.md"]
