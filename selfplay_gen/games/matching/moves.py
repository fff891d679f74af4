"""Moves: parsing a model's turn text into one of the four tagged moves, and rendering proposals.

A turn may carry private text before its tag (a player's reasoning); it is never shown to the
partner. Text after `[accept]` / `[reject]` is ignored. Everything else is strict: exactly one
known tag, a non-empty message, and a proposal that names a perfect matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import InvalidMove
from .instance import PAPER_TITLES, PAPERS, REVIEWERS, Pairs

TAGS = ("message", "propose", "accept", "reject")
_TAG = re.compile(r"\[(message|propose|accept|reject)\]", re.IGNORECASE)
_LEADING_BRACKET = re.compile(r"^\s*\[([^\]\n]{1,30})\]")
_LINE_BREAK = re.compile(r"<br\s*/?>|\n", re.IGNORECASE)
_BULLET = re.compile(r"^(?:\s|&emsp;|&nbsp;|[-*•]|\d+[.)])+", re.IGNORECASE)

_PAPER_NAMES: dict[str, int] = {}
for _i, _short in enumerate(PAPERS):
    _title = PAPER_TITLES[_short]
    for _name in (_short, _title, _title.split(":", 1)[1]):
        _PAPER_NAMES[_name.strip().lower()] = _i
_REVIEWER_NAMES = {name.lower(): i for i, name in enumerate(REVIEWERS)}


@dataclass(frozen=True)
class Move:
    """A parsed move. `text` is what the partner sees; `pairs` are (reviewer, paper) for proposals."""

    kind: str
    text: str
    pairs: tuple[tuple[int, int], ...] = ()

    @property
    def public(self) -> str:
        """The move as shown to the partner (private text before the tag removed)."""
        if self.kind == "propose":
            return "[propose] " + render_proposal(self.pairs)
        if self.kind == "message":
            return f"[message] {self.text}"
        return f"[{self.kind}]"


def parse_move(text: str) -> Move:
    """Parse one turn. Raises `InvalidMove` naming the problem."""
    tags = list(_TAG.finditer(text))
    if not tags:
        unknown = _LEADING_BRACKET.match(text)
        if unknown:
            raise InvalidMove(f"unknown tag [{unknown.group(1)}]; use one of [message], [propose], [accept], [reject]")
        raise InvalidMove("no move tag found; start your move with [message], [propose], [accept] or [reject]")
    if len(tags) > 1:
        names = ", ".join(f"[{t.group(1).lower()}]" for t in tags)
        raise InvalidMove(f"a move must contain exactly one tag, found {len(tags)}: {names}")
    kind, body = tags[0].group(1).lower(), text[tags[0].end() :].strip()
    if kind == "message":
        if not body:
            raise InvalidMove("empty message: write some text after [message]")
        return Move("message", body)
    if kind == "propose":
        return Move("propose", body, parse_proposal(body))
    return Move(kind, "")


def proposal_lines(body: str) -> list[str]:
    """The non-empty lines after a proposal's `Proposal:`, split at newlines or `<br/>`, bullet marks removed."""
    head, sep, _ = body.partition(":")
    if not sep or head.strip().lower() != "proposal":
        raise InvalidMove("a proposal must start with 'Proposal:' followed by 8 lines '<paper>: <reviewer>'")
    return [body[start:end] for start, end in _line_spans(body, len(head) + 1)]


def _line_spans(text: str, start: int) -> list[tuple[int, int]]:
    """(start, end) in `text` of each non-empty line from `start` on, split at newlines or `<br/>`, without its
    bullet mark and the spaces around it."""
    bounds = [start, *(at for brk in _LINE_BREAK.finditer(text, start) for at in brk.span()), len(text)]
    spans = []
    for begin, end in zip(bounds[::2], bounds[1::2], strict=True):
        line = text[begin:end]
        bare = _BULLET.sub("", line).strip()
        if bare:
            first = begin + line.index(bare)
            spans.append((first, first + len(bare)))
    return spans


def paper_named(text: str) -> int | None:
    """The paper a proposal line names, by short name or full title (any case), or None."""
    return _PAPER_NAMES.get(text.strip().lower())


def parse_proposal(body: str) -> tuple[tuple[int, int], ...]:
    """`Proposal:` then 8 lines `<paper>: <reviewer>` naming every paper and reviewer once."""
    lines = proposal_lines(body)
    if len(lines) != 8:
        raise InvalidMove(f"a proposal needs 8 lines '<paper>: <reviewer>', one per paper; found {len(lines)}")
    paper_line: dict[int, int] = {}
    reviewer_line: dict[int, int] = {}
    pairs = []
    for n, line in enumerate(lines, 1):
        paper_text, colon, reviewer_text = line.rpartition(":")
        if not colon:
            raise InvalidMove(f"proposal line {n} '{line}' has no ':' between paper and reviewer")
        paper = paper_named(paper_text)
        if paper is None:
            raise InvalidMove(
                f"proposal line {n}: unknown paper '{paper_text.strip()}'; papers are {', '.join(PAPERS)}"
            )
        reviewer = _REVIEWER_NAMES.get(reviewer_text.strip().lower())
        if reviewer is None:
            raise InvalidMove(
                f"proposal line {n}: unknown reviewer '{reviewer_text.strip()}'; reviewers are {', '.join(REVIEWERS)}"
            )
        if paper in paper_line:
            raise InvalidMove(f"paper {PAPERS[paper]} is assigned twice (lines {paper_line[paper]} and {n})")
        if reviewer in reviewer_line:
            raise InvalidMove(
                f"reviewer {REVIEWERS[reviewer]} is assigned twice (lines {reviewer_line[reviewer]} and {n})"
            )
        paper_line[paper], reviewer_line[reviewer] = n, n
        pairs.append((reviewer, paper))
    return tuple(sorted(pairs))


def proposal_line_spans(text: str) -> list[tuple[int, int, int, int]]:
    """Where each line of a valid proposal turn lies in `text`: (start, end, reviewer, paper), the line's
    characters without its bullet mark; [] for any other turn (a message, a reply, an invalid move)."""
    try:
        move = parse_move(text)
    except InvalidMove:
        return []
    if move.kind != "propose":
        return []
    tag = _TAG.search(text)
    assert tag is not None  # parse_move found it
    spans = []
    for start, end in _line_spans(text, text.index(":", tag.end()) + 1):  # the lines after `Proposal:`
        paper_text, _, reviewer_text = text[start:end].rpartition(":")
        paper, reviewer = _PAPER_NAMES[paper_text.strip().lower()], _REVIEWER_NAMES[reviewer_text.strip().lower()]
        spans.append((start, end, reviewer, paper))
    return spans


def render_proposal(pairs: Pairs) -> str:
    """The canonical proposal text: one line per paper, in paper order."""
    by_paper = {p: r for r, p in pairs}
    return "Proposal:\n" + "\n".join(f"{PAPERS[p]}: {REVIEWERS[by_paper[p]]}" for p in sorted(by_paper))
