"""Paired difference of two evaluations on the instances both played: B minus A, per instance, with a
95% bootstrap interval over instances (the evaluations' own resampling), beside each one's reward and the
random-matching baseline of B's instances.

    python bench/analysis/paired.py A/metrics.json B/metrics.json [...more B]

Each metrics.json is one model's `selfplay-gen eval` (its `per_instance` rewards). Comparing two runs'
evaluations this way needs no games files, only what `bench/results/` keeps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from selfplay_gen.stats.metrics import paired_difference

RESAMPLES = 2000


def one_model(path: Path) -> tuple[str, dict, pd.Series]:
    """(label, summary, per-instance rewards) of a one-model metrics.json."""
    data = json.loads(path.read_text())
    if not str(data.get("schema", "")).startswith("selfplay-gen-eval/"):
        raise SystemExit(f"{path}: field schema is {data.get('schema')!r}; give an evaluation's metrics.json")
    if len(data["models"]) != 1:
        raise SystemExit(f"{path}: field models holds {len(data['models'])} models; give one model's evaluation")
    ((label, summary),) = data["models"].items()
    return label, summary, pd.Series(data["per_instance"][label], dtype=float)


def row(path: Path, label: str, summary: dict) -> str:
    reward, random = summary["mean_normalized_reward"], summary["random_matching_reward"]
    low, high = reward["ci"]
    return (f"{path}: {label} {reward['mean']:.3f} [{low:.3f}, {high:.3f}] on {summary['instances']} instances x "
            f"{summary['games'] // summary['instances']} (random matching {random['mean']:.3f})")  # fmt: skip


def main(paths: list[Path]) -> None:
    base, *others = paths
    label, summary, a = one_model(base)
    print(row(base, label, summary))
    for path in others:
        label, summary, b = one_model(path)
        diff = paired_difference(b, a, RESAMPLES, np.random.default_rng(0))
        print(row(path, label, summary))
        if diff is None:
            print("  no instance in common: no paired difference")
        else:
            low, high = diff["ci"]
            print(f"  minus the first, paired: {diff['mean']:+.3f} [{low:+.3f}, {high:+.3f}] (n={diff['instances']})")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    main([Path(p) for p in sys.argv[1:]])
