"""The matching game's evaluation report: what gets compared (self-play per model, humans on
the same instances, cross-play, iterations, ratings), and how it is written (metrics.json,
report.md, PNG plots); the module `MatchingGame.evaluation` names (`selfplay-gen eval`).

A run-level report collects one evaluation per iteration: each appended evaluation keeps its
per-instance rewards, so paired differences and ratings across iterations are recomputed from
them every time a row is added.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import write_atomic
from ...stats.metrics import mean_interval, paired_difference
from ...stats.ratings import rate
from ...stats.report import (
    BOOTSTRAP_NOTE,
    add_run_row,
    format_interval,
    format_number,
    format_paired,
    markdown_table,
    only_model,
    plot_histograms,
    plot_panels,
    plot_series,
    report_head,
)
from .metrics import GAME, human_games_on, per_instance, summarize
from .metrics import game_table as game_table
from .metrics import seat_figures as seat_figures

SCHEMA = "selfplay-gen-eval/1"
HUMANS = "humans"
SUMMARY_NOTE = (
    "Random matching: the exact mean normalized reward of a uniformly random assignment of the same "
    "instances (sum of the table / 8 / best); model − random is paired by instance. Reward when agreed: the "
    "mean normalized reward of the games that reached an agreement, how good the agreed assignments are apart "
    "from how often there is one. Optimal: agreed on a "
    "best assignment (raw reward == best). Valid moves: share of all attempted moves that were valid. "
    "Cells stated: table cells named with a value in messages (`Ava Li: GLUE 421`); grounding: share of "
    "them whose value is in the speaker's own table. Own plan: what a seat's valid proposals are worth on the "
    "table it sees (hidden cells guessed at 50) as a share of the best plan it could make alone; a uniformly "
    "random matching averages about 0.7."
)
DIALOGUE_NOTE = (
    "Distinct-n: distinct word n-grams / all n-grams of the messages; repeated msgs: share of messages "
    "whose text also occurs in another game; top proposal: the most proposed assignment's share of all "
    "proposals (near 100%: one assignment whatever the table)."
)


# ---------------------------------------------------------------- what is compared


def evaluate(games: pd.DataFrame, models: list[str], resamples: int, seed: int) -> dict:
    """All metrics of a set of games whose `seat0`/`seat1` columns hold model labels. `models`:
    the self-play models in order (several are treated as iterations of one run)."""
    rng = np.random.default_rng(seed)
    selfplay = {m: games[(games["seat0"] == m) & (games["seat1"] == m)] for m in models}
    summaries = {m: summarize(g, resamples, rng) for m, g in selfplay.items()}
    humans = human_games_on(games)
    took_part = pd.DataFrame({m: per_instance(games[(games["seat0"] == m) | (games["seat1"] == m)]) for m in models})
    ratings = rate(took_part, resamples, rng) if len(models) > 1 else {}
    selfplay_rewards = [per_instance(selfplay[m]) for m in models]
    return {
        "schema": SCHEMA,
        "bootstrap": {"resamples": resamples, "unit": "instance", "level": 0.95, "seed": seed},
        "models": summaries,
        HUMANS: summarize(humans, resamples, rng) if len(humans) else None,
        "minus_humans": {
            m: paired_difference(r, per_instance(humans), resamples, rng) for m, r in zip(models, selfplay_rewards)
        }
        if len(humans)
        else {},
        "iterations": iteration_entries(
            models, selfplay_rewards, [summaries[m] for m in models], [ratings.get(m) for m in models], resamples, rng
        ),
        "cross_play": cross_play(games, models, resamples, rng),
        "ratings": ratings,
        "per_instance": {m: {k: float(v) for k, v in r.items()} for m, r in zip(models, selfplay_rewards)},
    }


# What an iteration entry copies from its model's summary (absent from summaries of older versions).
ITERATION_KEYS = (
    "mean_normalized_reward",
    "random_matching_reward",
    "minus_random",
    "agreement_rate",
    "agreed_reward",
    "valid_move_rate",
    "cells_stated_per_game",
    "grounding_rate",
    "proposals_per_game",
    "own_plan_share",
    "token_surprisal",
)


def iteration_entries(
    labels: list[str],
    rewards: list[pd.Series],
    summaries: list[dict],
    ratings: list[dict | None],
    resamples: int,
    rng: np.random.Generator,
) -> list[dict]:
    """Each model (checkpoint) in order with its reward beside the random-matching floor, paired
    against the previous one and the initial one (the warm start)."""
    return [
        {
            "iteration": i,
            "label": label,
            **{k: summaries[i].get(k) for k in ITERATION_KEYS},
            "vs_previous": paired_difference(rewards[i], rewards[i - 1], resamples, rng) if i else None,
            "vs_initial": paired_difference(rewards[i], rewards[0], resamples, rng) if i else None,
            "rating": ratings[i],
        }
        for i, label in enumerate(labels)
    ]


def cross_play(games: pd.DataFrame, models: list[str], resamples: int, rng: np.random.Generator) -> list[dict]:
    """For each pair with cross-play games: every seat pairing on the instances all of them
    share, and cross-play minus each model's self-play, paired by instance."""
    results = []
    for a, b in combinations(models, 2):
        pairings = {
            (s0, s1): per_instance(games[(games["seat0"] == s0) & (games["seat1"] == s1)])
            for s0, s1 in ((a, a), (b, b), (a, b), (b, a))
        }
        seats = list(zip(games["seat0"], games["seat1"]))
        cross = games[[s in ((a, b), (b, a)) for s in seats]]
        if cross.empty:
            continue
        shared = pairings[a, a].index.intersection(pairings[b, b].index).intersection(per_instance(cross).index)
        cross_rewards = per_instance(cross[cross["instance_id"].isin(shared)])
        floor = per_instance(cross[cross["instance_id"].isin(shared)], "random_matching_reward")
        results.append(
            {
                "models": [a, b],
                "instances": len(shared),
                "random_matching_reward": mean_interval(floor.to_numpy(), resamples, rng),
                "pairings": [
                    {"seats": [s0, s1], **mean_interval(r[r.index.intersection(shared)].to_numpy(), resamples, rng)}
                    for (s0, s1), r in pairings.items()
                ],
                "cross_minus_self": {
                    m: paired_difference(cross_rewards, pairings[m, m][shared], resamples, rng) for m in (a, b)
                },
            }
        )
    return results


# ---------------------------------------------------------------- writing


def summary_table(summaries: dict[str, dict]) -> str:
    """Outcomes: reward beside the random-matching floor of the same instances, agreement,
    valid moves and grounding (`.get`: run reports keep summaries of older versions)."""
    head = [
        "model",
        "games",
        "instances",
        "mean normalized reward [95% CI]",
        "random matching (same instances)",
        "model − random (paired)",
        "agreement",
        "reward when agreed",
        "optimal",
        "valid moves",
        "cells stated/game",
        "grounding [95% CI]",
        "own plan [95% CI]",
    ]
    return markdown_table(
        head,
        [
            [
                label,
                str(s["games"]),
                str(s["instances"]),
                format_interval(s["mean_normalized_reward"]),
                format_interval(s.get("random_matching_reward")),
                format_paired(s.get("minus_random")),
                format_interval(s["agreement_rate"], percent=True),
                format_interval(s.get("agreed_reward")),
                format_interval(s["optimal_share"], percent=True),
                format_interval(s.get("valid_move_rate"), percent=True),
                format_interval(s.get("cells_stated_per_game"), digits=1),
                format_interval(s.get("grounding_rate"), percent=True),
                format_interval(s.get("own_plan_share")),
            ]
            for label, s in summaries.items()
        ],
    )


def summary_text(metrics: dict) -> str:
    """The summary of an evaluation's models, with the humans where they played."""
    return summary_table({**metrics["models"], **({HUMANS: metrics[HUMANS]} if metrics[HUMANS] else {})})


def dialogue_table(summaries: dict[str, dict]) -> str:
    """How the games were played: length, wording and signs of mode collapse."""
    head = [
        "model",
        "moves/game",
        "messages/game",
        "proposals/game",
        "words/game",
        "distinct-1",
        "distinct-2",
        "repeated msgs",
        "top proposal",
        "words/response",
        "tokens/response",
        "nats/token",
    ]
    return markdown_table(
        head,
        [
            [
                label,
                format_number(s["moves_per_game"]["mean"], 1),
                format_number(s["messages_per_game"]["mean"], 1),
                format_number((s.get("proposals_per_game") or {}).get("mean"), 1),
                format_number(s["words_per_game"]["mean"], 1),
                format_number(d["distinct_1"]),
                format_number(d["distinct_2"]),
                format_number(d["repeated_message_share"], percent=True),
                format_number(d.get("top_proposal_share"), percent=True),
                format_number(d["response_words"], 1),
                format_number(d["response_tokens"], 1),
                format_number((s.get("token_surprisal") or {}).get("mean"), 3),
            ]
            for label, s in summaries.items()
            for d in [s["diversity"]]
        ],
    )


def terminations_table(summaries: dict[str, dict]) -> str:
    reasons = sorted({r for s in summaries.values() for r in s["terminations"]})
    lines = ["| model | " + " | ".join(reasons) + " | failed games |", "|---|" + "---|" * (len(reasons) + 1)]
    for label, s in summaries.items():
        shares = [format_number(s["terminations"].get(r, {}).get("share", 0.0), percent=True) for r in reasons]
        lines.append(f"| {label} | " + " | ".join(shares) + f" | {s['failed_games']} |")
    return "\n".join(lines)


def iterations_table(entries: list[dict]) -> str:
    head = [
        "iteration",
        "model",
        "mean normalized reward [95% CI]",
        "random matching (same instances)",
        "− random (paired)",
        "− previous (paired)",
        "− initial (paired)",
        "agreement",
        "reward when agreed",
        "valid moves",
        "grounding",
        "own plan",
        "rating (Elo) [95% CI]",
    ]
    return markdown_table(
        head,
        [
            [
                str(e["iteration"]),
                e["label"],
                format_interval(e["mean_normalized_reward"]),
                format_interval(e["random_matching_reward"]),
                format_paired(e["minus_random"]),
                format_paired(e["vs_previous"]),
                format_paired(e["vs_initial"]),
                format_interval(e["agreement_rate"], percent=True),
                format_interval(e.get("agreed_reward")),
                format_interval(e["valid_move_rate"], percent=True),
                format_interval(e["grounding_rate"], percent=True),
                format_interval(e.get("own_plan_share")),
                format_interval(e["rating"], digits=0),
            ]
            for e in entries
        ],
    )


def cross_play_table(results: list[dict]) -> str:
    lines = [
        "| models | instances | seats: reward [95% CI] | random matching (same instances) | "
        "cross-play − self-play (paired) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        pairings = "<br>".join(f"{s0} \\| {s1}: {format_interval(p)}" for p in r["pairings"] for s0, s1 in [p["seats"]])
        minus = "<br>".join(f"− {m} \\| {m}: {format_interval(d)}" for m, d in r["cross_minus_self"].items())
        lines.append(
            f"| {r['models'][0]} vs {r['models'][1]} | {r['instances']} | {pairings} | "
            f"{format_interval(r['random_matching_reward'])} | {minus} |"
        )
    return "\n".join(lines)


def write_report(out_dir: Path, metrics: dict, games: pd.DataFrame, inputs: list[dict]) -> list[Path]:
    """metrics.json, report.md and the plots for one evaluation; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    models = list(metrics["models"])
    groups = {m: games[(games["seat0"] == m) & (games["seat1"] == m)] for m in models}
    if metrics[HUMANS]:
        groups[HUMANS] = human_games_on(games)
    plots = {"reward_distribution.png": "Normalized reward per game", "moves_per_game.png": "Valid moves per game"}
    plot_histograms(
        {m: g["normalized_reward"].to_numpy() for m, g in groups.items()},
        np.linspace(0, 1, 21),
        "normalized reward",
        out_dir / "reward_distribution.png",
    )
    top = max(int(g["moves"].max()) for g in groups.values())
    plot_histograms(
        {m: g["moves"].to_numpy() for m, g in groups.items()},
        np.arange(0, top + 2) - 0.5,
        "valid moves per game",
        out_dir / "moves_per_game.png",
    )
    entries = metrics["iterations"]
    if len(entries) > 1:
        plot_series(
            models,
            [e["mean_normalized_reward"] for e in entries],
            "mean normalized reward",
            out_dir / "reward_by_iteration.png",
        )
        plot_series(models, [e["rating"] for e in entries], "rating (Elo, first = 0)", out_dir / "rating.png")
        plots.update({"reward_by_iteration.png": "Reward by iteration", "rating.png": "Rating per checkpoint"})

    summaries = {**metrics["models"], **({HUMANS: metrics[HUMANS]} if metrics[HUMANS] else {})}
    sections = [
        *report_head("Evaluation", inputs, metrics),
        "## Summary",
        "",
        summary_table(summaries),
        "",
        SUMMARY_NOTE
        + (" Humans: the people who played the same instances (one game each)." if metrics[HUMANS] else ""),
        *(
            [
                "",
                "Model minus humans, paired by instance: "
                + "; ".join(
                    f"{m}: {format_interval(d)} (n={d['instances']})" for m, d in metrics["minus_humans"].items() if d
                ),
            ]
            if metrics["minus_humans"]
            else []
        ),
        "",
        "## Dialogue",
        "",
        dialogue_table(summaries),
        "",
        DIALOGUE_NOTE,
        "",
        "## How games ended",
        "",
        terminations_table(summaries),
    ]
    if len(entries) > 1:
        sections += ["", "## Iterations", "", iterations_table(entries)]
    if metrics["cross_play"]:
        sections += ["", "## Cross-play", "", cross_play_table(metrics["cross_play"])]
    sections += ["", "## Plots", "", *[f"![{title}]({name})" for name, title in plots.items()], ""]
    write_atomic(out_dir / "report.md", "\n".join(sections))
    metrics = {**metrics, "inputs": inputs, "plots": list(plots)}
    write_atomic(out_dir / "metrics.json", json.dumps(metrics, indent=1) + "\n")
    return [out_dir / "metrics.json", out_dir / "report.md", *(out_dir / p for p in plots)]


# ---------------------------------------------------------------- run-level report


# the run report's panels of play by iteration: a measure's name and its key in a model's summary
STRATEGY_SERIES = {
    "valid-move rate": "valid_move_rate",
    "agreement": "agreement_rate",
    "reward when agreed": "agreed_reward",
    "cells stated a game": "cells_stated_per_game",
    "grounded share": "grounding_rate",
    "proposals a game": "proposals_per_game",
    "proposals' own-plan share": "own_plan_share",
    "nats a sampled token": "token_surprisal",
}


def append_to_run(run_dir: Path, metrics: dict, source: str) -> dict:
    """Add an evaluation of one self-play model as the next iteration of a run-level report (or
    replace the row with its label) and rewrite that report. Returns the run's metrics."""
    label = only_model(metrics)
    row = {"label": label, "source": source, "summary": metrics["models"][label]}
    run = add_run_row(run_dir, GAME, {**row, "per_instance": metrics["per_instance"][label]})
    path = run_dir / "metrics.json"
    rows, resamples, seed = run["rows"], metrics["bootstrap"]["resamples"], metrics["bootstrap"]["seed"]
    rng = np.random.default_rng(seed)
    rewards = [pd.Series(r["per_instance"], dtype=float) for r in rows]
    ratings = rate(pd.DataFrame(dict(enumerate(rewards))), resamples, rng) if len(rows) > 1 else {}
    labels = [f"{r['iteration']}: {r['label']}" for r in rows]
    run["iterations"] = iteration_entries(
        labels, rewards, [r["summary"] for r in rows], [ratings.get(i) for i in range(len(rows))], resamples, rng
    )
    plot_series(
        labels,
        [r["summary"]["mean_normalized_reward"] for r in rows],
        "mean normalized reward",
        run_dir / "reward_by_iteration.png",
    )
    plot_series(
        labels,
        [r["summary"]["moves_per_game"] for r in rows],
        "valid moves per game",
        run_dir / "moves_by_iteration.png",
    )
    # what the seats do, iteration by iteration: the strategy a run discovers (sharing the table before
    # proposing shows as more cells stated, grounded, and fewer proposals) and whether its policy still explores
    plot_panels(
        labels,
        {name: [r["summary"].get(key) for r in rows] for name, key in STRATEGY_SERIES.items()},
        run_dir / "strategy_by_iteration.png",
    )
    plots = {
        "reward_by_iteration.png": "Reward by iteration",
        "moves_by_iteration.png": "Moves per game",
        "strategy_by_iteration.png": "Play by iteration",
    }
    if ratings:
        plot_series(
            labels, [e["rating"] for e in run["iterations"]], "rating (Elo, iteration 0 = 0)", run_dir / "rating.png"
        )
        plots["rating.png"] = "Rating per checkpoint"
    summaries = {lab: r["summary"] for lab, r in zip(labels, rows)}
    write_atomic(
        run_dir / "report.md",
        "\n".join(
            [
                "# Run report",
                "",
                BOOTSTRAP_NOTE.format(resamples=resamples)
                + " Paired differences and ratings use the instances two iterations share.",
                "",
                "## Iterations",
                "",
                iterations_table(run["iterations"]),
                "",
                "## Metrics per iteration",
                "",
                summary_table(summaries),
                "",
                SUMMARY_NOTE,
                "",
                dialogue_table(summaries),
                "",
                "## How games ended",
                "",
                terminations_table(summaries),
                "",
                "## Plots",
                "",
                *[f"![{title}]({name})" for name, title in plots.items()],
                "",
            ]
        ),
    )
    write_atomic(path, json.dumps(run, indent=1) + "\n")
    return run
