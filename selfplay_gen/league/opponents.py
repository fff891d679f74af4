"""Which opponent each game gets: one drawn per game from the pool, weighted towards opponents the
player beats about half the time, where a game teaches most (AlphaStar's prioritized fictitious
self-play with its "variance" weighting, f(p) = (p (1 - p))^sharpness). Opponents far below the
player (it always wins) or far above (it always loses) are drawn rarely, never never: every
member keeps a floor weight, so a rating that is wrong gets corrected by new games.

A member without a rating yet (no games) counts as the player's equal: it is tried early.

Fictitious self-play (`past_share`): the past checkpoints of the pool together get a fixed share of
the draws and the other opponents (the scripted negotiators) the rest, each part keeping the
rating weights within it, so a learner keeps meeting the past versions of itself, whose refusals
a pool that drifts towards exploitable opponents would leave out of view.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np

FLOOR = 0.05  # every opponent's weight is at least this share of the largest


def win_probability(rating: float, opponent: float) -> float:
    """The Elo-scale Bradley–Terry chance that a player rated `rating` beats one rated `opponent`."""
    return float(1 / (1 + 10 ** ((opponent - rating) / 400)))


def _closeness(own: float | None, other: float | None) -> float:
    """p (1 - p) for the player's win chance p: 0.25 for an even game (or an unrated side)."""
    if own is None or other is None:
        return 0.25
    p = win_probability(own, other)
    return p * (1 - p)


def opponent_weights(
    ratings: Mapping[str, float | None],
    player: str,
    candidates: Sequence[str] | None = None,
    sharpness: float = 1.0,
    floor: float = FLOOR,
) -> dict[str, float]:
    """Per candidate (default: every rated name but the player), the probability it is drawn as
    the player's opponent; sums to 1. `sharpness` 0 draws uniformly, larger focuses on even games."""
    names = [n for n in (candidates if candidates is not None else ratings) if n != player]
    if not names:
        raise ValueError(f"no opponent for {player!r}: the pool holds only {list(ratings)}")
    unknown = [n for n in [player, *names] if n not in ratings]
    if unknown:
        raise ValueError(f"not in the league's ratings: {unknown}; rated: {list(ratings)}")
    own = ratings[player]
    closeness = np.array([_closeness(own, ratings[n]) for n in names])
    weights = (closeness / closeness.max()) ** sharpness
    weights = np.maximum(weights, floor)
    return {n: float(w) for n, w in zip(names, weights / weights.sum())}


def with_share(weights: Mapping[str, float], part: Collection[str], share: float | None) -> dict[str, float]:
    """`weights` (summing to 1) rescaled so the names in `part` hold `share` of them together and the others
    the rest, each side keeping its relative weights; unchanged where `share` is None or either side is
    empty (the side present takes everything)."""
    if share is not None and not 0 <= share <= 1:
        raise ValueError(f"the share of past checkpoints must be in [0, 1], got {share}")
    inside = sum(w for n, w in weights.items() if n in part)
    outside = sum(w for n, w in weights.items() if n not in part)
    if share is None or not inside or not outside:
        return dict(weights)
    return {n: w * share / inside if n in part else w * (1 - share) / outside for n, w in weights.items()}


def choose_opponents(
    ratings: Mapping[str, float | None],
    player: str,
    games: int,
    seed: int,
    candidates: Sequence[str] | None = None,
    sharpness: float = 1.0,
    past: Collection[str] = (),
    past_share: float | None = None,
) -> list[str]:
    """One opponent per game of the player's next batch, drawn independently by `opponent_weights`
    (the `past` checkpoints together with `past_share` of the weight: `with_share`; reproducible from
    `seed`)."""
    weights = with_share(opponent_weights(ratings, player, candidates, sharpness), past, past_share)
    rng = np.random.default_rng(seed)
    names = list(weights)
    return [names[i] for i in rng.choice(len(names), size=games, p=list(weights.values()))]


def stratified(weights: Mapping[str, float], groups: int) -> dict[str, int]:
    """`groups` split by `weights` (summing to 1) exactly rather than drawn: each name its whole share,
    the groups left over to the largest remainders (the earlier name on a tie). A population whose every
    member should meet the player each iteration gets them so, however few the groups."""
    exact = {n: w * groups for n, w in weights.items()}
    counts = {n: math.floor(x) for n, x in exact.items()}
    left = groups - sum(counts.values())
    for name in sorted(exact, key=lambda n: -(exact[n] - counts[n]))[:left]:
        counts[name] += 1
    return counts
