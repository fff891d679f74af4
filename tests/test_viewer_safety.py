"""`selfplay-gen view` left running on 127.0.0.1, tried as an attacker would: what it serves, which
requests it answers, and how much the games people start may take."""

from __future__ import annotations

import asyncio
import json
import re
import resource
import shutil
import time
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from viewer_helpers import SCRIPTED_OPTS, make_negotiation_file, page_client, run_cli

from selfplay_gen import games
from selfplay_gen.cli import main
from selfplay_gen.records import read_games
from selfplay_gen.viewer import app as viewer
from selfplay_gen.viewer import play
from selfplay_gen.viewer.app import ARENA, make_app
from selfplay_gen.viewer.library import Library
from selfplay_gen.viewer.replay import describe

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- secret"


@pytest.fixture(scope="module")
def games_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("games") / "games.jsonl"
    run_cli("--backend", "scripted", "-n", "2", "-k", "1", "-q", "--out", str(path))
    return path


def folder_with_secrets(tmp_path: Path, games_file: Path) -> Path:
    """A run folder as people share them: games, a hidden key folder and lock file, a second file."""
    folder = tmp_path / "d"
    (folder / ".ssh").mkdir(parents=True)
    (folder / ".ssh/id_rsa").write_text(KEY)
    (folder / ".games.jsonl.lock").write_text(KEY)
    shutil.copy(games_file, folder / "games.jsonl")
    shutil.copy(games_file, folder / "other.jsonl")
    (folder / "keys").symlink_to(folder / ".ssh")  # a visible name for a hidden folder
    return folder


async def page_token(client: TestClient) -> str:
    """The token the viewer's page is served with ('' for a page without one)."""
    page = await (await client.get("/")).text()
    found = re.search(r'<meta name="selfplay-token" content="([^"]*)">', page)
    return found.group(1) if found else ""


async def status_and_body(client: TestClient, path: str) -> tuple[int, str]:
    response = await client.get(path)
    return response.status, await response.text()


# ---------------------------------------------------------------- what is served


async def test_a_single_file_is_served_alone(tmp_path, games_file):
    folder = folder_with_secrets(tmp_path, games_file)
    async with page_client(make_app(folder / "games.jsonl", SCRIPTED_OPTS)) as c:
        for path in ("/files/.ssh/id_rsa", "/files/keys/id_rsa", "/files/other.jsonl", "/api/games?file=other.jsonl"):
            status, body = await status_and_body(c, path)
            assert status == 404 and KEY not in body and "BEGIN" not in body, (path, status)
        assert (await status_and_body(c, "/files/games.jsonl"))[0] == 200
        lib = await (await c.get("/api/library")).json()
        assert [f["file"] for f in lib["games_files"]] == ["games.jsonl"]


async def test_a_folder_never_serves_its_hidden_files(tmp_path, games_file):
    folder = folder_with_secrets(tmp_path, games_file)
    async with page_client(make_app(folder, SCRIPTED_OPTS)) as c:
        for path in ("/files/.ssh/id_rsa", "/files/keys/id_rsa", "/files/.games.jsonl.lock", "/files/%2Essh/id_rsa"):
            status, body = await status_and_body(c, path)
            assert status == 404 and KEY not in body, (path, status)
        assert (await status_and_body(c, "/files/other.jsonl"))[0] == 200


async def test_html_and_script_under_the_folder_are_served_as_data(tmp_path):
    (tmp_path / "evil.html").write_text('<script src="evil.js"></script>')
    (tmp_path / "evil.js").write_text("fetch('/api/library')")
    (tmp_path / "plot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>')
    (tmp_path / "notes.md").write_text("# notes")
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        for name in ("evil.html", "evil.js", "plot.svg"):
            response = await c.get(f"/files/{name}")
            assert response.status == 200
            assert response.content_type == "application/octet-stream"
            assert response.headers["Content-Disposition"].startswith("attachment")
            assert response.headers["Content-Security-Policy"].startswith("sandbox")
            assert response.headers["X-Content-Type-Options"] == "nosniff"
        notes = await c.get("/files/notes.md")
        assert notes.content_type == "text/plain" and "sandbox" in notes.headers["Content-Security-Policy"]


async def test_a_bad_symlink_leaves_the_index_whole(tmp_path, games_file):
    shutil.copy(games_file, tmp_path / "games.jsonl")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    shutil.copy(games_file, outside)
    (tmp_path / "out.jsonl").symlink_to(outside)
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        response = await c.get("/api/library")
        assert response.status == 200, await response.text()
        assert [f["file"] for f in (await response.json())["games_files"]] == ["games.jsonl"]
    assert Library(tmp_path).games_files() == ["games.jsonl"]


# ---------------------------------------------------------------- which requests are answered


async def test_only_the_viewers_own_host_is_answered(tmp_path, games_file):
    async with page_client(make_app(games_file, SCRIPTED_OPTS)) as c:
        port = c.port
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", f"0x7f.1:{port}"):
            response = await c.get("/api/library", headers={"Host": host})
            assert response.status == 403, host
            assert "Host" in (await response.json())["error"]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            assert (await c.get("/api/library", headers={"Host": host})).status == 200, host


async def test_games_start_only_from_the_viewers_own_page(tmp_path, games_file):
    app = make_app(games_file, SCRIPTED_OPTS)
    async with TestClient(TestServer(app)) as c:  # no Origin, no token: what another site can send
        own = f"http://127.0.0.1:{c.port}"
        token = await page_token(c)
        tries = [
            {"headers": {"Content-Type": "text/plain"}, "data": '{"game": "matching"}'},  # a form POST
            {"headers": {"Origin": "http://evil.example", "Content-Type": "text/plain"}, "data": "{}"},
            {"headers": {"Origin": "null", "X-Selfplay-Token": token}, "json": {}},
            {"headers": {"Origin": own}, "json": {}},  # the right origin, no token
            {"headers": {"Origin": own, "X-Selfplay-Token": token + "x"}, "json": {}},
            {"headers": {"Origin": "http://evil.example", "X-Selfplay-Token": token}, "json": {}},
        ]
        for kwargs in tries:
            response = await c.post("/api/play", **kwargs)
            assert response.status == 403, kwargs
        assert app[ARENA].sessions == {}
        assert token == app[viewer.ACCESS].token
        response = await c.post("/api/play", headers={"Origin": own, "X-Selfplay-Token": token}, json={"seed": 1})
        assert response.status == 200 and len(app[ARENA].sessions) == 1


async def test_a_flood_of_cross_origin_requests_starts_no_game_and_reads_no_file(tmp_path, games_file, monkeypatch):
    """1,000 requests another site or a rebound name could send: every one refused, nothing read."""
    folder = folder_with_secrets(tmp_path, games_file)
    app = make_app(folder, SCRIPTED_OPTS)
    resolved: list[str] = []
    original = Library.resolve
    monkeypatch.setattr(Library, "resolve", lambda self, name: resolved.append(name) or original(self, name))
    async with TestClient(TestServer(app)) as c:
        port, token = c.port, await page_token(c)
        shapes = [
            ("POST", "/api/play", {"Origin": "http://evil.example", "Content-Type": "text/plain"}),
            ("POST", "/api/play", {"Content-Type": "application/x-www-form-urlencoded"}),
            ("POST", "/api/play", {"Origin": f"http://localhost:{port}"}),  # same site, no token
            ("POST", "/api/play/0-x/move", {"Origin": "http://evil.example", "X-Selfplay-Token": token}),
            ("GET", "/files/games.jsonl", {"Host": f"evil.example:{port}"}),  # DNS rebinding
            ("GET", "/api/games?file=games.jsonl", {"Host": f"attacker.test:{port}"}),
            ("GET", "/files/.ssh/id_rsa", {"Host": "evil.example"}),
            ("POST", "/api/play", {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}),
        ]
        started = time.monotonic()
        for i in range(1000):
            method, path, headers = shapes[i % len(shapes)]
            response = await c.request(method, path, headers=headers, data='{"game": "matching"}')
            assert response.status == 403, (method, path, headers, await response.text())
            assert KEY not in await response.text()
        elapsed = time.monotonic() - started
    assert app[ARENA].sessions == {} and resolved == []
    assert not (folder / "play").exists()
    assert elapsed < 60, f"1,000 refusals took {elapsed:.1f} s"


async def test_another_address_needs_a_token_on_every_request(tmp_path, games_file):
    with pytest.raises(ValueError, match="give --token"):
        viewer.Access.for_host("0.0.0.0")
    result = CliRunner().invoke(main, ["view", str(games_file), "--host", "0.0.0.0", "--backend", "scripted"])
    assert result.exit_code == 2 and "--token" in result.output
    app = make_app(games_file, SCRIPTED_OPTS, access=viewer.Access.for_host("0.0.0.0", "s3cret-token"))
    async with TestClient(TestServer(app)) as c:
        assert (await c.get("/api/library")).status == 403
        assert (await c.get("/", headers={"Host": f"my-box.lan:{c.port}"})).status == 403
        opened = await c.get("/?token=s3cret-token", headers={"Host": f"my-box.lan:{c.port}"})
        assert opened.status == 200
        assert (await c.get("/api/library")).status == 200  # the cookie the page was opened with
        c.session.cookie_jar.clear()
        assert (await c.get("/api/library")).status == 403


def test_the_command_warns_when_other_machines_can_reach_it(games_file, monkeypatch):
    started = []
    monkeypatch.setattr(viewer, "serve", lambda app, host, port: started.append(app))
    args = ["view", str(games_file), "--backend", "scripted", "--port", "9999"]
    result = CliRunner().invoke(main, [*args, "--host", "0.0.0.0", "--token", "tok-123"])
    assert result.exit_code == 0, result.output
    assert "warning: --host 0.0.0.0 exposes the viewer" in result.output
    assert "http://localhost:9999/?token=tok-123" in result.output
    assert started[-1][viewer.ACCESS] == viewer.Access(None, "tok-123", everywhere=True)
    local = CliRunner().invoke(main, args)
    assert local.exit_code == 0 and "warning" not in local.output and "token=" not in local.output
    assert not started[-1][viewer.ACCESS].everywhere


async def test_error_answers_carry_the_security_headers(tmp_path, games_file):
    async with page_client(make_app(games_file, SCRIPTED_OPTS)) as c:
        answers = [
            await c.get("/no/such/page"),
            await c.post("/api/library"),  # 405
            await c.get("/api/game?file=games.jsonl&line=x"),  # 400
            await c.post("/api/play/nope/move", data="x" * 200_000),  # 413 or 404
            await c.get("/api/library", headers={"Host": "evil.example"}),  # 403
        ]
        for response in answers:
            assert response.status >= 400
            assert "frame-ancestors 'none'" in response.headers.get("Content-Security-Policy", ""), response.status
            assert response.headers.get("X-Content-Type-Options") == "nosniff", response.status
            assert "error" in await response.json()


# ---------------------------------------------------------------- games people play


async def start(client: TestClient, **body) -> dict:
    response = await client.post("/api/play", json={"game": "matching", "seat": 1, **body})
    assert response.status == 200, await response.text()
    return await response.json()


async def move(client: TestClient, state: dict, text: str, status: int = 200) -> dict:
    response = await client.post(f"/api/play/{state['id']}/move", json={"text": text})
    assert response.status == status, await response.text()
    return await response.json()


async def test_games_in_progress_are_capped_and_idle_ones_expire(tmp_path):
    now = [0.0]
    app = make_app(tmp_path, SCRIPTED_OPTS, limits=play.PlayLimits(idle_s=60, max_games=2))
    app[ARENA].clock = lambda: now[0]
    async with page_client(app) as c:
        first = await start(c, seed=1)
        await start(c, seed=2)
        refused = await c.post("/api/play", json={"game": "matching", "seed": 3})
        assert refused.status == 429
        assert "2 games are in progress" in (await refused.json())["error"]
        now[0] = 50.0
        assert (await c.get(f"/api/play/{first['id']}")).status == 200  # looked at: not idle
        now[0] = 100.0  # the second has been left alone for 100 s: it expires, and a new one fits
        await start(c, seed=4)
        assert len(app[ARENA].sessions) == 2 and first["id"] in app[ARENA].sessions
        now[0] = 1000.0
        expired = await c.get(f"/api/play/{first['id']}")
        assert expired.status == 404 and "expires" in (await expired.json())["error"]
    played = tmp_path / "play/matching-human-vs-scripted.jsonl"
    assert not played.exists() or list(read_games(played)) == []  # expired games are not recorded


async def test_a_long_move_is_refused_with_a_reason(tmp_path):
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        state = await start(c, seed=5)
        refused = await move(c, state, "[message] " + "x" * 2000, status=413)
        assert refused["error"].startswith("a move is at most 2,000 characters")
        huge = await c.post(f"/api/play/{state['id']}/move", json={"text": "y" * 100_000})
        assert huge.status == 413 and "at most 2,000 characters" in (await huge.json())["error"]
        state = await move(c, state, "[message] short enough")
        assert state["your_turn"]


async def test_invalid_moves_are_warned_of_and_the_outcome_names_the_seat(tmp_path):
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        state = await start(c, seed=6)
        instance = games.get("matching").instance_type.from_seed(6)
        assert state["private"]["view"] == instance.view(1) != instance.view(0)  # this seat's table only
        assert state["invalid_left"] == 3
        state = await move(c, state, "[propose] nobody")
        state = await move(c, state, "[propose] nobody")
        assert state["invalid_left"] == 1  # the page warns: one more ends the game
        state = await move(c, state, "[propose] nobody")
        assert state["done"] and state["outcome"]["termination"] == "max_invalid"
        assert state["invalid_by_seat"] == [0, 3] and state["invalid_seat"] == 1
        again = await move(c, state, "[accept]", status=409)
        assert "over" in again["error"] and "not your turn" not in again["error"]
        record = next(read_games(tmp_path / "play/matching-human-vs-scripted.jsonl"))
        assert describe(record)["invalid_seat"] == 1 and describe(record)["invalid_by_seat"] == [0, 3]


def test_the_replay_names_the_embedded_model_not_its_cache_path(games_file):
    record = next(read_games(games_file))
    cached = "/root/.cache/selfplay-gen/SmolLM2-135M-Instruct-warm-0123456789ab"
    record["settings"]["seat0"] = {"backend": "llamacpp", "model": cached}
    record["settings"]["seat1"] = {"backend": "sglang", "model": "/models/iter_003/merged/"}
    seats = describe(record)["seats"]
    assert [s["model"] for s in seats] == ["SmolLM2-135M-Instruct-warm", "merged"]
    assert seats[0]["model_path"] == cached


async def test_the_play_page_names_the_partner_model(tmp_path):
    cases = [
        ({"backend": "scripted"}, "scripted"),
        ({"backend": "llamacpp"}, "llamacpp SmolLM2-135M-Instruct-warm"),
        (
            {"backend": "local", "model": "/root/.cache/selfplay-gen/SmolLM2-135M-Instruct"},
            "local SmolLM2-135M-Instruct",
        ),
    ]
    for opts, shown in cases:
        async with page_client(make_app(tmp_path, {**SCRIPTED_OPTS, **opts})) as c:
            assert (await (await c.get("/api/play/setup")).json())["model"] == shown


def test_view_help_says_what_backend_plays():
    result = CliRunner().invoke(main, ["view", "--help"], terminal_width=200)
    backend = result.output.split("\n  --backend")[1].split("\n  --")[0]
    assert "against you" in backend and "both seats" not in backend
    assert "--token" in result.output and "--max-games" in result.output and "--idle-minutes" in result.output


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


async def test_memory_stays_bounded_after_10000_abandoned_games(tmp_path):
    """10,000 games started and left, one idle period apart: 50 matching games over HTTP, the rest
    in-process (of the toy sum game of tests/games_toy, whose instances take no search to draw).
    The viewer holds at most `max_games` of them, and memory grows less than 20 MB over the last
    9,500 (before the limits, 1,200 abandoned games took 25 MB and none was freed)."""
    games.register("sum", "games_toy.SumGame")
    now = [0.0]
    limits = play.PlayLimits(idle_s=1.0, max_games=4)
    app = make_app(tmp_path, SCRIPTED_OPTS, limits=limits)
    arena: play.Arena = app[ARENA]
    arena.clock = lambda: now[0]
    async with page_client(app) as c:
        for k in range(50):
            now[0] += 2.0
            await start(c, seed=k)
            assert len(arena.sessions) <= limits.max_games
    for k in range(50, 500):  # warm up (the allocator, caches of prompts)
        now[0] += 2.0
        await arena.start("sum", k % 2, "scripted", k, {})
    before = rss_mb()
    for k in range(500, 10_000):
        now[0] += 2.0
        await arena.start("sum", k % 2, "scripted", k, {})
        assert len(arena.sessions) <= limits.max_games
    await asyncio.sleep(0.1)  # the last expired games' tasks end
    grew = rss_mb() - before
    assert arena.in_progress <= 1 and len(arena._playing) <= 1
    assert grew < 20, f"memory grew {grew:.1f} MB over 9,500 abandoned games"
    await arena.close()


async def test_played_negotiation_is_reported_per_seat(tmp_path):
    """Negotiation: the person's points and reward are their seat's, never averaged with the partner's."""
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        for seed in (1, 2, 3):
            body = {"game": "negotiation", "seat": seed % 2, "seed": seed, "options": {"reward_mode": "competitive"}}
            state = await (await c.post("/api/play", json=body)).json()
            while not state["done"]:
                state = await move(c, state, "[message] what do you offer?")
    played = tmp_path / "play/negotiation-human-vs-scripted.jsonl"
    records = list(read_games(played))
    out = tmp_path / "eval"
    await asyncio.to_thread(
        run_cli, "eval", "--game", "negotiation", "--from-games", f"me,scripted={played}", "--out", str(out),
        "--bootstrap", "100", "-q",
    )  # fmt: skip
    sides = json.loads((out / "metrics.json").read_text())["people"]["sides"]
    seat_of = [next(s for s, p in enumerate(r["players"]) if p["kind"] == "human") for r in records]
    mine = [r["outcome"]["points"][s] for r, s in zip(records, seat_of)]
    theirs = [r["outcome"]["points"][1 - s] for r, s in zip(records, seat_of)]
    assert sides["me"]["role"] == "person" and sides["scripted"]["role"] == "partner"
    assert sides["me"]["figures"]["points"]["mean"] == pytest.approx(sum(mine) / len(mine))
    assert sides["scripted"]["figures"]["points"]["mean"] == pytest.approx(sum(theirs) / len(theirs))
    assert sides["me"]["games_in_seat"] == [seat_of.count(0), seat_of.count(1)]
    report = (out / "report.md").read_text()
    assert "human | human" not in report and "| me | person |" in report


def test_a_negotiation_file_of_models_is_still_self_play(tmp_path):
    path = make_negotiation_file(tmp_path / "neg.jsonl")
    run_cli("eval", "--game", "negotiation", "--from-games", f"m={path}", "--out", str(tmp_path / "e"), "-q")
    metrics = json.loads((tmp_path / "e/metrics.json").read_text())
    assert "m" in metrics["models"] and "people" not in metrics


async def test_a_bad_symlink_in_a_reports_games_leaves_the_report_whole(tmp_path, games_file):
    (tmp_path / "games").mkdir()
    (tmp_path / "report.md").write_text("# R\n")
    shutil.copy(games_file, tmp_path / "games/a.jsonl")
    (tmp_path / "games/out.jsonl").symlink_to(games_file)
    (tmp_path / "games/dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    async with page_client(make_app(tmp_path, SCRIPTED_OPTS)) as c:
        response = await c.get("/api/report?dir=.")
        assert response.status == 200, await response.text()
        assert (await response.json())["games_files"] == ["games/a.jsonl"]
