"""The token view of one seat of a game record: its full context ids, where its initial prompt
ends, which ids it produced itself, and their logprobs. What training reads of a seat, offline
(`selfplay-convert`) and online (`selfplay_gen.verl`) alike.

A seat that sampled (kind "llm") already holds its ids; they are checked, never rebuilt: each
turn's `output_ids` must sit verbatim at its `prompt_len` and turns must only append (the
player checked them against the chat template every turn). A seat without ids (a scripted
player) is tokenized the way an LLM seat builds its context (`TokenContext.retokenize`), so its
rows have the same shape and round-trip through the same loaders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from .records import Seat
from .token_context import TokenInvariantError, check_spans, token_context

SAMPLED, RETOKENIZED = "sampled", "retokenized"


@dataclass
class SeatTokens:
    token_ids: np.ndarray  # int32, the whole final context
    prompt_len: int  # ids of the initial prompt (system + first user message)
    own: np.ndarray  # int8 over token_ids[prompt_len:], 1 = produced by this seat
    own_logprobs: np.ndarray | None  # float32, one per own id in order
    num_turns: int
    source: str  # SAMPLED, or RETOKENIZED (scripted seat, or re-encoded server output)

    @property
    def response_len(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def logprobs(self) -> np.ndarray | None:
        """float32 over token_ids[prompt_len:], 0 where not own."""
        if self.own_logprobs is None:
            return None
        spread = np.zeros(len(self.own), dtype=np.float32)
        spread[self.own.view(np.bool_)] = self.own_logprobs
        return spread


def prompt_messages(messages: list[dict]) -> list[dict]:
    """What a player started from: every message before its first own turn."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return messages[:first]


def seat_tokens(seat: Seat, tokenizer: Callable[[], object]) -> SeatTokens | None:
    """The seat's tokens, or None for a seat that never moved. `tokenizer()` is called only for a
    seat without ids, so converting LLM games never loads one."""
    if seat.get("kind") == "llm":
        return sampled(seat) if seat["turns"] else None
    if not any(m["role"] == "assistant" for m in seat["messages"]):
        return None
    return retokenized(cast(list[dict], seat["messages"]), tokenizer())  # Message is a dict at run time


def sampled(seat: Seat) -> SeatTokens:
    """The recorded ids of an LLM seat, checked against its turns."""
    if not seat["invariant_ok"]:
        raise TokenInvariantError("the player flagged its context as not append-only")
    turns, ids = seat["turns"], seat["token_ids"]
    spans = [(turn["prompt_len"], turn["output_ids"]) for turn in turns]
    check_spans(ids, spans)
    start = turns[0]["prompt_len"]
    own = _own(len(ids), start, spans)
    logprobs: list[float] | None = []  # of every turn, in order; None as soon as a turn has none
    source = SAMPLED
    for n, turn in enumerate(turns):
        out, turn_logprobs = turn["output_ids"], turn.get("logprobs")
        if turn_logprobs is None:
            logprobs = None
        elif logprobs is not None:
            if len(turn_logprobs) != len(out):
                raise TokenInvariantError(f"turn {n}: {len(turn_logprobs)} logprobs for {len(out)} ids")
            logprobs += turn_logprobs
        if turn.get("retokenized"):
            source = RETOKENIZED
    stored = None if logprobs is None else np.fromiter(logprobs, np.float32, len(logprobs))
    return SeatTokens(np.fromiter(ids, np.int32, len(ids)), start, own, stored, len(turns), source)


def retokenized(messages: list[dict], tokenizer) -> SeatTokens:
    """Ids for a seat that kept only chat messages, built append-only like an LLM seat's context."""
    ids, turns = token_context(tokenizer).retokenize(messages)
    prompt_len = turns[0][0]
    return SeatTokens(
        np.asarray(ids, dtype=np.int32), prompt_len, _own(len(ids), prompt_len, turns), None, len(turns), RETOKENIZED
    )


def _own(length: int, start: int, turns: list[tuple[int, list[int]]]) -> np.ndarray:
    """int8 over ids[start:length], 1 on each turn's output_ids."""
    own = np.zeros(length - start, dtype=np.int8)
    for at, out in turns:
        own[at - start : at - start + len(out)] = 1
    return own
