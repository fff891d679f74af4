"""Games by name. The registry stores each game's qualified class name (as verl's agent-loop
registry stores `_target_`) and imports a game's module only when that game is asked for, so
naming one game never loads another's dependencies.

    from selfplay_gen import games
    game = games.get("negotiation")(reward_mode="competitive")
    start = game.reset(game.instance_type.from_seed(7))
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from .base import Game, Limits

# The game of records and init rows written before games had names, and of a run that names none.
UNNAMED = "matching"
# name -> "package.module.Class"
_TARGETS: dict[str, str] = {
    "matching": "selfplay_gen.games.matching.MatchingGame",
    "negotiation": "selfplay_gen.games.negotiation.NegotiationGame",
}
# family -> "package.module.function": a game per parameter, named "family:PARAM" (e.g.
# "textarena:KuhnPoker-v0"); the function makes the class of PARAM or refuses it (ValueError)
_FAMILIES: dict[str, str] = {
    "textarena": "selfplay_gen.games.textarena.game_for",
}


def names() -> list[str]:
    """Every registered game, sorted."""
    return sorted(_TARGETS)


def register(name: str, target: str) -> None:
    """Make the game class `target` ("package.module.Class") available as `name`. Registering a
    name again with another class is an error: two games must not share a name."""
    module, _, cls = target.rpartition(".")
    if not module or not cls:
        raise ValueError(f"a game target is 'package.module.Class', got {target!r}")
    if _TARGETS.get(name, target) != target:
        raise ValueError(f"game {name!r} is already registered as {_TARGETS[name]}")
    _TARGETS[name] = target


def families() -> list[str]:
    """The families of parametrized games, each as "family:PARAM", sorted."""
    return [f"{family}:ENV_ID" for family in sorted(_FAMILIES)]


def known(name: str) -> bool:
    """Whether `name` is a registered game or names one of a family (without making it)."""
    return name in _TARGETS or name.partition(":")[0] in _FAMILIES


# several games in one run: their names joined by commas ("textarena:TicTacToe-v0,textarena:KuhnPoker-v0")
MIX = ","


def mixture(name: str) -> list[str]:
    """The games `name` plays: itself, or each game of a mix (names joined by `MIX`), in order. A mix
    names each game once and only games the registry knows (`get` checks each)."""
    parts = [part.strip() for part in name.split(MIX)]
    if len(parts) > 1:
        if not all(parts):
            raise ValueError(f"{name!r}: a mix of games names one game between each pair of commas")
        repeated = sorted({part for part in parts if parts.count(part) > 1})
        if repeated:
            raise ValueError(f"{name!r}: a mix of games names each game once, not {repeated[0]!r} twice")
        for part in parts:
            get(part)
    return parts


def shares(name: str, seeds: range) -> list[tuple[str, range]]:
    """Each game of `name` (`mixture`) with its share of `seeds`: contiguous ranges, as even as they
    can be (the first games one seed more where the count does not divide), so a mix's instances are
    split evenly between its games and no two games share a seed (nor an instance id)."""
    parts, start = mixture(name), seeds.start
    out = []
    for i, part in enumerate(parts):
        size = len(seeds) // len(parts) + (i < len(seeds) % len(parts))
        out.append((part, range(start, start + size)))
        start += size
    return out


def get(name: str) -> type[Game[Any, Any]]:
    """The game class registered as `name`, or made by its family for "family:PARAM", its module
    imported now."""
    if MIX in name:
        raise ValueError(
            f"{name!r} is a mix of games; where a mix is taken (play, init, iterate) each of its games is "
            "played, converted and evaluated apart"
        )
    family, colon, param = name.partition(":")
    if colon and family in _FAMILIES:
        module, _, function = _FAMILIES[family].rpartition(".")
        game = getattr(importlib.import_module(module), function)(param)
    elif name not in _TARGETS:
        raise ValueError(f"unknown game {name!r}; known games: {', '.join(names() + families())}")
    else:
        module, _, cls = _TARGETS[name].rpartition(".")
        game = getattr(importlib.import_module(module), cls)
    if not (isinstance(game, type) and issubclass(game, Game)):
        raise TypeError(f"game {name!r} names {_TARGETS.get(name, family)}, which is not a Game class")
    return game


# Fewer seeds than this are drawn in this process: starting worker processes would cost more.
PARALLEL_SEEDS = 256


def seeded(name: str, seeds: range, desc: str | None = None) -> list[Any]:
    """The instances of game `name` for `seeds`, in seed order; `desc` labels a progress bar.

    A matching instance samples candidate tables until one is hard, which takes milliseconds, so
    the thousands an online run's pool holds are drawn by one process per available CPU. Workers
    are spawned, not forked: a fork of a process that runs threads (tqdm's monitor, a caller's
    own) can deadlock in the child.
    """
    from_seed = get(name).instance_type.from_seed
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    bar = {"desc": desc, "unit": "inst", "total": len(seeds), "disable": desc is None}
    if len(seeds) < PARALLEL_SEEDS or cpus < 2:
        return [from_seed(seed) for seed in tqdm(seeds, **bar)]
    with ProcessPoolExecutor(cpus, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(tqdm(pool.map(from_seed, seeds, chunksize=max(1, len(seeds) // (8 * cpus))), **bar))


@dataclass(frozen=True)
class GameConfig:
    """What a run plays: a registered game, its limits and its options (e.g. a reward mode).
    Checked when made, so a bad name or option fails before any game is played."""

    name: str = UNNAMED
    limits: Limits = field(default_factory=Limits)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.new()

    def new(self) -> Game[Any, Any]:
        """A fresh game of this configuration (one per game played: games hold their state)."""
        game = get(self.name)
        try:
            return game(self.limits, **self.options)
        except TypeError as err:
            raise ValueError(f"the {self.name} game does not take the options {dict(self.options)} ({err})") from None


__all__ = [
    "MIX",
    "UNNAMED",
    "Game",
    "GameConfig",
    "families",
    "get",
    "known",
    "mixture",
    "names",
    "register",
    "seeded",
    "shares",
]
