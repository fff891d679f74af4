"""Any OpenAI-compatible server (vLLM, llama.cpp, SGLang's OpenAI endpoint, hosted APIs).

Two endpoints, chosen with `options.endpoint`:
- "completions" (`/v1/completions`): the prompt goes as the list of token ids, so the model sees
  exactly the player's context (vLLM, SGLang and llama.cpp accept token-id prompts).
- "chat" (`/v1/chat/completions`): the server applies its own chat template to `messages`, which
  the player passes along with the ids (`Backend.generate(..., messages=...)`); the ids are then
  only the player's local rendering of the same chat.
Either way these servers return text, not ids, so `output_ids` is the text re-encoded with the
player's tokenizer, plus the end-of-turn id when the turn stopped; the Generation says
`retokenized=True`, since re-encoded ids may differ from the sampled ones (off-policy for RL).
Logprobs are kept only when the server returned one per re-encoded token.

The API key is read from the environment variable named by `options.api_key_env` and is only
ever sent in the Authorization header: never logged, recorded or put in an error message.
"""

from __future__ import annotations

import os

from ..token_context import token_context
from .base import BackendError, Generation, SamplingParams, register
from .http import HttpBackend, field

ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@register("openai")
class OpenAIBackend(HttpBackend):
    max_concurrency = 64

    def __init__(self, options, tokenizer):
        if options.endpoint not in ENDPOINTS:
            raise ValueError(f"unknown OpenAI endpoint {options.endpoint!r}; choose one of {sorted(ENDPOINTS)}")
        super().__init__(options, tokenizer)

    def headers(self) -> dict[str, str]:
        key = os.environ.get(self.options.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def start(self) -> None:
        """The served model name: `options.model` if the server lists it, else the first it lists."""
        await super().start()
        where = f"{self.base_urls[0]}/v1/models"
        body = await self.request("GET", where)
        with self.redacted():
            listed = field(body, "data", list, where)
        served: list[str] = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if not served:
            raise BackendError(f"{where} lists no models")
        self.model = self.options.model if self.options.model in served else served[0]

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        url = self.server_for(session) + ENDPOINTS[self.options.endpoint]
        payload = {
            "model": self.model,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop_token_ids:
            payload["stop_token_ids"] = list(params.stop_token_ids)  # vLLM/SGLang extension
        if self.options.endpoint == "chat":
            if messages is None:
                raise ValueError("the OpenAI chat endpoint needs the prompt as messages")
            payload |= {"messages": messages, "logprobs": True}
        else:
            payload |= {"prompt": list(prompt_ids), "logprobs": 1}
        body = await self.request("POST", url, payload)
        with self.redacted():
            gen = self._parse(body, params, url)
        self.stats.add(gen)
        return gen

    def _parse(self, body: dict, params: SamplingParams, where: str) -> Generation:
        choices = field(body, "choices", list, where)
        if not choices or not isinstance(choices[0], dict):
            raise BackendError(f"malformed response from {where}: field 'choices' is empty")
        choice, chat = choices[0], self.options.endpoint == "chat"
        text = field(choice, "message.content" if chat else "text", str, f"{where} (choices[0])")
        finish = field(choice, "finish_reason", str, f"{where} (choices[0])")
        if finish not in ("stop", "length"):
            raise BackendError(f"{where} ended the request with finish_reason {finish!r}")
        prompt_tokens = field(body, "usage.prompt_tokens", int, where)
        cached = ((body.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        output_ids = self.tokenizer.encode(text, add_special_tokens=False)
        if finish == "stop":
            output_ids.append((params.stop_token_ids or (token_context(self.tokenizer).end_of_turn_id,))[0])
        logprobs = _logprobs(choice.get("logprobs"), chat)
        if finish == "stop" and logprobs is not None and len(logprobs) == len(output_ids) - 1:
            logprobs.append(0.0)  # the end-of-turn token the server stopped on, not reported
        if logprobs is not None and len(logprobs) != len(output_ids):
            logprobs = None
        return Generation(output_ids, logprobs, finish, prompt_tokens, cached, retokenized=True)


def _logprobs(block: dict | None, chat: bool) -> list[float] | None:
    """The sampled tokens' logprobs: `logprobs.content[].logprob` (chat) or `logprobs.token_logprobs`."""
    if not isinstance(block, dict):
        return None
    values = (
        [t.get("logprob") for t in block.get("content") or [] if isinstance(t, dict)]
        if chat
        else block.get("token_logprobs") or []
    )
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    return numbers if values and len(numbers) == len(values) else None
