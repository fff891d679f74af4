"""Train/validation split by instance: every game of one instance lands in the same file, so
validation never scores a table the policy was trained on."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def validation_instances(instance_ids: Iterable[str], val_fraction: float, seed: int) -> set[str]:
    """The instances that go to validation: round(val_fraction * n) of them, drawn with `seed`
    from the sorted ids (so the input order does not matter). With a positive fraction and at
    least two instances, both sides get at least one."""
    unique = sorted(set(instance_ids))
    n_val = round(val_fraction * len(unique))
    if val_fraction > 0 and len(unique) > 1:
        n_val = min(max(n_val, 1), len(unique) - 1)
    order = np.random.default_rng(seed).permutation(len(unique))
    return {unique[i] for i in order[:n_val]}
