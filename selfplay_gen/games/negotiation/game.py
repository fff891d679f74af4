"""The negotiation game's turn rules, under the game protocol.

Seat 0 moves first; a valid `[message]` passes the turn. A `[propose]` passes the turn too, and
from then on the partner may only propose: its proposal ends the game, `agreed` when the two
shares take exactly the pool and `inconsistent` (0 for both) otherwise. An invalid move changes
nothing: only the mover is told, and moves again. `Limits` ends a game without a deal after
`max_moves` valid moves or `max_invalid` invalid moves in a row by one seat.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import Game, InvalidMove, Limits, Observation, Outcome, Seed, StepResult
from . import prompts
from .instance import REWARD_MODES, Instance, Share, consistent, points, rewards
from .moves import Move, misstates, parse_move
from .record import AGREED, INCONSISTENT, TERMINATIONS, NegotiationRecord
from .scripted import RandomNegotiator, ScriptedNegotiator


@dataclass
class Event:
    """A line of the game log: a valid move (with a proposal's share), an invalid one, or a stop."""

    player: int
    kind: str  # message | propose | invalid | stop
    text: str
    share: list[int] | None = None
    error: str | None = None


def seat_skills(skill: str | Sequence[str | None] | None) -> tuple[str | None, str | None]:
    """Each seat's skill level from the game option: one level for both seats, `seat0,seat1` (either
    may be empty: no level in that seat's prompt), or a pair."""
    if skill is None:
        return None, None
    parts: list[str | None] = list(skill.split(",")) if isinstance(skill, str) else list(skill)
    if isinstance(skill, str) and len(parts) == 1:
        parts *= 2
    levels = tuple(p.strip() or None if isinstance(p, str) else p for p in parts)
    if len(levels) != 2 or any(level is not None and level not in prompts.SKILLS for level in levels):
        raise ValueError(
            f"skill {skill!r}: give a level for both seats or 'seat0,seat1', each one of {', '.join(prompts.SKILLS)}"
        )
    return levels[0], levels[1]


class NegotiationGame(Game[Instance, Move]):
    name = "negotiation"
    instance_type = Instance
    terminations = TERMINATIONS
    ability = "negotiation"
    record = NegotiationRecord
    scripted_knobs = {"strength": 1.0}
    # full strength: it asks for all it values and concedes a point per counter-offer, in one fixed
    # wording ("I propose: I take ...; you take ..."), so its games show both the format and haggling
    teacher = {"strength": 1.0}
    event_type = Event
    crossplay_by_default = True  # each seat's reward is its own: checkpoints are compared by playing each other
    evaluation = "selfplay_gen.games.negotiation.evaluation"
    skill = "selfplay_gen.games.negotiation.skill"
    play_options = {"reward_mode": REWARD_MODES}
    move_grammar = "[message] text · [propose] 1 book, 0 hats, 2 balls (the items you take)"

    @classmethod
    def record_view(cls, record, view):
        from .view import record_view

        return record_view(record, view)

    @classmethod
    def seat_view(cls, instance, seat):
        from .view import seat_view

        return seat_view(instance, seat)

    @classmethod
    def misstatements(cls, record, seat):
        """`seat`'s messages stating an offer whose halves do not add up to the pool (`moves.misstates`)."""
        counts = tuple(record["instance"]["counts"])
        return sum(
            event["player"] == seat and event["kind"] == "message" and misstates(event["text"], counts)
            for event in record["events"]
        )

    def __init__(
        self,
        limits: Limits | None = None,
        reward_mode: str = "semi-competitive",
        skill: str | Sequence[str | None] | None = None,
    ):
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"unknown reward mode {reward_mode!r}; choose one of {', '.join(REWARD_MODES)}")
        self.reward_mode = reward_mode
        self.skills = seat_skills(skill)
        super().__init__(limits)

    def _clear(self) -> None:
        super()._clear()
        self.proposals: list[Share | None] = [None, None]
        self._system: tuple[str, str] = ("", "")

    def reset(self, instance: Instance) -> Observation:
        self.instance = instance
        self._clear()
        self._system = (self._prompt(0), self._prompt(1))
        return Observation(self._system, ((prompts.FIRST_MOVE,), ()))

    def _prompt(self, seat: int) -> str:
        return prompts.system_prompt(self._running(), seat, self.reward_mode, self.limits.max_moves, self.skills[seat])

    def step(self, seat: int, text: str) -> StepResult[Move]:
        self._check_turn(seat)
        partner = 1 - seat
        try:
            move = self._check(seat, parse_move(text, self._running().counts))
        except InvalidMove as err:
            self._refuse(seat, text, err)
            error = (prompts.INVALID.format(error=err),)
            return StepResult(seat, None, str(err), (error, ()) if seat == 0 else ((), error), self.done)
        self._count(Event(seat, move.kind, move.text, list(move.share) if move.share else None))
        if move.kind == "propose":
            self.proposals[seat] = move.share
            if self.proposals[partner] is not None:
                self._end(AGREED if consistent(self._running(), self._shares()) else INCONSISTENT)
        self._to_move = partner
        self._check_moves()
        told: tuple[str, ...] = (prompts.PARTNER_MOVED.format(move=move.public),)
        if move.kind == "propose" and not self.done:
            told += (prompts.PROPOSE_NOW,)
        return StepResult(seat, move, None, ((), told) if seat == 0 else (told, ()), self.done)

    def _check(self, seat: int, move: Move) -> Move:
        if move.kind == "message" and self.proposals[1 - seat] is not None:
            raise InvalidMove("your partner has made its final proposal: make yours now with [propose], not a message")
        return move

    def _shares(self) -> tuple[Share, Share]:
        a, b = self.proposals
        assert a is not None and b is not None  # both seats have proposed
        return a, b

    def _end(self, termination: str) -> None:
        instance = self._running()
        agreed = termination == AGREED
        pts = points(instance, self._shares()) if agreed else (0, 0)
        self._outcome = Outcome(
            termination,
            agreed,
            rewards(pts, self.reward_mode),
            {
                "reward_mode": self.reward_mode,
                "proposals": [list(s) if s else None for s in self.proposals],
                "points": list(pts),
                "best_joint": instance.best_joint,
                "pareto_optimal": agreed and instance.pareto_optimal(self._shares()[0]),
            },
        )

    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> ScriptedNegotiator:
        """Knobs: `strength` in [0, 1] (see `ScriptedNegotiator`). Several ints seed it through
        numpy's `SeedSequence`, as they seed the matching game's players."""
        options = self._knobs(knobs)
        return ScriptedNegotiator(
            self._running(), seat, self._system[seat], float(options["strength"]), random.Random(_one_int(seed))
        )

    def random_player(self, seat: int, *, seed: Seed = None) -> RandomNegotiator:
        return RandomNegotiator(self._running(), seat, self._system[seat], random.Random(_one_int(seed)))


def _one_int(seed: Seed) -> int | None:
    """A seed of several ints as one, through numpy's `SeedSequence`, as they seed the matching game's players."""
    if seed is None or isinstance(seed, int):
        return seed
    return int(np.random.SeedSequence(list(seed)).generate_state(1)[0])
