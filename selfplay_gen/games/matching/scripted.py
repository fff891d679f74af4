"""The matching game's model-free players. `ScriptedPlayer` shares a fraction of the cells it
sees and proposes the best assignment for what it knows, which spreads rewards over [0, 1];
`TeacherPlayer` plays the demonstration protocol whose games warm-start a model that cannot play
yet (every cell stated as shown, then picks a small model can copy or compare); `RandomPlayer` plays
random legal moves, the grammar of the game without its strategy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import ChatSeat, StepResult
from ..move_formats import PLAIN, answer
from . import prompts
from .assignment import max_matching
from .instance import PAPERS, REVIEWERS, Instance
from .moves import Move, render_proposal


class Player(ChatSeat):
    """A model-free seat of the matching game: its system prompt shows its own table, and it
    reads each of its partner's valid moves (`partner_moved`)."""

    move_format = PLAIN

    def __init__(self, instance: Instance, seat: int):
        super().__init__(seat, prompts.system_prompt(instance, seat))
        self.instance = instance

    def answering_in(self, move_format: str) -> Player:
        """This seat with its moves given in `move_format` and its system prompt asking for it, as the game asks its
        models: a format warm start's chats then teach the format the game reads."""
        self.move_format = move_format
        self.messages[0]["content"] = prompts.system_prompt(self.instance, self.seat, move_format)
        return self

    async def act(self) -> str:
        text = answer(await super().act(), self.move_format)
        self.messages[-1]["content"] = text
        return text

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        super().observe(told, step)
        if step is not None and step.seat != self.seat and step.move is not None:
            self.partner_moved(step.move)

    def partner_moved(self, move: Move) -> None:
        """Read the partner's move (its text arrives with what the seat is told)."""


class ScriptedPlayer(Player):
    """Shares a random `share` of its visible cells (as 0-99 relative to its own largest value),
    then proposes the best matching of what it knows (unknown cells guessed 50). It accepts a
    proposal once it has nothing left to share, or when the proposal is as good as its own plan.
    It only ever makes valid moves."""

    def __init__(
        self,
        instance: Instance,
        seat: int,
        share: float = 0.5,
        rng: np.random.Generator | None = None,
        cells_per_message: int = 6,
    ):
        super().__init__(instance, seat)
        rng = rng or np.random.default_rng()
        view = instance.view(seat)
        visible = [(r, p, v) for r, row in enumerate(view) for p, v in enumerate(row) if v is not None]
        top = max((v for _, _, v in visible), default=1) or 1
        self.known = np.full((8, 8), -1.0)
        for r, p, v in visible:
            self.known[r, p] = round(99 * v / top)
        chosen = rng.permutation(len(visible))[: round(share * len(visible))]
        self.to_share = sorted((visible[i] for i in chosen), key=lambda c: -c[2])
        self.cells_per_message = cells_per_message
        self.pending: tuple | None = None

    def partner_moved(self, move: Move) -> None:
        if move.kind == "propose":
            self.pending = move.pairs
        if move.kind == "message":
            for r, p, value in prompts.stated_cells(move.text):
                if self.known[r, p] < 0:
                    self.known[r, p] = value

    def _plan(self) -> tuple[float, list[tuple[int, int]]]:
        return max_matching(np.where(self.known < 0, 50, self.known))

    async def respond(self) -> str:
        if self.pending is not None:
            pairs, self.pending = self.pending, None
            guess = np.where(self.known < 0, 50, self.known)
            value = sum(guess[r, p] for r, p in pairs)
            return "[reject]" if self.to_share and value < self._plan()[0] else "[accept]"
        if self.to_share:
            chunk, self.to_share = self.to_share[: self.cells_per_message], self.to_share[self.cells_per_message :]
            cells = "; ".join(f"{REVIEWERS[r]} - {PAPERS[p]}: {int(self.known[r, p])}" for r, p, _ in chunk)
            return f"[message] Scores I see (0-99): {cells}"
        return "[propose] " + render_proposal(self._plan()[1])


class RandomPlayer(Player):
    """Random legal play: the moves of the game in their grammar, with no strategy to imitate. A
    pending proposal is accepted or rejected at even odds; otherwise, with probability `propose`, a
    uniformly random complete assignment is proposed, else 1 to `most_cells` random cells of its own
    table are stated as the table shows them (`Ava Li: GLUE 421, QuAC 779`). An accepted random
    assignment scores the random-matching floor, so a format warm start on these games learns how
    to move and nothing of which moves win."""

    def __init__(
        self, instance: Instance, seat: int, rng: np.random.Generator, propose: float = 0.3, most_cells: int = 6
    ):
        super().__init__(instance, seat)
        self.rng, self.propose, self.most_cells = rng, propose, most_cells
        self.cells = [
            (r, p, v) for r, row in enumerate(instance.view(seat)) for p, v in enumerate(row) if v is not None
        ]
        self.pending = False

    def partner_moved(self, move: Move) -> None:
        self.pending = move.kind == "propose"

    async def respond(self) -> str:
        if self.pending:
            self.pending = False
            return "[accept]" if self.rng.random() < 0.5 else "[reject]"
        if not self.cells or self.rng.random() < self.propose:
            papers = self.rng.permutation(len(PAPERS))
            return "[propose] " + render_proposal([(r, int(p)) for r, p in enumerate(papers)])
        count = int(self.rng.integers(1, min(self.most_cells, len(self.cells)) + 1))
        chosen = sorted(self.cells[i] for i in self.rng.choice(len(self.cells), count, replace=False))
        rows = [
            prompts.render_row(r, [(p, v) for rr, p, v in chosen if rr == r]) for r in sorted({c[0] for c in chosen})
        ]
        return "[message] " + "\n".join(rows)

    def log(self) -> dict:
        return {**super().log(), "policy": "random"}


class TeacherPlayer(Player):
    """Plays the demonstration protocol: each step is a copy or a comparison that a model can
    learn from its prompt alone, and every value it states is in its own table.

    The first mover states every cell it sees, line by line exactly as its table shows them. The
    other merges those cells with its own (its own value where it sees the cell), plans, and writes
    the plan privately before the tag; then it proposes the picks, reviewer by reviewer (reviewers
    left without a known free paper take the papers left over). A pending proposal is accepted.

    Plans (held-out seeds; random matching 0.61):
    - "by-reviewer": reviewer by reviewer, the free paper with the highest known value (about 0.82):
      one maximum of a list per row;
    - "by-reviewer-records" (the default): the same picks, each line also naming the running
      maximum's records in the line's order (`Ava Li: GLUE 421, QuAC 779, SQuAD 385 | GLUE 421 <
      QuAC 779 -> QuAC`), so a pick is the last record, found one comparison with the current
      record at a time rather than as the maximum of a list, which a 135M model learns far less
      reliably (bench/results/pick_formats/, bench/results/records_h100_2026-11-25/);
    - "shuffled-records": the records plan with the reviewers taken in a random order, drawn per
      game from `rng`. Its mean is the records plan's, but one instance's games end in different
      plans (a group of games differs where the fixed order's never does), and the best order is
      worth far more than the fixed one: a choice a model imitating it keeps open and RL can
      learn to make (bench/results/teacher_orders/);
    - "ranked-records": the records plan with the reviewers ranked by their highest known value, each
      value shifted by Gumbel noise of scale `RANK_NOISE` drawn per game from `rng` (a Plackett-Luce
      draw: the reviewer with the most valuable known cell tends to choose first). Its mean is the
      deterministic ranking's, above the records plan's, and its groups differ as the shuffled plan's
      do, with a best of 8 as high;
    - "sorted-records": the ranked plan's order without its noise, worked out in writing before the picks:
      first each reviewer's highest known value as the running maximum's records over all its known cells
      (`Ava Li: GLUE 421 < QuAC 779`), then the reviewers in the order of those values (`Order: Noah
      Wilson 931 > Ava Li 779 > ...`), then the records plan's lines in that order. A model imitating the
      ranked plan writes its reviewers in an order unrelated to their values, since it has to find the
      largest of some 40 values before its first word (bench/results/rl_x2_h100_2026-11-27b/); here each
      value it orders by is the last record of a line it wrote;
    - "chained-records": the sorted plan's picks, with the order worked out one place at a time instead of
      in one line: after the highest known values, a line per place but the last, the records of those
      values over the reviewers not yet placed (`1: Ava Li 779 < Noah Wilson 931`), whose last record takes
      the place. Each step is one comparison with the current record, as in the pick lines; a 135M model
      imitating the sorted plan's `Order:` line writes the reviewers in an order unrelated to their values,
      and imitating these lines learns part of the order (bench/results/order_learning/);
    - "by-score": every known cell from the highest value down, taking a cell whose reviewer and
      paper are both free, until all are taken (greedy by value, about 0.88): a sort of some 40
      cells, for larger models;
    - "sampled-by-score": by-score with each cell's value shifted by Gumbel noise of scale
      `SCORE_NOISE` drawn per game from `rng` (a Plackett-Luce draw of the cells' order): about
      by-score's mean, but one instance's games end in different plans whose best is well above it."""

    # each plan in a line of `--teacher-plan`'s help (held-out means)
    PLANS = {
        "by-reviewer": "row by row the best free paper known, about 0.82",
        "by-reviewer-records": "the same picks, written as the running maximum's records, which a 135M model learns",
        "shuffled-records": "the records plan with the reviewers in a random order per game: a choice left for RL",
        "ranked-records": "the reviewers ranked by their best known value with noise: about 0.86, a choice left for RL",
        "sorted-records": "the same ranking without noise, worked out in writing before the picks: about 0.85",
        "chained-records": "the same picks, the order worked out one place at a time: about 0.85",
        "by-score": "every known cell from the highest down, taking those still free: about 0.88",
        "sampled-by-score": "by-score with noise on the values: about 0.88, a choice left for RL",
    }
    # the plans whose picks are made in an order of their own, which the proposal keeps
    ORDERED_PLANS = ("shuffled-records", "ranked-records", "sorted-records", "chained-records")
    DEFAULT_PLAN = "by-reviewer-records"
    # the noise's scale in table values (ranked-records: on a reviewer's highest known value; sampled-by-score:
    # on each cell's), chosen on development instances for a high best of 8 games at about the noiseless
    # plan's mean (bench/results/teacher_orders/)
    RANK_NOISE = 80.0
    SCORE_NOISE = 20.0

    def __init__(self, instance: Instance, seat: int, plan: str = DEFAULT_PLAN, rng: np.random.Generator | None = None):
        super().__init__(instance, seat)
        if plan not in self.PLANS:
            raise ValueError(f"unknown teacher plan {plan!r}; choose one of {', '.join(self.PLANS)}")
        self.plan = plan
        # what a drawn plan draws, once per game: a reviewer order, a shift per reviewer, or one per cell
        rng, n = rng or np.random.default_rng(), len(REVIEWERS)
        self.order = [int(r) for r in rng.permutation(n)] if plan == "shuffled-records" else []
        self.reviewer_noise = rng.gumbel(scale=self.RANK_NOISE, size=n) if plan == "ranked-records" else None
        sampled = plan == "sampled-by-score"
        self.cell_noise = rng.gumbel(scale=self.SCORE_NOISE, size=(n, len(PAPERS))) if sampled else None
        self.cells = [[(p, v) for p, v in enumerate(row) if v is not None] for row in instance.view(seat)]
        self.told: list[list[tuple[int, int]]] = [[] for _ in REVIEWERS]
        self.pending = self.spoke = False

    def partner_moved(self, move: Move) -> None:
        self.pending = move.kind == "propose"
        if move.kind == "message":
            for r, p, value in prompts.stated_cells(move.text):
                self.told[r].append((p, value))

    async def respond(self) -> str:
        if self.pending:
            self.pending = False
            return "[accept]"
        if self.seat == 0 and not self.spoke:
            self.spoke = True
            rows = [prompts.render_row(r, cells) for r, cells in enumerate(self.cells) if cells]
            return "[message] My scores:\n" + "\n".join(rows)
        return self._proposal()

    def _proposal(self) -> str:
        known = [dict(told) | dict(own) for told, own in zip(self.told, self.cells)]
        if self.plan in ("by-score", "sampled-by-score"):
            lines, picks = self._by_score(known, self.cell_noise)
        elif self.plan in ("sorted-records", "chained-records"):
            order = ranked_order(known, np.zeros(len(REVIEWERS)))
            lines, picks = self._by_reviewer(known, records=True, order=order)
            ordering = [self._order_line(known, order)] if self.plan == "sorted-records" else self._places(known)
            lines = self._highest(known) + ordering + lines
        else:
            order = self.order if self.reviewer_noise is None else ranked_order(known, self.reviewer_noise)
            records = self.plan != "by-reviewer"
            lines, picks = self._by_reviewer(known, records=records, order=order or range(len(REVIEWERS)))
        # an ordered plan's picks in the order it made them (dicts keep it), the others' by reviewer
        pairs = completed(picks if self.plan in self.ORDERED_PLANS else dict(sorted(picks.items())))
        proposal = [f"{PAPERS[p]}: {REVIEWERS[r]}" for r, p in pairs]
        return "\n".join(lines) + "\n[propose] Proposal:\n" + "\n".join(proposal)

    @staticmethod
    def _by_reviewer(
        known: list[dict[int, int]], records: bool = False, order: Sequence[int] = range(len(REVIEWERS))
    ) -> tuple[list[str], dict[int, int]]:
        """Per reviewer in `order`, its known free papers and the best of them (`Ava Li: GLUE 421 ->
        GLUE`); with `records`, the running maximum's records before the pick (`| GLUE 421 -> GLUE`)."""
        lines: list[str] = []
        picks: dict[int, int] = {}
        for r in order:
            free = [(p, v) for p, v in sorted(known[r].items()) if p not in picks.values()]
            if free:
                picks[r] = max(free, key=lambda cell: cell[1])[0]
            line = prompts.render_row(r, free)
            if records and free:
                line += " | " + render_records(free)
            lines.append(line + " -> " + (PAPERS[picks[r]] if free else "later"))
        return lines, picks

    @staticmethod
    def _highest(known: list[dict[int, int]]) -> list[str]:
        """The sorted and chained plans' working up to their order: each reviewer's highest known value as the
        records of its known cells in paper order (`Ava Li: GLUE 421 < QuAC 779`), the values they order by."""
        rows = [f"{REVIEWERS[r]}: {render_records(sorted(cells.items()))}" for r, cells in enumerate(known) if cells]
        return [HIGHEST_HEADER, *rows]

    @staticmethod
    def _order_line(known: list[dict[int, int]], order: Sequence[int]) -> str:
        """The sorted plan's order after its highest known values: the reviewers with a known cell in `order`
        beside those values (`Order: Noah Wilson 931 > Ava Li 779`)."""
        return "Order: " + " > ".join(f"{REVIEWERS[r]} {max(known[r].values())}" for r in order if known[r])

    @staticmethod
    def _places(known: list[dict[int, int]]) -> list[str]:
        """The chained plan's order after its highest known values: one line per place but the last, the
        records of those values over the reviewers with a known cell not yet placed, in table order (`1: Ava
        Li 779 < Noah Wilson 931`); the last record takes the place, so the places follow `ranked_order`
        without noise (equal values: the first in table order)."""
        tops = {r: max(cells.values()) for r, cells in enumerate(known) if cells}
        places: list[str] = []
        while len(tops) > 1:
            chain = running_records(list(tops.items()))
            places.append(f"{len(places) + 1}: " + " < ".join(f"{REVIEWERS[r]} {v}" for r, v in chain))
            del tops[chain[-1][0]]
        return places

    @staticmethod
    def _by_score(known: list[dict[int, int]], noise: np.ndarray | None = None) -> tuple[list[str], dict[int, int]]:
        """Known cells from the highest value down (`Ava Li - GLUE 421: take` or `: skip`), up to
        the seventh take: the last reviewer takes the last paper whatever its value. With `noise`
        (reviewer x paper), by value plus noise: high values first, in an order drawn per game."""
        shift = np.zeros((len(REVIEWERS), len(PAPERS))) if noise is None else noise
        cells = [(v + shift[r][p], v, r, p) for r, row in enumerate(known) for p, v in row.items()]
        order = sorted(cells, key=lambda c: (-c[0], c[2:]))
        lines = ["Known scores, highest first:" if noise is None else "Known scores, high ones first:"]
        picks: dict[int, int] = {}
        for _, v, r, p in order:
            if len(picks) == len(REVIEWERS) - 1:
                break
            take = r not in picks and p not in picks.values()
            if take:
                picks[r] = p
            lines.append(f"{REVIEWERS[r]} - {PAPERS[p]} {v}: {'take' if take else 'skip'}")
        return lines, picks

    def log(self) -> dict:
        return {**super().log(), "policy": "teacher"}


# the first line of the sorted and chained plans' working before their picks
HIGHEST_HEADER = "Highest known values:"


def known_cells(instance: Instance) -> list[dict[int, int]]:
    """Per reviewer, paper -> value the teacher's proposer (seat 1) knows once seat 0 has stated every cell
    it sees: both views, the proposer's own value where both see a cell."""
    views = [instance.view(seat) for seat in (0, 1)]
    return [
        {p: v for p, v in enumerate(row0) if v is not None} | {p: v for p, v in enumerate(row1) if v is not None}
        for row0, row1 in zip(*views)
    ]


def ranked_order(known: list[dict[int, int]], noise: Sequence[float] | np.ndarray) -> list[int]:
    """Reviewers by their highest known value plus their `noise`, highest first (one without a known
    cell last): the order of the ranked plan, whose noise makes it a draw rather than a rule."""
    top = [max(cells.values(), default=-math.inf) + shift for cells, shift in zip(known, noise)]
    return sorted(range(len(REVIEWERS)), key=lambda r: -top[r])


def completed(picks: dict[int, int]) -> list[tuple[int, int]]:
    """A plan's (reviewer, paper) picks in their order, then each reviewer left without a pick with
    the papers left over, in order: the whole assignment the teacher proposes."""
    left = iter(p for p in range(len(PAPERS)) if p not in picks.values())
    return [*picks.items(), *((r, next(left)) for r in range(len(REVIEWERS)) if r not in picks)]


def running_records(cells: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (index, value) cells that raise the running maximum, in order: the last one is the first
    maximum, found one comparison with the current record at a time."""
    records: list[tuple[int, int]] = []
    for cell in cells:
        if not records or cell[1] > records[-1][1]:
            records.append(cell)
    return records


def render_records(cells: list[tuple[int, int]]) -> str:
    """`GLUE 421 < QuAC 779`: a list of (paper, value) cells' running records."""
    return " < ".join(f"{PAPERS[p]} {v}" for p, v in running_records(cells))
