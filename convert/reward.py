"""The training reward of one seat of one game: the one definition that `selfplay-convert` and
the online agent loop share, so offline and online GRPO optimize the same thing.

It is the seat's own reward in the game (`outcome.rewards`; the normalized reward of both seats
in the matching game) minus an opt-in penalty for the seat's own invalid moves:
`penalty x invalid moves / turns`, so the shaping lies in [-penalty, 0]. A seat that plays
only valid [message] moves gets no shaping at all, so the penalty cannot be farmed; agreement
is still the only way to a positive reward. The game's score in the records is never changed.

Offline only, `per_seat_baseline` subtracts from each seat's training reward that seat's mean
over the file (SPIRAL's role-conditioned baseline): in an asymmetric or competitive game one
seat may win more for its role alone, and an estimator that compares rows across seats would
credit that to the policy. verl's `grpo` estimator already subtracts each group's mean, and a
group holds one seat's games, so there the shift cancels; it changes advantages with estimators
that compare the whole batch, e.g. `algorithm.adv_estimator=reinforce_plus_plus`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

BASELINES = ("group", "per-seat")  # what a GRPO row's rewards are relative to, besides verl's group mean


def training_reward(record: Mapping[str, Any], seat: int, invalid_move_penalty: float = 0.0) -> float:
    """`seat`'s reward in `record`, less the penalty for its share of invalid turns.
    A seat without sampled turns (a scripted player) makes no invalid moves."""
    reward = float(record["outcome"]["rewards"][seat])
    turns = len(record["players"][seat].get("turns") or ())
    if not invalid_move_penalty or not turns:
        return reward
    invalid = sum(event["kind"] == "invalid" and event["player"] == seat for event in record["events"])
    return reward - invalid_move_penalty * invalid / turns


def per_seat_baseline(rewards: pd.DataFrame) -> list[float]:
    """Subtract from each seat's column (`reward0`, `reward1`: training rewards, one row per
    game) its mean, in place; returns the means."""
    means = [float(rewards[f"reward{seat}"].mean()) for seat in (0, 1)]
    for seat, mean in enumerate(means):
        rewards[f"reward{seat}"] -= mean
    return means
