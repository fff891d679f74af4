"""The checkpoint rule: a new checkpoint is promoted (joins the opponent pool as its newest and
becomes the run's output) only when it beats the previous one, judged by its share of the decided
cross-play games (wins / (wins + losses), both seat orders pooled) whose 95% interval lies wholly
above 0.5. Otherwise the previous checkpoint stays, and the decision says why: an interval that
straddles 0.5 is no evidence of a stronger player, however high its mean.

Winning is not enough where the game's evaluation also measures cooperation (the self-play joint
share of the best deal, `COOPERATION`): a checkpoint that beats the previous one by refusing deals
the previous one would concede wins head to head and reaches no deal against itself. With
`cooperation` on, a candidate that cooperates worse is kept out too. Where the evaluation pairs the
two self-plays instance by instance (`paired_self_play`), worse means: the paired difference's
interval lies below zero and the candidate's mean lies below the previous checkpoint's interval
(a drop larger than that interval's lower half). Instances differ far more than checkpoints do, so
side-by-side intervals overlap even where the paired drop is clear; without the pairing, worse means
the candidate's interval lies wholly below the previous one's.

A run may also bound what a promoted checkpoint gives up, as a target states it (`deal_loss`): its
self-play joint share at most `joint_margin` below the previous checkpoint's (the paired mean), and
deals in at least `min_agreement` of its self-play games. These read means, not intervals: a bound
says how much loss is acceptable, where the check above asks whether a loss is shown at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..stats.metrics import decided_share

COOPERATION = "joint_share"  # a model's self-play measure of how well two copies of it work together
AGREEMENT = "agreement_rate"  # the share of a model's self-play games that end in a deal


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


def paired_joint_share(metrics: Mapping[str, Any], candidate: str, previous: str) -> dict | None:
    """`candidate`'s self-play joint share minus `previous`'s on the instances both played
    ({"mean", "ci", "instances"}), from the evaluation's `paired_self_play`, or None when not paired."""
    for entry in metrics.get("paired_self_play", []):
        first, second = entry["models"]
        diff = entry.get(COOPERATION)
        if {first, second} != {candidate, previous} or diff is None or diff.get("ci") is None:
            continue
        if first == candidate:
            return diff
        lo, hi = diff["ci"]
        return {**diff, "mean": -diff["mean"], "ci": [-hi, -lo]}
    return None


def cooperation_drop(metrics: Mapping[str, Any], candidate: str, previous: str) -> str | None:
    """Why `candidate` cooperates worse than `previous` (see the module's docstring), or None: not
    worse, or the metrics hold no such measure."""
    models = metrics.get("models", {})
    ours, theirs = (models.get(m, {}).get(COOPERATION) or {} for m in (candidate, previous))
    if ours.get("ci") is None or theirs.get("ci") is None:
        return None

    def span(share: Mapping[str, Any]) -> str:
        return f"{share['mean']:.1%} [{share['ci'][0]:.1%}, {share['ci'][1]:.1%}]"

    paired = paired_joint_share(metrics, candidate, previous)
    if paired is not None:
        if paired["ci"][1] >= 0 or ours["mean"] >= theirs["ci"][0]:
            return None
        points = f"{100 * paired['mean']:+.1f} [{100 * paired['ci'][0]:+.1f}, {100 * paired['ci'][1]:+.1f}]"
        return (
            f"its self-play joint share of the best deal, {span(ours)}, lies below {previous}'s interval "
            f"{span(theirs)}, and paired on {paired['instances']} instances it changes by {points} points"
        )
    if ours["ci"][1] >= theirs["ci"][0]:
        return None
    return f"its self-play joint share of the best deal, {span(ours)}, lies below {previous}'s {span(theirs)}"


def deal_loss(
    metrics: Mapping[str, Any],
    candidate: str,
    previous: str,
    joint_margin: float | None = None,
    min_agreement: float | None = None,
) -> str | None:
    """Why `candidate` gives up more of the deal than the bounds allow (see the module's docstring), or
    None: within them, no bound set, or the metrics hold no such measure."""
    changed = joint_change(metrics, candidate, previous)
    if joint_margin is not None and changed is not None and changed[0] < -joint_margin:
        change, how = changed
        return (
            f"its self-play joint share of the best deal changes by {100 * change:+.1f} points against "
            f"{previous}'s ({how}), more than the {100 * joint_margin:.1f} points the run allows"
        )
    agreement = _mean(metrics, candidate, AGREEMENT)
    if min_agreement is not None and agreement is not None and agreement < min_agreement:
        return f"its self-play reaches a deal in {agreement:.1%} of its games, below the run's {min_agreement:.1%}"
    return None


def joint_change(metrics: Mapping[str, Any], candidate: str, previous: str) -> tuple[float, str] | None:
    """`candidate`'s self-play joint share minus `previous`'s (the mean) and how it was read: paired by instance
    where the evaluation pairs them, else side by side; None where the metrics hold no such measure."""
    paired = paired_joint_share(metrics, candidate, previous)
    if paired is not None:
        return paired["mean"], f"paired on {paired['instances']} instances"
    ours, theirs = _mean(metrics, candidate, COOPERATION), _mean(metrics, previous, COOPERATION)
    return None if ours is None or theirs is None else (ours - theirs, "side by side")


def _mean(metrics: Mapping[str, Any], model: str, measure: str) -> float | None:
    """The mean of a model's self-play `measure` in `metrics`, or None where it is not there."""
    return (metrics.get("models", {}).get(model, {}).get(measure) or {}).get("mean")


def promote(
    metrics: Mapping[str, Any],
    candidate: str,
    previous: str,
    order: str = "both",
    cooperation: bool = True,
    joint_margin: float | None = None,
    min_agreement: float | None = None,
) -> Promotion:
    """Promote `candidate` over `previous` when its decided-game win share's 95% interval lies above
    0.5 in the cross-play of `metrics` (see `decided_share`), with `cooperation` its self-play
    cooperation has not fallen below the previous checkpoint's (`cooperation_drop`), and it gives up no
    more of the deal than `joint_margin` and `min_agreement` allow (`deal_loss`)."""
    share, games = decided_share(metrics, candidate, previous, order)
    mean, ci = share["mean"], share["ci"]
    if mean is None or ci is None:
        reason = f"kept {previous}: {candidate} and {previous} decided no game ({games} games, all ties)"
        return Promotion(False, candidate, previous, previous, None, None, games, reason)
    lo, hi = float(ci[0]), float(ci[1])
    span = f"{mean:.1%} [{lo:.1%}, {hi:.1%}] of the decided games ({games} played)"
    if lo > 0.5:
        drop = (cooperation_drop(metrics, candidate, previous) if cooperation else None) or deal_loss(
            metrics, candidate, previous, joint_margin, min_agreement
        )
        if drop:
            reason = f"kept {previous}: {candidate} wins {span} against it, but {drop}"
            return Promotion(False, candidate, previous, previous, mean, (lo, hi), games, reason)
        reason = f"promoted {candidate}: it wins {span} against {previous}, the interval above 50%"
        return Promotion(True, candidate, previous, candidate, mean, (lo, hi), games, reason)
    verdict = "no better than" if hi > 0.5 else "worse than"
    reason = f"kept {previous}: {candidate} is {verdict} it, winning {span}; the interval does not lie above 50%"
    return Promotion(False, candidate, previous, previous, mean, (lo, hi), games, reason)
