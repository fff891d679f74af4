"""The game protocol: what the runner, records and convert may assume of any two-seat dialogue game.

Modelled on Gymnasium's `Env` and verl's agent loops, and on what `MatchingGame` already does:

- `reset(instance)` starts a game and returns what each seat sees first (its system prompt and
  its first messages); `step(seat, text)` applies one turn and returns an explicit `StepResult`,
  with the new messages for *each* seat, so no driver routes feedback itself.
- `done`, `to_move` and, once done, `outcome`: a termination reason and a reward per seat.
  `stop(reason)` ends a game for a limit only the driver sees (tokens, context, errors); the
  outcome marks such ends `truncated`, apart from the game's own ends (its limits included).
- Instances are plain data: `from_seed`, `to_dict` / `from_dict`, an `id`.
- `scripted_player(seat, seed=...)` builds the game's model-free player, deterministic per seed;
  `teacher` names the knobs of the one whose games warm-start a model that cannot play yet.
- Each game declares the parts of a game record it fills in its own way (`record`: instance,
  outcome details, events), which `records` checks on read.

Games are registered by name in `selfplay_gen.games` and imported only when used.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar


class InvalidMove(ValueError):
    """A turn that is not a legal move; the message says what is wrong (shown to the mover)."""


@dataclass(frozen=True)
class Limits:
    """When a game ends without agreement. Recorded with every game."""

    max_moves: int = 30  # valid moves, both seats together
    max_invalid: int = 3  # consecutive invalid moves by one seat

    def __post_init__(self):
        if self.max_moves < 1 or self.max_invalid < 1:
            raise ValueError(f"limits must be positive: {self}")


# Ends every game shares. Limits every game enforces itself (`Limits`): too many valid moves, too
# many invalid in a row.
MAX_MOVES, MAX_INVALID = "max_moves", "max_invalid"
# Ends a driver reports through `stop`: limits the rules cannot see, and failures of the driver.
MAX_NEW_TOKENS, CONTEXT_LENGTH = "max_new_tokens", "context_length"
BACKEND_ERROR, TOKEN_INVARIANT, INTERNAL = "backend_error", "token_invariant", "internal"
LIMIT_ENDS = (MAX_MOVES, MAX_INVALID)
STOPS = (MAX_NEW_TOKENS, CONTEXT_LENGTH, BACKEND_ERROR, TOKEN_INVARIANT, INTERNAL)

_I = TypeVar("_I", bound="GameInstance")
InstanceT = TypeVar("InstanceT", bound="GameInstance")  # a game's instance type
MoveT = TypeVar("MoveT")  # a game's parsed move type
# A scripted player's seed: an int, or several (numpy's `SeedSequence` entropy), e.g. (run seed,
# game, seat) so that every seat of every game plays its own way however the run is scheduled.
Seed = int | Sequence[int] | None


class GameInstance(Protocol):
    """One game's setup, fully determined by its seed (or loaded from data), JSON round trip."""

    @property
    def id(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

    @classmethod
    def from_seed(cls: type[_I], seed: int) -> _I: ...

    @classmethod
    def from_dict(cls: type[_I], data: Mapping[str, Any]) -> _I: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Observation:
    """What each seat sees when a game starts: `system[s]` (rules and its private view) and
    `told[s]`, the first user messages for seat s (empty for a seat that does not move first)."""

    system: tuple[str, ...]
    told: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class StepResult(Generic[MoveT]):
    """One turn: who moved, the parsed move if valid, the error if not (shown to the mover only),
    and `told[s]`, the new messages for each seat s, in order."""

    seat: int
    move: MoveT | None
    error: str | None
    told: tuple[tuple[str, ...], ...]
    done: bool

    @property
    def valid(self) -> bool:
        return self.move is not None


@dataclass(frozen=True)
class Outcome:
    """How a game ended. `rewards[s]` is what training compares for seat s; `truncated` is true
    when the driver stopped the game (`stop`), false for the game's own ends, limits included.
    `details` holds the game's own results (JSON values), e.g. the agreed proposal."""

    termination: str
    agreed: bool
    rewards: tuple[float, ...]
    truncated: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.details,
            "termination": self.termination,
            "agreed": self.agreed,
            "rewards": list(self.rewards),
            "truncated": self.truncated,
        }


class Player(Protocol):
    """What sits in a seat: told everything the game says to it, asked for its next turn."""

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        """New messages for this seat: after `reset` (`step` None) and after every step."""

    async def act(self) -> str:
        """The next turn's text."""
        ...

    def log(self) -> dict[str, Any]:
        """What the record keeps of this seat (its `kind` and `messages` at least)."""
        ...


class Game(abc.ABC, Generic[InstanceT, MoveT]):
    """A two-seat dialogue game as a pure state machine: no I/O, no model, no clock. State
    exists from `__init__`; `reset` (re)starts it. Options such as a reward mode are
    constructor keywords, so one run plays one configuration."""

    name: ClassVar[str]
    instance_type: ClassVar[type[GameInstance]]
    seats: ClassVar[int] = 2
    terminations: ClassVar[tuple[str, ...]]  # every `Outcome.termination` this game can give
    ability: ClassVar[str]  # what it trains, as verl's `ability` column names it
    record: ClassVar[Any]  # a TypedDict of its record's own parts (instance, outcome, events)
    scripted_knobs: ClassVar[Mapping[str, Any]]  # the scripted player's knobs and their defaults
    teacher: ClassVar[Mapping[str, Any]]  # the scripted player's knobs whose games a warm start imitates

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()

    @abc.abstractmethod
    def reset(self, instance: InstanceT) -> Observation:
        """Start a game of `instance`; what each seat sees first."""

    @abc.abstractmethod
    def step(self, seat: int, text: str) -> StepResult[MoveT]:
        """Apply `seat`'s turn (it must be `to_move`). An invalid move changes nothing but the
        mover's invalid count; the result says what each seat is told."""

    @property
    @abc.abstractmethod
    def done(self) -> bool: ...

    @property
    @abc.abstractmethod
    def to_move(self) -> int: ...

    @property
    @abc.abstractmethod
    def outcome(self) -> Outcome | None:
        """None until the game is done."""

    @property
    @abc.abstractmethod
    def valid_moves(self) -> int: ...

    @property
    @abc.abstractmethod
    def invalid_moves(self) -> int: ...

    @abc.abstractmethod
    def stop(self, reason: str, seat: int | None = None, detail: str = "") -> Outcome:
        """End the game without agreement for a limit or failure the rules cannot see (one of
        `STOPS`); the event log says who hit it. A game already over keeps its outcome."""

    @abc.abstractmethod
    def events(self) -> list[dict[str, Any]]:
        """The game log as JSON values: valid moves, invalid attempts with their error, stops."""

    @abc.abstractmethod
    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> Player:
        """This game's model-free player for `seat` of the game just reset; same seed, same play."""

    @classmethod
    def upgrade_record(cls, record: dict[str, Any]) -> None:
        """Bring a checked record written by an earlier version of this game up to date, in
        place (e.g. fields added since); records of the current version pass unchanged."""

    def _knobs(self, knobs: Mapping[str, Any]) -> dict[str, Any]:
        """The knobs' defaults (`scripted_knobs`, then the teacher's own) updated by `knobs`; a knob
        the scripted player does not have is an error."""
        defaults = {**self.teacher, **self.scripted_knobs}
        unknown = sorted(set(knobs) - set(defaults))
        if unknown:
            raise TypeError(
                f"the {self.name} scripted player has no knob {', '.join(unknown)}; "
                f"its knobs are {', '.join(defaults) or 'none'}"
            )
        return {**defaults, **knobs}

    def _check_turn(self, seat: int) -> None:
        if self.done:
            raise RuntimeError("the game is over; call reset()")
        if seat != self.to_move:
            raise ValueError(f"it is seat {self.to_move}'s turn, not seat {seat}'s")


async def play(game: Game[Any, Any], players: Sequence[Player], start: Observation) -> Outcome:
    """Drive a reset game to its end with `players` (one per seat), telling each what the game
    says. The runner is this loop plus records, `stop` for the limits players hit, and errors."""
    for seat, player in enumerate(players):
        player.observe(start.told[seat], None)
    while not game.done:
        seat = game.to_move
        step = game.step(seat, await players[seat].act())
        for s, player in enumerate(players):
            player.observe(step.told[s], step)
    assert game.outcome is not None  # done means an outcome exists
    return game.outcome


class ChatSeat(abc.ABC):
    """A seat that keeps its chat from its own view: its system prompt, what it is told since its
    last turn as one user turn, its moves as assistant turns. LLM seats and scripted ones alike,
    so their records have the same shape."""

    kind = "scripted"

    def __init__(self, seat: int, system: str):
        self.seat = seat
        self.messages: list[dict[str, str]] = [{"role": "system", "content": system}]
        self.inbox: list[str] = []

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        self.inbox.extend(told)

    async def act(self) -> str:
        user, self.inbox = "\n".join(self.inbox), []
        self.messages.append({"role": "user", "content": user})
        text = await self.respond()
        self.messages.append({"role": "assistant", "content": text})
        return text

    @abc.abstractmethod
    async def respond(self) -> str:
        """The turn for `self.messages` (which ends with the new user turn)."""

    def log(self) -> dict[str, Any]:
        return {"kind": self.kind, "messages": self.messages}


def split_tag(text: str, tags: Sequence[str]) -> tuple[str, str, str]:
    """(tag, text after it, text before it) of a turn holding exactly one of `tags` (`[tag]`, any
    case). Raises `InvalidMove` naming the problem: no tag, an unknown tag, or several tags."""
    names = ", ".join(f"[{t}]" for t in tags)
    found = list(re.finditer(r"\[(" + "|".join(map(re.escape, tags)) + r")\]", text, re.IGNORECASE))
    if not found:
        unknown = re.match(r"^\s*\[([^\]\n]{1,30})\]", text)
        if unknown:
            raise InvalidMove(f"unknown tag [{unknown.group(1)}]; use one of {names}")
        raise InvalidMove(f"no move tag found; start your move with one of {names}")
    if len(found) > 1:
        listed = ", ".join(f"[{m.group(1).lower()}]" for m in found)
        raise InvalidMove(f"a move must contain exactly one tag, found {len(found)}: {listed}")
    tag = found[0]
    return tag.group(1).lower(), text[tag.end() :].strip(), text[: tag.start()]
