"""The opponent pool: checkpoints and scripted negotiators of several strengths, with the games
each pair has won against the other, and ratings fit to those wins.

Ratings are the evaluation's Bradley–Terry fit (`stats.ratings.bradley_terry`, Elo scale)
to every cross-play game the pool has seen, so the league and the evaluation report agree on one
scale. Wins accumulate over iterations: a rating is as good as all games played so far, not the
last batch. A game is won by the seat with more points (ties as halves), as in the evaluation.
The pool is saved as JSON beside a run, so a resumed run continues from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..atomic import write_atomic
from ..stats.ratings import ELO, bradley_terry

SCRIPTED_PREFIX = "scripted@"
RUN_RELATIVE = "run_relative"  # a league file's checkpoints whose paths are relative to the run's directory
KINDS = ("checkpoint", "scripted")


@dataclass(frozen=True)
class Member:
    """One opponent: a model checkpoint (`path`, a model directory) or the scripted negotiator at
    `strength`. `name` is its label in cross-play games and ratings."""

    name: str
    kind: str = "checkpoint"
    path: str | None = None
    strength: float | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"member {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "scripted" and (self.strength is None or not 0 <= self.strength <= 1):
            raise ValueError(
                f"member {self.name!r}: a scripted negotiator needs a strength in [0, 1], not {self.strength}"
            )
        if self.kind == "checkpoint" and not self.path:
            raise ValueError(f"member {self.name!r}: a checkpoint needs a model directory (path)")

    def partner_args(self) -> list[str]:
        """The `selfplay-gen play` options that seat this member in seat 1: the scripted negotiator
        at its strength, or its model directory (served by the partner backend the run chooses)."""
        if self.kind == "scripted":
            return ["--partner-backend", "scripted", "--partner-scripted-strength", f"{self.strength:g}"]
        return ["--partner-model", str(self.path)]

    def first_seat_args(self) -> list[str]:
        """The `selfplay-gen play` options that seat this scripted negotiator in seat 0 (its partner the
        model, in seat 1)."""
        if self.kind != "scripted":
            raise ValueError(f"member {self.name!r}: only a scripted negotiator is seated in seat 0 by its options")
        return ["--backend", "scripted", "--scripted-strength", f"{self.strength:g}"]


def _inside(path: str, root: Path) -> str | None:
    """`path` relative to `root` where it lies under it, else None."""
    try:
        return str(Path(path).absolute().relative_to(Path(root).absolute()))
    except ValueError:
        return None


def scripted_member(strength: float) -> Member:
    """The scripted negotiator at `strength`, named `scripted@<strength>` (as labels in cross-play)."""
    return Member(f"{SCRIPTED_PREFIX}{strength:g}", "scripted", strength=float(strength))


@dataclass(frozen=True)
class League:
    """Members (in the order they joined: the first is the rating's anchor at 0) and
    `wins[a][b]`, the games a won against b (ties as halves)."""

    members: tuple[Member, ...] = ()
    wins: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self):
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError(f"league members must have distinct names, got {names}")
        for a, row in self.wins.items():
            for b, n in row.items():
                if a not in names or b not in names or n < 0:
                    raise ValueError(f"league wins[{a!r}][{b!r}] = {n}: not two members and a count >= 0")

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"no league member {name!r}; members: {', '.join(self.names)}")

    def add(self, member: Member) -> League:
        """The league with `member` joined (its wins start at none)."""
        return League((*self.members, member), self.wins)

    def record(self, games: pd.DataFrame) -> League:
        """The league with the cross-play games of `games` added to its wins: rows with `seat0`,
        `seat1` (member names) and `points0`, `points1`, as a competitive game's evaluation table
        (`Game.evaluation`) makes them. Self-play games and games of non-members are skipped: they rate no one."""
        names = set(self.names)
        wins = {a: dict(row) for a, row in self.wins.items()}
        for row in games.itertuples():
            if row.seat0 == row.seat1 or row.seat0 not in names or row.seat1 not in names:
                continue
            score = 1.0 if row.points0 > row.points1 else 0.5 if row.points0 == row.points1 else 0.0
            wins.setdefault(row.seat0, {}).setdefault(row.seat1, 0.0)
            wins.setdefault(row.seat1, {}).setdefault(row.seat0, 0.0)
            wins[row.seat0][row.seat1] += score
            wins[row.seat1][row.seat0] += 1 - score
        return League(self.members, wins)

    def record_file(self, games: Path, seats: tuple[str, str]) -> League:
        """`record` for a JSONL file of games whose seat 0 and 1 were `seats` (member names), as
        `selfplay-gen play` or the evaluation's cross-play (`OUT/games/A__B.jsonl`) writes them."""
        from ..evaluation.protocol import records_table
        from ..records import read_games

        return self.record(records_table(list(read_games(games)), seats))

    def win_matrix(self) -> np.ndarray:
        index = {n: i for i, n in enumerate(self.names)}
        matrix = np.zeros((len(index), len(index)))
        for a, row in self.wins.items():
            for b, n in row.items():
                matrix[index[a], index[b]] = n
        return matrix

    def ratings(self) -> dict[str, float | None]:
        """Elo-scale Bradley–Terry ratings from all recorded wins (first member 0, or the lowest
        rated at 0 when the first has played no one); None for a member with no games yet."""
        wins = self.win_matrix()
        if not wins.any():
            return {n: None for n in self.names}
        points = bradley_terry(wins) * ELO
        return {n: None if np.isnan(p) else float(p) for n, p in zip(self.names, points)}

    def to_dict(self) -> dict[str, Any]:
        return {"members": [asdict(m) for m in self.members], "wins": {a: dict(r) for a, r in self.wins.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "league") -> League:
        try:
            members = tuple(Member(**m) for m in data["members"])
            return cls(members, {a: dict(r) for a, r in data.get("wins", {}).items()})
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{where}: not a league ({err})") from None

    def save(self, path: Path, root: Path | None = None) -> None:
        """Write the league to `path`. Checkpoints under `root` (a run's directory) are written relative to it
        and named in RUN_RELATIVE, so a copy of the run, moved or forked, loads its own checkpoints (`load`
        with the copy's root); every other path is written as it is."""
        inside = {m.name: _inside(m.path, root) for m in self.members if m.path and root is not None}
        moved = {name: relative for name, relative in inside.items() if relative is not None}
        data = {**self.with_paths(moved).to_dict(), "ratings": self.ratings()}
        write_atomic(path, json.dumps({**data, **({RUN_RELATIVE: sorted(moved)} if moved else {})}, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path, root: Path | None = None) -> League:
        """The league saved at `path`, the checkpoints it names in RUN_RELATIVE read against `root` (the run's
        directory)."""
        data = json.loads(path.read_text())
        league, named = cls.from_dict(data, str(path)), set(data.get(RUN_RELATIVE, ()))
        if root is None:
            return league
        return league.with_paths({m.name: str(root / m.path) for m in league.members if m.path and m.name in named})

    def with_paths(self, paths: Mapping[str, str]) -> League:
        """The league with the checkpoints `paths` names at those paths."""
        members = tuple(replace(m, path=paths[m.name]) if m.name in paths else m for m in self.members)
        return League(members, self.wins)

    @classmethod
    def of(cls, members: Iterable[Member]) -> League:
        return cls(tuple(members))
