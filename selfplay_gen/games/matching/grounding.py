"""Grounding: do the table values a player states in its messages really appear in its own table?

A model that learns to share information should state its visible cells as it sees them (scaled
values); values that are not in its table are made up. Which cells a message states is read by
`prompts.stated_cells`, the owner of the table's line format.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...records import Record
from .instance import Instance
from .prompts import stated_cells


def count_grounded(instance: Instance, messages: Iterable[tuple[int, str]]) -> tuple[int, int]:
    """(stated, grounded) over (seat, text) messages: a stated cell is grounded when the
    speaker's own view shows exactly that value in that cell."""
    views = [instance.view(0), instance.view(1)]
    stated = grounded = 0
    for seat, text in messages:
        for r, p, value in stated_cells(text):
            stated += 1
            grounded += views[seat][r][p] == value
    return stated, grounded


def grounding(record: Record, instance: Instance | None = None) -> tuple[int, int]:
    """(stated, grounded) cells over both seats' valid [message] moves of a game record (its instance, where the
    caller has built it already)."""
    messages = [(e["player"], e["text"]) for e in record["events"] if e["kind"] == "message"]
    return count_grounded(instance or Instance.from_dict(record["instance"]), messages)
