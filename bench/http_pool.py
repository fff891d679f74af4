"""How many requests an HTTP client really keeps in flight once its connections are reused.

    python bench/http_pool.py [--out DIR] [--in-flight 100]

A local aiohttp server answers GET /slow after 0.2 s and counts the requests it holds at once. Each
client sends IN_FLIGHT (100) requests at once, twice: the first round opens a connection per request,
the second finds them all idle and kept alive, as every turn after a game's first does. Side by side:
httpx with keep-alive (as the backends had it), httpx without, aiohttp, and the backends' own client
(`selfplay_gen/backends/http.py`, now aiohttp).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import click
import httpx
from aiohttp import web
from benchmark import out_option, quick_option, write

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_sglang import serving

from selfplay_gen.backends.base import BackendOptions, backend_class
from selfplay_gen.backends.http import HttpBackend


async def client_for(kind: str, url: str):
    """(GET /slow, close) for one kind of client."""
    if kind == "backend":
        backend = backend_class("sglang")(BackendOptions(base_urls=(url,)), None)
        await HttpBackend.start(backend)  # the client only: no health wait
        return lambda: backend.request("GET", f"{url}/slow"), backend.close
    if kind == "aiohttp":
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

        async def get_aiohttp():
            async with session.get(f"{url}/slow") as response:
                await response.json()

        return get_aiohttp, session.close
    keep = None if kind == "httpx" else 0
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=keep))

    async def get_httpx():
        (await client.get(f"{url}/slow")).json()

    return get_httpx, client.aclose


async def rounds(kind: str, in_flight: int) -> list[dict]:
    """Per round: the most requests the server held at once, the connections they came on, the time."""
    held, peak, peers = [0], [0], [set()]

    async def slow(request):
        held[0] += 1
        peak[0] = max(peak[0], held[0])
        peers[-1].add(request.transport.get_extra_info("peername")[1])
        await asyncio.sleep(0.2)
        held[0] -= 1
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.get("/slow", slow)])
    found = []
    async with serving(app) as url:
        get, close = await client_for(kind, url)
        try:
            for _ in range(2):
                peak[0], peers[-1] = 0, set()
                started = time.perf_counter()
                await asyncio.gather(*(get() for _ in range(in_flight)))
                seconds = time.perf_counter() - started
                found.append({"peak_in_flight": peak[0], "connections": len(peers[-1]), "seconds": round(seconds, 2)})
        finally:
            await close()
    return found


@click.command(help=__doc__)
@click.option("--in-flight", type=click.IntRange(min=1), default=100, show_default=True, help="Requests sent at once.")
@out_option
@quick_option
def main(in_flight: int, out: Path, quick: bool) -> None:
    clients = {c: asyncio.run(rounds(c, in_flight)) for c in ("httpx", "httpx, no keep-alive", "aiohttp", "backend")}
    lines = [
        "| client | first round: at once, connections, s | kept alive: at once, connections, s |",
        "|---|---|---|",
    ]
    lines += [
        f"| {name} | " + " | ".join(f"{r['peak_in_flight']}, {r['connections']}, {r['seconds']}" for r in found) + " |"
        for name, found in clients.items()
    ]
    text = "\n".join(lines)
    click.echo(text)
    settings = {"in_flight": in_flight, "answer_delay_s": 0.2, "httpx": httpx.__version__}
    write("http_pool", out, "HTTP clients: requests in flight at once", settings, {"clients": clients}, text)


if __name__ == "__main__":
    main()
