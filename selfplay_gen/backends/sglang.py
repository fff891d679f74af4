"""SGLang's native API, token in and token out: `POST /generate` with `input_ids`, answered with
`output_ids` and per-token logprobs, so the ids a player keeps are exactly the ids sampled.

Several base URLs are several servers: each session (one seat of one game) always goes to the
same one, so its radix cache holds every earlier turn. An `sglang_router` URL is one base URL: the
router keeps a session on one worker by its prefix, and the games in flight follow the sum of its
workers' running-request limits, read from each worker it lists at `/workers`.

The end-of-turn token: when a turn ends on a stop token, SGLang may leave the matched id out of
`output_ids` (its detokenizer trims matched stops; we also send `no_stop_trim`). The player's
context must contain it, and the server did sample it, so it is appended: with its logprob when
`output_token_logprobs` has an entry for it, else with logprob 0.0.
"""

from __future__ import annotations

import asyncio

import aiohttp

from ..token_context import token_context
from .base import BackendError, Generation, SamplingParams, register
from .http import HttpBackend, field

DEFAULT_CONCURRENCY_PER_SERVER = 64  # when a server does not report its running-request limit
# Games in flight per request a server runs at once. A game has at most one request at the server, and
# between its turns it is on the client (the game's step, the token check, the next prompt): with as many
# games as batch slots, every game on the client is an empty slot. Twice as many keep a queue at the server
# that fills each slot as it frees; a game waiting there holds no KV beyond its cached prefix.
GAMES_PER_RUNNING_REQUEST = 2


def server_capacity(info: dict) -> int | None:
    """How many requests one server runs at once, from its `/get_server_info`."""
    states = info.get("internal_states")
    per_dp = states[0].get("effective_max_running_requests_per_dp") if states and isinstance(states[0], dict) else None
    if isinstance(per_dp, int) and per_dp > 0:
        return per_dp * max(1, info.get("dp_size") or 1)
    limit = info.get("max_running_requests")
    return limit if isinstance(limit, int) and limit > 0 else None


def router_workers(listing: dict) -> list[str]:
    """The worker URLs in an `sglang_router`'s `/workers` answer."""
    workers = listing.get("workers")
    return [w["url"] for w in workers or () if isinstance(w, dict) and isinstance(w.get("url"), str)]


@register("sglang")
class SGLangBackend(HttpBackend):
    capacity = 0  # requests the servers run at once, read from their /get_server_info

    async def start(self) -> None:
        await super().start()
        await asyncio.gather(*(self._wait_healthy(url) for url in self.base_urls))
        models, capacities = set(), []
        for url in self.base_urls:
            model_info = await self.request("GET", f"{url}/get_model_info")
            server_info = await self.request("GET", f"{url}/get_server_info")
            with self.redacted():
                models.add(field(model_info, "model_path", str, f"{url}/get_model_info"))
            capacities.append(await self._capacity(url, server_info))
            context = (
                server_info.get("context_length")
                or model_info.get("max_context_length")
                or model_info.get("context_length")
                or await self._max_model_len(url)
            )
            if isinstance(context, int):
                self.context_length = min(context, self.context_length or context)
        if len(models) > 1:
            raise BackendError(f"the SGLang servers serve different models: {sorted(models)}")
        self.model = models.pop()
        self.capacity = sum(capacities)  # requests the servers run at once
        self.max_concurrency = GAMES_PER_RUNNING_REQUEST * self.capacity

    async def _max_model_len(self, url: str) -> int | None:
        """The model's context length, as SGLang's OpenAI-compatible `/v1/models` states it: its
        `/get_server_info` names only a `--context-length` given at launch, and a turn whose prompt and
        `max_new_tokens` exceed the model's length is refused (HTTP 400) rather than shortened.
        None where the server (or a router in front of it) does not answer the route."""
        try:
            listing = await self.request("GET", f"{url}/v1/models")
        except BackendError:
            return None
        cards = listing.get("data")
        lengths = (
            [card.get("max_model_len") for card in cards if isinstance(card, dict)] if isinstance(cards, list) else []
        )
        return next((n for n in lengths if isinstance(n, int) and n > 0), None)

    async def _capacity(self, url: str, server_info: dict) -> int:
        """Requests the server at `url` runs at once. An `sglang_router`'s `/get_server_info`
        counts workers but names no limit: its capacity is the sum of its workers'."""
        if "workers_count" in server_info:
            workers = router_workers(await self.request("GET", f"{url}/workers"))
            infos = [await self.request("GET", f"{worker}/get_server_info") for worker in workers]
            if infos:
                return sum(server_capacity(info) or DEFAULT_CONCURRENCY_PER_SERVER for info in infos)
        return server_capacity(server_info) or DEFAULT_CONCURRENCY_PER_SERVER

    async def _wait_healthy(self, url: str) -> None:
        """Poll `/health` until it answers 200. A server that refuses connections for the first
        `unreachable_s` is taken to be absent (wrong URL, not started) rather than still loading."""
        assert self._client is not None, "start() opens the client first"
        loop = asyncio.get_running_loop()
        started, reached, problem = loop.time(), False, ""
        while True:
            try:
                async with self._client.get(f"{url}/health") as response:
                    status = response.status
                reached = True
                if status == 200:
                    return
                problem = f"HTTP {status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as err:
                problem = type(err).__name__
                if not reached and loop.time() - started >= self.options.unreachable_s:
                    raise BackendError(
                        f"cannot reach SGLang at {url} ({problem} for "
                        f"{self.options.unreachable_s:g} s): is the server running?"
                    ) from None
            if loop.time() - started >= self.options.health_timeout_s:
                raise BackendError(
                    f"SGLang at {url} not healthy after {self.options.health_timeout_s:g} s (last answer: {problem})"
                )
            await asyncio.sleep(min(1.0, self.options.retry_backoff_s))

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        url = f"{self.server_for(session)}/generate"
        request = {
            "input_ids": list(prompt_ids),
            "sampling_params": {
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_new_tokens": params.max_new_tokens,
                "stop_token_ids": list(params.stop_token_ids),
                "no_stop_trim": True,
            },
            "return_logprob": True,
        }
        if params.priority is not None:  # read by a server with --enable-priority-scheduling, else ignored
            request["priority"] = params.priority
        body = await self.request("POST", url, request)
        default_stop = token_context(self.tokenizer).end_of_turn_id if self.tokenizer is not None else None
        with self.redacted():
            gen = parse_generation(body, params, url, default_stop)
        self.stats.add(gen)
        return gen


def parse_generation(body: dict, params: SamplingParams, where: str, default_stop: int | None) -> Generation:
    """A `/generate` response as a Generation, every field checked (errors name the field)."""
    output_ids = field(body, "output_ids", list, where)
    triples = field(body, "meta_info.output_token_logprobs", list, where)
    finish = field(body, "meta_info.finish_reason", dict, where)
    kind = field(finish, "type", str, f"{where} (meta_info.finish_reason)")
    prompt_tokens = field(body, "meta_info.prompt_tokens", int, where)
    cached_tokens = field(body, "meta_info.cached_tokens", int, where)
    if not all(isinstance(i, int) for i in output_ids):
        raise BackendError(f"malformed response from {where}: field 'output_ids' holds non-integers")
    if not all(
        isinstance(t, list) and len(t) >= 2 and isinstance(t[0], (int, float)) and isinstance(t[1], int)
        for t in triples
    ):
        raise BackendError(
            f"malformed response from {where}: field 'meta_info.output_token_logprobs' "
            "must hold [logprob, token_id, text] entries"
        )
    if kind not in ("stop", "length"):
        raise BackendError(f"{where} ended the request with finish_reason {finish}")
    logprobs = [float(t[0]) for t in triples[: len(output_ids)]]
    matched = finish.get("matched")
    if kind == "stop" and not (output_ids and output_ids[-1] in {matched, default_stop, *params.stop_token_ids}):
        extra = triples[len(output_ids)] if len(triples) > len(output_ids) else None
        stop_id = (
            matched if isinstance(matched, int) else extra[1] if extra else (params.stop_token_ids or [default_stop])[0]
        )
        if stop_id is None:
            raise BackendError(
                f"malformed response from {where}: a 'stop' finish without the stop id "
                "(field 'meta_info.finish_reason.matched')"
            )
        output_ids = [*output_ids, stop_id]
        logprobs.append(float(extra[0]) if extra and extra[1] == stop_id else 0.0)
    if len(logprobs) != len(output_ids):
        raise BackendError(
            f"malformed response from {where}: field 'meta_info.output_token_logprobs' has "
            f"{len(triples)} entries for {len(output_ids)} output ids"
        )
    return Generation(output_ids, logprobs, kind, prompt_tokens, cached_tokens)
