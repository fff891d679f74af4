"""Evaluation of the negotiation game (the module `NegotiationGame.evaluation` names): what each
model scores in self-play, who wins when two models (checkpoints) play each other, and ratings
from those wins.

A game is won by the seat that ends with more points than its partner (a tie when equal, no
deal included), whatever the reward mode the game was played under, so win rates compare
models trained under different modes on one scale. Cross-play of models A and B reports A's
win, tie and loss rates in each seat order and pooled, and A's share of the decided games
(wins / (wins + losses)), whose interval excluding 0.5 says one model is the stronger. Ratings
are Bradley–Terry fits to the cross-play wins (ties as halves). Intervals resample instances,
as in every report (`stats.metrics`), since games of one instance are correlated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import write_atomic
from ...records import UNNAMED_GAME, Record
from ...stats.metrics import (
    distinct_n,
    endings,
    head_to_head,
    mean_interval,
    paired_difference,
    per_instance,
    repeated_share,
    side_results,
    valid_move_rate,
    win_counts,
    win_rates,
)
from ...stats.ratings import rate_wins
from ...stats.report import (
    BOOTSTRAP_NOTE,
    add_run_row,
    format_interval,
    markdown_table,
    only_model,
    plot_series,
    report_head,
)
from .record import AGREED

GAME = "negotiation"
SCHEMA = "selfplay-gen-eval-negotiation/1"
NOTE = (
    "Points: what each seat's share of the pool is worth to it (0 without a deal; the pool is worth 10 "
    "to each seat). Joint: both seats' points over the most the two could get together. Pareto: agreed "
    "on a split no other split improves for one seat without costing the other. Distinct-2: distinct word "
    "pairs over all word pairs of a seat's messages; distinct proposals: the share of an instance's proposals "
    "that differ, averaged over instances (both low: the model says and proposes the same in every game)."
)
CROSS_NOTE = (
    "A game is won by the seat with more points. Rates are the first model's, per seat order and "
    "pooled; decided: its wins / (wins + losses). Ratings: Bradley–Terry on the Elo scale (first model 0) "
    "from cross-play wins, ties as halves."
)


def game_row(record: Record, seats: tuple[str, str]) -> dict:
    """One negotiation game as a flat row; `seats` are the labels of the models in seat 0 and 1."""
    game = record.get("game", UNNAMED_GAME)
    if game != GAME:
        raise ValueError(f"game {record['game_id']!r} is a {game} game; evaluate it with --game {game}")
    outcome: dict = dict(record["outcome"])
    events: list[dict] = [dict(e) for e in record["events"]]
    p0, p1 = outcome["points"]
    return {
        "game_id": record["game_id"],
        "instance_id": record["instance_id"],
        "seat0": seats[0],
        "seat1": seats[1],
        "points0": float(p0),
        "points1": float(p1),
        "joint": (p0 + p1) / outcome["best_joint"] if outcome.get("best_joint") else np.nan,
        "agreed": bool(outcome["agreed"]),
        "pareto_optimal": bool(outcome.get("pareto_optimal", False)),
        "moves": record["stats"]["valid_moves"],
        "invalid": record["stats"]["invalid_moves"],
        "termination": outcome["termination"],
        "failed": record.get("failure") is not None,
        **{
            f"messages{seat}": [e["text"] for e in events if e["kind"] == "message" and e["player"] == seat]
            for seat in (0, 1)
        },
        "proposals": [tuple(e["share"]) for e in events if e["kind"] == "propose" and e.get("share")],
    }


def seat_figures(record: Record, seat: int) -> dict[str, float]:
    """One seat's own points (its reward depends on the reward mode; a game people played reports
    each seat apart)."""
    outcome: dict = dict(record["outcome"])
    return {"points": float(outcome["points"][seat])}


def game_table(records: Iterable[Record], seats: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame([game_row(r, seats) for r in records])


def summarize(games: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Aggregate metrics of one model's self-play games."""

    def interval(column: str) -> dict:
        return mean_interval(per_instance(games, column).to_numpy(float), resamples, rng)

    return {
        "games": len(games),
        "instances": int(games["instance_id"].nunique()),
        "points_seat0": interval("points0"),
        "points_seat1": interval("points1"),
        "joint_share": interval("joint"),
        "agreement_rate": interval("agreed"),
        "pareto_optimal_share": interval("pareto_optimal"),
        "moves_per_game": interval("moves"),
        "valid_move_rate": valid_move_rate(games, resamples, rng),
        "failed_games": int(games["failed"].sum()),
        "terminations": endings(games),
        "diversity": diversity(games),
    }


def diversity(games: pd.DataFrame) -> dict:
    """Signs of mode collapse in self-play: few distinct word n-grams in a seat's messages, the same
    messages in many games, and the same proposal in every game of an instance (the share of an
    instance's proposals that are distinct, averaged over instances with more than one)."""
    messages = {seat: [m for ms in games[f"messages{seat}"] for m in ms] for seat in (0, 1)}
    distinct = []
    for proposals in games.groupby("instance_id")["proposals"].sum():
        if len(proposals) > 1:
            distinct.append(len(set(proposals)) / len(proposals))
    return {
        **{f"distinct_{n}_seat{seat}": distinct_n(messages[seat], n) for seat in (0, 1) for n in (1, 2)},
        "repeated_message_share": repeated_share([a + b for a, b in zip(games["messages0"], games["messages1"])]),
        "distinct_proposal_share": float(np.mean(distinct)) if distinct else None,
    }


# self-play measures compared between models on the instances both played: (metrics key, game column)
PAIRED = (
    ("joint_share", "joint"),
    ("agreement_rate", "agreed"),
    ("pareto_optimal_share", "pareto_optimal"),
    ("points_seat0", "points0"),
    ("points_seat1", "points1"),
)


def paired_self_play(selfplay: dict[str, pd.DataFrame], resamples: int, rng: np.random.Generator) -> list[dict]:
    """The first model's self-play minus each other model's, instance by instance. Instances differ far
    more than checkpoints do, so two models' intervals side by side can overlap while the paired
    difference (whether a trained model keeps the cooperation of the one it started from) is clear."""
    played = [m for m, g in selfplay.items() if len(g)]
    if not played:
        return []
    first, entries = played[0], []
    for other in played[1:]:
        diffs = {
            key: paired_difference(
                per_instance(selfplay[first], column).astype(float),
                per_instance(selfplay[other], column).astype(float),
                resamples,
                rng,
            )
            for key, column in PAIRED
        }
        if diffs["joint_share"] is not None:
            entries.append({"models": [first, other], "instances": diffs["joint_share"]["instances"], **diffs})
    return entries


def results_of(games: pd.DataFrame, model: str) -> pd.DataFrame:
    """Cross-play games from `model`'s side: its points, its partner's, win/tie/loss and agreement."""
    return side_results(games, model, "points").assign(agreed=games["agreed"].astype(float))


def cross_play(games: pd.DataFrame, models: list[str], resamples: int, rng: np.random.Generator) -> list[dict]:
    """For each pair of models with cross-play games (`stats.metrics.head_to_head`): the first
    model's win, tie and loss rates, points and agreement when it sits in seat 0, in seat 1, and
    in both together."""
    means = ("points", "partner_points", "agreed")
    return head_to_head(games, models, lambda g, a: win_rates(results_of(g, a), resamples, rng, means))


def evaluate(games: pd.DataFrame, models: list[str], resamples: int, seed: int) -> dict:
    """All metrics of a set of negotiation games whose `seat0`/`seat1` columns hold model labels."""
    rng = np.random.default_rng(seed)
    selfplay = {m: games[(games["seat0"] == m) & (games["seat1"] == m)] for m in models}
    crossed = cross_play(games, models, resamples, rng)
    return {
        "schema": SCHEMA,
        "game": GAME,
        "bootstrap": {"resamples": resamples, "unit": "instance", "level": 0.95, "seed": seed},
        "models": {m: summarize(g, resamples, rng) for m, g in selfplay.items()},
        "cross_play": crossed,
        "ratings": rate_wins(win_counts(games, models, "points"), models, resamples, rng) if crossed else {},
        "paired_self_play": paired_self_play(selfplay, resamples, rng),
    }


def summary_text(metrics: dict) -> str:
    """Self-play per model: points per seat, joint share, deals and valid moves."""
    head = ["model", "games", "instances", "points seat 0", "points seat 1", "joint", "agreement", "Pareto", "valid"]
    head += ["distinct-2 seat 0 / 1", "distinct proposals"]
    rows = [
        [
            label,
            str(s["games"]),
            str(s["instances"]),
            format_interval(s["points_seat0"], digits=2),
            format_interval(s["points_seat1"], digits=2),
            format_interval(s["joint_share"], percent=True),
            format_interval(s["agreement_rate"], percent=True),
            format_interval(s["pareto_optimal_share"], percent=True),
            format_interval(s["valid_move_rate"], percent=True),
            *_diversity_cells(s.get("diversity", {})),
        ]
        for label, s in metrics["models"].items()
    ]
    return markdown_table(head, rows)


NO_DEAL_NOTE = (
    "Games without a deal, by how they ended: inconsistent, both seats proposed and the proposals do not add up "
    "to the pool; max_moves, the move limit came first; max_invalid, a seat made too many invalid moves in a "
    "row; max_new_tokens and context_length, a turn outgrew its limits."
)


def no_deal_table(metrics: dict) -> str | None:
    """Per model, its self-play games without a deal by termination reason; None when every game ended in one."""
    ends = {label: s.get("terminations", {}) for label, s in metrics["models"].items()}
    reasons = sorted(
        {r for counts in ends.values() for r in counts if r != AGREED},
        key=lambda r: -sum(counts.get(r, {}).get("games", 0) for counts in ends.values()),
    )
    if not reasons:
        return None
    rows = [
        [label, str(metrics["models"][label]["games"])] + [str(counts.get(r, {}).get("games", 0)) for r in reasons]
        for label, counts in ends.items()
    ]
    return markdown_table(["model", "games", *reasons], rows)


PAIRED_NOTE = (
    "Paired: the first model's self-play minus the other's, per instance both played (means of per-instance "
    "differences, in percentage points and points), so the instances' own spread does not hide a change."
)


def paired_table(metrics: dict) -> str:
    head = ["first − other", "instances", "joint", "agreement", "Pareto", "points seat 0", "points seat 1"]
    rows = [
        [
            f"{e['models'][0]} − {e['models'][1]}",
            str(e["instances"]),
            *(
                format_interval(e[key], percent=True)
                for key in ("joint_share", "agreement_rate", "pareto_optimal_share")
            ),
            *(format_interval(e[key], digits=2) for key in ("points_seat0", "points_seat1")),
        ]
        for e in metrics.get("paired_self_play", [])
    ]
    return markdown_table(head, rows)


def _diversity_cells(diversity: dict) -> list[str]:
    def cell(key: str) -> str:
        value = diversity.get(key)
        return "–" if value is None else f"{value:.2f}"

    return [f"{cell('distinct_2_seat0')} / {cell('distinct_2_seat1')}", cell("distinct_proposal_share")]


def cross_play_table(metrics: dict) -> str:
    head = ["models", "first model sits in", "games", "win [95% CI]", "tie", "loss", "decided: win share", "points"]
    rows = [
        [
            f"{e['models'][0]} vs {e['models'][1]}",
            {"seat0": "seat 0", "seat1": "seat 1", "both": "both"}[order],
            str(r["games"]),
            format_interval(r["win"], percent=True),
            format_interval(r["tie"], percent=True),
            format_interval(r["loss"], percent=True),
            format_interval(r["decided_win_share"], percent=True),
            f"{r['points']['mean']:.2f} vs {r['partner_points']['mean']:.2f}",
        ]
        for e in metrics["cross_play"]
        for order in ("seat0", "seat1", "both")
        if (r := e[order]) is not None
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
    """metrics.json and report.md; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [
        *report_head("Evaluation: negotiation", inputs, metrics),
        "## Self-play",
        "",
        summary_text(metrics),
        "",
        NOTE,
    ]
    if (no_deal := no_deal_table(metrics)) is not None:
        sections += ["", no_deal, "", NO_DEAL_NOTE]
    if metrics.get("paired_self_play"):
        sections += ["", paired_table(metrics), "", PAIRED_NOTE]
    plots = []
    if metrics["cross_play"]:
        sections += ["", "## Cross-play", "", cross_play_table(metrics), "", ratings_table(metrics), "", CROSS_NOTE]
        ratings = metrics["ratings"]
        plot_series(list(ratings), list(ratings.values()), "rating (Elo, first = 0)", out_dir / "rating.png", "model")
        sections += ["", "![Rating per model](rating.png)"]
        plots.append(out_dir / "rating.png")
    write_atomic(out_dir / "report.md", "\n".join(sections) + "\n")
    write_atomic(out_dir / "metrics.json", json.dumps({**metrics, "inputs": inputs}, indent=1) + "\n")
    return [out_dir / "metrics.json", out_dir / "report.md", *plots]


# what a run-level row keeps of a model's self-play, beside its label
RUN_KEYS = ("points_seat0", "points_seat1", "joint_share", "agreement_rate", "valid_move_rate")
RUN_NOTE = (
    "Self-play of one model has no winner: the run's ratings and win rates come from cross-play of its "
    "checkpoints (run_selfplay_iteration.sh's crossplay stage, RUN_DIR/report/crossplay)."
)


def append_to_run(run_dir: Path, metrics: dict, source: str) -> dict:
    """Add one model's self-play as the next row of a negotiation run's report (or replace the row
    with its label), so every checkpoint's points and deals sit side by side. Returns the run."""
    label = only_model(metrics)
    run = add_run_row(run_dir, GAME, {"label": label, "source": source, "summary": metrics["models"][label]})
    labels = [f"{r['iteration']}: {r['label']}" for r in run["rows"]]
    run["iterations"] = [
        {"iteration": r["iteration"], "label": lab, **{k: r["summary"][k] for k in RUN_KEYS}}
        for lab, r in zip(labels, run["rows"])
    ]
    table = summary_text({"models": {lab: r["summary"] for lab, r in zip(labels, run["rows"])}})
    note = BOOTSTRAP_NOTE.format(resamples=metrics["bootstrap"]["resamples"])
    report = ["# Run report: negotiation", "", note, "", "## Self-play per iteration", "", table, "", NOTE]
    report += ["", RUN_NOTE]
    write_atomic(run_dir / "report.md", "\n".join(report) + "\n")
    write_atomic(run_dir / "metrics.json", json.dumps(run, indent=1) + "\n")
    return run
