"""How every game's evaluation report is written: its opening lines, interval cells, markdown
tables, PNG plots, and the run-level report that collects one evaluation per iteration.

A game's own tables and sections live in its package (`Game.evaluation`); they are built from
these pieces, so every report reads and is written the same way.

A run-level report (`add_run_row`) keeps one row per iteration; adding an evaluation under a
label the run already has (a resumed iteration) replaces that row in place, so appending is
idempotent.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from ..atomic import write_atomic
from ..records import UNNAMED_GAME

RUN_SCHEMA = "selfplay-gen-run/1"
BOOTSTRAP_NOTE = (
    "Intervals are 95% percentile bootstrap intervals over instances ({resamples} resamples): "
    "instances are drawn with replacement, not games, because the games of one instance are "
    "correlated. Means are means of per-instance means."
)


def report_head(title: str, inputs: list[dict], metrics: dict) -> list[str]:
    """The opening lines of every game's report: its inputs and how its intervals are made."""
    return [
        f"# {title}",
        "",
        "Inputs:",
        "",
        *[f"- `{i['file']}`: seats {i['seats'][0]} | {i['seats'][1]}, {i['games']} games" for i in inputs],
        "",
        BOOTSTRAP_NOTE.format(resamples=metrics["bootstrap"]["resamples"]),
        "",
    ]


def save_figure(fig, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buffer.getvalue())


def plot_histograms(groups: dict[str, np.ndarray], bins, xlabel: str, path: Path) -> None:
    """Overlaid step histograms, one per model, as shares of its games."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, values in groups.items():
        ax.hist(
            values,
            bins=bins,
            histtype="step",
            linewidth=1.6,
            label=f"{label} (n={len(values)})",
            weights=np.full(len(values), 1 / max(len(values), 1)),
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of games")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_series(
    labels: list[str], points: list[dict | None], ylabel: str, path: Path, xlabel: str = "iteration"
) -> None:
    """Means (or ratings) with their intervals, in iteration order."""
    fig, ax = plt.subplots(figsize=(max(4.8, 0.9 * len(labels) + 2), 3.6))
    _draw_series(ax, labels, points, ylabel, xlabel)
    save_figure(fig, path)


def plot_panels(labels: list[str], series: dict[str, list[dict | None]], path: Path, xlabel: str = "iteration") -> None:
    """Several measures side by side, each as `plot_series` draws it: how a run's play changes as it learns."""
    width = max(4.0, 0.6 * len(labels) + 2)
    fig, axes = plt.subplots(1, len(series), figsize=(width * len(series), 3.6), squeeze=False)
    for ax, (ylabel, points) in zip(axes[0], series.items()):
        _draw_series(ax, labels, points, ylabel, xlabel)
    save_figure(fig, path)


def _draw_series(ax, labels: list[str], points: list[dict | None], ylabel: str, xlabel: str) -> None:
    shown = [(i, p) for i, p in enumerate(points) if p and p.get("mean", p.get("rating")) is not None]
    xs = [i for i, _ in shown]
    ys = np.array([p.get("mean", p.get("rating")) for _, p in shown], dtype=np.float64)
    ci = np.array([p["ci"] for _, p in shown], dtype=np.float64).reshape(-1, 2)
    ax.errorbar(xs, ys, yerr=[ys - ci[:, 0], ci[:, 1] - ys], marker="o", capsize=4)
    tilt = len(labels) > 3
    ax.set_xticks(range(len(labels)), labels, rotation=20 if tilt else 0, ha="right" if tilt else "center")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def format_interval(stat: dict | None, percent: bool = False, digits: int = 3) -> str:
    """A mean (or rating) with its interval as one cell (a dash when missing)."""
    value = stat.get("mean", stat.get("rating")) if stat else None
    if stat is None or value is None:
        return "–"
    scale, unit, digits = (100, "%", 1) if percent else (1, "", digits)
    lo, hi = (c * scale for c in stat["ci"])
    return f"{value * scale:.{digits}f}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def format_number(value, digits: int = 3, percent: bool = False) -> str:
    """A plain figure's cell (a dash when missing)."""
    if value is None:
        return "–"
    return f"{100 * value:.1f}%" if percent else f"{value:.{digits}f}"


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(row) + " |" for row in rows]
    )


def format_paired(d: dict | None) -> str:
    """A paired difference's cell: its interval and the instances it pairs."""
    return "–" if d is None else f"{format_interval(d)} (n={d['instances']})"


def only_model(metrics: dict) -> str:
    """The one self-play model of an evaluation added to a run-level report."""
    models = list(metrics["models"])
    if len(models) != 1:
        raise ValueError(
            f"--append-to adds one iteration; this evaluation has {len(models)} self-play models ({', '.join(models)})"
        )
    return models[0]


def add_run_row(run_dir: Path, game: str, row: dict[str, Any]) -> dict[str, Any]:
    """The run-level report in `run_dir` (of `game`; reports without a game are of `UNNAMED_GAME`)
    with `row` as its next row, or in place of the row with its label. Every game's run report
    starts here; each writes its own tables from the rows."""
    path = run_dir / "metrics.json"
    new = {"schema": RUN_SCHEMA, "game": game, "rows": []}
    run: dict[str, Any] = json.loads(path.read_text()) if path.exists() else new
    if run.get("schema") != RUN_SCHEMA:
        raise ValueError(f"{path}: not a run-level report (schema {run.get('schema')!r}, expected {RUN_SCHEMA!r})")
    if run.setdefault("game", UNNAMED_GAME) != game:
        raise ValueError(f"{path}: a run-level report of the {run['game']} game; this evaluation is of the {game} game")
    run_dir.mkdir(parents=True, exist_ok=True)
    labels = [r["label"] for r in run["rows"]]
    at = labels.index(row["label"]) if row["label"] in labels else len(labels)
    run["rows"][at : at + 1] = [{"iteration": at, **row}]
    return run
