"""A game record as the page shows it: every turn in order, both seats' private views, the outcome
beside what was possible.

The record already holds everything (the instance, the event log with each invalid move's
parser error, each seat's chat from its own view); this module only adds what a reader wants
next to it and the record leaves implicit: for the matching game, each seat's scaled table with
its hidden cells, the score of every proposal, the best assignment and the random-matching
baseline of the instance; for negotiation, each seat's values and what each proposal is worth
to each seat. Games without a view of their own here still show turns, chats and outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import games
from ..records import Record


def describe(record: Record) -> dict[str, Any]:
    """The page's view of one game: plain JSON values; text is left as text (the page escapes it)."""
    name = record.get("game", "matching")
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
    detail = DETAILS.get(name)
    if detail is not None:
        view["detail"] = detail(record, view)
    return view


def _matching(record: Record, view: dict[str, Any]) -> dict[str, Any]:
    from ..evaluation.metrics import random_matching_reward
    from ..games.matching.instance import PAPERS, REVIEWERS

    instance = games.get("matching").instance_type.from_dict(record["instance"])
    table = instance.table  # type: ignore[attr-defined]
    best = instance.best_reward  # type: ignore[attr-defined]

    def plan(pairs) -> dict[str, Any] | None:
        if not pairs:
            return None
        raw = int(sum(table[r][p] for r, p in pairs))
        return {"pairs": [list(p) for p in pairs], "raw": raw, "normalized": raw / best if best else 0.0}

    for turn, event in zip(view["turns"], record["events"]):
        turn["plan"] = plan(event.get("pairs"))
    outcome = record["outcome"]
    return {
        "reviewers": list(REVIEWERS),
        "papers": list(PAPERS),
        "table": table,
        "views": [instance.view(seat) for seat in (0, 1)],  # type: ignore[attr-defined]
        "scales": list(instance.scales),  # type: ignore[attr-defined]
        "agreed_plan": plan(outcome.get("proposal")) if outcome["agreed"] else None,
        "best_plan": plan(instance.best_assignment),  # type: ignore[attr-defined]
        "best_reward": best,
        "random_baseline": random_matching_reward(table, best),
        "hard": getattr(instance, "hard", False),
    }


def _negotiation(record: Record, view: dict[str, Any]) -> dict[str, Any]:
    from ..games.negotiation.instance import ITEMS, PLURALS

    instance = games.get("negotiation").instance_type.from_dict(record["instance"])
    counts = list(instance.counts)  # type: ignore[attr-defined]

    def worth(mover: int, share) -> dict[str, Any] | None:
        """A proposal takes `share` for its mover: what it leaves the partner, and its worth to each."""
        if share is None:
            return None
        rest = list(instance.rest(share))  # type: ignore[attr-defined]
        mine, theirs = instance.value(mover, share), instance.value(1 - mover, rest)  # type: ignore[attr-defined]
        return {"share": list(share), "rest": rest, "points": [mine, theirs] if mover == 0 else [theirs, mine]}

    for turn, event in zip(view["turns"], record["events"]):
        turn["share"] = worth(event["player"], event.get("share"))
    outcome = record["outcome"]
    return {
        "items": list(ITEMS),
        "plurals": list(PLURALS),
        "counts": counts,
        "values": [list(v) for v in instance.values],  # type: ignore[attr-defined]
        "reward_mode": outcome.get("reward_mode"),
        "points": outcome.get("points"),
        "proposals": outcome.get("proposals"),
        "best_joint": instance.best_joint,  # type: ignore[attr-defined]
        "pareto_optimal": outcome.get("pareto_optimal"),
    }


DETAILS: dict[str, Callable[[Record, dict[str, Any]], dict[str, Any]]] = {
    "matching": _matching,
    "negotiation": _negotiation,
}
