"""Bradley–Terry ratings from paired instance-level comparisons.

For every instance two models both took part in, the model whose games there have the higher
mean normalized reward wins that comparison (equal means: half a win each). A Bradley–Terry
model fit to the win counts (Hunter's MM iteration) gives each model a strength; ratings are
on the Elo scale (400 points = 10:1 odds of winning a comparison) with the first model at 0.
One virtual drawn comparison per pair of compared models keeps ratings finite when one model
wins every comparison. Intervals resample instances, like every interval in this report.
Competitive games rate from the wins of cross-play games instead (`rate_wins`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import LEVEL, bootstrap_counts

ELO = 400 / np.log(10)


def outcomes(scores: np.ndarray) -> np.ndarray:
    """(instances, models, models): 1 where row model beats column model on that instance, 0.5
    on a tie, 0 on a loss or where either model did not play the instance."""
    a, b = scores[:, :, None], scores[:, None, :]
    played = ~np.isnan(a) & ~np.isnan(b)
    return np.where(played, (a > b) + 0.5 * (a == b), 0.0) * (1 - np.eye(scores.shape[1]))


def bradley_terry(wins: np.ndarray, iterations: int = 10_000, tol: float = 1e-10) -> np.ndarray:
    """Log-strengths from wins[i, j] (comparisons i won against j), the first model at 0;
    NaN for models with no comparisons."""
    compared = (wins + wins.T) > 0
    wins = wins + 0.5 * compared  # the virtual draw of every compared pair
    games = wins + wins.T
    rated = compared.any(axis=1)
    strength = np.where(rated, 1.0, np.nan)
    w, n, p = wins[np.ix_(rated, rated)].sum(axis=1), games[np.ix_(rated, rated)], strength[rated]
    for _ in range(iterations):
        new = w / (n / (p[:, None] + p[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())
        done = np.max(np.abs(np.log(new / p))) < tol
        p = new
        if done:
            break
    strength[rated] = p
    log_strength = np.log(strength)
    return log_strength - (log_strength[0] if rated[0] else np.nanmin(log_strength))


def rate(scores: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Elo-scale ratings with bootstrap intervals. `scores`: one row per instance, one column
    per model, the mean normalized reward of the games the model took part in (NaN: none)."""
    return rate_wins(outcomes(scores.to_numpy(dtype=float)), list(scores.columns), resamples, rng)


def rate_wins(per_instance: np.ndarray, models: list[str], resamples: int, rng: np.random.Generator) -> dict:
    """Elo-scale ratings with bootstrap intervals from per_instance[k, i, j], the wins (ties as
    halves) of model i against model j on instance k; instances are what the bootstrap resamples."""
    point = bradley_terry(per_instance.sum(axis=0)) * ELO
    flat = per_instance.reshape(len(per_instance), -1)
    boots = (
        np.array(
            [
                bradley_terry((c @ flat).reshape(len(models), len(models)))
                for c in bootstrap_counts(len(per_instance), resamples, rng)
            ]
        )
        * ELO
    )
    lo, hi = np.nanquantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    wins = per_instance.sum(axis=(0, 2))
    compared = (per_instance + per_instance.transpose(0, 2, 1)).sum(axis=(0, 2))
    return {
        m: {
            "rating": None if np.isnan(point[i]) else float(point[i]),
            "ci": None if np.isnan(point[i]) else [float(lo[i]), float(hi[i])],
            "wins": float(wins[i]),
            "comparisons": float(compared[i]),
        }
        for i, m in enumerate(models)
    }
