"""The training reward of one seat of one game: the one definition that `selfplay-convert` and
the online agent loop share, so offline and online GRPO optimize the same thing.

It is the seat's own reward in the game (`outcome.rewards`) minus an opt-in penalty for the
seat's own invalid moves: `penalty x invalid moves / turns`, so the shaping lies in
[-penalty, 0]. A seat that plays only valid moves gets no shaping at all, so the penalty cannot
be farmed; agreement is still the only way to a positive reward. The game's score in the
records is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def training_reward(record: Mapping[str, Any], seat: int, invalid_move_penalty: float = 0.0) -> float:
    """`seat`'s reward in `record`, less the penalty for its share of invalid turns.
    A seat without sampled turns (a scripted player) makes no invalid moves."""
    reward = float(record["outcome"]["rewards"][seat])
    turns = len(record["players"][seat].get("turns") or ())
    if not invalid_move_penalty or not turns:
        return reward
    invalid = sum(event["kind"] == "invalid" and event["player"] == seat for event in record["events"])
    return reward - invalid_move_penalty * invalid / turns
