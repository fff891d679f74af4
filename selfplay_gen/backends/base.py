"""The inference backend interface: token ids in, token ids (with logprobs) out.

One small abstract class, typed results, implementations registered by name (like verl's agent
loops). A backend is opened once per run (`async with`), shared by every game in flight, and
owns its retries: callers see either a `Generation` or a `BackendError`.
"""

from __future__ import annotations

import abc
import importlib
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = ()
    # A scheduling hint, not a sampling one: a server that schedules by priority (SGLang with
    # `--enable-priority-scheduling`) runs waiting requests of higher values first. A player sends its
    # game's depth, so on such a server a long game's next turn goes before the first turns of new
    # games. Backends without such a scheduler ignore it.
    priority: int | None = None


@dataclass(frozen=True)
class BackendOptions:
    """Everything a backend may need, straight from the command line."""

    base_urls: tuple[str, ...] = ()  # sglang / openai servers (several, or one router URL)
    model: str | None = None  # local model dir (local), tokenizer source, or served model name
    api_key_env: str = "OPENAI_API_KEY"  # openai: environment variable holding the key
    endpoint: str = "chat"  # openai: "chat" or "completions"
    timeout_s: float = 120.0  # per request
    max_retries: int = 5  # retries after the first attempt (connection errors, timeouts, 429, 5xx)
    retry_backoff_s: float = 0.5  # first retry delay, doubled each time (capped at 30 s)
    health_timeout_s: float = 300.0  # how long start() waits for /health
    unreachable_s: float = 10.0  # start() gives up early on a server that refuses connections this long
    down_after: int = 8  # refused connections in a row, every server among them, that mean all are gone
    # local: sequences per forward pass; llamacpp: games in flight (None: the backend's own default)
    max_batch: int | None = None
    # llamacpp: precision of the exported GGUF (gguf_export.DTYPES), or "auto" (llamacpp.native_weights)
    gguf_weights: str = "auto"
    device: str = "cpu"  # local: torch device
    seed: int | None = None  # local: sampling seed (batch n uses seed + n)


@dataclass(frozen=True)
class Generation:
    """What one call produced. `finish_reason` is "stop" (a stop token or eos) or "length"."""

    output_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int = 0
    retokenized: bool = False  # output_ids re-encoded from returned text (OpenAI-style servers): off-policy


class BackendError(RuntimeError):
    """A request that failed for good (after the backend's own retries)."""


class Backend(abc.ABC):
    """Generates continuations of token-id prompts. Constructed as `cls(options, tokenizer)`."""

    name: str = ""
    model: str = ""  # model name as reported by the server (or the local path)
    context_length: int | None = None
    max_concurrency: int = 1  # how many requests the backend wants in flight
    down: str | None = None  # why no request can succeed any more (every server gone): the run stops

    async def __aenter__(self) -> Backend:
        """Start; a start that fails (no server, no health) closes what it opened, since
        `__aexit__` never runs for a context that was not entered."""
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, wait for health, read server limits. Raise BackendError if unreachable."""

    async def close(self) -> None:
        """Release sessions, threads, servers."""

    @abc.abstractmethod
    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        """Continue `prompt_ids`. `session` names the game and seat; every request of one session
        should reach the same server so that its prefix cache is reused. `messages` is the same
        prompt as chat messages, for servers that only take chat (the OpenAI chat endpoint)."""


_REGISTRY: dict[str, type[Backend]] = {}
# name -> the module that registers it, imported only when that backend is used: `local` needs
# torch and transformers, the server backends need neither
MODULES = {"llamacpp": "llamacpp", "local": "local", "sglang": "sglang", "openai": "openai"}
IN_PROCESS = ("llamacpp", "local")  # backends that run the model here, from a local directory


def register(name: str):
    """Class decorator: make a backend available by name (`--backend NAME`)."""

    def wrap(cls: type[Backend]) -> type[Backend]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def backend_class(name: str) -> type[Backend]:
    if name not in MODULES:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(MODULES)}")
    importlib.import_module(f"{__package__}.{MODULES[name]}")  # registers it
    return _REGISTRY[name]


@dataclass
class BackendStats:
    """Counters a backend keeps for the run summary."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    errors: Counter = field(default_factory=Counter)  # kind of failed attempt -> count

    def add(self, gen: Generation) -> None:
        self.requests += 1
        self.prompt_tokens += gen.prompt_tokens
        self.cached_tokens += gen.cached_tokens
        self.output_tokens += len(gen.output_ids)
