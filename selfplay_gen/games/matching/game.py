"""The matching game's turn rules, under the game protocol (shared/spec/matching-game.md,
section 4).

Seat 0 moves first. A `[message]` or a `[propose]` passes the turn; a proposal stays pending
until the partner answers it: `[accept]` ends the game with the proposal's score, `[reject]`
drops it and the responder keeps the turn. An invalid move changes nothing: only the mover is
told, and moves again. Both seats get the same reward, the agreed matching's score over the
best one's (0 without agreement).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import Game, GameInstance, InvalidMove, Limits, Observation, Outcome, Seed, StepResult
from ..move_formats import NO_BOXED_MOVE, PLAIN, asked, boxed, checked
from . import prompts
from .instance import HUMAN_GAMES, Instance, score
from .moves import Move, parse_move, proposal_line_spans
from .record import ACCEPTED, TERMINATIONS, MatchingRecord
from .scripted import Player, RandomPlayer, ScriptedPlayer, TeacherPlayer

POLICIES = ("share", "teacher")


@dataclass
class Event:
    """A line of the game log: a valid move, an invalid attempt with its error, or a stop."""

    player: int
    kind: str  # message | propose | accept | reject | invalid | stop
    text: str
    pairs: list[list[int]] | None = None  # [reviewer, paper] lists, as JSON holds them
    error: str | None = None


class MatchingGame(Game[Instance, Move]):
    name = "matching"
    instance_type = Instance
    event_type = Event
    terminations = TERMINATIONS
    ability = "cooperative_negotiation"
    record = MatchingRecord
    scripted_knobs = {"policy": "share", "share": 0.5}
    teacher = {"policy": "teacher", "plan": TeacherPlayer.DEFAULT_PLAN}
    teacher_plans = TeacherPlayer.PLANS
    # new tokens a proposal needs: by-score's list every known cell (some 650 tokens); by-reviewer-records
    # proposals take up to about 480, sorted-records' up to about 780 and chained-records' up to about 820
    # (their working before the picks)
    teacher_new_tokens = {
        "by-score": 768,
        "sampled-by-score": 768,
        "by-reviewer-records": 640,
        "shuffled-records": 640,
        "ranked-records": 640,
        "sorted-records": 896,
        "chained-records": 896,
    }
    human_games = 134
    own_plan = True  # `outcome.own_plan_shares`: `Instance.own_plan_shares` of the agreed matching
    evaluation = "selfplay_gen.games.matching.report"
    move_grammar = "[message] text · [propose] Proposal: then 8 lines “paper: reviewer” · [accept] · [reject]"

    def __init__(self, limits: Limits | None = None, move_format: str = PLAIN):
        """`move_format` (`move_formats`): how a response gives its move; boxed, a seat reasons before it moves,
        and its partner is told the move alone."""
        self.move_format = checked(move_format)
        super().__init__(limits)

    @classmethod
    def record_view(cls, record, view):
        from .view import record_view  # its metrics' imports (pandas) only when a page asks

        return record_view(record, view)

    @classmethod
    def seat_view(cls, instance, seat):
        from .view import seat_view

        return seat_view(instance, seat)

    def move_credits(self, seat: int, text: str) -> list[tuple[int, int, float]]:
        """Each line of a proposal: how far its reviewer stands above the paper's average reviewer on the table
        `seat` sees (hidden cells guessed, as its own plan is valued), in that paper's standard deviations. The
        own-plan term's question (does the proposal follow the seat's table?) asked of each line apart, so a
        proposal's good lines are told from its bad ones."""
        move_text = self._move_text(text)
        if move_text is None:
            return []
        offset = text.rfind(move_text)
        guess = self._running().guessed(seat).astype(float)
        mean, spread = guess.mean(axis=0), guess.std(axis=0)
        return [
            (offset + start, offset + end, float((guess[r, p] - mean[p]) / spread[p]) if spread[p] else 0.0)
            for start, end, r, p in proposal_line_spans(move_text)
        ]

    def _clear(self) -> None:
        super()._clear()
        self.pending: tuple[int, tuple[tuple[int, int], ...]] | None = None  # (proposer, pairs)

    def reset(self, instance: Instance) -> Observation:
        self.instance = instance
        self._clear()
        system = tuple(prompts.system_prompt(instance, seat, self.move_format) for seat in (0, 1))
        return Observation(system, self._told(([prompts.FIRST_MOVE], [])))

    def step(self, seat: int, text: str) -> StepResult[Move]:
        self._check_turn(seat)
        told: tuple[list[str], list[str]] = ([], [])
        move_text = self._move_text(text)
        try:
            if move_text is None:
                raise InvalidMove(NO_BOXED_MOVE)
            move = self._check(parse_move(move_text))
        except InvalidMove as err:
            self._refuse(seat, text if move_text is None else move_text, err)  # a response with no box, whole
            told[seat].append(prompts.INVALID.format(error=err))
            return StepResult(seat, None, str(err), self._told(told), self.done)
        self._count(Event(seat, move.kind, move.text, [list(p) for p in move.pairs] or None))
        if move.kind == "accept":
            self._end(ACCEPTED)
        elif move.kind == "reject":
            self.pending = None
        else:
            if move.kind == "propose":
                self.pending = (seat, move.pairs)
            self._to_move = 1 - seat
        self._check_moves()
        told[1 - seat].append(prompts.PARTNER_MOVED.format(move=move.public))
        if not self.done and self._to_move == seat:
            told[seat].append(prompts.AGAIN)
        return StepResult(seat, move, None, self._told(told), self.done)

    def _move_text(self, text: str) -> str | None:
        """The move a response gives in the game's move format (boxed: its last box's content; None without)."""
        return text if self.move_format == PLAIN else boxed(text)

    def _told(self, told: tuple[list[str], list[str]]) -> tuple[tuple[str, ...], ...]:
        """A step's messages for each seat, the move format's request closing those of the seat to move."""
        return asked((tuple(told[0]), tuple(told[1])), None if self.done else self._to_move, self.move_format)

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

    def _end(self, termination: str) -> None:
        instance = self._running()
        proposal = list(self.pending[1]) if termination == ACCEPTED and self.pending else None
        raw = score(instance, proposal) if proposal else 0
        best = instance.best_reward
        normalized = raw / best if best else 0.0
        details: dict[str, Any] = {"proposal": proposal, "raw_reward": raw, "best_reward": best}
        details["normalized_reward"] = normalized
        # what the agreed matching is worth to each seat on the table it sees (`selfplay_gen.reward`'s own-plan term)
        details["own_plan_shares"] = instance.own_plan_shares(proposal)
        if self.move_format != PLAIN:
            details["move_format"] = self.move_format
        self._outcome = Outcome(termination, proposal is not None, (normalized, normalized), details)

    def scripted_player(self, seat: int, *, seed: Seed = None, **knobs: Any) -> Player:
        """Knobs: `policy` "share" (`ScriptedPlayer`, which shares a fraction `share` of its cells,
        its rng seeded by `seed`) or "teacher" (`TeacherPlayer`, the warm-start protocol, whose
        `plan` is one of `TeacherPlayer.PLANS`; a shuffled plan draws its order from `seed`)."""
        options = self._knobs(knobs)
        instance = self._running()
        if options["policy"] == "share":
            rng = np.random.default_rng(seed)
            return ScriptedPlayer(instance, seat, share=float(options["share"]), rng=rng).answering_in(self.move_format)
        if options["policy"] == "teacher":
            teacher = TeacherPlayer(instance, seat, plan=options["plan"], rng=np.random.default_rng(seed))
            return teacher.answering_in(self.move_format)
        raise ValueError(f"unknown matching policy {options['policy']!r}; choose one of {', '.join(POLICIES)}")

    def random_player(self, seat: int, *, seed: Seed = None) -> Player:
        return RandomPlayer(self._running(), seat, np.random.default_rng(seed)).answering_in(self.move_format)

    @classmethod
    def human_instances(cls, count: int) -> list[GameInstance]:
        """The first `count` of DialOp's 134 human games' instances (`source` human-NNN)."""
        lines = HUMAN_GAMES.read_text().splitlines()
        if count > len(lines):
            raise ValueError(f"there are {len(lines)} human instances, not {count}")
        return [
            Instance.from_human_record(json.loads(line), source=f"human-{i:03d}")
            for i, line in enumerate(lines[:count])
        ]

    @classmethod
    def upgrade_record(cls, record: dict[str, Any]) -> None:
        """Records written before per-seat rewards: both seats' reward is the normalized one; before
        own-plan shares: each seat's, of the agreed matching."""
        outcome = record["outcome"]
        outcome.setdefault("rewards", [outcome["normalized_reward"]] * 2)
        if "own_plan_shares" not in outcome:
            outcome["own_plan_shares"] = Instance.from_dict(record["instance"]).own_plan_shares(outcome.get("proposal"))
