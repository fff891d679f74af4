"""A game record as the page shows it: every turn in order, both seats' private views, the outcome
beside what was possible.

The record already holds everything (the instance, the event log with each invalid move's
parser error, each seat's chat from its own view); this module only adds what a reader wants
next to it and the record leaves implicit, which its game says (`Game.record_view`, in the game's
package: e.g. each seat's private information and what each proposal is worth). Games without a
view of their own still show turns, chats and outcome.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .. import games
from ..games.base import MAX_INVALID
from ..models import DEFAULT_MODEL, RAW_MODEL
from ..records import UNNAMED_GAME, Record

# the embedded models' cached copies: cache_dir()/SmolLM2-135M-Instruct-warm-<adapter hash>
_EMBEDDED_COPY = re.compile(rf"^({re.escape(DEFAULT_MODEL)}|{re.escape(RAW_MODEL)})(-[0-9a-f]{{12}})?$")


def model_name(model: str | None) -> str:
    """A model as a reader names it: the embedded model's name for its cached copy (records hold
    the path a backend opened, under the cache directory), else the directory's name; the
    default model when none was named."""
    if not model:
        return DEFAULT_MODEL
    name = Path(str(model).rstrip("/")).name or str(model)
    found = _EMBEDDED_COPY.match(name)
    return found.group(1) if found else name


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
                "model": model_name(who["model"]) if who.get("model") else None,
                "model_path": who.get("model"),
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
        "invalid_by_seat": [
            sum(e["kind"] == "invalid" and e["player"] == s for e in record["events"]) for s in range(len(seats))
        ],
        "invalid_seat": invalid_seat(record["outcome"], record["events"]),
        "failure": record.get("failure"),
        "stats": record["stats"],
    }
    detail = games.get(name).record_view(record, view) if games.known(name) else None
    if detail is not None:
        view["detail"] = detail
    return view


def invalid_seat(outcome: Any, events: Any) -> int | None:
    """The seat whose invalid moves in a row ended the game (its last event), if that ended it."""
    return events[-1]["player"] if outcome["termination"] == MAX_INVALID and events else None
