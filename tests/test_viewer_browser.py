"""The viewer in a real browser (Debian's Chromium, headless, driven by Selenium through the
system chromedriver), used as a person would: replay a game to its end, play a whole matching
game, open a run's report, read a broken file. `.ci/run` installs chromium and chromium-driver;
without them these tests skip.

SELFPLAY_VIEWER_SCREENSHOTS=DIR saves the screenshots the README shows into DIR."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_helpers import SCRIPTED_OPTS, Served, make_negotiation_file, make_run_dir

from selfplay_gen import games
from selfplay_gen.records import read_games
from selfplay_gen.viewer.app import ARENA, make_app
from selfplay_gen.viewer.play import HUMAN

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Chromium and its driver from the system packages (apt-get install chromium chromium-driver; "
    ".ci/run installs them)",
)
SHOTS = os.environ.get("SELFPLAY_VIEWER_SCREENSHOTS")
XSS = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> & <b>bold?</b>'


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = make_run_dir(tmp_path_factory.mktemp("run"))
    make_negotiation_file(run / "negotiation/games.jsonl")
    return run


@pytest.fixture(scope="module")
def served(run_dir) -> Iterator[Served]:
    with Served(make_app(run_dir, SCRIPTED_OPTS)) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    # headless as root: Chromium's sandbox needs a user namespace that containers rarely allow
    flags = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000")
    for flag in flags:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception:  # the element is not there yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {getattr(condition, '__name__', condition)}")
        time.sleep(0.1)


def by_id(browser, name: str):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, name)


def css(browser, selector: str) -> list:
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, selector)


def stale(element) -> bool:
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    return False


def shot(browser, name: str, height: int | None = None) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        if height:
            browser.set_window_size(1280, height)
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(str(Path(SHOTS) / f"{name}.png"))
        browser.set_window_size(1280, 1000)


def start_playing(browser, url: str, seed: int) -> None:
    """Start a matching game in seat 1 against the scripted player, on the instance of `seed`."""
    browser.get(f"{url}/#/play")
    wait_for(lambda: by_id(browser, "play-start"))
    by_id(browser, "play-seat").send_keys("seat 1")
    by_id(browser, "play-seed").send_keys(str(seed))
    by_id(browser, "play-start").click()


def send_move(browser, text: str) -> None:
    """Type a move and send it; back once the page is drawn anew (the partner has answered)."""
    box = wait_for(lambda: by_id(browser, "move"))
    box.clear()
    box.send_keys(text)
    by_id(browser, "send").click()
    wait_for(lambda: stale(box))
    wait_for(lambda: css(browser, "#move") or css(browser, "#play-outcome"))


def no_page_error(browser) -> None:
    alert = by_id(browser, "alert")
    assert not alert.is_displayed(), alert.text


def test_replay_a_recorded_game_to_its_end(browser, served, run_dir):
    record = next(read_games(run_dir / "iter_001/gen/games.jsonl"))
    browser.get(f"{served.url}/#/games?file=iter_001/gen/games.jsonl")
    wait_for(lambda: css(browser, "#games a")).__getitem__(0).click()
    wait_for(lambda: by_id(browser, "next").is_enabled())
    assert len(css(browser, ".view table.grid")) == 2  # both seats' private tables
    hidden = [len(css(browser, f'.view[data-seat="{s}"] td.hidden')) for s in (0, 1)]
    assert hidden == [64 - sum(map(sum, record["instance"]["masks"][s])) for s in (0, 1)]
    assert not css(browser, "#outcome")
    clicks = 0
    while by_id(browser, "next").is_enabled():
        by_id(browser, "next").click()
        clicks += 1
        assert len(css(browser, "#turns li.turn")) == clicks
    assert clicks == len(record["events"])
    assert by_id(browser, "turn-counter").text == f"turn {clicks} of {clicks}"
    outcome = by_id(browser, "outcome").text
    raw, best = record["outcome"]["raw_reward"], record["outcome"]["best_reward"]
    assert f"{raw} of {best} possible" in outcome and "random matching (this instance)" in outcome
    by_id(browser, "best-plan").click()
    assert len(css(browser, "#best-plan td.best")) == 8 and len(css(browser, "#best-plan td.agreed")) == 8
    no_page_error(browser)
    shot(browser, "replay", height=1900)


def test_negotiation_replay_shows_each_seats_values(browser, served, run_dir):
    record = next(read_games(run_dir / "negotiation/games.jsonl"))
    browser.get(f"{served.url}/#/game?file=negotiation/games.jsonl&line=1")
    wait_for(lambda: by_id(browser, "to-end").is_enabled())
    values = css(browser, ".view table.list tr")[1:]
    assert [[int(c.text) for c in row.find_elements("css selector", "td")[1:]] for row in values] == [
        [record["instance"]["counts"][i], record["instance"]["values"][0][i], record["instance"]["values"][1][i]]
        for i in range(3)
    ]
    by_id(browser, "to-end").click()
    assert "points" in by_id(browser, "outcome").text


def test_play_a_whole_matching_game_as_the_human_seat(browser, served, run_dir):
    start_playing(browser, served.url, 21)
    # the scripted partner in seat 0 has moved; the page shows what a model in seat 1 is given
    wait_for(lambda: by_id(browser, "move"))
    system = by_id(browser, "play-system").text
    assert system.startswith("You and your partner are area chairs") and "Your table:" in system
    assert css(browser, "#play-chat .msg pre")[-1].text.startswith("Partner: [message]")

    send_move(browser, "[propose] everyone to BLEU")
    assert "Invalid move:" in css(browser, "#play-chat .msg pre")[-1].text  # the game's reason, and move again
    send_move(browser, "[message] " + XSS)
    shot(browser, "play", height=1250)
    for _ in range(30):
        if css(browser, "#play-outcome"):
            break
        told = css(browser, "#play-chat .msg pre")[-1].text
        last = [line for line in told.splitlines() if line.startswith("Partner: ")][-1:]
        send_move(
            browser, "[accept]" if last and last[0].startswith("Partner: [propose]") else "[message] Please go on."
        )
    recorded = wait_for(lambda: by_id(browser, "play-recorded")).text
    game_id = recorded.split()[2]
    played = run_dir / "play/matching-human-vs-scripted.jsonl"
    record = next(r for r in read_games(played) if r["game_id"] == game_id)
    assert record["players"][1]["kind"] == HUMAN and record["settings"]["seat1"]["backend"] == HUMAN
    assert record["outcome"]["agreed"] and record["stats"]["invalid_moves"] == 1
    assert any(e["text"] == XSS for e in record["events"])
    no_page_error(browser)

    # the game is in the viewer at once; its messages are shown as text and never run
    browser.get(f"{served.url}/#/games?file=play/matching-human-vs-scripted.jsonl")
    wait_for(lambda: [a for a in css(browser, "#games a") if a.text == game_id])[0].click()
    wait_for(lambda: by_id(browser, "to-end").is_enabled())
    by_id(browser, "to-end").click()
    shown = [t.text for t in css(browser, "#turns li.turn .text")]
    assert XSS in shown
    assert any(t.text.startswith("invalid: ") for t in css(browser, "#turns .error"))
    assert browser.execute_script("return window.pwned === undefined")
    assert not css(browser, "#turns img") and not css(browser, "#turns b")


def test_open_a_runs_report_and_the_games_behind_a_row(browser, served):
    browser.get(f"{served.url}/#/")
    wait_for(lambda: [a for a in css(browser, "ul.reports a") if a.text == "report/heldout"])[0].click()
    wait_for(lambda: css(browser, "#report table"))
    rows = css(browser, "#report-rows tr")[1:]
    assert [r.find_elements("css selector", "td")[1].text for r in rows] == ["base", "iter_1"]
    plots = css(browser, "#report img")
    assert len(plots) == 4  # reward, moves, play by iteration, rating
    wait_for(lambda: all(browser.execute_script("return arguments[0].naturalWidth", img) > 0 for img in plots))
    assert "0: base" in by_id(browser, "report").text and "1: iter_1" in by_id(browser, "report").text
    shot(browser, "report", height=1400)
    rows[1].find_element("css selector", "a").click()
    wait_for(lambda: len(css(browser, "#games tr")) == 1 + 6)
    css(browser, "#games a")[0].click()
    compare = wait_for(lambda: css(browser, "#same-instance a"))
    assert any(a.text.startswith("base/eval/heldout/games/base__base.jsonl") for a in compare)
    next(a for a in compare if a.text.startswith("base/")).click()
    sides = wait_for(lambda: css(browser, "#compare .side"))
    assert len(sides) == 2 and all(s.find_elements("css selector", "#outcome") for s in sides)
    no_page_error(browser)
    shot(browser, "side_by_side", height=1400)


def test_a_broken_games_file_names_the_line_and_the_page_keeps_working(browser, served, run_dir):
    lines = (run_dir / "iter_001/gen/games.jsonl").read_text().splitlines(keepends=True)
    bad = json.loads(lines[0])
    bad["players"][0]["kind"] = 7
    broken = run_dir / "broken/games.jsonl"
    broken.parent.mkdir()
    broken.write_text(json.dumps(bad) + "\n" + lines[1] + lines[2][:100])
    browser.get(f"{served.url}/#/games?file=broken/games.jsonl")
    errors = wait_for(lambda: by_id(browser, "file-errors")).text
    assert "broken/games.jsonl:1: field 'players[0].kind'" in errors
    assert "broken/games.jsonl:3: not valid JSON" in errors
    links = css(browser, "#games a")
    assert [a.text for a in links] == [json.loads(lines[1])["game_id"]]
    browser.get(f"{served.url}/#/game?file=broken/games.jsonl&line=3")
    alert = wait_for(lambda: by_id(browser, "alert").is_displayed() and by_id(browser, "alert").text)
    assert alert.startswith("broken/games.jsonl:3: not valid JSON")
    css(browser, "main a")[0].click()  # back to the list: the page still works
    wait_for(lambda: css(browser, "#games-files, table.list"))
    no_page_error(browser)


# ---------------------------------------------------------------- tried as an attacker would


def test_a_page_under_the_folder_never_runs_as_the_viewer(browser, tmp_path, run_dir):
    """A shared run folder may hold any file: an HTML page and its script are sent as downloads
    (and sandboxed), never run on the viewer's origin, where they could read and start games."""
    folder = tmp_path / "shared"
    folder.mkdir()
    shutil.copy(run_dir / "iter_001/gen/games.jsonl", folder / "games.jsonl")
    (folder / "evil.html").write_text('<html><body>report<script src="evil.js"></script></body></html>')
    (folder / "evil.js").write_text(
        'document.title = "pwned"; fetch("/api/play", {method: "POST", headers: {"Content-Type": '
        '"application/json"}, body: JSON.stringify({game: "matching"})});'
    )
    with Served(make_app(folder, SCRIPTED_OPTS)) as server:
        browser.get(f"{server.url}/#/")
        wait_for(lambda: css(browser, "#files a"))
        browser.get(f"{server.url}/files/evil.html")
        time.sleep(1.5)
        assert browser.title != "pwned"
        assert server.app[ARENA].sessions == {}


def test_another_site_cannot_start_games(browser, tmp_path, run_dir):
    """A page on another origin posts a text/plain form and a no-cors fetch at the viewer: refused."""
    from aiohttp import web

    with Served(make_app(run_dir / "iter_001/gen/games.jsonl", SCRIPTED_OPTS)) as viewer:
        target = f"{viewer.url}/api/play"
        form = f"""<form id="f" method="POST" action="{target}" enctype="text/plain">
<input name='{{"game": "matching", "x": "' value='"}}'></form>"""
        script = f"""fetch("{target}", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
  body: '{{"game": "matching"}}'}})
  .finally(() => {{ document.title = "sent"; document.getElementById("f").submit(); }});"""
        page = f"<html><body>{form}<script>{script}</script></body></html>"

        async def evil(request: web.Request) -> web.Response:
            return web.Response(text=page, content_type="text/html")

        site = web.Application()
        site.router.add_get("/", evil)
        with Served(site) as attacker:
            browser.get(attacker.url.replace("127.0.0.1", "localhost") + "/")
            wait_for(lambda: browser.title == "sent" or "api/play" in browser.current_url)
            wait_for(lambda: "api/play" in browser.current_url)  # the form went out too
            time.sleep(0.5)
        assert viewer.app[ARENA].sessions == {}


def test_play_shows_the_table_warns_of_invalid_moves_and_refuses_long_ones(browser, served, run_dir):
    start_playing(browser, served.url, 31)
    box = wait_for(lambda: by_id(browser, "move"))
    # this seat's private table, drawn as the replay draws it
    mask = games.get("matching").instance_type.from_seed(31).masks[1]
    assert len(css(browser, "#play-private table.grid tr")) == 1 + 8
    assert len(css(browser, "#play-private td.hidden")) == 64 - sum(map(sum, mask))
    assert not css(browser, "#invalid-warning")

    browser.execute_script("arguments[0].value = '[message] ' + 'x'.repeat(5000)", box)
    by_id(browser, "send").click()
    alert = wait_for(lambda: by_id(browser, "alert").is_displayed() and by_id(browser, "alert").text)
    assert "a move is at most 2,000 characters" in alert
    assert by_id(browser, "send").is_enabled()  # the move stays, to be shortened

    send_move(browser, "[propose] nobody")
    assert not css(browser, "#invalid-warning")
    send_move(browser, "[propose] nobody")
    assert "one more invalid move" in by_id(browser, "invalid-warning").text
    send_move(browser, "[propose] nobody")
    ended = wait_for(lambda: by_id(browser, "play-invalid")).text
    assert "you (seat 1): 3" in ended and "you (seat 1) made too many invalid moves in a row" in ended


def test_a_bad_link_in_the_folder_leaves_the_page_working(browser, tmp_path, run_dir):
    folder = tmp_path / "links"
    folder.mkdir()
    shutil.copy(run_dir / "iter_001/gen/games.jsonl", folder / "games.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "gone.jsonl")
    (folder / "out.jsonl").symlink_to(run_dir / "iter_001/gen/games.jsonl")
    with Served(make_app(folder, SCRIPTED_OPTS)) as server:
        browser.get(f"{server.url}/#/")
        links = wait_for(lambda: css(browser, "#files a"))
        assert [a.text for a in links] == ["games.jsonl"]
        no_page_error(browser)
