"""The sum game's instance, rules, record parts and scripted player (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import numpy as np

from selfplay_gen.games.base import (
    LIMIT_ENDS,
    STOPS,
    ChatSeat,
    Game,
    InvalidMove,
    Observation,
    Outcome,
    Seed,
    StepResult,
    split_tag,
)
from selfplay_gen.records import Event as RecordEvent
from selfplay_gen.records import terminations
from selfplay_gen.validate import lengths, within

ANSWERED = "answered"
TERMINATIONS = (ANSWERED, *LIMIT_ENDS, *STOPS)
TAGS = ("say", "answer")


@dataclass(frozen=True)
class SumInstance:
    digits: tuple[int, int]
    seed: int | None = None

    @property
    def id(self) -> str:
        return f"seed-{self.seed}" if self.seed is not None else f"digits-{self.digits[0]}{self.digits[1]}"

    @classmethod
    def from_seed(cls, seed: int) -> SumInstance:
        a, b = np.random.default_rng(seed).integers(0, 10, size=2)
        return cls((int(a), int(b)), seed)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SumInstance:
        a, b = data["digits"]
        return cls((a, b), data.get("seed"))

    def to_dict(self) -> dict[str, Any]:
        return {"digits": list(self.digits), "seed": self.seed}


@dataclass
class Event:
    player: int
    kind: str  # say | answer | invalid | stop
    text: str
    error: str | None = None


@dataclass(frozen=True)
class Move:
    kind: str
    text: str


Digit = Annotated[int, within(0, 9)]


class _Instance(TypedDict):
    digits: Annotated[list[Digit], lengths(2)]
    seed: int | None


class _Outcome(TypedDict):
    termination: Annotated[str, terminations(TERMINATIONS)]
    answer: int | None
    best_sum: Annotated[int, within(0, 18)]


class SumRecord(TypedDict):
    instance: _Instance
    outcome: _Outcome
    events: list[RecordEvent]


class SumGame(Game[SumInstance, Move]):
    name = "sum"
    instance_type = SumInstance
    event_type = Event
    terminations = TERMINATIONS
    ability = "arithmetic_dialogue"
    record = SumRecord
    scripted_knobs = {"strength": 1.0}  # a knob `selfplay-gen` has an option for (--scripted-strength)
    teacher = {"strength": 1.0}

    def _clear(self) -> None:
        super()._clear()
        self.answer: int | None = None

    def reset(self, instance: SumInstance) -> Observation:
        self.instance = instance
        self._clear()
        self.system = tuple(
            f"Your digit is {digit}. Tell your partner with [say], or give the sum of both digits with [answer] N."
            for digit in instance.digits
        )
        return Observation(self.system, (("You move first.",), ()))

    def step(self, seat: int, text: str) -> StepResult[Move]:
        self._check_turn(seat)
        try:
            kind, body, _ = split_tag(text, TAGS)
            if kind == "answer" and not body.isdigit():
                raise InvalidMove(f"an answer is a number, not {body!r}")
        except InvalidMove as err:
            self._refuse(seat, text, err)
            told: tuple[tuple[str, ...], ...] = ((f"Invalid move: {err}",), ())
            return StepResult(seat, None, str(err), told if seat == 0 else told[::-1], self.done)
        self._count(Event(seat, kind, body))
        if kind == "answer":
            self.answer = int(body)
            self._end(ANSWERED)
        self._to_move = 1 - seat
        self._check_moves()
        told = ((), (f"Partner: [{kind}] {body}",))
        return StepResult(seat, Move(kind, body), None, told if seat == 0 else told[::-1], self.done)

    def _end(self, termination: str) -> None:
        best = sum(self._running().digits)
        right = termination == ANSWERED and self.answer == best
        self._outcome = Outcome(termination, right, (float(right),) * 2, {"answer": self.answer, "best_sum": best})

    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> ScriptedSummer:
        """Seat 0 tells its digit at `strength` 0.5 or more (else nothing useful); seat 1 answers
        with the digits it knows (a guess of 5 for one it was not told)."""
        options = self._knobs(knobs)
        return ScriptedSummer(self._running(), seat, self.system[seat], float(options["strength"]) >= 0.5)

    def random_player(self, seat: int, *, seed: Seed = None) -> RandomSummer:
        """Seat 0 says a random digit, seat 1 answers a random sum."""
        return RandomSummer(seat, self.system[seat], np.random.default_rng(seed))


class ScriptedSummer(ChatSeat):
    def __init__(self, instance: SumInstance, seat: int, system: str, tell: bool):
        super().__init__(seat, system)
        self.instance, self.tell = instance, tell
        self.heard: int | None = None

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        super().observe(told, step)
        if step is not None and step.seat != self.seat and step.move is not None and step.move.text.isdigit():
            self.heard = int(step.move.text)

    async def respond(self) -> str:
        mine = self.instance.digits[self.seat]
        if self.seat == 0:
            return f"[say] {mine}" if self.tell else "[say] hello"
        return f"[answer] {mine + (5 if self.heard is None else self.heard)}"


class RandomSummer(ChatSeat):
    def __init__(self, seat: int, system: str, rng: np.random.Generator):
        super().__init__(seat, system)
        self.rng = rng

    async def respond(self) -> str:
        return f"[say] {self.rng.integers(10)}" if self.seat == 0 else f"[answer] {self.rng.integers(19)}"
