"""Which instances each purpose may use, by seed: training, development, test, the skill match.

A random instance is fully determined by its seed, so the purposes are disjoint seed ranges:

- training: seeds below 10**9 (iteration N of a run plays its games on seeds N x 10**6 on);
- development (`dev`, formerly `heldout`): seeds from 10**9, for every choice (learning rates,
  games per iteration, temperature, which trainer);
- test: seeds from 2 x 10**9, played only to report final models, never to pick a setting;
- the skill match (a skill-conditioned run's highest level against its lowest): seeds from 3 x 10**9.

A score measured on instances a setting was chosen on overstates what the setting does on new
ones; a model trained on evaluation instances could learn them by heart. So training data is
refused when its instances lie in any evaluation range (`check_training_seeds`), and the
evaluation ranges are apart from each other (`split_seeds`). A game's human instances (those
people played, `Game.human_games`) are a further report of their own, not a range here: they have no
seed, and training data must come from a training seed, so their games are refused as well.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedRange:
    """Seeds `start` up to, not including, `stop`, reserved for one purpose."""

    name: str
    start: int
    stop: int

    def __contains__(self, seed: object) -> bool:
        return isinstance(seed, int) and self.start <= seed < self.stop

    def overlaps(self, start: int, stop: int) -> bool:
        """Whether any seed of [start, stop) is in this range."""
        return start < self.stop and self.start < stop

    def __str__(self) -> str:
        return f"{self.name} instances (seeds {self.start:_} to {self.stop - 1:_})"


DEV = SeedRange("development", 10**9, 2 * 10**9)
TEST = SeedRange("test", 2 * 10**9, 3 * 10**9)
SKILL = SeedRange("skill match", 3 * 10**9, 4 * 10**9)  # below 2**32, the largest seed some generators take
EVALUATION_RANGES = (DEV, TEST, SKILL)
TRAINING_STOP = DEV.start  # training seeds are below it

# `--instances` values for evaluation on seeded instances, and the names kept for old commands
SPLITS = {"dev": DEV, "test": TEST}
ALIASES = {"heldout": "dev"}
# instances an evaluation plays unless told otherwise: the test split is bigger, since its
# one reading per final model has to carry the result (256 instances x 4 games by default)
DEFAULT_INSTANCES = {"dev": 128, "test": 256}

# training seeds of one self-play iteration: iteration N plays on seeds N x ITERATION_SEEDS on
ITERATION_SEEDS = 10**6


class EvaluationSeedError(ValueError):
    """Training that would use evaluation (development, test, skill-match) instances, or an evaluation past
    its range."""


def split_name(name: str) -> str:
    """The split an `--instances` value names (`heldout` is `dev`)."""
    name = ALIASES.get(name, name)
    if name not in SPLITS:
        raise ValueError(f"unknown instance split {name!r}; known: {', '.join([*SPLITS, *ALIASES])}")
    return name


def split_seeds(name: str, count: int, offset: int = 0) -> range:
    """The seeds of `count` instances of the split `name` (dev, test or heldout), starting
    `offset` seeds into it; refused when they would run past the split into another range."""
    chosen = SPLITS[split_name(name)]
    if count < 1 or offset < 0:
        raise ValueError(f"a split needs count >= 1 and offset >= 0, got count {count}, offset {offset}")
    seeds = range(chosen.start + offset, chosen.start + offset + count)
    if seeds.stop > chosen.stop:
        raise EvaluationSeedError(
            f"{count} {name} instances from seed offset {offset} (seeds {seeds.start:_} to {seeds.stop - 1:_}) "
            f"run past the {chosen}"
        )
    return seeds


def evaluation_range(seed: int) -> SeedRange | None:
    """The evaluation range holding `seed`, or None for a seed training may use."""
    return next((r for r in EVALUATION_RANGES if seed in r), None)


def check_training_seeds(start: int, count: int, what: str = "training instances") -> range:
    """The seeds [start, start + count) of `what`, refused with `EvaluationSeedError` when any of
    them is an evaluation seed (development, test or skill match)."""
    seeds = range(start, start + count)
    hit = [r for r in EVALUATION_RANGES if r.overlaps(seeds.start, seeds.stop)]
    if hit:
        raise EvaluationSeedError(
            f"{what}: seeds {seeds.start:_} to {seeds.stop - 1:_} overlap the "
            + " and the ".join(map(str, hit))
            + f"; training seeds must stay below {TRAINING_STOP:_}"
        )
    return seeds


def iteration_seeds(iteration: int, instances: int) -> range:
    """The training seeds of self-play iteration `iteration` (1, 2, ...) playing `instances`
    instances: ITERATION_SEEDS x iteration on. Refused when they would reach the next
    iteration's seeds or an evaluation range."""
    if iteration < 0 or instances < 1:
        raise ValueError(f"iteration must be >= 0 and instances >= 1, got {iteration} and {instances}")
    if instances > ITERATION_SEEDS:
        raise EvaluationSeedError(
            f"iteration {iteration}: {instances} instances do not fit its {ITERATION_SEEDS:_} seeds; "
            "the next iteration would replay them"
        )
    return check_training_seeds(iteration * ITERATION_SEEDS, instances, f"iteration {iteration}")
