"""Whether skill-conditioned play follows the requested level: one model, asked to play at each
level (novice, intermediate, expert; `prompts.SKILLS`), plays itself across
levels, and each higher level should win most decided games against each lower one, in both seat
orders, and earn more points.

The measurement plan: label each level's seat by its level, play every pair of levels in both
seat orders on held-out instances (`selfplay-gen eval --game negotiation` cross-play, seats told
their levels with `--skill SEAT0,SEAT1`), then `follows_levels` on the games. The issue's target:
expert beats novice in at least 65% of decided games.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...stats.metrics import ORDERS, decided_share, mean_interval, per_instance
from .evaluation import cross_play, results_of
from .prompts import SKILL_STRENGTHS

LEVELS = tuple(SKILL_STRENGTHS)  # lowest first
TARGET = 0.65  # expert's share of the decided games against novice


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
