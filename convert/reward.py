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


def per_seat_baseline(rewards: pd.DataFrame) -> list[float] | dict[str, list[float]]:
    """Subtract from each seat's column (`reward0`, `reward1`: training rewards, one row per
    game) its mean, in place, per game where the file holds a mix of games (a role is a seat of
    one game); returns the means, per game for a mix."""
    by_game = rewards.groupby("game", sort=False)
    means = {game: [float(rows[f"reward{seat}"].mean()) for seat in (0, 1)] for game, rows in by_game}
    for seat in (0, 1):
        rewards[f"reward{seat}"] -= by_game[f"reward{seat}"].transform("mean")
    return next(iter(means.values())) if len(means) == 1 else means
