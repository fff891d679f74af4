"""Connections a server may be closing are not reused: SGLang's server closes a connection idle for
its keep-alive time, and a request sent on it just then fails (ServerDisconnectedError). The stand-in
server below does the worst of that race on purpose: a request on a connection idle for its keep-alive
time gets the connection closed instead of an answer."""

import asyncio
import time

import pytest

from selfplay_gen.backends import http
from selfplay_gen.backends.base import BackendError, BackendOptions, backend_class
from selfplay_gen.backends.http import HttpBackend

SERVER_KEEPALIVE_S = 0.6


@pytest.fixture
async def closing_server():
    """Answers `{}` to every request; closes, unanswered, a connection reused after SERVER_KEEPALIVE_S idle.
    Yields (url, connections opened)."""
    opened = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(writer)
        answered_at = None
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                if answered_at is not None and time.monotonic() - answered_at >= SERVER_KEEPALIVE_S:
                    break
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.lower().split(b"\r\n")
                        if line.startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
                answered_at = time.monotonic()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", opened


async def two_requests_apart(url: str) -> HttpBackend:
    backend = backend_class("sglang")(BackendOptions(base_urls=(url,), max_retries=0), None)
    await HttpBackend.start(backend)  # the client only: no health wait
    try:
        # POST, as /generate: aiohttp itself sends an idempotent GET again on a new connection
        assert await backend.request("POST", f"{url}/generate", {"input_ids": [1]}) == {}
        await asyncio.sleep(SERVER_KEEPALIVE_S + 0.3)
        assert await backend.request("POST", f"{url}/generate", {"input_ids": [1]}) == {}
    finally:
        await backend.close()
    return backend


async def test_a_connection_idle_past_the_client_keepalive_is_not_reused(closing_server, monkeypatch):
    url, opened = closing_server
    monkeypatch.setattr(http, "KEEPALIVE_S", SERVER_KEEPALIVE_S / 2)  # as 3 s stands to SGLang's 5 s
    backend = await two_requests_apart(url)
    assert not backend.stats.errors and len(opened) == 2  # a new connection for the second request


async def test_the_stand_in_server_breaks_a_client_that_reuses_such_a_connection(closing_server, monkeypatch):
    url, opened = closing_server
    monkeypatch.setattr(http, "KEEPALIVE_S", 15.0)  # aiohttp's default
    with pytest.raises(BackendError, match="ServerDisconnectedError"):
        await two_requests_apart(url)
    assert len(opened) == 1
