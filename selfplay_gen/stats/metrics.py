"""Metrics any game's evaluation uses: bootstrap intervals over instances, paired differences,
the wording measures of dialogue (distinct n-grams, repeated messages), and who wins in a competitive
game's cross-play: each model's wins, ties and losses per seat order (`head_to_head`, from a
per-seat score a game names), the win counts ratings are fitted to (`win_counts`), and a model's
share of the decided games (`decided_share`). A game's own rows and
summaries live in its package (`Game.evaluation`); these functions know nothing of a game.

Games played from one instance are correlated (same setup, same hidden information), so intervals
resample instances, not games: each resample draws instances with replacement and takes the mean
of their per-instance means. Point estimates are that same mean of per-instance means, which
weighs every instance equally whatever its number of games.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

LEVEL = 0.95
ORDERS = ("both", "seat0", "seat1")  # a cross-play result's seat orders: pooled, or the first model in seat 0 / 1


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


def side_results(games: pd.DataFrame, model: str, score: str, own: Sequence[str] = ()) -> pd.DataFrame:
    """Games from `model`'s side (seat 0 where it sits in both): its `score` (the game's per-seat
    columns `score`0 and `score`1) and its partner's (`partner_`score), and whether it won (the
    higher score), tied (a draw: equal scores) or lost; `own` names further per-seat columns taken
    from its side. The index is the games' own, so a caller may add game-level columns."""
    first = games["seat0"] == model

    def mine(column: str) -> pd.Series:
        return games[f"{column}0"].where(first, games[f"{column}1"])

    ours, theirs = mine(score), games[f"{score}1"].where(first, games[f"{score}0"])
    return pd.DataFrame(
        {
            "instance_id": games["instance_id"],
            score: ours,
            f"partner_{score}": theirs,
            "win": (ours > theirs).astype(float),
            "tie": (ours == theirs).astype(float),
            "loss": (ours < theirs).astype(float),
            **{column: mine(column) for column in own},
        }
    )


def win_rates(results: pd.DataFrame, resamples: int, rng: np.random.Generator, means: Sequence[str] = ()) -> dict:
    """Win, tie and loss rates of one side of some games (`side_results`), the mean of each column
    in `means`, and the share of the decided games it won, each with its interval over instances."""
    rates = {
        c: mean_interval(per_instance(results, c).to_numpy(float), resamples, rng)
        for c in ("win", "tie", "loss", *means)
    }
    sums = results.groupby("instance_id")[["win", "loss"]].sum()
    return {
        "games": len(results),
        "instances": int(results["instance_id"].nunique()),
        **rates,
        "decided_win_share": ratio_interval(sums["win"], sums["win"] + sums["loss"], resamples, rng),
    }


def pairs_met(games: pd.DataFrame, models: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs of `models` that met in cross-play, in the order of their first game, each from
    the side of the model in seat 0 there (a run lists a later checkpoint's games first, so its
    results are reported against the earlier one)."""
    met = games[(games["seat0"] != games["seat1"]) & games["seat0"].isin(models) & games["seat1"].isin(models)]
    first: dict[frozenset, tuple[str, str]] = {}
    for a, b in zip(met["seat0"], met["seat1"]):
        first.setdefault(frozenset((a, b)), (a, b))
    return list(first.values())


def head_to_head(
    games: pd.DataFrame, models: Sequence[str], results: Callable[[pd.DataFrame, str], dict]
) -> list[dict]:
    """For each pair of models that met (`pairs_met`): `results(games, first model)` of the first
    model's games in seat 0, in seat 1 and in both together (None for an order not played)."""
    entries = []
    for a, b in pairs_met(games, models):
        orders = {
            "seat0": games[(games["seat0"] == a) & (games["seat1"] == b)],
            "seat1": games[(games["seat0"] == b) & (games["seat1"] == a)],
        }
        both = pd.concat(orders.values())
        entries.append(
            {
                "models": [a, b],
                **{order: results(g, a) if len(g) else None for order, g in {**orders, "both": both}.items()},
            }
        )
    return entries


def win_counts(games: pd.DataFrame, models: Sequence[str], score: str) -> np.ndarray:
    """(instances, models, models): cross-play games the row model won against the column model on
    each instance by the higher `score` (the game's per-seat columns `score`0, `score`1), ties as halves."""
    instances = {i: k for k, i in enumerate(games["instance_id"].unique())}
    index = {m: k for k, m in enumerate(models)}
    counts = np.zeros((len(instances), len(models), len(models)))
    for seat0, seat1, instance, ours, theirs in zip(
        games["seat0"], games["seat1"], games["instance_id"], games[f"{score}0"], games[f"{score}1"]
    ):
        if seat0 == seat1 or seat0 not in index or seat1 not in index:
            continue
        a, b, k = index[seat0], index[seat1], instances[instance]
        won = 1.0 if ours > theirs else 0.5 if ours == theirs else 0.0
        counts[k, a, b] += won
        counts[k, b, a] += 1 - won
    return counts


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
