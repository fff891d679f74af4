"""A seat's token context, as a tokenizer's chat template builds it: the one owner of the
end-of-turn token, the template delta, the append-only check and re-tokenization.

A context is the template's rendering of the conversation with every assistant turn replaced
by the ids sampled for it, verbatim. The end-of-turn token is read from the template itself
(the first special token after an assistant's content), never assumed to be eos: most instruct
models ship eos `<|endoftext|>` and close turns with `<|im_end|>`. A template delta may only
follow a turn closed by that token, and `TokenContext.check` holds the ids against a fresh
rendering of the whole conversation, so a context that is not what the template gives fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

Turns = Sequence[tuple[int, Sequence[int]]]  # per sampled turn: its prompt_len and output_ids

_TURN = "\ue000turn\ue000"  # stands for an assistant's content; no template alters it
_BASE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": _TURN}]


class TokenInvariantError(ValueError):
    """Ids that do not hold what the turns sampled, or not what the chat template renders around them."""


def check_spans(ids: Sequence[int], turns: Turns) -> None:
    """Each turn's output_ids sit verbatim at its prompt_len, after the previous turn's and inside
    the ids: what any append-only context holds, checkable without a tokenizer."""
    end = 0
    for n, (at, out) in enumerate(turns):
        if n == 0 and not 0 < at <= len(ids):
            raise TokenInvariantError(f"turn 0: prompt_len {at} is outside the {len(ids)} token_ids")
        if at < end or list(ids[at : at + len(out)]) != list(out):
            raise TokenInvariantError(f"turn {n}: its output_ids are not at offset {at} of token_ids")
        end = at + len(out)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids two id lists share (what a prefix cache can reuse); vectorised, since
    the llama.cpp engine compares whole prompts with every cache slot on each turn."""
    n = min(len(a), len(b))
    differ = np.asarray(a[:n]) != np.asarray(b[:n])
    return int(np.argmax(differ)) if differ.any() else n


@lru_cache(maxsize=8)
def token_context(tokenizer) -> TokenContext:
    """The `TokenContext` of a tokenizer, built once (it renders the template to find its tokens)."""
    return TokenContext(tokenizer)


class TokenContext:
    """What a tokenizer's chat template means for append-only token contexts."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.model = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        text = self._render(_BASE)
        after = text.rindex(_TURN) + len(_TURN)
        special = {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
        found = next((i for i in self._encode(text[after:]) if i in special), None)
        if found is None:
            raise ValueError(
                f"the chat template of {self.model!r} closes an assistant turn with {text[after:]!r}, which holds "
                "no special token to stop on; a token-in, token-out context needs one"
            )
        self.end_of_turn_id: int = found
        self.end_of_turn: str = tokenizer.added_tokens_decoder[found].content
        # the template's text from an assistant's content through its end-of-turn token
        self._closing = text[after : text.index(self.end_of_turn, after) + len(self.end_of_turn)]
        self._closed = text[: after + len(self._closing)]  # _BASE up to its closed assistant turn

    def prompt(self, messages: list[dict], memo: dict[str, list[int]] | None = None) -> list[int]:
        """Ids of a first prompt: the conversation so far and the generation prompt (`memo` as in `check`)."""
        text = self._render(messages, add_generation_prompt=True)
        return self._encode(text) if memo is None else _memoized(memo, text, self._encode)

    def delta(self, message: dict, memo: dict[str, list[int]] | None = None) -> list[int]:
        """Ids that follow a closed assistant turn for a new (user or tool) message and the
        generation prompt (ChatML: "\\n<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n").
        With `memo` (as in `check`), the encoding is kept for the check of the same turn."""
        text = self._render([*_BASE, message], add_generation_prompt=True)
        if not text.startswith(self._closed):
            raise ValueError(f"the chat template of {self.model!r} is not append-only after an assistant turn")
        piece = text[len(self._closed) :]
        return self._encode(piece) if memo is None else _memoized(memo, piece, self._encode)

    def check(
        self, ids: Sequence[int], turns: Turns, messages: list[dict], memo: dict[str, list[int]] | None = None
    ) -> None:
        """Raise TokenInvariantError unless `ids` is the template's rendering of `messages` (which end
        with the message to answer) and the generation prompt, with each assistant message replaced
        by its turn's output_ids, each closed by the end-of-turn token.

        `memo` (text -> ids, owned by the caller, e.g. one per seat) keeps the encoding of each piece
        of template text: the conversation is still rendered afresh every turn, but only text not
        seen before is encoded, so checking a seat's whole game costs encodes linear in its length
        rather than quadratic. Encoding is deterministic, so the check is the same either way."""
        check_spans(ids, turns)
        pieces = self._pieces(messages, memo)
        if len(pieces) != len(turns) + 1:
            raise TokenInvariantError(f"{len(turns)} sampled turns for {len(pieces) - 1} assistant messages")
        bounds = [0, *(x for at, out in turns for x in (at, at + len(out))), len(ids)]
        for n, piece in enumerate(pieces):
            if n and list(turns[n - 1][1][-1:]) != [self.end_of_turn_id]:
                raise TokenInvariantError(
                    f"turn {n - 1} does not end with the end-of-turn token {self.end_of_turn!r}, "
                    "so no template text can follow it"
                )
            start, stop = bounds[2 * n], bounds[2 * n + 1]
            if list(ids[start:stop]) != piece:
                where = "the first prompt" if n == 0 else f"the template text after turn {n - 1}"
                raise TokenInvariantError(
                    f"ids {start}..{stop} are not {where}, as the chat template renders the conversation"
                )

    def retokenize(self, messages: list[dict]) -> tuple[list[int], list[tuple[int, list[int]]]]:
        """Ids for a seat that kept only chat messages (a scripted seat), built as an LLM seat builds
        its context: the first prompt, then each assistant content and the end-of-turn token, each
        other message as a delta. Returns the ids and each assistant turn's (prompt_len, output_ids)."""
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        ids, turns = self.prompt(messages[:first]), []
        for message in messages[first:]:
            if message["role"] == "assistant":
                out = [*self._encode(message["content"]), self.end_of_turn_id]
                turns.append((len(ids), out))
                ids += out
            else:
                ids += self.delta(message)
        return ids, turns

    def _pieces(self, messages: list[dict], memo: dict[str, list[int]] | None = None) -> list[list[int]]:
        """The template's ids around the assistant messages of a fresh rendering of `messages` (and
        the generation prompt): before the first, then after each one's end-of-turn token."""
        stand_in = [{**m, "content": _TURN} if m["role"] == "assistant" else m for m in messages]
        texts = self._render(stand_in, add_generation_prompt=True).split(_TURN)
        if len(texts) != sum(m["role"] == "assistant" for m in messages) + 1:
            raise TokenInvariantError("the chat template does not render each assistant message once")
        for n, text in enumerate(texts[1:]):
            if not text.startswith(self._closing):
                raise TokenInvariantError(
                    f"the chat template does not close assistant message {n} with {self._closing!r}"
                )
        encode = self._encode if memo is None else lambda text: _memoized(memo, text, self._encode)
        return [encode(texts[0]), *(encode(text[len(self._closing) :]) for text in texts[1:])]

    def _render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)


def _memoized(memo: dict[str, list[int]], text: str, encode) -> list[int]:
    ids = memo.get(text)
    if ids is None:
        ids = memo[text] = encode(text)
    return ids
