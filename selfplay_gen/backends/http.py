"""What the server backends share: one aiohttp session per run, each session pinned to one server,
and the one place where requests are retried.

aiohttp, not httpx: with httpx 0.28 / httpcore 1.0.9, requests that find their connections idle and
kept alive (every turn after a game's first) went out about 19 at a time out of 100 in flight, 16x
slower than aiohttp on the same server (`bench/http_pool.py`, `bench/results/http_pool.json`).

Retried (with exponential backoff, jittered so that many games do not retry in step, at most
`options.max_retries` times): connection errors, timeouts, 429 and 5xx, i.e. what a busy or
restarting server answers. Anything else (another 4xx, a body that is not JSON or not decodable, a
missing field) is a `BackendError` at once: trying again would get the same answer. Error texts
quote the server, which can echo a request's headers: the values of `headers()` (an API key) are
replaced by "[redacted]" before any text leaves this module.

Health is shared by every request: when `options.down_after` connections in a row were refused,
with every server among them and no answer from any in between, the servers are taken to be gone:
`down` says so, and every request fails at once instead of retrying (the runner then stops). A
connection that this machine could not open (out of ports or file descriptors: `CLIENT_LIMITS`) says
nothing about the servers: it is retried like a busy server's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import random
import zlib
from collections.abc import Iterator

import aiohttp
import orjson

from .base import Backend, BackendError, BackendOptions, BackendStats

MAX_BACKOFF_S = 30.0
# SGLang's HTTP server closes a connection idle for 5 s (uvicorn's keep-alive, SGLANG_TIMEOUT_KEEP_ALIVE); a
# request sent on one as the server closes it fails with ServerDisconnectedError and costs a retry. The
# pool drops idle connections sooner, so it never reuses one the server may be closing.
KEEPALIVE_S = 3.0
_JSON = {"Content-Type": "application/json"}
# connect() failures of the client's own machine (no free port, no file descriptor, no buffer), not a refusal
CLIENT_LIMITS = frozenset({errno.EADDRNOTAVAIL, errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def field(body: dict, path: str, kind: type | tuple[type, ...], where: str):
    """`body["a"]["b"]` for `path` "a.b", checked to be a `kind`; else a BackendError naming the field."""
    value = body
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise BackendError(f"malformed response from {where}: missing field '{path}'")
        value = value[key]
    if not isinstance(value, kind):
        raise BackendError(
            f"malformed response from {where}: field '{path}' is {type(value).__name__} "
            f"{str(value)[:80]!r}, expected {getattr(kind, '__name__', kind)}"
        )
    return value


class HttpBackend(Backend):
    """A backend that talks to one or more servers over HTTP."""

    def __init__(self, options: BackendOptions, tokenizer):
        if not options.base_urls:
            raise ValueError(f"the {self.name} backend needs at least one base URL")
        self.options, self.tokenizer = options, tokenizer
        self.base_urls = tuple(url.rstrip("/") for url in options.base_urls)
        self.stats = BackendStats()
        self._client: aiohttp.ClientSession | None = None
        self._refused: list[str] = []  # servers that refused a connection since the last answer from any

    def headers(self) -> dict[str, str]:
        """Headers sent with every request (e.g. authorization)."""
        return {}

    def redact(self, text: str) -> str:
        """`text` without the secrets of `headers()`: each value, and its last word ("Bearer KEY")."""
        for value in self.headers().values():
            for secret in {value, *value.split()[-1:]}:
                if len(secret) >= 8:
                    text = text.replace(secret, "[redacted]")
        return text

    @contextlib.contextmanager
    def redacted(self) -> Iterator[None]:
        """Around the reading of an answer: a `field` error quotes the server's values, which
        may echo the request's headers."""
        try:
            yield
        except BackendError as err:
            raise BackendError(self.redact(str(err))) from None

    async def start(self) -> None:
        # a request may wait timeout_s for each read; the runner bounds how many are in flight, so no pool limit
        timeout = aiohttp.ClientTimeout(
            total=None, connect=min(10.0, self.options.timeout_s), sock_read=self.options.timeout_s
        )
        self._client = aiohttp.ClientSession(
            timeout=timeout,
            headers=self.headers(),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S),
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def server_for(self, session: str) -> str:
        """The base URL that serves every request of `session` (a stable hash, same in every process)."""
        return self.base_urls[zlib.crc32(session.encode()) % len(self.base_urls)]

    async def request(self, method: str, url: str, payload: dict | None = None) -> dict:
        """Send one request, retrying what a busy server answers; the JSON body, or BackendError."""
        if self._client is None:
            raise RuntimeError(f"the {self.name} backend is not started: use `async with backend:`")
        attempts = self.options.max_retries + 1
        for attempt in range(attempts):
            if self.down:
                raise BackendError(self.down)
            delay = min(MAX_BACKOFF_S, self.options.retry_backoff_s * 2**attempt) * random.uniform(0.5, 1.0)
            try:
                body = None if payload is None else orjson.dumps(payload)  # long token-id lists: orjson, not json
                async with self._client.request(method, url, data=body, headers=_JSON if body else None) as response:
                    status, retry_after, raw = (
                        response.status,
                        response.headers.get("retry-after", ""),
                        await response.read(),
                    )
            except aiohttp.ClientPayloadError as err:  # a body that cannot be decoded: the same on every try
                self.stats.errors[type(err).__name__] += 1
                raise BackendError(self.redact(f"{method} {url} failed: {type(err).__name__}: {err}")) from None
            except (aiohttp.ClientError, asyncio.TimeoutError) as err:  # refused, reset, timed out
                problem = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
                self.stats.errors[type(err).__name__] += 1
                if isinstance(err, aiohttp.ClientConnectorError) and err.os_error.errno not in CLIENT_LIMITS:
                    self._note_refused(url)
            else:
                self._refused.clear()  # a server answered
                if status < 400:
                    try:
                        answer = orjson.loads(raw)
                    except ValueError:
                        text = raw.decode(errors="replace")
                        raise BackendError(
                            self.redact(f"malformed response from {url}: not JSON: {text[:200]!r}")
                        ) from None
                    if not isinstance(answer, dict):
                        raise BackendError(
                            f"malformed response from {url}: expected a JSON object, got {type(answer).__name__}"
                        )
                    return answer
                problem = self.redact(f"HTTP {status}: {raw.decode(errors='replace')[:300]}")
                self.stats.errors[f"http_{status}"] += 1
                if status != 429 and status < 500:
                    raise BackendError(f"{method} {url} failed: {problem}")
                if retry_after.isdigit():
                    delay = min(MAX_BACKOFF_S, float(retry_after))
            if attempt + 1 < attempts:
                self.stats.retries += 1
                await asyncio.sleep(delay)
        raise BackendError(f"{method} {url} failed after {attempts} attempts: {problem}")

    def _note_refused(self, url: str) -> None:
        self._refused.append(next((base for base in self.base_urls if url.startswith(base)), url))
        if len(self._refused) >= self.options.down_after and set(self.base_urls) <= set(self._refused):
            self.down = (
                f"every server refused {len(self._refused)} connections in a row ({', '.join(self.base_urls)}): "
                "they are gone"
            )
