"""What the viewer's tests share: a small run directory made by the real commands with scripted
players, and the viewer served from a thread (for the browser tests)."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.viewer.cli import DEFAULTS

# play options as `selfplay-gen view --backend scripted` has them
SCRIPTED_OPTS: dict[str, Any] = dict(DEFAULTS)
SCRIPTED_OPTS.update(backend="scripted", base_url=())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def page_client(app: web.Application, **kwargs: Any) -> TestClient:
    """A client that asks as the viewer's own page does: from its origin, with the token the page
    was served with."""
    from selfplay_gen.viewer.app import ACCESS

    port = free_port()
    headers = {"Origin": f"http://127.0.0.1:{port}", "X-Selfplay-Token": app[ACCESS].token}
    return TestClient(TestServer(app, host="127.0.0.1", port=port), headers=headers, **kwargs)


def run_cli(*args: str) -> None:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output


def make_run_dir(run: Path) -> Path:
    """A run directory laid out as run_selfplay_iteration.sh lays it out, with scripted players
    standing in for the models: one iteration's games, two held-out evaluations of the same
    instances and the run-level report that collects them."""
    run_cli("--backend", "scripted", "-n", "8", "-k", "2", "-q", "--out", str(run / "iter_001/gen/games.jsonl"))
    for label, stage, policy in (("base", "base", "share"), ("iter_1", "iter_001", "teacher")):
        run_cli(
            "eval",
            "--backend",
            "scripted",
            "--scripted-policy",
            policy,
            "--instances",
            "heldout",
            "--num-instances",
            "3",
            "-k",
            "2",
            "--bootstrap",
            "100",
            "-q",
            "--label",
            label,
            "--out",
            str(run / stage / "eval/heldout"),
            "--append-to",
            str(run / "report/heldout"),
        )
    return run


def make_negotiation_file(path: Path) -> Path:
    run_cli("--game", "negotiation", "--backend", "scripted", "-n", "4", "-k", "2", "-q", "--out", str(path))
    return path


class Served:
    """The app served on 127.0.0.1 (a free port) by an event loop in a thread, for a browser."""

    def __init__(self, app: web.Application):
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner = web.AppRunner(app)
        self.url = ""

    def __enter__(self) -> Served:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
