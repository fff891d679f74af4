"""GRPO groups: which games are compared with which, and what each game is worth relative to
its group.

verl draws a random `uid` per dataset row, so with offline data (replayed with `rollout.n=1`)
the trainer cannot form groups itself: the converter computes the group-relative advantage.
A group is every game of one instance (K games from the same table); both perspectives of a
game carry the game's reward. Statistics are per game, and the std is the population std
(ddof=0): it is defined for any group size, and counting each game once or twice (once per
perspective) gives the same value.
"""
from __future__ import annotations

import math

import pandas as pd

NORMALIZE = ("mean", "mean-std", "none")
EPS = 1e-6


def constant(rewards: pd.Series, groups: pd.Series) -> pd.Series:
    """Per game: whether every game of its group has the same reward (no learning signal)."""
    by_group = rewards.groupby(groups)
    return by_group.transform("max") == by_group.transform("min")


def advantages(rewards: pd.Series, groups: pd.Series, normalize: str) -> pd.Series:
    """mean: r - mean; mean-std: (r - mean) / (std + 1e-6); none: r. Constant groups get exactly 0
    (not float noise from the mean) under mean and mean-std."""
    if normalize == "none":
        return rewards.astype(float)
    by_group = rewards.groupby(groups)
    centered = (rewards - by_group.transform("mean")).where(~constant(rewards, groups), 0.0)
    if normalize == "mean":
        return centered
    return centered / (by_group.transform("std", ddof=0) + EPS)


def top(rewards: pd.Series, groups: pd.Series, fraction: float) -> pd.Series:
    """Per game: among the best ceil(fraction * group size) of its group (ties broken by order in
    the file) and rewarded at all. A game with no agreement is never a demonstration."""
    rank = rewards.groupby(groups).rank(method="first", ascending=False)
    size = rewards.groupby(groups).transform("size")
    return (rank <= (size * fraction).map(math.ceil)) & (rewards > 0)


def extremes(rewards: pd.Series, groups: pd.Series) -> pd.DataFrame:
    """Per group with unequal rewards: the best game (`chosen`) and the worst (`rejected`), as
    index labels of `rewards`; the first in file order among equals."""
    by_group = rewards.groupby(groups)
    pairs = pd.DataFrame({"chosen": by_group.idxmax(), "rejected": by_group.idxmin()})
    return pairs[rewards[pairs["chosen"]].to_numpy() > rewards[pairs["rejected"]].to_numpy()]
