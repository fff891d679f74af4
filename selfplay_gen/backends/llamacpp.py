"""The embedded model on CPU through llama.cpp (`llama-cpp-python`): what the field runs GGUF models
with on CPU, several times the speed of transformers on the same cores.

Token ids in, token ids out: prompts are fed to llama.cpp as ids (its tokenizer is never used) and
every sampled id comes back verbatim, with its logprob, so the players' contexts and the records
stay token-exact. The model is a GGUF holding the very weights the `local` backend plays
(`gguf_export`: the embedded model with its warm-start adapter folded in, float32), or on request
(`--gguf-weights`) those weights quantized by llama.cpp: their logits differ from the float32
ones, while each record still holds the ids sampled and the logprobs of the distribution they
were drawn from.

One llama.cpp context serves every game in flight (continuous batching). Each seat of a game
(`session`) keeps a sequence of the context's KV cache, so a new turn only feeds the ids that
follow what the cache already holds (the partner's reply and the template's turn markers); a
first prompt that another sequence already holds (the same seat in another game of the same
instance) is copied from its cache instead of read. Every
step decodes one token for each sequence that is sampling and prompt chunks for those still
reading their prompt, all in one `llama_decode`; a turn that ends leaves at once and a queued
one takes its place. Sampling is done here from the logits (temperature, then top-p, as the
`local` backend and SGLang do), so the logprob of each id is that of the distribution it was
drawn from.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .. import gguf_export, models
from ..token_context import common_prefix, token_context
from .base import Backend, BackendError, BackendOptions, BackendStats, Generation, SamplingParams, register
from .llama_binding import import_llama_cpp

CONTEXT_PER_SEQUENCE = 4096  # tokens of KV cache per seat: the longest shipped game's context fits
SHARE_AT_LEAST = 64  # prompt ids another sequence must hold beyond a seat's own to copy its cache
# Games in flight unless --max-batch says otherwise. A step's cost grows slower than its count of
# sequences, so 32 sample more ids per second than 16 (bench/results/cpu_engines/llamacpp_settings.md),
# for more KV cache.
GAMES_IN_FLIGHT = 32
TOKENS_PER_STEP = 512  # ids one llama_decode takes at most (prompt chunks plus one per sampling turn)
# The context a seat samples at, halfway through a typical turn of the default game: prompts of
# 560 to 1,400 ids (median 760) and replies of about 250 in `selfplay-gen --num-games 16`
TYPICAL_CONTEXT = 900
# What a game of the embedded model costs, for the estimate printed before a run: ids read and ids
# sampled per game, both seats together, at the defaults (a seat's first prompt is copied from a twin
# game's cache), as `selfplay-gen --num-games 200` played them (bench/results/cpu_engines/run200.md)
TYPICAL_GAME = {"prompt_tokens": 155, "output_tokens": 633}
# A run also has its start, turns that change hands, a tail of stragglers with few games in flight and
# the client's own work on the same cores, which the short measurement does not: the whole of
# `selfplay-gen --num-games 200` over what the measurement at its start predicted (bench/results/cpu_engines/run200.md)
RUN_OVER_MEASURED = 1.22


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    session: str
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    slot: int = -1
    cached: int = 0  # prompt ids the slot's cache already held
    todo: list[int] = field(default_factory=list)  # ids still to feed (prompt rest, or the last sampled id)
    output: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def settle(self, result=None, error: Exception | None = None) -> None:
        self.loop.call_soon_threadsafe(_settle, self.future, result, error)


@dataclass
class _Slot:
    """One sequence of the KV cache: the ids it holds, and which seat they belong to."""

    tokens: list[int] = field(default_factory=list)
    session: str | None = None
    busy: bool = False


class Engine:
    """A llama.cpp model and context that decodes many sequences at once. Not thread-safe: one
    thread calls `serve` (the backend's worker); others only `submit`."""

    def __init__(self, gguf_path: str, *, games: int, threads: int, seed: int | None = None):
        # sequences 0 .. games-1 sample (one seat of each game at a time); the games + 1 others park the
        # caches of the seats that wait for their turn, so one is always free to park into
        self.games = games
        sequences = 2 * games + 1
        self.llama_cpp = llama_cpp = import_llama_cpp()
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        self._model = llama_cpp.llama_model_load_from_file(gguf_path.encode(), model_params)
        if not self._model:
            raise BackendError(f"llama.cpp could not load {gguf_path}")
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self._model))
        self.context_per_sequence = min(CONTEXT_PER_SEQUENCE, llama_cpp.llama_model_n_ctx_train(self._model))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.context_per_sequence * sequences
        params.n_seq_max = sequences
        params.n_ubatch = TOKENS_PER_STEP
        params.n_batch = TOKENS_PER_STEP + sequences  # room for a filler id per idle sequence (`_step`)
        params.n_threads = params.n_threads_batch = threads
        # a stream of its own per sequence: attention then spans its own ids, not every sequence's
        params.kv_unified = False
        # llama.cpp's CPU flash-attention kernel, with every sequence sampling in one micro-batch (`_step`):
        # at 2 threads and a game's context it samples 1.0-1.2 times and reads 1.1-1.5 times the ids/s of
        # plain attention (bench/results/cpu_engines/llamacpp_settings_bf16.md)
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            raise BackendError(f"llama.cpp could not make a context of {params.n_ctx} tokens for {gguf_path}")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(TOKENS_PER_STEP + sequences, 0, 1)
        self.threads = threads
        self.slots = [_Slot() for _ in range(sequences)]
        self._idle: OrderedDict[int, None] = OrderedDict((i, None) for i in range(sequences))  # least recent first
        self._inbox: queue.Queue[_Request] = queue.Queue()
        self._waiting: list[_Request] = []
        self._active: list[_Request] = []
        self._rng = np.random.default_rng(seed)
        self.closing = threading.Event()
        self._lock = threading.Lock()  # held by whatever fills the batch and calls llama_decode
        self.steps = 0  # llama_decode calls
        self.busiest_step = 0  # most sequences in one llama_decode
        self.sampled = 0  # ids sampled, over all steps: sampled / steps is the batch a run reached
        self.fillers = 0  # filler ids fed to idle sequences to keep a step one micro-batch
        self.parked = 0  # caches moved out of a sampling sequence for another seat's turn

    def close(self) -> None:
        if self._ctx:
            self.llama_cpp.llama_batch_free(self._batch)
            self.llama_cpp.llama_free(self._ctx)
            self.llama_cpp.llama_model_free(self._model)
            self._ctx = self._model = None

    def measure(self, sequences: int, seconds: float = 2.0) -> dict:
        """Tokens/s of this engine now, on this machine, at a game's context length: a prompt of
        TYPICAL_CONTEXT ids read in steps of TOKENS_PER_STEP, then `sequences` sequences holding
        that context (copied from the reader's cache) sampled together for `seconds` at most, after
        one untimed step of each shape (the first call of a shape builds its compute graph).
        Attention over the context costs as much as the weights here, so a measurement at short
        contexts would promise twice the speed a game gets. Leaves the cache as it found it."""
        with self._lock:
            free = [i for i in self._idle if not self.slots[i].tokens][:sequences]
            reader = free[0]
            self._fill([(reader, [0])])  # warm-up, untimed
            started = time.perf_counter()
            for start in range(1, TYPICAL_CONTEXT, TOKENS_PER_STEP):
                self._fill([(reader, list(range(start, min(TYPICAL_CONTEXT, start + TOKENS_PER_STEP))))])
            prefill_s = time.perf_counter() - started
            for seq in free[1:]:
                self.llama_cpp.llama_memory_seq_cp(self._memory, reader, seq, -1, -1)
            self._fill([(seq, [TYPICAL_CONTEXT]) for seq in free])  # warm-up, untimed
            steps, started = 0, time.perf_counter()
            while steps < 32 and time.perf_counter() - started < seconds:
                steps += 1
                self._fill([(seq, [TYPICAL_CONTEXT + steps]) for seq in free])
            decode_s = time.perf_counter() - started
            for seq in free:
                self.llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)
        return {
            "prompt_tokens_per_s": (TYPICAL_CONTEXT - 1) / prefill_s,
            "output_tokens_per_s": len(free) * steps / decode_s,
        }

    def _fill(self, rows: list[tuple[int, list[int]]]) -> None:
        """Decode, for `measure`, token 1 at the given positions of each sequence (logits of the last)."""
        batch, at = self._batch, 0
        for seq, positions in rows:
            for k, pos in enumerate(positions):
                batch.token[at], batch.pos[at], batch.n_seq_id[at], batch.seq_id[at][0] = 1, pos, 1, seq
                batch.logits[at] = k == len(positions) - 1
                at += 1
        batch.n_tokens = at
        self.llama_cpp.llama_decode(self._ctx, batch)

    def submit(self, request: _Request) -> None:
        self._inbox.put(request)

    def serve(self) -> None:
        """Decode until `closing` is set; then fail whatever is still asked."""
        try:
            while not self.closing.is_set():
                self._admit(block=not self._active)
                if self._active:
                    with self._lock:
                        self._step()
        finally:
            for request in [*self._active, *self._waiting, *_drain(self._inbox)]:
                request.settle(error=BackendError("the llamacpp backend was closed"))

    def _admit(self, block: bool) -> None:
        """Give queued requests a sequence each: their seat's own when free, else the one idle longest."""
        try:
            if block and not self._waiting:
                self._waiting.append(self._inbox.get(timeout=0.2))
            self._waiting.extend(_drain(self._inbox))
        except queue.Empty:
            return
        still = []
        with self._lock:
            for request in self._waiting:
                if request.future.done():  # its game was cancelled
                    continue
                if self._reading_the_same(request):
                    still.append(request)  # it copies that prompt from the cache once it is read
                    continue
                slot = self._sampling_slot(request)
                if slot is None:
                    still.append(request)
                    continue
                self._start(request, slot)
        self._waiting = still

    def _sampling_slot(self, request: _Request) -> int | None:
        """An idle sequence among the first `games` for `request`: its seat's own, else an empty one, else
        the one idle longest, whose seat's cache moves to a parking sequence first. The sampling sequences
        so stay together at the front, and a step needs filler ids (`_step`) only for the few gaps; a
        filler costs as much as a sampled id, and sampling seats spread over every sequence would need
        about one each (bench/results/cpu_engines/notes.md)."""
        idle = [i for i in self._idle if i < self.games]  # least recently used first
        if not idle:
            return None
        slot = next((i for i in idle if self.slots[i].session == request.session), None)
        if slot is None:
            slot = next((i for i in idle if not self.slots[i].tokens), idle[0])
        if self.slots[slot].tokens and self.slots[slot].session != request.session:
            self._park(slot)
        return slot

    def _park(self, slot: int) -> None:
        """Copy `slot`'s cache to the parking sequence idle longest (parking sequences are never busy: at
        most `games` requests sample at once), so that its seat's next turn finds it there."""
        target = next(i for i in self._idle if i >= self.games)
        self.llama_cpp.llama_memory_seq_cp(self._memory, slot, target, -1, -1)
        parked, held = self.slots[target], self.slots[slot]
        parked.tokens, parked.session = list(held.tokens), held.session
        self._idle.move_to_end(target)
        self.parked += 1

    def _reading_the_same(self, request: _Request) -> bool:
        """Whether a sequence is reading a prompt that shares more of this one than any cache holds."""
        prompt = request.prompt_ids
        reading = [r for r in self._active if not r.output and len(r.todo) > 1]
        if not reading:
            return False
        cached = max(common_prefix(slot.tokens, prompt) for slot in self.slots)
        return any(common_prefix(r.prompt_ids, prompt) > cached + SHARE_AT_LEAST for r in reading)

    def _start(self, request: _Request, slot: int) -> None:
        del self._idle[slot]
        held = self.slots[slot]
        held.busy, held.session = True, request.session
        prompt = request.prompt_ids
        keep = common_prefix(held.tokens, prompt)
        donor, shared = max(
            ((i, common_prefix(other.tokens, prompt)) for i, other in enumerate(self.slots) if i != slot),
            key=lambda pair: pair[1],
            default=(None, 0),
        )
        if donor is not None and shared > keep + SHARE_AT_LEAST:
            # another sequence holds more of this prompt (the same seat of another game of the
            # instance): copy its cache rather than read the prompt again
            self.llama_cpp.llama_memory_seq_cp(self._memory, donor, slot, -1, -1)
            held.tokens = list(self.slots[donor].tokens)
            keep = shared
        keep = min(keep, len(prompt) - 1)  # the last prompt id is fed again: its logits start the reply
        if keep < len(held.tokens):
            self.llama_cpp.llama_memory_seq_rm(self._memory, slot, keep, -1)
            del held.tokens[keep:]
        request.slot, request.cached, request.todo = slot, keep, prompt[keep:]
        self._active.append(request)

    def _release(self, request: _Request) -> None:
        self.slots[request.slot].busy = False
        self._idle[request.slot] = None
        self._active.remove(request)

    def _step(self) -> None:
        """One llama_decode: a token per sampling sequence, then prompt chunks up to TOKENS_PER_STEP."""
        for request in [r for r in self._active if r.future.done()]:  # cancelled games
            self._release(request)
        plan: list[tuple[_Request, int]] = []  # (request, ids fed this step)
        room = TOKENS_PER_STEP
        for request in sorted(self._active, key=lambda r: len(r.todo)):  # sampling ones (1 id) first
            if room == 0:
                break
            n = min(len(request.todo), room)
            plan.append((request, n))
            room -= n
        if not plan:
            return
        # With a KV stream per sequence, llama.cpp puts into one micro-batch (one pass over the
        # weights) only sequences whose ids follow each other in the batch: 3, 4, 5. So the batch
        # goes in sequence order, and each idle sequence between two fed ones gets a filler id
        # (no logits; removed right after) rather than splitting the step into one pass per run.
        plan.sort(key=lambda item: item[0].slot)
        fed = {request.slot for request, _ in plan}
        fillers = [seq for seq in range(plan[0][0].slot, plan[-1][0].slot) if seq not in fed]
        batch, at = self._batch, 0
        ends = []
        rows: list[tuple[int, _Request | None, int]] = [(r.slot, r, n) for r, n in plan]
        rows = sorted(rows + [(seq, None, 1) for seq in fillers], key=lambda row: row[0])
        for seq, owner, n in rows:
            held = self.slots[seq]
            ids = owner.todo[:n] if owner is not None else [0]
            for k, token in enumerate(ids):
                batch.token[at] = token
                batch.pos[at] = len(held.tokens) + k
                batch.n_seq_id[at] = 1
                batch.seq_id[at][0] = seq
                batch.logits[at] = owner is not None and n == len(owner.todo) and k == n - 1
                at += 1
            if owner is not None:
                ends.append(at - 1)
        batch.n_tokens = at
        status = self.llama_cpp.llama_decode(self._ctx, batch)
        for seq in fillers:
            self.llama_cpp.llama_memory_seq_rm(self._memory, seq, len(self.slots[seq].tokens), -1)
        self.fillers += len(fillers)
        if status != 0:  # what the failed call left in these sequences is unknown: they start over
            for request, _ in plan:
                self.llama_cpp.llama_memory_seq_rm(self._memory, request.slot, -1, -1)
                self.slots[request.slot].tokens.clear()
                self._release(request)
                request.settle(error=BackendError(f"llama_decode failed (status {status})"))
            return
        self.steps += 1
        self.busiest_step = max(self.busiest_step, len(plan))
        for (request, n), end in zip(plan, ends):
            held = self.slots[request.slot]
            held.tokens.extend(request.todo[:n])
            request.todo = request.todo[n:]
            if request.todo:
                continue  # more of its prompt to read
            logits = np.ctypeslib.as_array(self.llama_cpp.llama_get_logits_ith(self._ctx, end), shape=(self.n_vocab,))
            token, logprob = sample(logits, request.params, self._rng)
            self.sampled += 1
            request.output.append(token)
            request.logprobs.append(logprob)
            stops = request.params.stop_token_ids
            if token in stops or len(request.output) >= request.params.max_new_tokens:
                self._release(request)
                finish = "stop" if token in stops else "length"
                gen = Generation(request.output, request.logprobs, finish, len(request.prompt_ids), request.cached)
                request.settle(gen)
            else:
                request.todo = [token]


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> tuple[int, float]:
    """An id drawn from `logits` under temperature and top-p (greedy at temperature 0), and its
    logprob under the distribution it was drawn from (that of the processed logits)."""
    scores = logits.astype(np.float64)
    if params.temperature == 0:
        token = int(np.argmax(scores))
        return token, float(scores[token] - _logsumexp(scores))
    scores = scores / params.temperature
    logp = scores - _logsumexp(scores)
    if params.top_p < 1.0:
        order = np.argsort(-logp, kind="stable")
        cumulative = np.cumsum(np.exp(logp[order]))
        # the smallest set of most likely ids holding top_p of the mass (at least one)
        cut = int(np.searchsorted(cumulative, params.top_p)) + 1
        kept = order[:cut]
        logp_kept = logp[kept] - _logsumexp(logp[kept])
        choice = int(rng.choice(len(kept), p=np.exp(logp_kept)))
        return int(kept[choice]), float(logp_kept[choice])
    probs = np.exp(logp)
    token = int(rng.choice(len(probs), p=probs / probs.sum()))
    return token, float(logp[token])


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    return top + float(np.log(np.sum(np.exp(x - top))))


def _drain(inbox: queue.Queue) -> list:
    items = []
    while True:
        try:
            items.append(inbox.get_nowait())
        except queue.Empty:
            return items


def _settle(future: asyncio.Future, result=None, error: Exception | None = None) -> None:
    """Resolve a request unless its caller gave up on it (a cancelled game)."""
    if not future.done():
        future.set_exception(error) if error else future.set_result(result)


def native_weights() -> str:
    """The precision `--gguf-weights auto` plays: bf16 where llama.cpp's CPU build computes in it
    natively (AVX512_BF16: 1.2-1.4 times the sampled ids/s of float32 at 32 games in flight and a
    game's context, with the model's own training precision; bench/results/cpu_engines/), float32
    elsewhere, where bf16 would be converted on the fly."""
    llama_cpp = import_llama_cpp()
    llama_cpp.llama_backend_init()
    features = llama_cpp.llama_print_system_info().decode()
    return "bf16" if "AVX512_BF16 = 1" in features else "f32"


@register("llamacpp")
class LlamaCppBackend(Backend):
    """`max_batch` games in flight (default GAMES_IN_FLIGHT), on every core this process may use: a KV
    sequence for each game's seat whose turn it is, and as many again for the seats that wait."""

    def __init__(self, options: BackendOptions, tokenizer):
        self.options, self.tokenizer = options, tokenizer
        gguf = (options.model or "").endswith(".gguf")
        self.model = options.model if gguf else models.resolve(options.model)  # type: ignore[assignment]
        self.max_concurrency = options.max_batch or GAMES_IN_FLIGHT  # games in flight
        self.threads = len(os.sched_getaffinity(0))
        self.stats = BackendStats()
        self.engine: Engine | None = None
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        import_llama_cpp()  # the missing package is said before a model is exported
        weights = self.options.gguf_weights if self.options.gguf_weights != "auto" else native_weights()
        self.gguf = str(await asyncio.to_thread(gguf_export.gguf_for, self.options.model, weights))
        self.engine = await asyncio.to_thread(
            Engine, self.gguf, games=self.max_concurrency, threads=self.threads, seed=self.options.seed
        )
        self.context_length = self.engine.context_per_sequence
        self._thread = threading.Thread(target=self.engine.serve, name="llamacpp", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        if self.engine is None:
            return
        self.engine.closing.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        self.engine.close()
        self.engine = None

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        if self.engine is None:
            raise RuntimeError("the llamacpp backend is not started: use `async with backend:`")
        if not params.stop_token_ids and self.tokenizer is not None:
            params = SamplingParams(
                params.temperature, params.top_p, params.max_new_tokens, (token_context(self.tokenizer).end_of_turn_id,)
            )
        if len(prompt_ids) + params.max_new_tokens > self.engine.context_per_sequence:
            raise BackendError(
                f"a prompt of {len(prompt_ids)} tokens and {params.max_new_tokens} new ones pass the "
                f"{self.engine.context_per_sequence} tokens a sequence holds"
            )
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_ids), params, session, loop.create_future(), loop)
        self.engine.submit(request)
        gen = await request.future
        self.stats.add(gen)
        return gen

    def estimate(self, games: int) -> str:
        """What `games` games of a typical length will take here, from a short measurement."""
        assert self.engine is not None
        # a run's steps sample nearly every game in flight (the seats whose turn it is sit together: `_sampling_slot`)
        speed = self.engine.measure(self.max_concurrency)
        per_game = (
            TYPICAL_GAME["prompt_tokens"] / speed["prompt_tokens_per_s"]
            + TYPICAL_GAME["output_tokens"] / speed["output_tokens_per_s"]
        )
        seconds = RUN_OVER_MEASURED * games * per_game
        return (
            f"playing {games} games with {os.path.basename(self.gguf)} on CPU (llama.cpp, {self.threads} threads, "
            f"{self.max_concurrency} games at once): about {max(1, round(seconds / 60))} minutes "
            f"({speed['output_tokens_per_s']:.0f} tokens/s sampled, {speed['prompt_tokens_per_s']:.0f} read)"
        )
