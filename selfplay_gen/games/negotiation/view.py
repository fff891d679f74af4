"""What the viewer's page shows of a negotiation game beside its turns
(`NegotiationGame.record_view`): each seat's values, and what each proposal is worth to each seat."""

from __future__ import annotations

from typing import Any

from .instance import ITEMS, PLURALS, Instance


def record_view(record: Any, view: dict[str, Any]) -> dict[str, Any]:
    """The game's detail for the page; each turn of `view` that proposes gains its `share`."""
    instance = Instance.from_dict(record["instance"])

    def worth(mover: int, share) -> dict[str, Any] | None:
        """A proposal takes `share` for its mover: what it leaves the partner, and its worth to each."""
        if share is None:
            return None
        rest = list(instance.rest(share))
        mine, theirs = instance.value(mover, share), instance.value(1 - mover, rest)
        return {"share": list(share), "rest": rest, "points": [mine, theirs] if mover == 0 else [theirs, mine]}

    for turn, event in zip(view["turns"], record["events"]):
        turn["share"] = worth(event["player"], event.get("share"))
    outcome = record["outcome"]

    def said(share) -> str:
        return ", ".join(f"{n} {item if n == 1 else plural}" for n, item, plural in zip(share, ITEMS, PLURALS))

    points, proposals = outcome.get("points"), outcome.get("proposals")
    rows = [
        ["points", f"seat 0 {points[0]}, seat 1 {points[1]} (best joint {instance.best_joint})"],
        ["reward mode", outcome.get("reward_mode")],
    ]
    if proposals:
        taken = [f"seat {s} takes {said(p)}" if p else f"seat {s}: none" for s, p in enumerate(proposals)]
        rows.append(["proposals", "; ".join(taken)])
    if outcome["agreed"]:
        rows.append(["Pareto optimal", "yes" if outcome.get("pareto_optimal") else "no"])
    return {
        "items": list(ITEMS),
        "plurals": list(PLURALS),
        "counts": list(instance.counts),
        "values": [list(v) for v in instance.values],
        "reward_mode": outcome.get("reward_mode"),
        "points": outcome.get("points"),
        "proposals": outcome.get("proposals"),
        "best_joint": instance.best_joint,
        "pareto_optimal": outcome.get("pareto_optimal"),
        "outcome_rows": rows,
    }


def seat_view(instance: Instance, seat: int) -> dict[str, Any]:
    """What a person playing `seat` sees beside the prompt: the pool and that seat's own values."""
    return {
        "items": list(ITEMS),
        "plurals": list(PLURALS),
        "counts": list(instance.counts),
        "values": list(instance.values[seat]),
    }
