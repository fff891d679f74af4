"""The negotiation game's own parts of a game record (`NegotiationGame.record`), checked on read
by `selfplay_gen.records` beside the parts every game shares, and the ways a game ends."""

from __future__ import annotations

from typing import Annotated, TypedDict

from ...records import Count, Event, terminations
from ...validate import Invalid, lengths, within
from ..base import MAX_INVALID, MAX_MOVES, STOPS
from .instance import MAX_COUNT, REWARD_MODES, TOTAL_VALUE

AGREED, INCONSISTENT = "agreed", "inconsistent"
TERMINATIONS = (AGREED, INCONSISTENT, MAX_MOVES, MAX_INVALID, *STOPS)
Share = Annotated[list[Annotated[int, within(0, MAX_COUNT)]], lengths(3)]
# the most a seat can score: the sum of both seats' points (cooperative); the least, minus that
Reward = Annotated[float, within(-2 * TOTAL_VALUE, 2 * TOTAL_VALUE)]


def _reward_mode(value: str) -> None:
    if value not in REWARD_MODES:
        raise Invalid(value, f"is not a reward mode ({', '.join(REWARD_MODES)})")


class _InstanceData(TypedDict):
    counts: Annotated[list[Annotated[int, within(1, MAX_COUNT)]], lengths(3)]
    values: Annotated[list[list[Annotated[int, within(0, TOTAL_VALUE)]]], lengths(2, 3)]


class InstanceData(_InstanceData, total=False):
    """`Instance.to_dict()`."""

    seed: int | None
    source: str
    best_joint: Count


class _Outcome(TypedDict):
    termination: Annotated[str, terminations(TERMINATIONS)]
    rewards: Annotated[list[Reward], lengths(2)]
    reward_mode: Annotated[str, _reward_mode]
    points: Annotated[list[Annotated[int, within(0, TOTAL_VALUE)]], lengths(2)]


class Outcome(_Outcome, total=False):
    proposals: Annotated[list[Share | None], lengths(2)]
    best_joint: Count
    pareto_optimal: bool


class NegotiationEvent(Event):
    share: Share | None


class NegotiationRecord(TypedDict):
    instance: InstanceData
    outcome: Outcome
    events: list[NegotiationEvent]
