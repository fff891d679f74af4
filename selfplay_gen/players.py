"""Players: what sits in a seat of one game. Each is told what the game says to it (`observe`)
and returns its next turn text (`act`); the game judges the text.

`LLMPlayer` plays any game: it starts from the game's system prompt for its seat and keeps its
context as token ids that only grow by appending (token in, token out): sampled ids are kept
verbatim and new user text is appended as a chat-template delta, so the ids trained on are
exactly the ids sampled, and a server's prefix cache covers every earlier turn.
Each game's model-free players live in its own package (`Game.scripted_player`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .backends.base import Backend, SamplingParams
from .games.base import ChatSeat
from .token_context import TokenInvariantError, token_context


class GameStop(Exception):
    """A player hit a limit only it can see; `reason` is a game termination reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass
class Turn:
    prompt_len: int
    output_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    cached_tokens: int = 0
    retokenized: bool = False


class LLMPlayer(ChatSeat):
    """A seat of any game played by a model behind a `Backend`, token in, token out: `ids` only
    ever grows by the sampled ids (verbatim) and the template delta of each new user turn."""

    kind = "llm"

    def __init__(
        self,
        seat: int,
        system: str,
        backend: Backend,
        tokenizer,
        params: SamplingParams,
        session: str,
        context_length: int | None = None,
        response_length: int | None = None,
    ):
        super().__init__(seat, system)
        self.backend, self.tokenizer, self.params, self.session = backend, tokenizer, params, session
        self.context_length = context_length or backend.context_length
        self.response_length = response_length  # ids the context may grow past the first prompt (training limit)
        self.ids: list[int] = []
        self.turns: list[Turn] = []
        self.invariant_ok = True
        self._encoded: dict[str, list[int]] = {}  # template text -> ids, for the per-turn check

    def _next_prompt(self) -> list[int]:
        """The context so far and the template delta of the new user turn, checked against a fresh
        rendering of the whole conversation."""
        context = token_context(self.tokenizer)
        prompt = (
            self.ids + context.delta(self.messages[-1], self._encoded)
            if self.ids
            else context.prompt(self.messages, self._encoded)
        )
        try:
            context.check(prompt, [(t.prompt_len, t.output_ids) for t in self.turns], self.messages, self._encoded)
        except TokenInvariantError as err:
            self.invariant_ok = False
            raise GameStop("token_invariant", str(err)) from None
        return prompt

    async def respond(self) -> str:
        prompt = self._next_prompt()
        if not self.ids and self.response_length is not None:
            self.context_length = min(
                self.context_length or len(prompt) + self.response_length, len(prompt) + self.response_length
            )
        self.ids = prompt
        budget = self.params.max_new_tokens
        if self.context_length is not None:
            if len(prompt) >= self.context_length:
                raise GameStop("context_length", f"the prompt of {len(prompt)} tokens fills the context")
            budget = min(budget, self.context_length - len(prompt))
        # the game's depth (messages so far, both seats' moves) as its priority at the server
        params = SamplingParams(
            self.params.temperature, self.params.top_p, budget, self.params.stop_token_ids, len(self.messages)
        )
        gen = await self.backend.generate(prompt, params, session=self.session, messages=self.messages)
        self.turns.append(
            Turn(len(prompt), list(gen.output_ids), gen.logprobs, gen.finish_reason, gen.cached_tokens, gen.retokenized)
        )
        self.ids = self.ids + list(gen.output_ids)
        text = self.tokenizer.decode(gen.output_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if gen.finish_reason == "length":
            self.messages.append({"role": "assistant", "content": text})  # kept for the record
            raise GameStop(
                "max_new_tokens" if budget == self.params.max_new_tokens else "context_length",
                f"the turn did not end within {budget} new tokens",
            )
        return text

    def log(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.backend.model,
            "backend": self.backend.name,
            "messages": self.messages,
            "token_ids": self.ids,
            "turns": [t.__dict__ for t in self.turns],
            "invariant_ok": self.invariant_ok,
        }
