"""The viewer's web app: the page (`static/`) and the JSON API it reads, on aiohttp.

Routes:
    GET  /                      the page (one HTML file; the rest of the page is in /static)
    GET  /api/library           games files, reports and the run summary under the root
    GET  /api/games?file=F      the games of F, with an error per line that is not a record
    GET  /api/game?file=F&line=N  one game as `replay.describe` shows it
    GET  /api/same?file=F&line=N  the other games of its instance (to put side by side)
    GET  /api/report?dir=D      a report directory: its report.md as HTML, its games files,
                                and for run-level reports the games behind each row
    GET  /files/PATH            a file under the root (the reports' plots)
    GET  /api/play/setup        what can be played: games, their options, the partners
    POST /api/play              start a game with a person in one seat
    GET  /api/play/ID?wait=S    its state, once the person is asked to move (or after S seconds)
    POST /api/play/ID/move      the person's turn

Every path a request names goes through `Library.resolve`, so nothing outside the root is
served; every text goes to the page as JSON and is put in the page as text, never as markup
(the report's markdown is rendered here with raw HTML escaped), and a Content-Security-Policy
allows no inline script at all.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from markdown_it import MarkdownIt

from .. import games
from ..records import RecordError
from .library import GamesIndex, Library, OutsideRoot
from .play import PARTNERS, Arena
from .replay import describe

STATIC = Path(__file__).with_name("static")  # package data: index.html, app.js, style.css
LIBRARY = web.AppKey("library", Library)
ARENA = web.AppKey("arena", Arena)
CSP = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; object-src 'none'; base-uri 'none'"
)
R = TypeVar("R", web.StreamResponse, web.HTTPException)
MOVE_WAIT_S = 120.0  # how long a move's request waits for the partner's answer before the page polls


def _error(status: type[web.HTTPException], message: str) -> web.HTTPException:
    return status(text=json.dumps({"error": message}), content_type="application/json")


def _lib(request: web.Request) -> Library:
    return request.app[LIBRARY]


def _param(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if value is None:
        raise _error(web.HTTPBadRequest, f"missing query parameter {name!r}")
    return value


@web.middleware
async def _guard(request: web.Request, handler):
    """Paths outside the root read as absent; every answer carries the page's security policy."""
    try:
        response = await handler(request)
    except OutsideRoot as err:
        raise _secured(_error(web.HTTPNotFound, str(err))) from None
    except web.HTTPException as err:
        raise _secured(err) from None
    return _secured(response)


def _secured(response: R) -> R:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def index(request: web.Request) -> web.StreamResponse:
    return web.Response(text=(STATIC / "index.html").read_text(), content_type="text/html")


def _markdown(text: str, folder: str) -> str:
    """Markdown as HTML with raw HTML escaped, and relative image and link targets pointed at
    /files/ under `folder`; anything else (other hosts, schemes) is dropped."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or ():
            attr = "src" if child.type == "image" else "href" if child.type == "link_open" else None
            if attr is None:
                continue
            target = str(child.attrGet(attr) or "")
            if target and not target.startswith(("/", "#")) and ":" not in target.split("/")[0]:
                prefix = "" if folder in ("", ".") else f"{folder}/"
                child.attrSet(attr, f"/files/{prefix}{target}")
            elif not target.startswith("#"):
                child.attrSet(attr, "")
    return md.renderer.render(tokens, md.options, {})


async def library(request: web.Request) -> web.StreamResponse:
    """What is under the root. Games files are listed, not read: a run holds files of thousands
    of games, and each is read (`Library.index`) only when it is opened."""
    lib = _lib(request)
    summary = lib.root / "summary.md"
    return web.json_response(
        {
            "root": lib.root.name if lib.single is None else lib.single.name,
            "games_files": [{"file": name, "bytes": lib.resolve(name).stat().st_size} for name in lib.games_files()],
            "reports": lib.reports(),
            "summary": _markdown(summary.read_text(), ".") if lib.single is None and summary.is_file() else None,
        }
    )


async def _index(request: web.Request, name: str) -> GamesIndex:
    """The file's index, built off the event loop (reading a large file takes seconds, and games
    in play must not wait for it)."""
    return await asyncio.to_thread(_lib(request).index, name)


async def games_list(request: web.Request) -> web.StreamResponse:
    index = await _index(request, _param(request, "file"))
    return web.json_response({"file": index.name, "games": [g.to_dict() for g in index.games], "errors": index.errors})


def _line(request: web.Request) -> int:
    try:
        return int(_param(request, "line"))
    except ValueError:
        raise _error(web.HTTPBadRequest, f"line must be a number, got {request.query['line']!r}") from None


async def game(request: web.Request) -> web.StreamResponse:
    index, line = await _index(request, _param(request, "file")), _line(request)
    try:
        record = index.record(line)
    except RecordError as err:
        raise _error(web.HTTPUnprocessableEntity, str(err)) from None
    return web.json_response({"file": index.name, "line": line, **describe(record)})


async def same_instance(request: web.Request) -> web.StreamResponse:
    """The other games of a game's instance, in every games file under the root (each file read
    once): what the page offers to put side by side."""
    lib, line = _lib(request), _line(request)
    index = await _index(request, _param(request, "file"))
    summary = next((g for g in index.games if g.line == line), None)
    if summary is None:
        raise _error(web.HTTPNotFound, f"{index.name}:{line}: no game on this line")
    same = await asyncio.to_thread(lib.same_instance, summary.instance_id, summary.game)
    return web.json_response([g for g in same if (g["file"], g["line"]) != (index.name, line)])


async def report(request: web.Request) -> web.StreamResponse:
    """A report directory: its report.md, the games files of its own games/ folder, and, in a
    run-level report (metrics.json with `rows`), the games files behind each row."""
    lib = _lib(request)
    folder = lib.resolve(_param(request, "dir"))
    if not (folder / "report.md").is_file():
        raise _error(web.HTTPNotFound, f"{_param(request, 'dir')!r} is not a report directory (no report.md)")
    name = lib.name(folder) or "."
    own = sorted(lib.name(p) for p in folder.glob("games/*.jsonl"))
    rows = []
    metrics = folder / "metrics.json"
    if metrics.is_file():
        try:
            data = json.loads(metrics.read_text())
        except ValueError as err:
            data = {"rows": [], "error": f"{name}/metrics.json: {err}"}
        for row in data.get("rows", []) if isinstance(data, dict) else []:
            source = lib.locate(str(row.get("source", "")), folder) if row.get("source") else None
            files = sorted(lib.name(p) for p in source.glob("games/*.jsonl")) if source else []
            rows.append(
                {
                    "iteration": row.get("iteration"),
                    "label": row.get("label"),
                    "source": lib.name(source) if source else None,
                    "games_files": files,
                }
            )
    html = _markdown((folder / "report.md").read_text(), name)
    return web.json_response({"dir": name, "html": html, "games_files": own, "rows": rows})


async def files(request: web.Request) -> web.StreamResponse:
    path = _lib(request).resolve(request.match_info["path"])
    if not path.is_file():
        raise OutsideRoot(f"{request.match_info['path']!r} is not a file")
    return web.FileResponse(path)


def _game_options() -> dict[str, Any]:
    """Each game's options a person may pick, with their values (`Game.play_options`)."""
    return {name: {k: list(v) for k, v in games.get(name).play_options.items()} for name in games.names()}


async def play_setup(request: web.Request) -> web.StreamResponse:
    opts = request.app[ARENA].opts
    model = f"{opts['backend']}" + (f" {opts['model']}" if opts.get("model") else "")
    if opts.get("base_url"):
        model += " at " + " ".join(opts["base_url"])
    return web.json_response(
        {"games": games.names(), "options": _game_options(), "partners": list(PARTNERS), "model": model}
    )


async def play_start(request: web.Request) -> web.StreamResponse:
    try:
        body = await request.json()
        name = str(body.get("game", games.UNNAMED))
        seat = int(body.get("seat", 0))
        seed = body.get("seed")
        seed = None if seed in (None, "") else int(seed)
        options = {k: str(v) for k, v in body.get("options", {}).items() if v}
        games.get(name)
    except (ValueError, TypeError, AttributeError) as err:
        raise _error(web.HTTPBadRequest, f"cannot start a game: {err}") from None
    try:
        session = await request.app[ARENA].start(name, seat, str(body.get("partner", "scripted")), seed, options)
    except (ValueError, TypeError) as err:
        raise _error(web.HTTPBadRequest, f"cannot start a game: {err}") from None
    except Exception as err:  # a model that cannot be opened: say why, keep serving
        raise _error(web.HTTPServiceUnavailable, f"cannot start a game: {type(err).__name__}: {err}") from None
    return _state(request, session)


def _state(request: web.Request, session) -> web.Response:
    """A game in play as the page shows it, with the file it is recorded in as the viewer names
    it (None when that file is outside the viewed directory)."""
    lib = _lib(request)
    out = session.out.resolve()
    out_path = lib.name(out) if out.is_relative_to(lib.root) else None
    return web.json_response({**session.state(), "out_path": out_path})


def _session(request: web.Request):
    try:
        return request.app[ARENA].get(request.match_info["id"])
    except KeyError as err:
        raise _error(web.HTTPNotFound, str(err.args[0])) from None


async def play_state(request: web.Request) -> web.StreamResponse:
    session = _session(request)
    try:
        wait = min(float(request.query.get("wait", 0)), MOVE_WAIT_S)
    except ValueError:
        raise _error(web.HTTPBadRequest, "wait must be a number of seconds") from None
    await session.wait(wait)
    return _state(request, session)


async def play_move(request: web.Request) -> web.StreamResponse:
    session = _session(request)
    try:
        text = str((await request.json())["text"])
    except (ValueError, KeyError, TypeError):
        raise _error(web.HTTPBadRequest, 'a move is a JSON object {"text": "..."}') from None
    if session.human is None or not session.human.asked:
        raise _error(web.HTTPConflict, "it is not your turn")
    session.human.submit(text)
    await asyncio.sleep(0)  # the game takes the turn
    await session.wait(MOVE_WAIT_S)
    return _state(request, session)


def make_app(path: str | Path, play_opts: dict[str, Any], play_out: Path | None = None) -> web.Application:
    """The app over `path` (a games file, a report or a run directory). People's games go to
    `play_out` (default: PATH/play/, or play/ beside a games file), played with the seat options
    `play_opts` (those of `selfplay-gen play`)."""
    lib = Library(path)
    app = web.Application(middlewares=[_guard])
    app[LIBRARY] = lib
    app[ARENA] = Arena(Path(play_out) if play_out else lib.root / "play", play_opts)

    async def close(app: web.Application) -> None:
        await app[ARENA].close()

    app.on_cleanup.append(close)
    app.router.add_get("/", index)
    app.router.add_get("/api/library", library)
    app.router.add_get("/api/games", games_list)
    app.router.add_get("/api/game", game)
    app.router.add_get("/api/same", same_instance)
    app.router.add_get("/api/report", report)
    app.router.add_get("/api/play/setup", play_setup)
    app.router.add_post("/api/play", play_start)
    app.router.add_get("/api/play/{id}", play_state)
    app.router.add_post("/api/play/{id}/move", play_move)
    app.router.add_get("/files/{path:.+}", files)
    app.router.add_static("/static", STATIC, follow_symlinks=False)
    return app


def serve(app: web.Application, host: str, port: int) -> None:
    web.run_app(app, host=host, port=port, print=None)
