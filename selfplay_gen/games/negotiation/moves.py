"""Negotiation moves: `[message] <text>` and `[propose] <the items you take>`.

As in the matching game, a turn holds exactly one tag, text before it is private, and a message
must not be empty. A proposal names every item once with the number the mover takes, as
`<number> <item>` (singular or plural), separated by commas, semicolons, `and` or line breaks,
optionally in parentheses and ending with a period: `1 book, 0 hats, 2 balls` or
`(2 balls and 1 book, 0 hats)`. Nothing else may follow it. It is final and private: the
partner learns only that a proposal was made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import InvalidMove, split_tag
from .instance import ITEMS, PLURALS, Share, item_name, takes_pool

TAGS = ("message", "propose")
EXAMPLE = "1 book, 0 hats, 2 balls"
_NAMES = {name: i for i, names in enumerate(zip(ITEMS, PLURALS)) for name in names}
_SEPARATOR = re.compile(r"\s*(?:[,;\n]|\band\b)\s*", re.IGNORECASE)
_PART = re.compile(r"(\d+)\s+([a-z]+)", re.IGNORECASE)
# An offer stated in a message: "I take <share>" or "I get <share>", up to the end of its sentence.
_OFFER = re.compile(r"\bI\s+(?:take|get)\b:?\s*(.+?)(?:;|\.(?=\s|$)|\n|$)", re.IGNORECASE)
# The partner's half of it, in the same words: "you take <share>" or "you get <share>".
_THEIRS = re.compile(r"\byou\s+(?:take|get)\b:?\s*(.+?)(?:;|\.(?=\s|$)|\n|$)", re.IGNORECASE)


@dataclass(frozen=True)
class Move:
    """A parsed move: `text` is the message or the proposal as written; `share` what a proposal takes."""

    kind: str
    text: str
    share: Share | None = None

    @property
    def public(self) -> str:
        """The move as the partner sees it: a message in full, a proposal without its content."""
        return f"[message] {self.text}" if self.kind == "message" else "[propose]"


def parse_move(text: str, counts: Share) -> Move:
    """Parse one turn of a game whose pool is `counts`. Raises `InvalidMove` naming the problem."""
    kind, body, _private = split_tag(text, TAGS)
    if kind == "message":
        if not body:
            raise InvalidMove("empty message: write some text after [message]")
        return Move("message", body)
    return Move("propose", body, parse_share(body, counts))


def parse_share(body: str, counts: Share) -> Share:
    """The share a proposal names: every item once, each count at most what the pool holds."""
    text = body.strip()
    text = text[:-1].rstrip() if text.endswith(".") else text
    text = text[1:-1].strip() if text.startswith("(") and text.endswith(")") else text
    if not text:
        raise InvalidMove(f"a proposal names how many of each item you take, e.g. '[propose] {EXAMPLE}'")
    share: dict[int, int] = {}
    for part in _SEPARATOR.split(text):
        if not part:
            continue
        match = _PART.fullmatch(part)
        if match is None:
            raise InvalidMove(
                f"cannot read '{part}' in your proposal: write each item as '<number> <item>', e.g. '2 hats'"
            )
        item = _NAMES.get(match.group(2).lower())
        if item is None:
            raise InvalidMove(f"unknown item '{match.group(2)}'; the items are {', '.join(PLURALS)}")
        if item in share:
            raise InvalidMove(f"your proposal names {PLURALS[item]} twice")
        n = int(match.group(1))
        if n > counts[item]:
            raise InvalidMove(f"you cannot take {n} {item_name(item, n)}: there are only {counts[item]}")
        share[item] = n
    missing = [PLURALS[i] for i in range(len(ITEMS)) if i not in share]
    if missing:
        raise InvalidMove(
            f"your proposal does not say how many {' or '.join(missing)} you take; name every item, 0 if you take none"
        )
    a, b, c = (share[i] for i in range(len(ITEMS)))
    return a, b, c


def stated_offer(text: str, counts: Share) -> Share | None:
    """The share a message says its writer takes ("I take 2 books, 0 hats, 1 ball"), or None
    when it states none that `parse_share` reads. For scripted players, which read offers."""
    for match in _OFFER.finditer(text):
        try:
            return parse_share(match.group(1), counts)
        except InvalidMove:
            continue
    return None


def stated_split(text: str, counts: Share) -> tuple[Share, Share] | None:
    """Both halves of an offer a message states, the writer's ("I take ...", as `stated_offer` reads it) and the
    partner's ("you take ..."), or None when it does not state both readably."""
    mine, theirs = stated_offer(text, counts), _THEIRS.search(text)
    if mine is None or theirs is None:
        return None
    try:
        return mine, parse_share(theirs.group(1), counts)
    except InvalidMove:
        return None


def misstates(text: str, counts: Share) -> bool:
    """Whether a message states an offer whose two halves do not add up to the pool. A partner that proposes
    the half it was offered and a writer that proposes its own then make proposals that do not match, and the
    game ends without a deal."""
    split = stated_split(text, counts)
    return split is not None and not takes_pool(split, counts)
