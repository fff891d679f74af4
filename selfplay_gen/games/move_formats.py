"""How a seat's response gives its move, in the games that offer a choice. `plain`: the whole response is the move.
`boxed`, as SPIRAL plays its games: the seat is asked to reason step by step at the end of everything it is told
before each of its moves, and the last \\boxed{...} of its response is the move, so the reasoning may name moves it
does not make. The reasoning is the seat's own: its partner is told the move alone, and the game's events keep the
move."""

from __future__ import annotations

import re

PLAIN, BOXED = "plain", "boxed"
MOVE_FORMATS = (PLAIN, BOXED)
BOXED_ASK = "Please reason step by step, and put your final answer within \\boxed{}."  # SPIRAL's words
BOX_OPEN, BOX_TEXT = "\\boxed{", re.compile(r"\\text\{(.*)\}", re.DOTALL)  # \boxed{\text{[bet]}}: [bet]
NO_BOXED_MOVE = "no move: put your final move within \\boxed{}"  # a response the game never reads


def checked(move_format: str) -> str:
    """`move_format`, or a ValueError naming the formats there are."""
    if move_format not in MOVE_FORMATS:
        raise ValueError(f"unknown move format {move_format!r}; choose one of {', '.join(MOVE_FORMATS)}")
    return move_format


def asked(told: tuple[tuple[str, ...], ...], mover: int | None, move_format: str) -> tuple[tuple[str, ...], ...]:
    """What each seat is told, with the boxed format's request as the last line the seat to move next (`mover`;
    None once the game is over) reads before its move: SPIRAL's template closes every observation with it, so it
    is the instruction nearest the answer, whatever the rules above it say of moves."""
    if move_format != BOXED or mover is None:
        return told
    return tuple((*lines, BOXED_ASK) if seat == mover else lines for seat, lines in enumerate(told))


def boxed(text: str) -> str | None:
    """What the last \\boxed{...} of `text` holds, braces nested and a \\text{...} around it taken off as SPIRAL reads
    it; None when it boxes nothing or never closes its box."""
    start = text.rfind(BOX_OPEN)
    if start < 0:
        return None
    depth = 0
    for end in range(start + len(BOX_OPEN) - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    else:
        return None
    inner = text[start + len(BOX_OPEN) : end].strip()
    wrapped = BOX_TEXT.fullmatch(inner)
    return (wrapped.group(1) if wrapped else inner).strip()


def answer(move: str, move_format: str) -> str:
    """A response that makes `move` in `move_format` (a scripted seat's, which has no reasoning to give)."""
    return move if move_format == PLAIN else f"\\boxed{{{move}}}"
