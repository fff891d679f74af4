"""The checkpoint rule: a new checkpoint is promoted (joins the opponent pool as its newest and
becomes the run's output) only when it beats the previous one, judged by its share of the decided
cross-play games (wins / (wins + losses), both seat orders pooled) whose 95% interval lies wholly
above 0.5. Otherwise the previous checkpoint stays, and the decision says why: an interval that
straddles 0.5 is no evidence of a stronger player, however high its mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

ORDERS = ("both", "seat0", "seat1")


@dataclass(frozen=True)
class Promotion:
    """The decision: `keep` is the checkpoint the run goes on with (the candidate when promoted)."""

    promoted: bool
    candidate: str
    previous: str
    keep: str
    win_share: float | None
    ci: tuple[float, float] | None
    games: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decided_share(metrics: Mapping[str, Any], model: str, other: str, order: str = "both") -> tuple[dict, int]:
    """`model`'s share of the decided games against `other` ({"mean", "ci"}) and the number of games,
    from a competitive game's evaluation metrics (`selfplay-gen eval --game GAME`, its metrics.json),
    whichever of the two was listed first there. `order`: both seat orders pooled, or `model` in
    seat 0 / seat 1."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r} is not one of {', '.join(ORDERS)}")
    for entry in metrics.get("cross_play", []):
        first, second = entry["models"]
        if {first, second} != {model, other}:
            continue
        flipped = first != model
        seat = {"seat0": "seat1", "seat1": "seat0"}.get(order, order) if flipped else order
        result = entry[seat]
        if result is None:
            return {"mean": None, "ci": None}, 0
        share = result["decided_win_share"]
        if share["mean"] is None or not flipped:
            return share, int(result["games"])
        lo, hi = share["ci"]
        return {"mean": 1 - share["mean"], "ci": [1 - hi, 1 - lo]}, int(result["games"])
    met = [tuple(e["models"]) for e in metrics.get("cross_play", [])]
    raise ValueError(f"no cross-play of {model!r} against {other!r} in the metrics; pairs there: {met}")


def promote(metrics: Mapping[str, Any], candidate: str, previous: str, order: str = "both") -> Promotion:
    """Promote `candidate` over `previous` when its decided-game win share's 95% interval lies above
    0.5 in the cross-play of `metrics` (see `decided_share`)."""
    share, games = decided_share(metrics, candidate, previous, order)
    mean, ci = share["mean"], share["ci"]
    if mean is None or ci is None:
        reason = f"kept {previous}: {candidate} and {previous} decided no game ({games} games, all ties)"
        return Promotion(False, candidate, previous, previous, None, None, games, reason)
    lo, hi = float(ci[0]), float(ci[1])
    span = f"{mean:.1%} [{lo:.1%}, {hi:.1%}] of the decided games ({games} played)"
    if lo > 0.5:
        reason = f"promoted {candidate}: it wins {span} against {previous}, the interval above 50%"
        return Promotion(True, candidate, previous, candidate, mean, (lo, hi), games, reason)
    verdict = "no better than" if hi > 0.5 else "worse than"
    reason = f"kept {previous}: {candidate} is {verdict} it, winning {span}; the interval does not lie above 50%"
    return Promotion(False, candidate, previous, previous, mean, (lo, hi), games, reason)
