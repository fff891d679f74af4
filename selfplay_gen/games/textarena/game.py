"""A TextArena environment as a game of this project: its seed is the instance, each seat is told
what the environment shows that player, and the environment checks moves, keeps score and says
when the game is over.

The environment's code is used as shipped (`fixes.py` says what the adapter corrects in a few, and
why), with two things around it:

- Its own random draws (a shuffled deck, rolled dice) come from Python's global `random`, which
  `State` seeds at `reset`. Many games are in flight in one process, so each game keeps that
  generator's state as its own and swaps it in around every call into its environment: a game
  plays the same way for the same seed however the runner interleaves games.
- The environment is unwrapped: TextArena's default wrappers re-send a player's whole history as
  one string every turn, while a seat here keeps a chat that only grows, so each seat is told the
  new messages only, rendered as the wrapper renders them (`[GAME] ...`, `[Player 1] ...`). A
  seat's own move, which the environment echoes to both players, is its own assistant turn already
  and is not told back to it.  A first mover the environment tells nothing beyond its rules is told
  `FIRST_MOVE`, so that its first turn answers a message.
"""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, ClassVar, TypedDict

from ...records import Event as RecordEvent
from ...records import terminations
from ..base import (
    LIMIT_ENDS,
    MAX_INVALID,
    MAX_NEW_TOKENS,
    STOPS,
    Game,
    InvalidMove,
    Limits,
    Observation,
    Outcome,
    Seed,
    StepResult,
)
from ..move_formats import NO_BOXED_MOVE, PLAIN, answer, asked, boxed, checked
from . import fixes

FAMILY = "textarena"
GAME_OVER, INVALID_MOVE = "game_over", "invalid_move"  # the environment's own ends
TERMINATIONS = (GAME_OVER, INVALID_MOVE, *LIMIT_ENDS, *STOPS)
SEAT_LIMITS = (MAX_INVALID, MAX_NEW_TOKENS)  # limits one seat hits by itself: that seat loses
INSTALL = f'pip install "selfplay-gen[{FAMILY}]"'
FIRST_MOVE = "[GAME] You move first."  # the adapter's words, where the environment says nothing before a first move
# a game's reward: `outcome`, the environment's own (1 / -1 for a win, 0 / 0 a draw); `chips`, each seat's
# chips won a hand, in an environment that keeps chips (Kuhn Poker: `fixes.keeps_chips`)
OUTCOME, CHIPS = "outcome", "chips"
REWARD_MODES = (OUTCOME, CHIPS)


class EnvUnavailable(ValueError):
    """An environment id this adapter cannot play; the message says why."""


@dataclass(frozen=True)
class TextArenaInstance:
    """One game: the seed its environment is reset with."""

    seed: int

    @property
    def id(self) -> str:
        return f"seed-{self.seed}"

    @classmethod
    def from_seed(cls, seed: int) -> TextArenaInstance:
        return cls(int(seed))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextArenaInstance:
        return cls(int(data["seed"]))

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed}


@dataclass
class Event:
    player: int
    kind: str  # move | invalid | stop
    text: str
    error: str | None = None


class _Instance(TypedDict):
    seed: int


class _Outcome(TypedDict):
    termination: Annotated[str, terminations(TERMINATIONS)]
    reason: str | None  # the environment's own words for how it ended


class TextArenaRecord(TypedDict):
    instance: _Instance
    outcome: _Outcome
    events: list[RecordEvent]


def make_env(env_id: str) -> Any:
    """A fresh, unwrapped environment of `env_id`; `EnvUnavailable` if TextArena is missing, has
    no such environment or cannot load its code."""
    try:
        import textarena as ta
    except ImportError:
        raise EnvUnavailable(f"{FAMILY}:{env_id} needs TextArena, which is not installed: {INSTALL}") from None
    from textarena.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        raise EnvUnavailable(
            f"TextArena {ta.__version__} has no environment {env_id!r} (ids look like TicTacToe-v0, KuhnPoker-v0)"
        )
    try:
        env = ta.make(env_id)
    except (ImportError, SyntaxError) as err:
        raise EnvUnavailable(f"TextArena's {env_id} does not load here: {err}") from None
    while isinstance(env, ta.Wrapper):
        env = env.env
    return env


@cache
def env_class(env_id: str) -> str:
    """The class name of `env_id`'s environment (the rules it plays, whatever its id)."""
    return type(make_env(env_id)).__name__


@cache
def check_env(env_id: str) -> None:
    """Refuse an environment that cannot be played by two players here: one made for another
    number of players, or one that needs what a run cannot have (a download at run time, such
    as nltk's word lists; an API key for a model that plays a part in it)."""
    saved = random.getstate()
    try:
        make_env(env_id).reset(num_players=2, seed=0)
    except EnvUnavailable:
        raise
    except AssertionError as err:
        raise EnvUnavailable(f"TextArena's {env_id} is not a two-player environment ({err})") from None
    except LookupError as err:  # nltk: a resource that is not on this machine
        first = str(err).strip().splitlines()[1:2] or [str(err)]
        raise EnvUnavailable(f"TextArena's {env_id} needs data it downloads at run time: {first[0].strip()}") from None
    except Exception as err:
        raise EnvUnavailable(f"TextArena's {env_id} cannot start a two-player game here: {err}") from None
    finally:
        random.setstate(saved)


class TextArenaGame(Game[TextArenaInstance, Event]):
    """Any two-player TextArena environment; `game_for(env_id)` makes the class of one.

    Ends: `game_over` (the environment's rules ended it; its rewards, e.g. 1 / -1 for a win, 0 / 0 for a
    draw, or with `reward_mode` `chips` each seat's chips won a hand: what a game of chips is played
    for, which the win or loss of the whole match hides) and `invalid_move` (the environment ended it
    for a player's invalid moves, with the environment's rewards for that). A limit of this project is a
    truncation: one that a seat hit by itself (`max_invalid` invalid moves in a row, a move cut at
    `max_new_tokens`) is lost by that seat as TextArena scores a game lost to invalid moves (-1, its
    partner +1), so a seat cannot draw by failing to move; the others (`max_moves`, the context) are
    scored 0 for both seats, as a game cut short says nothing of who would win. An invalid move the
    environment lets a player retry is refused (the player is told why) and counts toward
    `Limits.max_invalid`. The seats of these games agree on nothing but to play: `agreed` says that they
    played the game out by its rules (`game_over`), which is what the iteration's automatic warm start
    asks of a model. `move_format` says how a response gives its move (`MOVE_FORMATS`): the whole
    response, or SPIRAL's last \\boxed{...} after the seat's reasoning."""

    env_id: str = ""
    version = 2  # 2: a seat that hits a limit by itself loses (SEAT_LIMITS); 1 scored it a draw
    instance_type = TextArenaInstance
    event_type = Event
    terminations = TERMINATIONS
    ability = "game_play"
    record = TextArenaRecord
    scripted_knobs = {"policy": "random"}
    # no teacher of strategy: a teacher warm start imitates random legal play, as a format warm
    # start does; self-play from the rules alone, as SPIRAL trains, is `--warm-start none`
    teacher: ClassVar[Mapping[str, Any]] = {"policy": "random"}
    crossplay_by_default = True  # competitive: checkpoints are measured against each other
    evaluation = "selfplay_gen.games.textarena.evaluation"
    move_grammar = "a move as the environment asks for it, e.g. [4] or [bet]"

    def __init__(self, limits: Limits | None = None, reward_mode: str = OUTCOME, move_format: str = PLAIN):
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"unknown reward mode {reward_mode!r}; choose one of {', '.join(REWARD_MODES)}")
        if reward_mode == CHIPS and not fixes.keeps_chips(env_class(self.env_id)):
            raise ValueError(f"the reward mode {CHIPS} needs a game of chips (Kuhn Poker); {self.env_id} keeps none")
        self.reward_mode, self.move_format = reward_mode, checked(move_format)
        super().__init__(limits)
        self.env: Any = None
        self._random: Any = None
        self._admin: list[str] = []

    # the environment's random draws, kept per game -----------------------------------------
    @contextlib.contextmanager
    def _own_random(self, keep: bool = True) -> Iterator[None]:
        """Run environment code with this game's state of the global `random` (saved after,
        unless `keep` is False), the caller's state restored."""
        outer = random.getstate()
        if self._random is not None:
            random.setstate(self._random)
        try:
            yield
        finally:
            if keep:
                self._random = random.getstate()
            random.setstate(outer)

    # what each seat is told ------------------------------------------------------------------
    def _drain(self, mover: int | None = None) -> tuple[tuple[str, ...], ...]:
        """Each player's new messages, rendered, taken off the environment's queues."""
        import textarena as ta

        state = self.env.state
        told = []
        self._admin = []  # what the environment said to the mover about its move (e.g. why it is invalid)
        for seat in range(2):
            queue, state.observations[seat] = state.observations[seat], []
            lines = []
            for sender, text, kind in queue:
                if kind == ta.ObservationType.PROMPT:
                    continue  # the system prompt, read at reset
                if kind == ta.ObservationType.PLAYER_ACTION and sender == seat == mover:
                    continue  # the seat's own move: its assistant turn already
                if kind == ta.ObservationType.GAME_ADMIN and seat == mover:
                    self._admin.append(text)
                name = "GAME" if sender == ta.GAME_ID else state.role_mapping.get(sender, f"Player {sender}")
                lines.append(f"[{name}] {text}")
            told.append(tuple(lines))
        return tuple(told)

    def reset(self, instance: TextArenaInstance) -> Observation:
        import textarena as ta

        self.instance = instance
        self._clear()
        self.env = make_env(self.env_id)
        self._random = None
        with self._own_random():
            self.env.reset(num_players=2, seed=instance.seed)
        state = self.env.state
        self.system = tuple(
            "\n".join(text for _, text, kind in state.observations[seat] if kind == ta.ObservationType.PROMPT)
            for seat in range(2)
        )
        self._to_move = state.current_player_id
        told = list(self._drain())
        if not told[self._to_move]:  # an environment that shows the first mover nothing but its rules
            told[self._to_move] = (FIRST_MOVE,)
        return Observation(self.system, self._told(tuple(told)))

    def _told(self, told: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        """What each seat is told, the move format's request closing what the seat to move reads."""
        return asked(told, None if self.done else self._to_move, self.move_format)

    def move_of(self, text: str) -> str | None:
        """The move a response makes: the whole response (`plain`), or what its last \\boxed{...} holds, braces
        nested and a \\text{...} around it taken off as SPIRAL reads it, bracketed as TextArena's own action
        wrapper brackets a bare move (`boxed`); None when it boxes nothing."""
        if self.move_format == PLAIN:
            return text
        move = boxed(text)
        if move is None:
            return None
        return move if "[" in move or "]" in move else f"[{move}]"

    def answer(self, move: str) -> str:
        """A response that makes `move` in this game's move format (a scripted seat's)."""
        return answer(move, self.move_format)

    def step(self, seat: int, text: str) -> StepResult[Event]:
        self._check_turn(seat)
        move_text = self.move_of(text)
        if move_text is None:
            self._refuse(seat, text, InvalidMove(NO_BOXED_MOVE))
            why = tuple((f"[GAME] {NO_BOXED_MOVE}",) if s == seat else () for s in range(2))  # the reasoning stays
            return StepResult(seat, None, NO_BOXED_MOVE, self._told(why), self.done)
        text = move_text  # what the environment is given, and what the move's event keeps
        state = self.env.state
        errors = getattr(state, "error_count", 0)
        with self._own_random():
            fixes.before_step(self.env, text)
            done, _ = self.env.step(action=text)
        state = self.env.state
        told = self._drain(mover=seat)
        if done and state.game_info[seat].get("invalid_move"):
            reason = state.game_info[seat].get("reason") or "invalid move"
            self._invalid += 1
            self.invalid_streak += 1
            self._events.append(Event(seat, "invalid", text, error=str(reason)))
            self._end(INVALID_MOVE)
            return StepResult(seat, None, str(reason), told, True)
        if not done and getattr(state, "error_count", 0) > errors:
            error = " ".join(self._admin) or "invalid move"
            self._refuse(seat, text, InvalidMove(error))
            return StepResult(seat, None, error, self._told(told), self.done)
        move = Event(seat, "move", text)
        self._count(move)
        if done:
            self._end(GAME_OVER)
        else:
            self._to_move = state.current_player_id
            self._check_moves()
        return StepResult(seat, move, None, self._told(told), self.done)

    def _end(self, termination: str) -> None:
        state, details = self.env.state, fixes.details(self.env)
        if termination in (GAME_OVER, INVALID_MOVE):
            rewards = tuple(float(state.rewards[seat]) for seat in range(2))
            if termination == GAME_OVER and self.reward_mode == CHIPS:
                rewards = tuple(chips / details["hands"] for chips in details["chips"])
            reasons = {
                str(state.game_info[seat].get("reason")) for seat in range(2) if state.game_info[seat].get("reason")
            }
            reason = " ".join(sorted(reasons)) or None
        elif termination in SEAT_LIMITS:
            loser = self._events[-1].player  # `_refuse` and `stop` log who hit the limit before ending
            rewards = tuple(-1.0 if seat == loser else 1.0 for seat in range(2))
            reason = f"Player {loser} hit the limit {termination}"
        else:
            rewards, reason = (0.0, 0.0), None
        formats = {"move_format": self.move_format} if self.move_format != PLAIN else {}
        self._outcome = Outcome(
            termination, termination == GAME_OVER, rewards, {"reason": reason, **formats, **details}
        )

    def legal(self, text: str) -> bool:
        """Whether the environment would take `text` as the next move (tried on a copy)."""
        env = copy.deepcopy(self.env)
        mover, errors = env.state.current_player_id, getattr(env.state, "error_count", 0)
        with self._own_random(keep=False):
            fixes.before_step(env, text)
            done, _ = env.step(action=text)
        if done:
            return not env.state.game_info[mover].get("invalid_move")
        return getattr(env.state, "error_count", 0) <= errors

    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any):
        """`policy`: `random` (uniform over the moves the environment lists and accepts, every
        environment), `minimax` (TicTacToe-v0: never loses) or `equilibrium` (KuhnPoker-v0: a
        Nash equilibrium, worth -1/18 a hand to the player who acts first)."""
        from .scripted import scripted_player

        return scripted_player(self, seat, seed, self._knobs(knobs)["policy"])

    def random_player(self, seat: int, *, seed: Seed = None):
        """Random legal play: the `random` policy."""
        return self.scripted_player(seat, seed=seed, policy="random")

    @classmethod
    def references(cls) -> Mapping[str, Mapping[str, Any]]:
        """Random legal play, and the exact player of this environment where it has one (TicTacToe's
        `minimax`, Kuhn Poker's `equilibrium`; `scripted.EXACT`)."""
        from .scripted import EXACT

        kind = env_class(cls.env_id)
        return {policy: {"policy": policy} for policy in ("random", *(p for p, env in EXACT.items() if env == kind))}

    @classmethod
    def record_view(cls, record: Mapping[str, Any], view: dict[str, Any]) -> dict[str, Any] | None:
        """The environment, its seed, how it ended in its own words and each seat's reward."""
        outcome = record["outcome"]
        rows = [
            ["environment", f"TextArena {cls.env_id}, seed {record['instance']['seed']}"],
            ["ended", outcome.get("reason") or outcome["termination"]],
            ["rewards", ", ".join(f"seat {seat} {reward:g}" for seat, reward in enumerate(outcome.get("rewards", [])))],
        ]
        return {"outcome_rows": rows}


@cache
def game_for(env_id: str) -> type[TextArenaGame]:
    """The game class of TextArena's `env_id` (made once), named `textarena:ENV_ID`; an
    environment that cannot be played by two players here is refused (`EnvUnavailable`)."""
    check_env(env_id)
    name = f"{FAMILY}:{env_id}"
    return type(f"TextArena_{env_id.replace('-', '_')}", (TextArenaGame,), {"name": name, "env_id": env_id})
