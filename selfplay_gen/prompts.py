"""What players read: the rules and their own table, partner moves, and game feedback.

The same texts on every backend, so games from different servers are comparable. Each function
returns plain strings; turning them into chat messages and tokens is the player's job.
"""
from __future__ import annotations

from .instance import PAPERS, REVIEWERS, Instance
from .moves import render_proposal

RULES = """You and your partner are area chairs assigning 8 reviewers to 8 papers, one reviewer per paper. \
Each of you sees a different part of a table of reviewer-paper similarity scores, shown in your own \
private scale; empty cells are hidden from you. You share the final score: the total similarity of the \
assignment you both accept, divided by the best possible total. Share what you know and agree on the best \
assignment.

Each of your turns is exactly one move, starting with its tag:
[message] <text to your partner>
[propose] Proposal:
<paper>: <reviewer>   (8 lines, every paper and every reviewer exactly once)
[accept]   (accept your partner's pending proposal; ends the game)
[reject]   (reject it; then you move again)
A pending proposal must be answered with [accept] or [reject]. Anything you write before the tag is \
private and never shown to your partner.

Example proposal:
[propose] {example}"""


def render_table(view: list[list[int | None]]) -> str:
    """One comma-separated line per reviewer under a header of paper names; hidden cells empty."""
    lines = ["Reviewer," + ",".join(PAPERS)]
    for name, row in zip(REVIEWERS, view):
        lines.append(name + "," + ",".join("" if v is None else str(v) for v in row))
    return "\n".join(lines)


def system_prompt(instance: Instance, player: int) -> str:
    example = render_proposal([(i, i) for i in range(8)])
    return RULES.format(example=example) + "\n\nYour table:\n" + render_table(instance.view(player))


FIRST_MOVE = "You move first. Make your move."
PARTNER_MOVED = "Partner: {move}"
INVALID = "Invalid move: {error}. Your partner did not see it. Try again."
AGAIN = "It is still your turn. Make your move."
