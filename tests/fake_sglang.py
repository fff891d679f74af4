"""A stand-in SGLang server for tests: the native API's routes and shapes (`/generate`,
`/health`, `/get_model_info`, `/get_server_info`, `/update_weights_from_disk`,
`/release_memory_occupation`, `/resume_memory_occupation`), answered by the
real embedded model through the local backend, so games played against it make real moves. Knobs
inject the faults a real server shows: errors, stalls, death, malformed bodies, a slow start.
Run as a script it takes `python -m sglang.launch_server`'s place (`--model-path`, `--port`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import socket
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from aiohttp import web

from selfplay_gen.backends.base import BackendOptions, SamplingParams
from selfplay_gen.backends.local import LocalBackend
from selfplay_gen.token_context import common_prefix


def free_port(offsets: Iterable[int] = (0,)) -> int:
    """A port P with P + offset free now for every offset (DP workers sit at PORT + 1000·i, a partner
    slot at PORT + 1). It is drawn below the kernel's ephemeral range, so a client connection made
    between this check and a server's bind cannot take it, and below the router's default metrics
    port (29000)."""
    offsets = sorted(set(offsets))
    while True:
        port = random.randrange(10000, 28000 - offsets[-1])
        with contextlib.ExitStack() as stack:
            try:
                for offset in offsets:
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port + offset))
            except OSError:
                continue
            return port


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """`app` served on a free local port for the block: yields its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


class FakeSGLang:
    """`async with FakeSGLang(tokenizer, model_dir) as fake:` serves at `fake.url`."""

    def __init__(
        self,
        tokenizer,
        model_dir: str,
        max_running_requests: int = 8,
        context_length: int | None = None,  # the model's, stated at /v1/models
        seed: int = 0,
        port: int | None = None,
        memory_saver: bool = False,
        host: str = "127.0.0.1",
    ):
        self.tokenizer, self.model_dir, self.seed, self.port, self.host = tokenizer, model_dir, seed, port, host
        # --enable-memory-saver: /release_memory_occupation frees the weights (they must be loaded
        # again after /resume_memory_occupation); without it the server answers and keeps them
        self.memory_saver = memory_saver
        self.released = False
        self.weights_lost = False
        self.engine = self._engine(model_dir, max_running_requests)
        self.max_running_requests, self.context_length = max_running_requests, context_length
        # fault injection
        self.fail_next: list[int] = []  # HTTP statuses for the next /generate requests
        self.stall_next: list[float] = []  # seconds the next /generate requests hang (then answer 504)
        self.malformed_next = 0  # next /generate answers lack `output_ids`
        self.unhealthy_polls = 0  # /health answers 503 this many times first
        self.die_after: int | None = None  # stop serving after this many answered /generate requests
        self.trim_stop = False  # leave the matched stop id out of output_ids (SGLang's trimming)
        # what it saw
        self.health_polls = 0
        self.generate_requests = 0
        self.weight_updates = 0
        self.flushes = 0
        self.answered = 0
        self.in_flight = self.peak_in_flight = 0  # /generate requests being answered: now, and at most
        self.prompts: list[list[int]] = []  # input_ids of every answered /generate
        self.priorities: list[int | None] = []  # the `priority` of every answered /generate (None: not sent)
        self._contexts: list[list[int]] = []  # prompt + output of every answer: the "radix cache"
        self._dead = False

    async def __aenter__(self) -> FakeSGLang:
        await self.engine.start()
        app = web.Application()
        app.add_routes(
            [
                web.get("/health", self._health),
                web.get("/get_model_info", self._model_info),
                web.get("/get_server_info", self._server_info),
                web.get("/v1/models", self._models),
                web.post("/generate", self._generate),
                web.post("/flush_cache", self._flush_cache),
                web.post("/update_weights_from_disk", self._update_weights_from_disk),
                web.post("/release_memory_occupation", self._release_memory),
                web.post("/resume_memory_occupation", self._resume_memory),
            ]
        )
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        port = self.port or free_port()
        self._site = web.TCPSite(self._runner, self.host, port)
        await self._site.start()
        self.url = f"http://{self.host}:{port}"
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()
        await self.engine.close()

    def _engine(self, model_dir: str, max_batch: int) -> LocalBackend:
        return LocalBackend(BackendOptions(model=model_dir, max_batch=max_batch, seed=self.seed), self.tokenizer)

    async def _health(self, request: web.Request) -> web.Response:
        self.health_polls += 1
        return web.Response(status=503 if self.health_polls <= self.unhealthy_polls else 200)

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"model_path": self.model_dir, "tokenizer_path": self.model_dir, "is_generation": True}
        )

    async def _models(self, request: web.Request) -> web.Response:
        """The OpenAI-compatible model list, where SGLang states the model's context length."""
        card = {"id": self.model_dir, "object": "model", "root": self.model_dir, "max_model_len": self.context_length}
        return web.json_response({"object": "list", "data": [card]})

    async def _server_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "context_length": None,  # the launch argument, which SGLang reports as given (none here)
                "max_running_requests": None,
                "dp_size": 1,
                "enable_memory_saver": self.memory_saver,
                "internal_states": [{"effective_max_running_requests_per_dp": self.max_running_requests}],
            }
        )

    async def _update_weights_from_disk(self, request: web.Request) -> web.Response:
        """SGLang's in-place load of another checkpoint: 200 and success true, or 400 and success false
        with the reason, and the model keeps serving; after a load /get_model_info names the new path
        and the prefix cache is empty."""
        self.weight_updates += 1
        path = (await request.json())["model_path"]
        if self.released:  # SGLang would write the weights into unmapped memory
            return web.json_response({"success": False, "message": "memory released"}, status=400)
        engine = self._engine(path, self.max_running_requests)
        try:
            await engine.start()
        except Exception as err:  # whatever loading raises, SGLang answers it as a failed update
            answer = {"success": False, "message": f"Failed to update weights: {err}.", "num_paused_requests": 0}
            return web.json_response(answer, status=400)
        old, self.engine, self.model_dir = self.engine, engine, path
        self.weights_lost = False
        await old.close()
        self._contexts.clear()
        answer = {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        return web.json_response(answer)

    async def _release_memory(self, request: web.Request) -> web.Response:
        """SGLang's release of the GPU memory (answer: `null`); with the memory saver the weights are
        gone until a load after the resume, without it nothing changes."""
        if self.memory_saver:
            self.released = self.weights_lost = True
            self._contexts.clear()
        return web.json_response(None)

    async def _resume_memory(self, request: web.Request) -> web.Response:
        if not self.released:  # SGLang's scheduler removes tags it never released: a KeyError
            return web.json_response({"error": {"message": "'kv_cache'"}}, status=400)
        self.released = False
        return web.json_response(None)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        self.generate_requests += 1
        if self.released or self.weights_lost:  # SGLang would compute on freed or stale memory
            return web.json_response({"error": {"message": "no weights on the GPU"}}, status=500)
        if self._dead:  # gone: drop the connection without an answer
            request.transport.close()
            return web.Response()
        if self.fail_next:
            return web.json_response({"error": "injected failure"}, status=self.fail_next.pop(0))
        if self.stall_next:
            await asyncio.sleep(self.stall_next.pop(0))
            return web.json_response({"error": "stalled"}, status=504)
        body = await request.json()
        sampling = body["sampling_params"]
        prompt = body["input_ids"]
        priority = body.get("priority")
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            message = f"priority must be an integer, not {priority!r}"
            return web.json_response({"error": {"message": message}}, status=400)
        # SGLang's length checks (tokenizer_manager), with its messages: a request longer than the model's
        # context is refused, not shortened (the server runs without --allow-auto-truncate)
        limit, wanted = self.context_length, len(prompt) + sampling["max_new_tokens"]
        if limit is not None and len(prompt) >= limit:
            message = f"The input ({len(prompt)} tokens) is longer than the model's context length ({limit} tokens)."
            return web.json_response({"error": {"message": message}}, status=400)
        if limit is not None and wanted > limit:
            message = f"Requested token count exceeds the model's maximum context length of {limit} tokens."
            return web.json_response({"error": {"message": message}}, status=400)
        params = SamplingParams(
            sampling["temperature"],
            sampling["top_p"],
            sampling["max_new_tokens"],
            tuple(sampling.get("stop_token_ids") or ()),
        )
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            gen = await self.engine.generate(prompt, params, session="fake")
        finally:
            self.in_flight -= 1
        cached = max((common_prefix(prompt, seen) for seen in self._contexts), default=0)
        self._contexts.append(prompt + gen.output_ids)
        self.prompts.append(prompt)
        self.priorities.append(priority)
        output_ids = list(gen.output_ids)
        if gen.finish_reason == "stop":
            finish = {"type": "stop", "matched": output_ids[-1]}
            if self.trim_stop:
                output_ids = output_ids[:-1]
        else:
            finish = {"type": "length", "length": len(output_ids)}
        answer = {
            "text": self.tokenizer.decode(output_ids),
            "output_ids": output_ids,
            "meta_info": {
                "id": f"req-{self.generate_requests}",
                "finish_reason": finish,
                "prompt_tokens": len(prompt),
                "completion_tokens": len(gen.output_ids),
                "cached_tokens": cached,
                "output_token_logprobs": [[lp, t, None] for lp, t in zip(gen.logprobs, gen.output_ids)],
            },
        }
        if self.malformed_next:
            self.malformed_next -= 1
            del answer["output_ids"]
        self.answered += 1
        if self.die_after is not None and self.answered >= self.die_after:
            self.die()
        return web.json_response(answer)

    async def _flush_cache(self, request: web.Request) -> web.Response:
        """SGLang empties its radix cache unless requests are running or waiting (then 400)."""
        if self.in_flight:
            return web.Response(status=400, text="Flush cache failed: requests are running.\n")
        self._contexts.clear()
        self.flushes += 1
        return web.Response(text="Cache flushed.\n")

    def die(self) -> None:
        """Stop serving, as a crashed server does: requests in flight are dropped, new ones refused."""
        if not self._dead:
            self._dead = True
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._site.stop()))


def launcher(directory: Path) -> str:
    """An executable for ServerSettings.python: it runs this stand-in where `python -m
    sglang.launch_server` would run, and any other module (sglang_router's) with this Python."""
    python = directory / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$2" = sglang.launch_server ]; then shift 2; exec {sys.executable} {Path(__file__)} "$@"; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return str(python)


async def _serve_until_killed(model_dir: str, host: str, port: int, memory_saver: bool) -> None:
    from selfplay_gen import models

    async with FakeSGLang(models.load_tokenizer(), model_dir, port=port, memory_saver=memory_saver, host=host):
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--enable-memory-saver", action="store_true")
    known, _ = parser.parse_known_args()  # SGLang's other arguments are accepted and ignored
    logging.basicConfig(level=logging.INFO)  # a line for each request in the log, as SGLang's server writes
    asyncio.run(_serve_until_killed(known.model_path, known.host, known.port, known.enable_memory_saver))
