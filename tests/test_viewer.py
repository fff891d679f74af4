"""`selfplay-gen view`'s API on a real run directory (made by the real commands with scripted
players): what it shows of games and reports, what it refuses, and games people play."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import ClientTimeout
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from viewer_helpers import SCRIPTED_OPTS, make_negotiation_file, make_run_dir, page_client, run_cli

from selfplay_gen import games
from selfplay_gen.cli import main
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.records import read_games
from selfplay_gen.viewer.app import make_app
from selfplay_gen.viewer.play import HUMAN


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run_dir(tmp_path_factory.mktemp("run"))


@pytest.fixture
async def client(run_dir, tmp_path):
    app = make_app(run_dir, SCRIPTED_OPTS, play_out=run_dir / "play")
    async with page_client(app) as c:
        yield c


async def get_json(client, path, status=200):
    response = await client.get(path)
    assert response.status == status, await response.text()
    return await response.json()


async def test_library_lists_the_runs_games_and_reports(client, run_dir):
    lib = await get_json(client, "/api/library")
    files = {f["file"]: f["bytes"] for f in lib["games_files"]}
    assert files["iter_001/gen/games.jsonl"] == (run_dir / "iter_001/gen/games.jsonl").stat().st_size
    assert "base/eval/heldout/games/base__base.jsonl" in files
    assert not any(Path(f).name.startswith(".") for f in files)  # lock files are not games
    games = await get_json(client, "/api/games?file=iter_001/gen/games.jsonl")
    assert [g["line"] for g in games["games"]] == list(range(1, 9)) and games["errors"] == []
    assert set(lib["reports"]) == {"base/eval/heldout", "iter_001/eval/heldout", "report/heldout"}


async def test_a_matching_game_shows_both_views_every_turn_and_what_was_possible(client, run_dir):
    record = next(read_games(run_dir / "iter_001/gen/games.jsonl"))
    view = await get_json(client, "/api/game?file=iter_001/gen/games.jsonl&line=1")
    assert [(t["seat"], t["kind"], t["text"]) for t in view["turns"]] == [
        (e["player"], e["kind"], e["text"]) for e in record["events"]
    ]
    inst, outcome, detail = record["instance"], record["outcome"], view["detail"]
    for seat in (0, 1):  # each seat's own scaled table, blank exactly where its mask hides a cell
        for r in range(8):
            for p in range(8):
                cell = detail["views"][seat][r][p]
                assert (cell is None) == (not inst["masks"][seat][r][p])
                if cell is not None:
                    assert cell == int(inst["table"][r][p] * inst["scales"][seat])
        assert view["seats"][seat]["system"] == record["players"][seat]["messages"][0]["content"]
    assert detail["best_plan"]["raw"] == outcome["best_reward"] == detail["best_reward"]
    assert detail["agreed_plan"]["raw"] == outcome["raw_reward"]
    assert detail["random_baseline"] == pytest.approx(sum(map(sum, inst["table"])) / 8 / outcome["best_reward"])
    proposals = [t for t in view["turns"] if t["kind"] == "propose"]
    assert proposals and all(t["plan"]["raw"] <= outcome["best_reward"] for t in proposals)
    score = f"{outcome['raw_reward']} of {outcome['best_reward']} possible = {outcome['normalized_reward']:.3f}"
    assert detail["outcome_rows"][0] == ["score", score]  # the game's own outcome lines, worded by its view
    shares = Instance.from_dict(inst).own_plan_shares(outcome["proposal"])
    assert 0 < shares[0] <= 1 and 0 < shares[1] <= 1
    own = dict(detail["outcome_rows"])["on each seat's own table (own-plan share)"]
    assert own == f"{shares[0]:.3f} | {shares[1]:.3f}"


async def test_two_checkpoints_games_of_an_instance_are_found_for_side_by_side(client):
    view = await get_json(client, "/api/game?file=base/eval/heldout/games/base__base.jsonl&line=1")
    same = await get_json(client, "/api/same?file=base/eval/heldout/games/base__base.jsonl&line=1")
    others = {(g["file"], g["instance_id"]) for g in same}
    assert ("iter_001/eval/heldout/games/iter_1__iter_1.jsonl", view["instance_id"]) in others
    assert ("base/eval/heldout/games/base__base.jsonl", view["instance_id"]) in others  # its group's other game
    assert all(g["line"] != 1 or g["file"] != "base/eval/heldout/games/base__base.jsonl" for g in same)


async def test_a_negotiation_game_shows_each_seats_values_and_what_proposals_are_worth(tmp_path):
    path = await asyncio.to_thread(make_negotiation_file, tmp_path / "neg.jsonl")
    records = list(read_games(path))
    async with TestClient(TestServer(make_app(path, SCRIPTED_OPTS))) as c:
        lib = await get_json(c, "/api/library")
        assert [f["file"] for f in lib["games_files"]] == ["neg.jsonl"] and lib["reports"] == []
        agreed = next(i for i, r in enumerate(records, 1) if r["outcome"]["agreed"])
        view = await get_json(c, f"/api/game?file=neg.jsonl&line={agreed}")
    record, detail = records[agreed - 1], view["detail"]
    assert detail["values"] == record["instance"]["values"] and detail["counts"] == record["instance"]["counts"]
    final = [t for t in view["turns"] if t["kind"] == "propose"]
    assert len(final) == 2
    # both proposals (each takes its share) say the points each seat gets, which the outcome paid
    assert final[0]["share"]["points"] == final[1]["share"]["points"] == record["outcome"]["points"]
    rows = dict(detail["outcome_rows"])
    assert rows["points"].startswith(f"seat 0 {record['outcome']['points'][0]}, seat 1 ")
    assert rows["reward mode"] == record["outcome"]["reward_mode"] and rows["Pareto optimal"] in ("yes", "no")


@pytest.mark.parametrize(
    "path",
    [
        "/api/games?file=../outside.jsonl",
        "/api/games?file=%2e%2e/outside.jsonl",
        "/api/games?file=/etc/passwd",
        "/api/report?dir=..",
        "/files/..%2Foutside.jsonl",
        "/files/%2e%2e/outside.jsonl",
        "/files/link-out/outside.jsonl",
        "/files/iter_001/../../outside.jsonl",
    ],
)
async def test_nothing_outside_the_given_path_is_served(tmp_path, path):
    root = tmp_path / "root"
    (root / "iter_001").mkdir(parents=True)
    secret = "SECRET-OUTSIDE-THE-ROOT"
    (tmp_path / "outside.jsonl").write_text(secret)
    (root / "link-out").symlink_to(tmp_path)
    async with TestClient(TestServer(make_app(root, SCRIPTED_OPTS))) as c:
        response = await c.get(path)
        body = await response.text()
    assert response.status in (400, 403, 404), body
    assert secret not in body


async def test_a_file_under_the_root_is_served(client):
    response = await client.get("/files/report/heldout/reward_by_iteration.png")
    assert response.status == 200 and (await response.read()).startswith(b"\x89PNG")
    assert response.content_type == "image/png" and response.headers["Content-Security-Policy"].startswith("sandbox")


async def test_bad_lines_are_named_and_the_rest_of_the_file_still_shows(tmp_path, run_dir):
    lines = (run_dir / "iter_001/gen/games.jsonl").read_text().splitlines(keepends=True)
    bad = json.loads(lines[1])
    bad["outcome"]["normalized_reward"] = 7.5
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + json.dumps(bad) + "\n" + lines[2] + lines[3][: len(lines[3]) // 2])
    async with TestClient(TestServer(make_app(broken, SCRIPTED_OPTS))) as c:
        data = await get_json(c, "/api/games?file=broken.jsonl")
        assert [g["line"] for g in data["games"]] == [1, 3]
        errors = {e["line"]: e["error"] for e in data["errors"]}
        assert set(errors) == {2, 4}
        assert (
            errors[2].startswith("broken.jsonl:2:") and "outcome.normalized_reward" in errors[2] and "7.5" in errors[2]
        )
        assert errors[4].startswith("broken.jsonl:4: not valid JSON")
        refused = await get_json(c, "/api/game?file=broken.jsonl&line=4", status=422)
        assert refused["error"].startswith("broken.jsonl:4:")
        assert (await get_json(c, "/api/game?file=broken.jsonl&line=3"))["game_id"] == json.loads(lines[2])["game_id"]


async def test_a_run_report_renders_its_tables_and_plots_and_links_each_rows_games(client):
    data = await get_json(client, "/api/report?dir=report/heldout")
    assert "<table>" in data["html"] and "0: base" in data["html"]
    assert 'src="/files/report/heldout/reward_by_iteration.png"' in data["html"]
    assert [(r["label"], r["games_files"]) for r in data["rows"]] == [
        ("base", ["base/eval/heldout/games/base__base.jsonl"]),
        ("iter_1", ["iter_001/eval/heldout/games/iter_1__iter_1.jsonl"]),
    ]


async def test_a_run_directory_moved_elsewhere_still_links_each_rows_games(run_dir, tmp_path):
    moved = tmp_path / "copied" / "run"
    await asyncio.to_thread(shutil.copytree, run_dir, moved, ignore=shutil.ignore_patterns("play"))
    async with TestClient(TestServer(make_app(moved.parent, SCRIPTED_OPTS))) as c:
        data = await get_json(c, "/api/report?dir=run/report/heldout")
    assert [r["games_files"] for r in data["rows"]] == [
        ["run/base/eval/heldout/games/base__base.jsonl"],
        ["run/iter_001/eval/heldout/games/iter_1__iter_1.jsonl"],
    ]


async def test_report_markdown_cannot_carry_markup_or_links_out(tmp_path):
    (tmp_path / "summary.md").write_text("| stage | games |\n|---|---|\n| warm | 4096 <script>x</script> |\n")
    (tmp_path / "report.md").write_text(
        "# R\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) [y](https://example.com/) ![p](p.png)\n"
    )
    async with TestClient(TestServer(make_app(tmp_path, SCRIPTED_OPTS))) as c:
        html = (await get_json(c, "/api/report?dir=.", status=200))["html"]
        summary = (await get_json(c, "/api/library"))["summary"]
    assert "<td>warm</td>" in summary and "<td>4096 &lt;script&gt;x&lt;/script&gt;</td>" in summary
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="javascript' not in html
    assert 'href="https://example.com/"' not in html and 'src="/files/p.png"' in html


async def move(client, state, text):
    return await (await client.post(f"/api/play/{state['id']}/move", json={"text": text})).json()


def _human_turn(told: str) -> str:
    """A person's simple plan against the scripted matcher: accept its proposal, otherwise ask it to go on."""
    last = [line for line in told.splitlines() if line.startswith("Partner: ")][-1:]
    return "[accept]" if last and last[0].startswith("Partner: [propose]") else "[message] Go on, tell me more."


@pytest.mark.parametrize("seat", [0, 1])
async def test_a_person_plays_a_whole_matching_game_and_it_is_recorded_as_human(client, run_dir, seat):
    state = await (await client.post("/api/play", json={"game": "matching", "seat": seat, "seed": 11})).json()
    instance = games.get("matching").instance_type.from_seed(11)
    system = games.get("matching")().reset(instance).system[seat]
    assert state["messages"][0] == {"role": "system", "content": system}  # what a model in the seat gets
    assert state["your_turn"] and state["messages"][-1]["role"] == "user"
    # an invalid move is explained to the mover, who moves again
    state = await move(client, state, "[propose] nobody")
    assert state["your_turn"] and state["messages"][-1]["content"].startswith("Invalid move: ")
    for _ in range(40):
        if state["done"]:
            break
        state = await move(client, state, _human_turn(state["messages"][-1]["content"]))
    assert state["done"] and state["outcome"]["agreed"], state
    assert state["out_path"] == "play/matching-human-vs-scripted.jsonl"
    record = next(r for r in read_games(run_dir / state["out_path"]) if r["game_id"] == state["game_id"])
    assert record["players"][seat]["kind"] == HUMAN and record["players"][1 - seat]["kind"] == "scripted"
    assert record["settings"][f"seat{seat}"]["backend"] == HUMAN
    assert record["stats"]["invalid_moves"] >= 1 and record["outcome"]["termination"] == "accepted"


async def test_played_games_are_evaluated_with_the_persons_seat_apart(client, run_dir, tmp_path):
    """The person's figures are their own seat's, wherever they sat: valid moves, words and stated
    cells of their moves only; the partner is reported beside them, not mixed in."""
    for seed, seat in ((3, 0), (4, 1)):
        state = await (await client.post("/api/play", json={"game": "matching", "seat": seat, "seed": seed})).json()
        state = await move(client, state, "[propose] nobody")  # one invalid move each game
        while not state["done"]:
            state = await move(client, state, _human_turn(state["messages"][-1]["content"]))
    played = run_dir / "play/matching-human-vs-scripted.jsonl"
    records = list(read_games(played))
    seat_of = [next(s for s, p in enumerate(r["players"]) if p["kind"] == HUMAN) for r in records]

    def own(kind: str, mine: bool) -> int:
        """The moves (valid, or `invalid`) of the person's seat (`mine`) or of the partner's."""
        return sum(
            e["kind"] == kind if kind == "invalid" else e["kind"] not in ("invalid", "stop")
            for r, s in zip(records, seat_of)
            for e in r["events"]
            if (e["player"] == s) == mine
        )

    for spec in (f"human={played}", f"human,scripted={played}"):
        out = tmp_path / spec.split("=")[0]
        await asyncio.to_thread(run_cli, "eval", "--from-games", spec, "--out", str(out), "--bootstrap", "100", "-q")
        sides = json.loads((out / "metrics.json").read_text())["people"]["sides"]
        assert list(sides) == ["human", "scripted"]
        human, partner = sides["human"], sides["scripted"]
        assert human["role"] == "person" and partner["role"] == "partner"
        assert human["games"] == partner["games"] == len(records) >= 2
        assert human["games_in_seat"] == [seat_of.count(0), seat_of.count(1)]
        for side, mine in ((human, True), (partner, False)):
            valid, invalid = own("valid", mine), own("invalid", mine)
            assert side["valid_move_rate"]["mean"] == pytest.approx(valid / (valid + invalid))
            assert side["invalid_moves"] == invalid
        assert human["invalid_moves"] >= 2 and partner["invalid_moves"] == 0
        assert "cells stated" in human["figures"]
        report = (out / "report.md").read_text()
        assert "human | human" not in report and "| human | person |" in report and "| scripted | partner |" in report


async def test_two_people_on_one_instance_get_two_records(client, run_dir):
    start = {"game": "matching", "seat": 0, "seed": 77}
    first, second = [await (await client.post("/api/play", json=start)).json() for _ in range(2)]
    for state in (second, first):  # the later one ends first
        while not state["done"]:
            state = await move(client, state, _human_turn(state["messages"][-1]["content"]))
        assert state["outcome"]["agreed"]
    ids = [r["game_id"] for r in read_games(run_dir / state["out_path"]) if r["instance_id"] == "seed-77"]
    assert sorted(ids) == ["seed-77/human-0", "seed-77/human-1"]


async def test_a_person_plays_negotiation_against_a_scripted_negotiator(client, run_dir):
    state = await (
        await client.post(
            "/api/play", json={"game": "negotiation", "seat": 1, "seed": 5, "options": {"reward_mode": "competitive"}}
        )
    ).json()
    assert "Your values:" in state["messages"][0]["content"] and state["your_turn"]
    assert state["grammar"].startswith("[message] text · [propose] 1 book")  # the game's, shown beside the box
    setup = await get_json(client, "/api/play/setup")
    assert setup["options"]["negotiation"] == {"reward_mode": ["cooperative", "semi-competitive", "competitive"]}
    assert setup["options"]["matching"] == {}
    state = await move(client, state, "[propose] 9 books")
    assert state["messages"][-1]["content"].startswith("Invalid move: ")
    record = None
    for _ in range(30):
        if state["done"]:
            break
        state = await (
            await client.post(f"/api/play/{state['id']}/move", json={"text": "[message] what do you offer?"})
        ).json()
    assert state["done"]
    record = next(r for r in read_games(run_dir / state["out_path"]) if r["game_id"] == state["game_id"])
    assert record["game"] == "negotiation" and record["players"][1]["kind"] == HUMAN
    assert record["outcome"]["reward_mode"] == "competitive"


async def test_bad_play_requests_are_refused_with_a_reason(client):
    response = await client.post("/api/play", json={"game": "chess"})
    assert response.status == 400 and "chess" in (await response.json())["error"]
    response = await client.post("/api/play", json={"game": "matching", "partner": "oracle"})
    assert response.status == 400 and "oracle" in (await response.json())["error"]
    response = await client.post("/api/play/nope/move", json={"text": "[accept]"})
    assert response.status == 404


@pytest.mark.slow
async def test_a_person_plays_against_the_embedded_model(tmp_path, local_model_dir):
    """The model seat is built as `play` builds it (an LLM seat on the local backend), and its
    sampled tokens are recorded beside the human seat. Short limits keep the game to one turn each."""
    opts = {**SCRIPTED_OPTS, "backend": "local", "model": local_model_dir, "max_new_tokens": 16}
    opts.update(max_moves=2, max_invalid=1)
    async with page_client(make_app(tmp_path, opts), timeout=ClientTimeout(total=900)) as c:
        state = await (await c.post("/api/play", json={"game": "matching", "seat": 0, "partner": "model"})).json()
        assert state["your_turn"] and state["partner"] == "model"
        state = await move(c, state, "[message] Hello! Ava Li: GLUE 12.")
        while not state["done"]:
            state = await (await c.get(f"/api/play/{state['id']}?wait=60")).json()
    record = next(read_games(tmp_path / state["out_path"]))
    assert state["out_path"] == "play/matching-human-vs-model.jsonl"
    assert record["players"][0]["kind"] == HUMAN and record["players"][1]["kind"] == "llm"
    assert record["players"][1]["turns"] and record["players"][1]["invariant_ok"]
    assert record["settings"]["seat1"]["backend"] == "local" and record["failure"] is None


def test_the_command_listens_on_this_machine_only_by_default(run_dir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    server = subprocess.Popen(
        [sys.executable, "-m", "selfplay_gen.cli", "view", str(run_dir), "--port", str(port), "--backend", "scripted"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                time.sleep(0.2)
        listening = [
            line.split()[1]
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
            + Path("/proc/net/tcp6").read_text().splitlines()[1:]
            if line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A"
        ]
        assert listening == [f"0100007F:{port:04X}"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_server_backend_without_its_url_is_refused_before_serving(run_dir):
    result = CliRunner().invoke(main, ["view", str(run_dir), "--backend", "sglang"])
    assert result.exit_code == 2 and "--backend sglang needs --base-url" in result.output
