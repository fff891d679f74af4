"""The embedded engine: a transformers model in this process (float32 on CPU by default), so the
whole tool runs with no server and no GPU.

It batches across games: every `generate` call queues its request, and one worker takes up to
`max_batch` queued requests with the same sampling settings, left-pads them into one
`model.generate` call (in a thread, so the event loop keeps the other games moving), then cuts
each row at its first stop id (kept, as a server would sample it) or at its own token budget.
Logprobs are those of the sampled ids under the processed (temperature, top-p) distribution.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from .. import models
from ..token_context import token_context
from .base import Backend, BackendError, BackendOptions, BackendStats, Generation, SamplingParams, register


@lru_cache(maxsize=2)
def load_model(path: str, device: str):
    """One copy of the weights per process, shared by every backend instance."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model.to(device).eval()  # type: ignore[arg-type]  # transformers types `to` as unbound


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future


MAX_BATCH = 16  # sequences per `model.generate` unless --max-batch says otherwise


@register("local")
class LocalBackend(Backend):
    def __init__(self, options: BackendOptions, tokenizer):
        self.options, self.tokenizer = options, tokenizer
        self.model = models.resolve(options.model)
        self.max_batch = options.max_batch or MAX_BATCH
        self.max_concurrency = self.max_batch
        self.stats = BackendStats()
        self.batches = 0  # model.generate calls so far
        self.largest_batch = 0  # most requests served by one call
        self._pending: deque[_Request] = deque()
        self._worker: asyncio.Task | None = None
        # set by close(): a `model.generate` running in its thread stops at its next token instead of
        # running to its budget (Ctrl-C took 99 s), since a thread cannot be cancelled
        self._closing = threading.Event()

    async def start(self) -> None:
        if self.options.device == "cpu":
            torch.set_num_threads(len(os.sched_getaffinity(0)))
        self._model = await asyncio.to_thread(load_model, self.model, self.options.device)
        self.context_length = self._model.config.max_position_embeddings
        self._wakeup = asyncio.Event()
        self._closing.clear()
        self._worker = asyncio.create_task(self._serve())

    async def close(self) -> None:
        self._closing.set()
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        while self._pending:
            _settle(self._pending.popleft().future, error=BackendError("the local backend was closed"))

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        if self._worker is None:
            raise RuntimeError("the local backend is not started: use `async with backend:`")
        request = _Request(list(prompt_ids), params, asyncio.get_running_loop().create_future())
        self._pending.append(request)
        self._wakeup.set()
        gen = await request.future
        self.stats.add(gen)
        return gen

    async def _serve(self) -> None:
        while True:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                await asyncio.sleep(0)  # let the other games that are ready queue their turns too
            batch = self._take_batch()
            try:
                results = await asyncio.to_thread(self._run, batch, self.batches)
            except Exception as err:  # a failed forward pass fails its requests, not the worker
                for request in batch:
                    _settle(request.future, error=BackendError(f"local generation failed: {err!r}"))
            else:
                for request, gen in zip(batch, results):
                    _settle(request.future, gen)
            self.batches += 1
            self.largest_batch = max(self.largest_batch, len(batch))

    def _take_batch(self) -> list[_Request]:
        """Up to `max_batch` queued requests that can share one `model.generate` call."""
        key = _batch_key(self._pending[0].params)
        batch: list[_Request] = []
        rest: deque[_Request] = deque()
        while self._pending:
            request = self._pending.popleft()
            (batch if len(batch) < self.max_batch and _batch_key(request.params) == key else rest).append(request)
        self._pending = rest
        return batch

    def _run(self, batch: list[_Request], batch_index: int) -> list[Generation]:
        params = batch[0].params
        stops = list(params.stop_token_ids) or [token_context(self.tokenizer).end_of_turn_id]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else stops[0]
        width = max(len(r.prompt_ids) for r in batch)
        input_ids = torch.tensor([[pad] * (width - len(r.prompt_ids)) + r.prompt_ids for r in batch])
        attention_mask = torch.tensor([[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in batch])
        sampling = (
            {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": None}
            if params.temperature > 0
            else {"do_sample": False}
        )
        if self.options.seed is not None:
            torch.manual_seed(self.options.seed + batch_index)
        device = self._model.device
        with torch.inference_mode():
            out = self._model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                max_new_tokens=max(r.params.max_new_tokens for r in batch),
                eos_token_id=stops,
                pad_token_id=pad,
                return_dict_in_generate=True,
                output_scores=True,
                stopping_criteria=StoppingCriteriaList([_UntilSet(self._closing)]),
                **sampling,
            )
            logprobs = self._model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        sampled = out.sequences[:, width:].tolist()
        results = []
        for request, ids, row_logprobs in zip(batch, sampled, logprobs.tolist()):
            budget = request.params.max_new_tokens
            end = next((i + 1 for i, token in enumerate(ids[:budget]) if token in stops), None)
            finish = "stop" if end is not None else "length"
            end = end or min(budget, len(ids))
            results.append(Generation(ids[:end], row_logprobs[:end], finish, len(request.prompt_ids)))
        return results


class _UntilSet(StoppingCriteria):
    """Stops every row of a generation once `event` is set."""

    def __init__(self, event: threading.Event):
        self.event = event

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


def _batch_key(params: SamplingParams) -> tuple:
    """Requests batch together when they sample the same way (`max_new_tokens` may differ)."""
    return params.temperature, params.top_p, params.stop_token_ids


def _settle(future: asyncio.Future, result=None, error: Exception | None = None) -> None:
    """Resolve a request unless its caller gave up on it (a cancelled game)."""
    if not future.done():
        future.set_exception(error) if error else future.set_result(result)
