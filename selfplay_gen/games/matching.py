"""The matching game (`selfplay_gen.game`) under the game protocol, registered as "matching".

A wrapper, not a copy: the rules stay in `MatchingGame`, the texts in `prompts`, the players in
`players`, the record's own parts in `records`. What this adds: the texts each seat is told after
a step (partner's move, the mover's error, "still your turn"), and the outcome as a reward per
seat (both seats get the normalized reward).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from .. import prompts
from ..game import TERMINATIONS, MatchingGame
from ..instance import Instance
from ..moves import Move
from ..players import Player, ScriptedPlayer, TeacherPlayer
from ..records import MatchingRecord
from .base import STOPS, Game, Limits, Observation, Outcome, Seed, StepResult

POLICIES = ("share", "teacher")


class Matching(Game[Instance, Move]):
    name = "matching"
    instance_type = Instance
    terminations = TERMINATIONS
    ability = "cooperative_negotiation"
    record = MatchingRecord
    scripted_knobs = {"policy": "share", "share": 0.5}
    teacher = {"policy": "teacher", "plan": "by-reviewer"}
    evaluation_sets = ("heldout", "human")  # models are also judged on the 134 instances people played

    def __init__(self, limits: Limits | None = None):
        super().__init__(limits)
        self.game = MatchingGame(self.limits)
        self._started = False

    def reset(self, instance: Instance) -> Observation:
        self.game.reset(instance)
        self._started = True
        return Observation(tuple(prompts.system_prompt(instance, seat) for seat in (0, 1)), ((prompts.FIRST_MOVE,), ()))

    def _running(self) -> MatchingGame:
        if not self._started:
            raise RuntimeError("no game yet; call reset(instance)")
        return self.game

    @property
    def done(self) -> bool:
        return self._started and self.game.done

    @property
    def to_move(self) -> int:
        return self._running().to_move

    @property
    def valid_moves(self) -> int:
        return self._running().valid_moves if self._started else 0

    @property
    def invalid_moves(self) -> int:
        return self._running().invalid_moves if self._started else 0

    def step(self, seat: int, text: str) -> StepResult[Move]:
        self._check_turn(seat)
        result = self.game.step(text)
        told: tuple[list[str], list[str]] = ([], [])
        if result.move is not None:
            told[1 - seat].append(prompts.PARTNER_MOVED.format(move=result.move.public))
            if not self.game.done and self.game.to_move == seat:
                told[seat].append(prompts.AGAIN)
        else:
            told[seat].append(prompts.INVALID.format(error=result.error or ""))
        return StepResult(seat, result.move, result.error, (tuple(told[0]), tuple(told[1])), result.done)

    @property
    def outcome(self) -> Outcome | None:
        result = self.game.result if self._started else None
        if result is None:
            return None
        return Outcome(
            result.termination,
            result.agreed,
            (result.normalized_reward, result.normalized_reward),
            result.termination in STOPS,
            result.to_dict(),
        )

    def stop(self, reason: str, seat: int | None = None, detail: str = "") -> Outcome:
        self._running().stop(reason, seat, detail)
        assert self.outcome is not None  # stop always leaves a result
        return self.outcome

    def events(self) -> list[dict[str, Any]]:
        return [asdict(event) for event in self._running().events]

    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> Player:
        """Knobs: `policy` "share" (`ScriptedPlayer`, which shares a fraction `share` of its cells,
        its rng seeded by `seed`) or "teacher" (`TeacherPlayer`, the warm-start protocol, whose
        `plan` is "by-reviewer" or "by-score")."""
        options = self._knobs(knobs)
        instance = self._running().instance
        if options["policy"] == "share":
            rng = np.random.default_rng(seed)
            return ScriptedPlayer(instance, seat, share=float(options["share"]), rng=rng)
        if options["policy"] == "teacher":
            return TeacherPlayer(instance, seat, plan=options["plan"])
        raise ValueError(f"unknown matching policy {options['policy']!r}; choose one of {', '.join(POLICIES)}")
