"""The game protocol: what the runner, records and convert may assume of any two-seat dialogue game.

Modelled on Gymnasium's `Env` and verl's agent loops:

- `reset(instance)` starts a game and returns what each seat sees first (its system prompt and
  its first messages); `step(seat, text)` applies one turn and returns an explicit `StepResult`,
  with the new messages for *each* seat, so no driver routes feedback itself.
- `done`, `to_move` and, once done, `outcome`: a termination reason and a reward per seat.
  `stop(reason)` ends a game for a limit only the driver sees (tokens, context) or a failure of
  the driver (a backend error, a broken token invariant, a defect).
- Every end is one of three, as in Gymnasium: `terminated` (the rules ended the game, e.g. an
  agreement), `truncated` (a limit cut it short: moves, invalid moves, tokens, context) or
  `failed` (the driver failed; such a game says nothing about the players and is never trained).
  The termination reason says which (`TRUNCATIONS`, `FAILURES`; every other reason is a game's own).
- Instances are plain data: `from_seed`, `to_dict` / `from_dict`, an `id`.
- `scripted_player(seat, seed=...)` builds the game's model-free player, deterministic per seed;
  `teacher` names the knobs of the one whose games warm-start a model that cannot play yet;
  `random_player(seat, seed=...)` plays random legal moves (a format warm start's games).
- Each game declares the parts of a game record it fills in its own way (`record`: instance,
  outcome details, events), which `records` checks on read.

Games are registered by name in `selfplay_gen.games` and imported only when used.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
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
TRUNCATIONS = (*LIMIT_ENDS, MAX_NEW_TOKENS, CONTEXT_LENGTH)  # a limit: scored (0 without agreement), trained
FAILURES = (BACKEND_ERROR, TOKEN_INVARIANT, INTERNAL)  # the driver failed: never trained, played again on --resume


def end_of(termination: str) -> str:
    """ "terminated", "truncated" or "failed": which of Gymnasium's ends a termination reason is."""
    return "failed" if termination in FAILURES else "truncated" if termination in TRUNCATIONS else "terminated"


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
    """How a game ended: its reason (`termination`), whether the seats agreed, and `rewards[s]`,
    what training compares for seat s. Exactly one of `terminated`, `truncated` and `failed` holds
    (`end_of`). `details` holds the game's own results (JSON values), e.g. the agreed proposal."""

    termination: str
    agreed: bool
    rewards: tuple[float, ...]
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def terminated(self) -> bool:
        return end_of(self.termination) == "terminated"

    @property
    def truncated(self) -> bool:
        return end_of(self.termination) == "truncated"

    @property
    def failed(self) -> bool:
        return end_of(self.termination) == "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.details,
            "termination": self.termination,
            "agreed": self.agreed,
            "rewards": list(self.rewards),
            "terminated": self.terminated,
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
    constructor keywords, so one run plays one configuration.

    What every game shares lives here: the turn order and move counters, the limits (`Limits`),
    the event log and `stop`. A game supplies `reset`, `step` (with `_refuse` for an invalid
    move, `_count` for a valid one) and `_end`, which makes the outcome of a termination reason.
    Decisions other parts make per game (human instances, cross-play by default, its evaluation)
    are read from its class attributes, never from its name."""

    name: ClassVar[str]
    version: ClassVar[int] = 1  # of its rules and record parts; recorded with every game
    instance_type: ClassVar[type[GameInstance]]
    event_type: ClassVar[Callable[..., Any]]  # a dataclass (player, kind, text, ..., error): a line of the log
    seats: ClassVar[int] = 2
    terminations: ClassVar[tuple[str, ...]]  # every `Outcome.termination` this game can give
    ability: ClassVar[str]  # what it trains, as verl's `ability` column names it
    record: ClassVar[Any]  # a TypedDict of its record's own parts (instance, outcome, events)
    scripted_knobs: ClassVar[Mapping[str, Any]]  # the scripted player's knobs and their defaults
    teacher: ClassVar[Mapping[str, Any]]  # the scripted player's knobs whose games a warm start imitates
    teacher_plans: ClassVar[Mapping[str, str]] = {}  # the values of the teacher's `plan` knob, if any: what each does
    teacher_new_tokens: ClassVar[Mapping[str, int]] = {}  # new tokens a turn a teacher plan's moves need, if more
    human_games: ClassVar[int] = 0  # how many instances people played this game has (`human_instances`)
    crossplay_by_default: ClassVar[bool] = False  # competitive: iterations measure checkpoints against each other
    # its seats share one reward over values each sees in part, and its outcome records `own_plan_shares`: what the
    # agreed outcome is worth on what each seat sees (the training reward's own-plan term, `selfplay_gen.reward`)
    own_plan: ClassVar[bool] = False
    # the module of its `eval` metrics and report (`selfplay_gen.evaluation.protocol`); by default the
    # one every record allows: rewards per seat, agreement, moves, endings
    evaluation: ClassVar[str] = "selfplay_gen.stats.generic"
    # the module of its skill levels, if its prompts take one (`--skill`): `LEVELS`, `strength_of(level)`
    # (the scripted player's strength whose games teach a level) and `follows_levels(games, levels)`
    skill: ClassVar[str | None] = None
    play_options: ClassVar[Mapping[str, Sequence[str]]] = {}  # options a person picks to play it (viewer): values
    move_grammar: ClassVar[str] = ""  # its moves in brief, shown to a person playing it (viewer)

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.instance: InstanceT | None = None
        self._clear()

    def _clear(self) -> None:
        """The state of a game about to start (a subclass adds its own, calling this)."""
        self._to_move = 0
        self._valid = self._invalid = self.invalid_streak = 0
        self._events: list[Any] = []
        self._outcome: Outcome | None = None

    @abc.abstractmethod
    def reset(self, instance: InstanceT) -> Observation:
        """Start a game of `instance` (set `self.instance`, call `_clear`); what each seat sees first."""

    @abc.abstractmethod
    def step(self, seat: int, text: str) -> StepResult[MoveT]:
        """Apply `seat`'s turn (it must be `to_move`). An invalid move changes nothing but the
        mover's invalid count; the result says what each seat is told."""

    @abc.abstractmethod
    def _end(self, termination: str) -> None:
        """Set `self._outcome` for `termination` from the game's state (rewards, details)."""

    @classmethod
    def record_view(cls, record: Mapping[str, Any], view: dict[str, Any]) -> dict[str, Any] | None:
        """What a page shows of a `record` beside its turns, chats and outcome (the viewer's
        `detail`): e.g. each seat's private information and what each proposal is worth; it may
        add to each of `view["turns"]`. None: the page shows turns, chats and outcome only."""
        return None

    @classmethod
    def seat_view(cls, instance: Any, seat: int) -> dict[str, Any] | None:
        """What a page shows a person playing `seat` of `instance` beside its prompt: that seat's
        private information only, in the form `record_view` gives it (e.g. its table, hidden
        cells None). None: the prompt alone."""
        return None

    def move_credits(self, seat: int, text: str) -> list[tuple[int, int, float]]:
        """Credit for parts of a valid turn `text` of `seat` in the game being played, from what the rules and that
        seat's own view say each part is worth by itself: (start, end, credit) character spans. Online GRPO adds
        `selfplay.move_credit` x credit to the advantage of each span's tokens, where the game's reward credits
        the whole game alike (`verl.online_trainer`). None by default."""
        return []

    @classmethod
    def misstatements(cls, record: Mapping[str, Any], seat: int) -> int:
        """How many of `seat`'s valid moves in `record` state something the game's own state contradicts, which a
        partner taking them at their word would act on to both seats' cost (an offer whose halves do not add up
        to the pool). The training reward's misstatement penalty counts them (`selfplay_gen.reward`); the rules
        do not, so the game's score does not. 0 by default."""
        return 0

    @classmethod
    def references(cls) -> Mapping[str, Mapping[str, Any]]:
        """Fixed opponents of known strength that every model a run evaluates also plays, in both
        seats, so progress reads against them and not only against the model's past selves: by
        name, the knobs of the scripted player that sits as each (`scripted_player`'s; `{"policy":
        "random"}` is `random_player`). None by default: a game whose wins mean something names its
        own (TextArena: random legal play and its exact player where it has one; a negotiator at a
        strength would be `{"strength": 1.0}`)."""
        return {}

    @classmethod
    def human_instances(cls, count: int) -> list[GameInstance]:
        """The first `count` of the `human_games` instances people played (none by default)."""
        raise ValueError(f"the {cls.name} game has random ones only")

    def _running(self) -> InstanceT:
        if self.instance is None:
            raise RuntimeError("no game yet; call reset(instance)")
        return self.instance

    @property
    def done(self) -> bool:
        return self._outcome is not None

    @property
    def to_move(self) -> int:
        self._running()
        return self._to_move

    @property
    def outcome(self) -> Outcome | None:
        """None until the game is done."""
        return self._outcome

    @property
    def valid_moves(self) -> int:
        return self._valid

    @property
    def invalid_moves(self) -> int:
        return self._invalid

    def _refuse(self, seat: int, text: str, error: InvalidMove) -> None:
        """Log an invalid move; the limit on invalid moves in a row ends the game."""
        self._invalid += 1
        self.invalid_streak += 1
        self._events.append(self.event_type(seat, "invalid", text, error=str(error)))
        if self.invalid_streak >= self.limits.max_invalid:
            self._end(MAX_INVALID)

    def _count(self, event: Any) -> None:
        """Log a valid move (its event); the limit on moves ends the game once `step` calls
        `_check_moves` after applying it."""
        self.invalid_streak = 0
        self._valid += 1
        self._events.append(event)

    def _check_moves(self) -> None:
        if not self.done and self._valid >= self.limits.max_moves:
            self._end(MAX_MOVES)

    def stop(self, reason: str, seat: int | None = None, detail: str = "") -> Outcome:
        """End the game without agreement for a limit or failure the rules cannot see (one of
        `STOPS`); the event log says who hit it. A game already over keeps its outcome."""
        if reason not in STOPS:
            stops = ", ".join(STOPS)
            raise ValueError(f"unknown termination reason: a driver stops a game for one of {stops}, not {reason!r}")
        if not self.done:
            seat = self.to_move if seat is None else seat
            self._events.append(self.event_type(seat, "stop", "", error=detail or reason))
            self._end(reason)
        assert self._outcome is not None  # _end always sets it
        return self._outcome

    def events(self) -> list[dict[str, Any]]:
        """The game log as JSON values: valid moves, invalid attempts with their error, stops."""
        return [asdict(event) for event in self._events]

    @abc.abstractmethod
    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> Player:
        """This game's model-free player for `seat` of the game just reset; same seed, same play."""

    @abc.abstractmethod
    def random_player(self, seat: int, *, seed: Seed = None) -> Player:
        """Random legal play for `seat` of the game just reset: every kind of move in the grammar the
        prompts teach, chosen at random, so that a model imitating it learns to move and nothing of
        which moves win (a format warm start); same seed, same play."""

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
