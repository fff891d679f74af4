"""Health shared by every request of a server backend: when every server refuses connections, the
backend says it is down and fails each request at once, instead of retrying every game."""

import pytest
from aiohttp import web
from fake_sglang import free_port, serving

from selfplay_gen.backends.base import BackendError, BackendOptions, backend_class
from selfplay_gen.backends.http import HttpBackend


@pytest.fixture
async def alive():
    """A server that answers every GET /ok."""
    app = web.Application()

    async def ok(request):
        return web.json_response({"ok": True})

    app.add_routes([web.get("/ok", ok)])
    async with serving(app) as url:
        yield url


async def opened(*urls: str) -> HttpBackend:
    options = BackendOptions(base_urls=urls, max_retries=5, retry_backoff_s=0.001, down_after=4)
    backend = backend_class("sglang")(options, None)
    await HttpBackend.start(backend)  # the client only: no health wait
    return backend


async def test_every_server_refusing_means_down_and_requests_fail_at_once():
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    backend = await opened(*dead)
    try:
        with pytest.raises(BackendError, match="failed after 6 attempts"):
            await backend.request("GET", f"{dead[0]}/generate")
        assert backend.down is None  # one server refusing is not every server
        with pytest.raises(BackendError, match=r"every server refused 7 connections in a row \(.+\): they are gone"):
            await backend.request("GET", f"{dead[1]}/generate")  # its first refusal completes the set
        tried = sum(backend.stats.errors.values())
        with pytest.raises(BackendError, match="they are gone"):
            await backend.request("GET", f"{dead[0]}/generate")
        assert sum(backend.stats.errors.values()) == tried  # not tried again
    finally:
        await backend.close()


async def test_one_server_answering_keeps_the_backend_up(alive):
    dead = f"http://127.0.0.1:{free_port()}"
    backend = await opened(dead, alive)
    try:
        for _ in range(3):
            with pytest.raises(BackendError, match="failed after 6 attempts"):
                await backend.request("GET", f"{dead}/generate")
            assert await backend.request("GET", f"{alive}/ok") == {"ok": True}
        assert backend.down is None and backend.stats.errors["ClientConnectorError"] == 18
    finally:
        await backend.close()


async def test_reused_connections_keep_every_request_in_flight():
    """Every turn after a game's first finds its connection idle and kept alive. With httpx 0.28 such
    requests went out about 16 at a time of 100 (bench/http_pool.py); all of them must reach the server
    together, as in the first round that opened the connections."""
    import asyncio

    held, peaks = [0], []

    async def slow(request):
        held[0] += 1
        peaks[-1] = max(peaks[-1], held[0])
        await asyncio.sleep(0.2)
        held[0] -= 1
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.get("/slow", slow)])
    async with serving(app) as url:
        backend = await opened(url)
        try:
            for _ in range(2):
                peaks.append(0)
                await asyncio.gather(*(backend.request("GET", f"{url}/slow") for _ in range(100)))
        finally:
            await backend.close()
    assert peaks == [100, 100]


CLIENT_WITH_FEW_FILE_DESCRIPTORS = """
import asyncio, json, os, resource, sys
from selfplay_gen.backends.base import BackendOptions, backend_class
from selfplay_gen.backends.http import HttpBackend

async def main(url):
    options = BackendOptions(base_urls=(url,), max_retries=30, retry_backoff_s=0.02, down_after=4)
    backend = backend_class("sglang")(options, None)
    await HttpBackend.start(backend)
    # room for 4 more file descriptors: 4 connections at once
    top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 5, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    answers = await asyncio.gather(*(backend.request("GET", f"{url}/slow") for _ in range(24)), return_exceptions=True)
    failed = [a for a in answers if a != {"ok": True}]
    print(json.dumps({"answered": len(answers) - len(failed), "down": backend.down,
                      "errors": dict(backend.stats.errors), "failures": sorted(set(map(str, failed)))}))
    await backend.close()

asyncio.run(main(sys.argv[1]))
"""


async def test_connections_this_machine_cannot_open_are_retried_not_taken_for_a_server_gone():
    """A client out of file descriptors (or ports: tens of thousands of connections at once) fails to
    connect with EMFILE (EADDRNOTAVAIL); the server is up, and every request gets its answer."""
    import asyncio
    import json
    import os
    import sys

    async def slow(request):
        await asyncio.sleep(0.1)
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.get("/slow", slow)])
    async with serving(app) as url:
        client = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT_WITH_FEW_FILE_DESCRIPTORS,
            url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        out, err = await asyncio.wait_for(client.communicate(), 60)
    assert client.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["errors"].get("ClientConnectorError", 0) > 0  # the limit was reached
    assert seen["down"] is None and seen["failures"] == [] and seen["answered"] == 24
