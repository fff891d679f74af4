"""The matching game as a pure state machine: `reset` with an instance (or a seed), `step` with
the current player's turn text, and an explicit `result`. No I/O, no model, no clock.

Players, backends and the runner sit around it: they turn `StepResult`s into what each player
sees, and report the limits only they can observe (tokens per turn, context length) via `stop`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..base import MAX_INVALID, MAX_MOVES, Limits
from .instance import Instance, score
from .moves import InvalidMove, Move, parse_move
from .record import ACCEPTED, TERMINATIONS


@dataclass(frozen=True)
class StepResult:
    """One turn: who moved, the parsed move if valid, the error (seen by the mover only) if not."""

    player: int
    move: Move | None
    error: str | None
    done: bool

    @property
    def valid(self) -> bool:
        return self.move is not None


@dataclass(frozen=True)
class Outcome:
    """How a game ended. `normalized` = raw / best; no agreement scores 0."""

    agreed: bool
    termination: str
    proposal: list[tuple[int, int]] | None
    raw_reward: int
    best_reward: int
    normalized_reward: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Event:
    """A line of the game log: a valid move, or an invalid attempt with its error."""

    player: int
    kind: str  # message | propose | accept | reject | invalid | stop
    text: str
    pairs: list[list[int]] | None = None  # [reviewer, paper] lists, as JSON holds them
    error: str | None = None


@dataclass
class MatchingGame:
    """Turn rules of the matching game (see shared/spec/matching-game.md, section 4)."""

    limits: Limits = field(default_factory=Limits)

    def reset(self, instance: Instance | None = None, *, seed: int | None = None) -> MatchingGame:
        if instance is None and seed is not None:
            instance = Instance.from_seed(seed)
        elif instance is None or seed is not None:
            raise ValueError("reset needs exactly one of an instance or a seed")
        self.instance = instance
        self.to_move = 0
        self.pending: tuple[int, tuple[tuple[int, int], ...]] | None = None  # (proposer, pairs)
        self.valid_moves = 0
        self.invalid_streak = 0
        self.invalid_moves = 0
        self.events: list[Event] = []
        self.result: Outcome | None = None
        return self

    @property
    def done(self) -> bool:
        return self.result is not None

    def step(self, text: str) -> StepResult:
        """Apply the current player's turn. Invalid moves change nothing but the mover's streak."""
        if self.done:
            raise RuntimeError("the game is over; call reset()")
        player = self.to_move
        try:
            move = self._check(parse_move(text))
        except InvalidMove as err:
            self.invalid_moves += 1
            self.invalid_streak += 1
            self.events.append(Event(player, "invalid", text, error=str(err)))
            if self.invalid_streak >= self.limits.max_invalid:
                self._end(MAX_INVALID)
            return StepResult(player, None, str(err), self.done)
        self.invalid_streak = 0
        self.valid_moves += 1
        self.events.append(Event(player, move.kind, move.text, [list(p) for p in move.pairs] or None))
        if move.kind == "accept":
            assert self.pending is not None  # _check lets an accept through only when a proposal is pending
            self._end(ACCEPTED, list(self.pending[1]))
        elif move.kind == "reject":
            self.pending = None
        else:
            if move.kind == "propose":
                self.pending = (player, move.pairs)
            self.to_move = 1 - player
        if not self.done and self.valid_moves >= self.limits.max_moves:
            self._end(MAX_MOVES)
        return StepResult(player, move, None, self.done)

    def stop(self, reason: str, player: int | None = None, detail: str = "") -> Outcome:
        """End the game without agreement for a limit the game cannot see (tokens, context,
        errors); the event log says who hit it and how."""
        if reason not in TERMINATIONS or reason == ACCEPTED:
            raise ValueError(f"unknown termination reason {reason!r}")
        if not self.done:
            self.events.append(Event(self.to_move if player is None else player, "stop", "", error=detail or reason))
            self._end(reason)
        assert self.result is not None
        return self.result

    def _check(self, move: Move) -> Move:
        responding = self.pending is not None
        if responding and move.kind not in ("accept", "reject"):
            raise InvalidMove(
                f"your partner's proposal is pending: answer it with [accept] or [reject] "
                f"before making a {move.kind} move"
            )
        if not responding and move.kind in ("accept", "reject"):
            raise InvalidMove(f"there is no pending proposal to {move.kind}")
        return move

    def _end(self, termination: str, proposal: list[tuple[int, int]] | None = None) -> None:
        raw = score(self.instance, proposal) if proposal else 0
        best = self.instance.best_reward
        self.result = Outcome(proposal is not None, termination, proposal, raw, best, raw / best if best else 0.0)
