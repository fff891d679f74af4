"""The matching game's own parts of a game record (`Matching.record`), checked on read by
`selfplay_gen.records` beside the parts every game shares."""

from __future__ import annotations

from typing import Annotated, TypedDict

from ...records import Count, Event, terminations
from ...validate import lengths, within
from ..base import LIMIT_ENDS, STOPS

ACCEPTED = "accepted"  # the game's own end: a proposal accepted
TERMINATIONS = (ACCEPTED, *LIMIT_ENDS, *STOPS)

Grid = list[list[int]]


class MatchingEvent(Event):
    pairs: Grid | None


class _InstanceData(TypedDict):
    table: Annotated[Grid, lengths(8, 8)]
    masks: Annotated[list[Grid], lengths(2, 8, 8)]
    scales: Annotated[list[Annotated[float, within(0, open_low=True)]], lengths(2)]


class InstanceData(_InstanceData, total=False):
    """`Instance.to_dict()`."""

    seed: int | None
    hard: bool
    source: str
    best_reward: Count
    best_assignment: Grid


class _MatchingOutcome(TypedDict):
    termination: Annotated[str, terminations(TERMINATIONS)]
    raw_reward: Count  # the agreed matching's total score
    best_reward: Count
    normalized_reward: Annotated[float, within(0, 1)]  # raw / best, both seats' reward


class MatchingOutcome(_MatchingOutcome, total=False):
    proposal: Grid | None
    # per seat, the agreed matching's `Instance.own_plan_share` (0 without one)
    own_plan_shares: Annotated[list[Annotated[float, within(0, 1)]], lengths(2)]


class MatchingRecord(TypedDict):
    """The matching game's own parts of a record (`Matching.record`)."""

    instance: InstanceData
    outcome: MatchingOutcome
    events: list[MatchingEvent]
