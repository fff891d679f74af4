"""What shows a competitive run making a stronger player, per checkpoint, from one evaluation of
a competitive game over all its checkpoints and its scripted players (`selfplay-gen eval --game
GAME`, its metrics.json): the share of decided games won against the previous checkpoint and
against the warm start in each seat order (95% intervals), the rating on one scale with all of them,
and, from the checkpoint's self-play, the joint share of the best deal and the Pareto-optimal share
(cooperation must not collapse as competition rises) and response diversity (mode collapse).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..stats.metrics import ORDERS, decided_share
from ..stats.report import format_interval, markdown_table

DIVERSITY = ("distinct_2_seat0", "distinct_2_seat1", "distinct_proposal_share")


def _against(metrics: Mapping[str, Any], model: str, other: str) -> dict | None:
    met = {frozenset(e["models"]) for e in metrics.get("cross_play", [])}
    if model == other or frozenset((model, other)) not in met:
        return None
    return {order: decided_share(metrics, model, other, order)[0] for order in ORDERS}


def progress(metrics: Mapping[str, Any], checkpoints: Sequence[str], warm_start: str) -> list[dict[str, Any]]:
    """One row per checkpoint (in training order, the warm start first or not): its decided-game win
    share against the previous checkpoint and the warm start per seat order (None where they did not
    meet), its rating, and its self-play joint share, Pareto-optimal share and diversity."""
    rows = []
    for i, name in enumerate(checkpoints):
        selfplay = metrics.get("models", {}).get(name)
        rating = metrics.get("ratings", {}).get(name)
        rows.append(
            {
                "checkpoint": name,
                "vs_previous": _against(metrics, name, checkpoints[i - 1]) if i else None,
                "vs_warm_start": _against(metrics, name, warm_start),
                "rating": rating,
                "joint_share": selfplay["joint_share"] if selfplay else None,
                "pareto_optimal_share": selfplay["pareto_optimal_share"] if selfplay else None,
                "diversity": {k: selfplay.get("diversity", {}).get(k) for k in DIVERSITY} if selfplay else None,
            }
        )
    return rows


def progress_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows of `progress` as a markdown table (percentages with 95% intervals)."""

    def share(entry: Mapping | None, order: str) -> str:
        return format_interval(entry[order] if entry else None, percent=True)

    def number(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    head = ["checkpoint", "vs previous: seat 0", "seat 1", "both", "vs warm start: seat 0", "seat 1", "both"]
    head += ["rating (Elo)", "joint", "Pareto", "distinct-2 seat 0 / 1", "distinct proposals"]
    body = []
    for r in rows:
        diversity = r["diversity"] or {}
        body.append(
            [
                r["checkpoint"],
                *(share(r["vs_previous"], o) for o in ("seat0", "seat1", "both")),
                *(share(r["vs_warm_start"], o) for o in ("seat0", "seat1", "both")),
                format_interval(r["rating"], digits=0),
                format_interval(r["joint_share"], percent=True),
                format_interval(r["pareto_optimal_share"], percent=True),
                f"{number(diversity.get('distinct_2_seat0'))} / {number(diversity.get('distinct_2_seat1'))}",
                number(diversity.get("distinct_proposal_share")),
            ]
        )
    return markdown_table(head, body)
