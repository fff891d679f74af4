"""What the viewer's page shows of a matching game beside its turns (`MatchingGame.record_view`):
each seat's scaled table with its hidden cells, the score of every proposal, the best assignment,
the random-matching baseline of the instance and what the agreed assignment is worth on each seat's
own table."""

from __future__ import annotations

from typing import Any

from .instance import PAPERS, REVIEWERS, Instance
from .metrics import random_matching_reward


def record_view(record: Any, view: dict[str, Any]) -> dict[str, Any]:
    """The game's detail for the page; each turn of `view` that proposes gains its `plan`."""
    instance = Instance.from_dict(record["instance"])
    table, best = instance.table, instance.best_reward

    def plan(pairs) -> dict[str, Any] | None:
        if not pairs:
            return None
        raw = int(sum(table[r][p] for r, p in pairs))
        return {"pairs": [list(p) for p in pairs], "raw": raw, "normalized": raw / best if best else 0.0}

    for turn, event in zip(view["turns"], record["events"]):
        turn["plan"] = plan(event.get("pairs"))
    outcome = record["outcome"]
    baseline = random_matching_reward(table, best)
    return {
        "reviewers": list(REVIEWERS),
        "papers": list(PAPERS),
        "table": table,
        "views": [instance.view(seat) for seat in (0, 1)],
        "scales": list(instance.scales),
        "agreed_plan": plan(outcome.get("proposal")) if outcome["agreed"] else None,
        "best_plan": plan(instance.best_assignment),
        "best_reward": best,
        "random_baseline": baseline,
        "hard": getattr(instance, "hard", False),
        "outcome_rows": [
            ["score", f"{outcome['raw_reward']} of {best} possible = {outcome['normalized_reward']:.3f}"],
            ["random matching (this instance)", f"{baseline:.3f}"],
            ["on each seat's own table (own-plan share)", " | ".join(f"{s:.3f}" for s in outcome["own_plan_shares"])],
        ],
    }


def seat_view(instance: Instance, seat: int) -> dict[str, Any]:
    """What a person playing `seat` sees beside the prompt: that seat's scaled table, hidden cells None."""
    return {
        "reviewers": list(REVIEWERS),
        "papers": list(PAPERS),
        "view": instance.view(seat),
        "scale": instance.scales[seat],
    }
