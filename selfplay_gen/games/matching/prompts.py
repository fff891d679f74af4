"""What players read: the rules and their own table, partner moves, and game feedback.

The same texts on every backend, so games from different servers are comparable. Each function
returns plain strings; turning them into chat messages and tokens is the player's job.
"""

from __future__ import annotations

import re

from ..move_formats import BOXED, PLAIN, answer
from .instance import PAPERS, REVIEWERS, Instance
from .moves import render_proposal

RULES = """You and your partner are area chairs assigning 8 reviewers to 8 papers, one reviewer per paper. \
Each of you sees a different part of a table of reviewer-paper similarity scores, shown in your own \
private scale; empty cells are hidden from you. You share the final score: the total similarity of the \
assignment you both accept, divided by the best possible total. Share what you know and agree on the best \
assignment.

Your table has one line per reviewer, listing the papers whose scores you can see: \
"Ava Li: GLUE 421, QuAC 779" means you see Ava Li's score for GLUE (421) and for QuAC (779) and no other.

Each of your turns is exactly one move, starting with its tag:
[message] <text to your partner>
[propose] Proposal:
<paper>: <reviewer>   (8 lines, every paper and every reviewer exactly once)
[accept]   (accept your partner's pending proposal; ends the game)
[reject]   (reject it; then you move again)
A pending proposal must be answered with [accept] or [reject]. {private}

{example}"""
PRIVATE = {
    PLAIN: "Anything you write before the tag is private and never shown to your partner.",
    BOXED: "Reason step by step first, then put your move, its tag included, within \\boxed{} at the end of "
    "your response, e.g. \\boxed{[reject]}: your partner is shown the boxed move and nothing else.",
}
# How a proposal is laid out. The plain format shows a whole one, which the shipped warm starts were trained to
# read; the boxed format, for models that learn from the rules alone, shows the lines with each reviewer left to
# choose: a complete example is a valid move that a model can box as it stands, whatever its table says, and
# that one assignment is worth what a random one is.
EXAMPLE = {
    PLAIN: "Example proposal:\n" + answer("[propose] " + render_proposal([(i, i) for i in range(8)]), PLAIN),
    BOXED: "Example proposal, each <reviewer> the full name of the reviewer you assign to that paper:\n"
    + answer("[propose] Proposal:\n" + "\n".join(f"{paper}: <reviewer>" for paper in PAPERS), BOXED),
}


def render_row(reviewer: int, cells: list[tuple[int, int]]) -> str:
    """`Ava Li: GLUE 421, QuAC 779`: one reviewer's cells as (paper, value), or `none`."""
    return f"{REVIEWERS[reviewer]}: " + (", ".join(f"{PAPERS[p]} {v}" for p, v in cells) or "none")


def render_table(view: list[list[int | None]]) -> str:
    """One line per reviewer naming each visible cell's paper beside its value: a small model can
    copy a cell without counting columns, and states it exactly as it reads it."""
    return "\n".join(render_row(r, [(p, v) for p, v in enumerate(row) if v is not None]) for r, row in enumerate(view))


_REVIEWER = re.compile(
    r"\b(" + "|".join(r"\s+".join(map(re.escape, name.split())) for name in REVIEWERS) + r")\b", re.IGNORECASE
)
# A paper's short name, an optional ':', '=' or '-', and an integer (not the start of a decimal).
_CELL = re.compile(r"\b(" + "|".join(map(re.escape, PAPERS)) + r")\b\s*[:=\-]?\s*(\d+)(?!\.?\d)", re.IGNORECASE)
_REVIEWER_INDEX = {name.lower(): r for r, name in enumerate(REVIEWERS)}
_PAPER_INDEX = {name.lower(): p for p, name in enumerate(PAPERS)}


def stated_cells(text: str) -> list[tuple[int, int, int]]:
    """The (reviewer, paper, value) cells a text states, in order: in the table's line format
    (`Ava Li: GLUE 421, QuAC 779`) or as `Ava Li - GLUE: 421`, i.e. each paper and integer after
    a reviewer's full name, up to the next reviewer's name."""
    names = list(_REVIEWER.finditer(text))
    cells = []
    for name, following in zip(names, names[1:] + [None]):
        r = _REVIEWER_INDEX[" ".join(name.group(1).split()).lower()]
        segment = text[name.end() : following.start() if following else len(text)]
        cells += [(r, _PAPER_INDEX[m.group(1).lower()], int(m.group(2))) for m in _CELL.finditer(segment)]
    return cells


def system_prompt(instance: Instance, player: int, move_format: str = PLAIN) -> str:
    """The rules, as a response gives its move in `move_format`, and the player's own table."""
    rules = RULES.format(example=EXAMPLE[move_format], private=PRIVATE[move_format])
    return rules + "\n\nYour table:\n" + render_table(instance.view(player))


FIRST_MOVE = "You move first. Make your move."
PARTNER_MOVED = "Partner: {move}"
INVALID = "Invalid move: {error}. Your partner did not see it. Try again."
AGAIN = "It is still your turn. Make your move."
