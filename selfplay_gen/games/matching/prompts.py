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

{table}

Each of your turns is exactly one move, starting with its tag:
[message] <text to your partner>
[propose] Proposal:
<paper>: <reviewer>   (8 lines, every paper and every reviewer exactly once)
[accept]   (accept your partner's pending proposal; ends the game)
[reject]   (reject it; then you move again)
A pending proposal must be answered with [accept] or [reject]. {private}

{example}"""
BY_REVIEWER = """Your table has one line per reviewer, listing the papers whose scores you can see: \
"Ava Li: GLUE 421, QuAC 779" means you see Ava Li's score for GLUE (421) and for QuAC (779) and no other."""
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


def render_by_paper(view: list[list[int | None]]) -> str:
    """`GLUE: Ava Li 421, Noah Wilson 142`: the same cells one line per paper, its reviewers highest first (ties in
    the table's order)."""
    columns = [
        sorted(((r, value) for r, row in enumerate(view) if (value := row[p]) is not None), key=lambda c: -c[1])
        for p in range(len(PAPERS))
    ]
    return "\n".join(
        f"{PAPERS[p]}: " + (", ".join(f"{REVIEWERS[r]} {v}" for r, v in cells) or "none")
        for p, cells in enumerate(columns)
    )


# How the table is laid out: what the rules say of it, and its renderings. The plain format lists it by reviewer,
# as the shipped warm starts were trained to read. The boxed format, for models that learn from the rules alone,
# lists the same cells a second time by paper, in the order a proposal's lines go and each paper's reviewers
# highest first: a model choosing a paper's reviewer reads that paper's candidates on one line instead of scanning
# eight, and reads first the one worth most to it, not the reviewer of the paper's own line (which, paper after
# paper, is the identity assignment).
TABLE = {
    PLAIN: (BY_REVIEWER, (render_table,)),
    BOXED: (
        BY_REVIEWER
        + """ Below it, the same scores one line per paper, highest first: "GLUE: Ava Li 421, Noah Wilson 142" \
means you see GLUE's score for Ava Li (421) and for Noah Wilson (142) and no other.""",
        (render_table, render_by_paper),
    ),
}


_REVIEWER_NAME = "|".join(r"\s+".join(map(re.escape, name.split())) for name in REVIEWERS)
_REVIEWER = re.compile(rf"\b({_REVIEWER_NAME})\b", re.IGNORECASE)
_PAPER_NAME = "|".join(map(re.escape, PAPERS))
# An integer that is not the start of a decimal.
_VALUE = r"(\d+)(?!\.?\d)"
# A paper's short name, an optional ':', '=' or '-', and a value.
_CELL = re.compile(rf"\b({_PAPER_NAME})\b\s*[:=\-]?\s*{_VALUE}", re.IGNORECASE)
# The by-paper line: a paper's short name, ':', '=' or '-', then reviewers each with a value.
_REVIEWER_VALUE = rf"\b({_REVIEWER_NAME})\b\s*[:=\-]?\s*{_VALUE}"
_PAPER_LINE = re.compile(rf"\b({_PAPER_NAME})\b\s*[:=\-]\s*((?:{_REVIEWER_VALUE}[\s,;]*)+)", re.IGNORECASE)
_REVIEWER_CELL = re.compile(_REVIEWER_VALUE, re.IGNORECASE)
_REVIEWER_INDEX = {name.lower(): r for r, name in enumerate(REVIEWERS)}
_PAPER_INDEX = {name.lower(): p for p, name in enumerate(PAPERS)}


def _reviewer(name: str) -> int:
    """The index of a reviewer's full name as a text writes it (any case, any spaces between the names)."""
    return _REVIEWER_INDEX[" ".join(name.split()).lower()]


def stated_cells(text: str) -> list[tuple[int, int, int]]:
    """The (reviewer, paper, value) cells a text states, in order: in the table's line format
    (`Ava Li: GLUE 421, QuAC 779`) or as `Ava Li - GLUE: 421`, i.e. each paper and integer after
    a reviewer's full name, up to the next reviewer's name; or in the boxed table's by-paper format
    (`GLUE: Ava Li 421, Noah Wilson 142`), each reviewer and integer after a paper's name and a colon."""
    names = list(_REVIEWER.finditer(text))
    cells = []
    for name, following in zip(names, names[1:] + [None]):
        start = name.end()
        segment = text[start : following.start() if following else len(text)]
        r = _reviewer(name.group(1))
        cells += [
            (start + m.start(), r, _PAPER_INDEX[m.group(1).lower()], int(m.group(2))) for m in _CELL.finditer(segment)
        ]
    for line in _PAPER_LINE.finditer(text):
        p, start = _PAPER_INDEX[line.group(1).lower()], line.start(2)
        cells += [
            (start + m.start(), _reviewer(m.group(1)), p, int(m.group(2)))
            for m in _REVIEWER_CELL.finditer(line.group(2))
        ]
    return [(r, p, value) for _, r, p, value in sorted(cells)]


def system_prompt(instance: Instance, player: int, move_format: str = PLAIN) -> str:
    """The rules, as a response gives its move in `move_format`, and the player's own table."""
    explained, renderings = TABLE[move_format]
    rules = RULES.format(table=explained, example=EXAMPLE[move_format], private=PRIVATE[move_format])
    view = instance.view(player)
    return rules + "\n\nYour table:\n" + "\n\n".join(render(view) for render in renderings)


FIRST_MOVE = "You move first. Make your move."
PARTNER_MOVED = "Partner: {move}"
INVALID = "Invalid move: {error}. Your partner did not see it. Try again."
AGAIN = "It is still your turn. Make your move."
