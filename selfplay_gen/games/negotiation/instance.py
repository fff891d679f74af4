"""Deal or No Deal instances (Lewis et al. 2017): a pool of books, hats and balls, each seat's
private value per item, and how a pair of stated shares scores under each reward mode.

Instances follow Lewis et al.'s constraints: 1 to 4 of each item, 5 to 7 items in all, each
seat's values (non-negative integers) add up to 10 over the whole pool, every item is worth
something to at least one seat, and at least one item is worth something to both. Each seat's
values are drawn uniformly from all value vectors that meet the first constraints, and a
candidate that misses the last two is drawn again.

The seed -> instance contract: candidates are drawn only through `random.Random(seed).random()`,
whose sequence Python guarantees across versions and machines.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

ITEMS = ("book", "hat", "ball")
PLURALS = ("books", "hats", "balls")
TOTAL_VALUE = 10  # what the whole pool is worth to each seat
MAX_COUNT = 4
MIN_ITEMS, MAX_ITEMS = 5, 7
REWARD_MODES = ("cooperative", "semi-competitive", "competitive")

Share = tuple[int, int, int]  # how many of each item one seat takes


def item_name(item: int, n: int) -> str:
    return ITEMS[item] if n == 1 else PLURALS[item]


def render_share(share: Sequence[int]) -> str:
    """`1 book, 0 hats, 2 balls`: the canonical form, which `parse_share` reads back."""
    return ", ".join(f"{n} {item_name(i, n)}" for i, n in enumerate(share))


@dataclass(frozen=True)
class Instance:
    """One negotiation: `counts[i]` items of type `ITEMS[i]`, `values[seat][i]` what one of them
    is worth to `seat`, and where it came from (`seed`, or a named source)."""

    counts: Share
    values: tuple[Share, Share]
    seed: int | None = None
    source: str = "random"

    def __post_init__(self):
        counts = tuple(int(n) for n in self.counts)
        values = tuple(tuple(int(v) for v in seat) for seat in self.values)
        if len(counts) != len(ITEMS) or len(values) != 2 or any(len(v) != len(ITEMS) for v in values):
            raise ValueError(f"an instance needs a count and two values for each of {', '.join(ITEMS)}")
        if min(counts) < 1:
            raise ValueError(f"every item must be in the pool at least once, got counts {counts}")
        for seat, seat_values in enumerate(values):
            if min(seat_values) < 0:
                raise ValueError(f"values must not be negative, got {seat_values} for seat {seat}")
            total = sum(c * v for c, v in zip(counts, seat_values))
            if total != TOTAL_VALUE:
                raise ValueError(f"the pool must be worth {TOTAL_VALUE} to each seat; to seat {seat} it is {total}")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "values", values)

    @property
    def id(self) -> str:
        return f"seed-{self.seed}" if self.seed is not None else self.source

    @classmethod
    def from_seed(cls, seed: int) -> Instance:
        counts, values = sample(seed)
        return cls(counts, values, seed=seed)

    def value(self, seat: int, share: Sequence[int]) -> int:
        """What `share` is worth to `seat`."""
        return sum(n * v for n, v in zip(share, self.values[seat]))

    def rest(self, share: Sequence[int]) -> Share:
        """The items left for the other seat when one takes `share`."""
        a, b, c = (n - k for n, k in zip(self.counts, share))
        return a, b, c

    def shares(self) -> list[Share]:
        """Every share one seat can take, in a fixed order."""
        return [(a, b, c) for a, b, c in itertools.product(*(range(n + 1) for n in self.counts))]

    @cached_property
    def best_joint(self) -> int:
        """The most points both seats can earn together (the cooperative optimum)."""
        return max(self.value(0, s) + self.value(1, self.rest(s)) for s in self.shares())

    def pareto_optimal(self, share0: Sequence[int]) -> bool:
        """Whether no other split gives one seat more and the other no less (seat 0 takes `share0`)."""
        p0, p1 = self.value(0, share0), self.value(1, self.rest(share0))
        return not any(
            q0 >= p0 and q1 >= p1 and (q0, q1) != (p0, p1)
            for q0, q1 in ((self.value(0, s), self.value(1, self.rest(s))) for s in self.shares())
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": list(self.counts),
            "values": [list(v) for v in self.values],
            "seed": self.seed,
            "source": self.source,
            "best_joint": self.best_joint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        values = data["values"]
        inst = cls(
            tuple(data["counts"]), (tuple(values[0]), tuple(values[1])), data.get("seed"), data.get("source", "random")
        )
        if "best_joint" in data and data["best_joint"] != inst.best_joint:
            raise ValueError(f"stored best_joint {data['best_joint']} != recomputed {inst.best_joint}")
        return inst


def consistent(instance: Instance, shares: Sequence[Sequence[int]]) -> bool:
    """Whether the two seats' shares together take exactly the whole pool."""
    return takes_pool(shares, instance.counts)


def takes_pool(shares: Sequence[Sequence[int]], counts: Sequence[int]) -> bool:
    """Whether two shares together are exactly the pool `counts`: proposals that end a game in a deal, or an
    offer stated in a message whose halves add up."""
    return all(a + b == n for a, b, n in zip(shares[0], shares[1], counts))


def points(instance: Instance, shares: Sequence[Sequence[int]]) -> tuple[int, int]:
    """Each seat's points: the value of the share it took when the shares are consistent, else 0."""
    if not consistent(instance, shares):
        return 0, 0
    return instance.value(0, shares[0]), instance.value(1, shares[1])


def rewards(pts: Sequence[int], mode: str) -> tuple[float, float]:
    """Each seat's reward from both seats' points: `cooperative` the sum, `semi-competitive` its
    own points, `competitive` its own minus its partner's (the two rewards add up to 0)."""
    p0, p1 = pts
    if mode == "cooperative":
        return float(p0 + p1), float(p0 + p1)
    if mode == "semi-competitive":
        return float(p0), float(p1)
    if mode == "competitive":
        return float(p0 - p1), float(p1 - p0)
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")


def below(rng: random.Random, n: int) -> int:
    """A uniform integer in 0..n-1 from `rng.random()` alone (the guaranteed stream)."""
    return min(int(rng.random() * n), n - 1)


def value_vectors(counts: Sequence[int]) -> list[Share]:
    """Every vector of non-negative integer values that makes the pool worth TOTAL_VALUE, in order."""
    ranges = (range(TOTAL_VALUE // n + 1) for n in counts)
    return [
        (a, b, c)
        for a, b, c in itertools.product(*ranges)
        if sum(n * v for n, v in zip(counts, (a, b, c))) == TOTAL_VALUE
    ]


def sample(seed: int) -> tuple[Share, tuple[Share, Share]]:
    """The seed's (counts, values): the first candidate of its stream that meets every constraint."""
    rng = random.Random(seed)
    while True:
        a, b, c = (1 + below(rng, MAX_COUNT) for _ in ITEMS)
        if not MIN_ITEMS <= a + b + c <= MAX_ITEMS:
            continue
        options = value_vectors((a, b, c))
        values = (options[below(rng, len(options))], options[below(rng, len(options))])
        worth = [(v0 > 0, v1 > 0) for v0, v1 in zip(*values)]
        if all(x or y for x, y in worth) and any(x and y for x, y in worth):
            return (a, b, c), values
