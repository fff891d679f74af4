"""A game record as the page shows it: every turn in order, both seats' private views, the outcome
beside what was possible.

The record already holds everything (the instance, the event log with each invalid move's
parser error, each seat's chat from its own view); this module only adds what a reader wants
next to it and the record leaves implicit, which its game says (`Game.record_view`, in the game's
package: e.g. each seat's private information and what each proposal is worth). Games without a
view of their own still show turns, chats and outcome.
"""

from __future__ import annotations

from typing import Any

from .. import games
from ..records import UNNAMED_GAME, Record


def describe(record: Record) -> dict[str, Any]:
    """The page's view of one game: plain JSON values; text is left as text (the page escapes it)."""
    name = record.get("game", UNNAMED_GAME)
    settings = record.get("settings", {})
    seats = []
    for seat, player in enumerate(record["players"]):
        who = dict(settings.get(f"seat{seat}", {}))  # type: ignore[call-overload]
        seats.append(
            {
                "kind": player["kind"],
                "backend": who.get("backend"),
                "model": who.get("model"),
                "messages": player["messages"],
                "system": next((m["content"] for m in player["messages"] if m["role"] == "system"), ""),
            }
        )
    view: dict[str, Any] = {
        "game": name,
        "game_id": record["game_id"],
        "instance_id": record["instance_id"],
        "seats": seats,
        "turns": [
            {"seat": e["player"], "kind": e["kind"], "text": e["text"], "error": e.get("error")}
            for e in record["events"]
        ],
        "outcome": record["outcome"],
        "failure": record.get("failure"),
        "stats": record["stats"],
    }
    detail = games.get(name).record_view(record, view) if games.known(name) else None
    if detail is not None:
        view["detail"] = detail
    return view
