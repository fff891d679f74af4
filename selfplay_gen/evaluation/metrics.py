"""Metrics any game's evaluation uses: bootstrap intervals over instances, paired differences,
and the wording measures of dialogue (distinct n-grams, repeated messages). A game's own rows and
summaries live in its package (`Game.evaluation`); these functions know nothing of a game.

Games played from one instance are correlated (same setup, same hidden information), so intervals
resample instances, not games: each resample draws instances with replacement and takes the mean
of their per-instance means. Point estimates are that same mean of per-instance means, which
weighs every instance equally whatever its number of games.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

LEVEL = 0.95


def bootstrap_counts(n_instances: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n_instances) multiplicities of each instance in each bootstrap resample."""
    return rng.multinomial(n_instances, np.full(n_instances, 1 / n_instances), size=resamples)


def mean_interval(per_instance: np.ndarray, resamples: int, rng: np.random.Generator) -> dict:
    """Mean of per-instance values and its percentile bootstrap interval over instances."""
    values = np.asarray(per_instance, dtype=float)
    if values.size == 0:
        return {"mean": None, "ci": None}
    boots = bootstrap_counts(values.size, resamples, rng) @ values / values.size
    lo, hi = np.quantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"mean": float(values.mean()), "ci": [float(lo), float(hi)]}


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, resamples: int, rng: np.random.Generator) -> dict:
    """Pooled sum(numerator) / sum(denominator) of per-instance counts and its percentile
    bootstrap interval over instances; mean None when the denominator is 0."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.size == 0 or den.sum() == 0:
        return {"mean": None, "ci": None}
    counts = bootstrap_counts(num.size, resamples, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        boots = (counts @ num) / (counts @ den)
    lo, hi = np.nanquantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"mean": float(num.sum() / den.sum()), "ci": [float(lo), float(hi)]}


def per_instance(games: pd.DataFrame, column: str) -> pd.Series:
    """The mean of `column` per instance (the unit every interval resamples)."""
    return games.groupby("instance_id")[column].mean()


def paired_difference(a: pd.Series, b: pd.Series, resamples: int, rng: np.random.Generator) -> dict | None:
    """Mean of a - b over the instances both have (per-instance values), with its interval;
    None when they share no instance."""
    shared = a.index.intersection(b.index)
    if shared.empty:
        return None
    return {**mean_interval((a[shared] - b[shared]).to_numpy(), resamples, rng), "instances": len(shared)}


def distinct_n(messages: list[str], n: int) -> float | None:
    """Distinct n-grams / all n-grams over messages (lower-cased words, n-grams within a message)."""
    grams = [
        tuple(words[i : i + n]) for m in messages for words in [m.lower().split()] for i in range(len(words) - n + 1)
    ]
    return len(set(grams)) / len(grams) if grams else None


def repeated_share(games_messages: list[list[str]]) -> float | None:
    """Share of messages whose exact text (case and spacing aside) also occurs in another game."""
    games_of = defaultdict(set)
    texts = [(g, " ".join(m.lower().split())) for g, msgs in enumerate(games_messages) for m in msgs]
    for g, text in texts:
        games_of[text].add(g)
    return sum(len(games_of[t]) > 1 for _, t in texts) / len(texts) if texts else None


def valid_move_rate(games: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """The share of attempted moves that were valid, pooled per instance, with its interval; no
    figure where invalid moves were not counted (`invalid` missing, as in people's games)."""
    if games["invalid"].isna().all():
        return {"mean": None, "ci": None}
    sums = games.groupby("instance_id")[["moves", "invalid"]].sum(min_count=1)
    return ratio_interval(sums["moves"], sums["moves"] + sums["invalid"], resamples, rng)


def endings(games: pd.DataFrame) -> dict[str, dict]:
    """How the games ended: games and share per termination reason."""
    counts = games["termination"].value_counts()
    return {str(k): {"games": int(v), "share": float(v / len(games))} for k, v in counts.items()}


def sampled_surprisal(record) -> tuple[float, int]:
    """(sum of -logprob, tokens) over the sampled tokens of a game's model seats that carry their
    logprobs: per token, the policy's entropy as sampled, to follow a run's exploration (a policy
    that has collapsed onto one game reads near 0). Scripted seats and turns without logprobs add nothing."""
    total, tokens = 0.0, 0
    for seat in record["players"]:
        for turn in seat.get("turns", ()):
            if turn.get("logprobs") and not turn.get("retokenized"):
                total -= float(np.sum(turn["logprobs"]))
                tokens += len(turn["logprobs"])
    return total, tokens
