"""Baselines of the training rewards (`selfplay_gen.reward.training_reward`) in a converted file.

Offline only, `per_seat_baseline` subtracts from each seat's training reward that seat's mean
over the file (SPIRAL's role-conditioned baseline): in an asymmetric or competitive game one
seat may win more for its role alone, and an estimator that compares rows across seats would
credit that to the policy. verl's `grpo` estimator already subtracts each group's mean, and a
group holds one seat's games, so there the shift cancels; it changes advantages with estimators
that compare the whole batch, e.g. `algorithm.adv_estimator=reinforce_plus_plus`.
"""

from __future__ import annotations

import pandas as pd

BASELINES = ("group", "per-seat")  # what a GRPO row's rewards are relative to, besides verl's group mean


def per_seat_baseline(rewards: pd.DataFrame) -> list[float]:
    """Subtract from each seat's column (`reward0`, `reward1`: training rewards, one row per
    game) its mean, in place; returns the means."""
    means = [float(rewards[f"reward{seat}"].mean()) for seat in (0, 1)]
    for seat, mean in enumerate(means):
        rewards[f"reward{seat}"] -= mean
    return means
