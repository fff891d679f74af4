"""The evaluation every game has until it brings its own (`Game.evaluation`'s default): what the
protocol guarantees of any game record, its reward per seat, agreement, moves, invalid moves and
endings, with bootstrap intervals over instances; cross-play as each seat order's rewards; and
the wording of its messages. A new game is evaluated, reported and appended to a run's report
with nothing but its folder and its registry line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import write_atomic
from ..records import UNNAMED_GAME, Record
from ..stats.metrics import (
    distinct_n,
    endings,
    mean_interval,
    paired_difference,
    per_instance,
    repeated_share,
    valid_move_rate,
)
from ..stats.report import (
    BOOTSTRAP_NOTE,
    add_run_row,
    format_interval,
    format_number,
    markdown_table,
    only_model,
    report_head,
)

SCHEMA = "selfplay-gen-eval-generic/1"
NOTE = (
    "Reward: each seat's reward (`outcome.rewards`), and their mean; agreement: the games the seats "
    "agreed in; valid moves: the share of all attempted moves that were valid. Distinct-2: distinct "
    "word pairs over all word pairs of the messages; repeated: the share of messages also said in another game."
)


def game_row(record: Record, seats: tuple[str, str]) -> dict:
    """One game as a flat row of what every record holds; `seats` are the labels of the models
    in seat 0 and seat 1."""
    outcome = record["outcome"]
    rewards = [float(r) for r in outcome["rewards"]]
    return {
        "game": record.get("game", UNNAMED_GAME),
        "game_id": record["game_id"],
        "instance_id": record["instance_id"],
        "seat0": seats[0],
        "seat1": seats[1],
        "reward0": rewards[0],
        "reward1": rewards[1],
        "reward": float(np.mean(rewards)),
        "agreed": bool(outcome["agreed"]),
        "moves": record["stats"]["valid_moves"],
        "invalid": record["stats"]["invalid_moves"],
        "termination": outcome["termination"],
        "failed": record.get("failure") is not None,
        "message_texts": [e["text"] for e in record["events"] if e["kind"] not in ("invalid", "stop") and e["text"]],
    }


def game_table(records: Iterable[Record], seats: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame([game_row(r, seats) for r in records])


def summarize(games: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Aggregate metrics of one model's self-play games."""

    def interval(column: str) -> dict:
        return mean_interval(per_instance(games, column).to_numpy(float), resamples, rng)

    messages = [m for ms in games["message_texts"] for m in ms]
    return {
        "games": len(games),
        "instances": int(games["instance_id"].nunique()),
        "mean_reward": interval("reward"),
        "reward_seat0": interval("reward0"),
        "reward_seat1": interval("reward1"),
        "agreement_rate": interval("agreed"),
        "moves_per_game": interval("moves"),
        "valid_move_rate": valid_move_rate(games, resamples, rng),
        "failed_games": int(games["failed"].sum()),
        "terminations": endings(games),
        "diversity": {
            "distinct_1": distinct_n(messages, 1),
            "distinct_2": distinct_n(messages, 2),
            "repeated_message_share": repeated_share(list(games["message_texts"])),
        },
    }


def cross_play(games: pd.DataFrame, models: list[str], resamples: int, rng: np.random.Generator) -> list[dict]:
    """Each seat order two different models played in: each seat's reward, and the first model's
    reward minus the second's, paired by instance."""
    entries = []
    met = games[(games["seat0"] != games["seat1"]) & games["seat0"].isin(models) & games["seat1"].isin(models)]
    for (a, b), played in met.groupby(["seat0", "seat1"], sort=False):
        entries.append(
            {
                "seats": [a, b],
                "games": len(played),
                "instances": int(played["instance_id"].nunique()),
                "reward_seat0": mean_interval(per_instance(played, "reward0").to_numpy(float), resamples, rng),
                "reward_seat1": mean_interval(per_instance(played, "reward1").to_numpy(float), resamples, rng),
                "seat0_minus_seat1": paired_difference(
                    per_instance(played, "reward0"), per_instance(played, "reward1"), resamples, rng
                ),
            }
        )
    return entries


def evaluate(games: pd.DataFrame, models: list[str], resamples: int, seed: int) -> dict:
    """All metrics of a set of games whose `seat0`/`seat1` columns hold model labels."""
    rng = np.random.default_rng(seed)
    selfplay = {m: games[(games["seat0"] == m) & (games["seat1"] == m)] for m in models}
    return {
        "schema": SCHEMA,
        "game": str(games["game"].iloc[0]) if len(games) else None,
        "bootstrap": {"resamples": resamples, "unit": "instance", "level": 0.95, "seed": seed},
        "models": {m: summarize(g, resamples, rng) for m, g in selfplay.items() if len(g)},
        "cross_play": cross_play(games, models, resamples, rng),
    }


def summary_text(metrics: dict) -> str:
    """Self-play per model: rewards, agreement, moves and wording."""
    head = ["model", "games", "instances", "reward [95% CI]", "seat 0", "seat 1", "agreement", "valid moves"]
    head += ["moves/game", "distinct-2", "repeated"]
    rows = [
        [
            label,
            str(s["games"]),
            str(s["instances"]),
            format_interval(s["mean_reward"]),
            format_interval(s["reward_seat0"]),
            format_interval(s["reward_seat1"]),
            format_interval(s["agreement_rate"], percent=True),
            format_interval(s["valid_move_rate"], percent=True),
            format_number(s["moves_per_game"]["mean"], 1),
            format_number(s["diversity"]["distinct_2"]),
            format_number(s["diversity"]["repeated_message_share"], percent=True),
        ]
        for label, s in metrics["models"].items()
    ]
    return markdown_table(head, rows)


def cross_play_table(metrics: dict) -> str:
    rows = [
        [
            f"{e['seats'][0]} \\| {e['seats'][1]}",
            str(e["games"]),
            format_interval(e["reward_seat0"]),
            format_interval(e["reward_seat1"]),
            "–" if e["seat0_minus_seat1"] is None else format_interval(e["seat0_minus_seat1"]),
        ]
        for e in metrics["cross_play"]
    ]
    return markdown_table(["seats", "games", "reward seat 0", "reward seat 1", "seat 0 − seat 1 (paired)"], rows)


def write_report(out_dir: Path, metrics: dict, games: pd.DataFrame, inputs: list[dict]) -> list[Path]:
    """metrics.json and report.md; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"Evaluation: {metrics['game']}" if metrics.get("game") else "Evaluation"
    sections = [*report_head(title, inputs, metrics), "## Self-play", "", summary_text(metrics), "", NOTE]
    if metrics["cross_play"]:
        sections += ["", "## Cross-play", "", cross_play_table(metrics)]
    write_atomic(out_dir / "report.md", "\n".join(sections) + "\n")
    write_atomic(out_dir / "metrics.json", json.dumps({**metrics, "inputs": inputs}, indent=1) + "\n")
    return [out_dir / "metrics.json", out_dir / "report.md"]


def append_to_run(run_dir: Path, metrics: dict, source: str) -> dict:
    """Add one model's self-play as the next row of a run's report (or replace the row with its
    label), so every checkpoint's rewards sit side by side. Returns the run."""
    label = only_model(metrics)
    game = metrics.get("game") or UNNAMED_GAME
    run = add_run_row(run_dir, game, {"label": label, "source": source, "summary": metrics["models"][label]})
    labels = [f"{r['iteration']}: {r['label']}" for r in run["rows"]]
    run["iterations"] = [
        {"iteration": r["iteration"], "label": lab, "mean_reward": r["summary"]["mean_reward"]}
        for lab, r in zip(labels, run["rows"])
    ]
    table = summary_text({"models": {lab: r["summary"] for lab, r in zip(labels, run["rows"])}})
    note = BOOTSTRAP_NOTE.format(resamples=metrics["bootstrap"]["resamples"])
    report = [f"# Run report: {game}", "", note, "", "## Self-play per iteration", "", table, "", NOTE]
    write_atomic(run_dir / "report.md", "\n".join(report) + "\n")
    write_atomic(run_dir / "metrics.json", json.dumps(run, indent=1) + "\n")
    return run
