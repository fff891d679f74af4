"""The viewer's web app: the page (`static/`) and the JSON API it reads, on aiohttp.

Routes:
    GET  /                      the page (one HTML file carrying the request token; the rest is in /static)
    GET  /api/library           games files, reports and the run summary under the root
    GET  /api/games?file=F      the games of F, with an error per line that is not a record
    GET  /api/game?file=F&line=N  one game as `replay.describe` shows it
    GET  /api/same?file=F&line=N  the other games of its instance (to put side by side)
    GET  /api/report?dir=D      a report directory: its report.md as HTML, its games files,
                                and for run-level reports the games behind each row
    GET  /files/PATH            a file under the root (the reports' plots), as data only
    GET  /api/play/setup        what can be played: games, their options, the partners, the limits
    POST /api/play              start a game with a person in one seat
    GET  /api/play/ID?wait=S    its state, once the person is asked to move (or after S seconds)
    POST /api/play/ID/move      the person's turn

What is served (`Library.resolve`): the one games file given, or what is under the folder given;
never hidden files, nor links that lead out. Files from that folder are data, never active content
on the viewer's origin: images as images, text as plain text, anything else (HTML, scripts, SVG)
as a download, each under a sandboxing Content-Security-Policy. Every text goes to the page as
JSON and is put in the page as text, never as markup (the report's markdown is rendered here with
raw HTML escaped), and the page's policy allows no inline script and no framing.

Who is answered (`Access`, one middleware): requests whose Host is the address the viewer was
started on (127.0.0.1, localhost or the --host named) and its port, so a rebound DNS name reads
nothing; requests that change state (POST) only with this origin's `Origin` and the token the
page was served with, so no other site starts games; on an address other machines reach, every
request with the token (`?token=` once, then a cookie). Anything else: 403.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import ipaddress
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import hdrs, web
from markdown_it import MarkdownIt

from .. import games
from ..options import IN_PROCESS
from ..records import RecordError
from .library import GamesIndex, Library, OutsideRoot
from .play import PARTNERS, Arena, PlayLimits, TooManyGames
from .replay import describe, model_name

STATIC = Path(__file__).with_name("static")  # package data: index.html, app.js, style.css
LIBRARY = web.AppKey("library", Library)
ARENA = web.AppKey("arena", Arena)
CSP = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# a file from the viewed folder opened on its own: no script, no plugin, no frame, its own origin
FILES_CSP = "sandbox; default-src 'none'; img-src 'self'; frame-ancestors 'none'"
# what a file under the root is served as, by suffix: images as images, text as plain text;
# anything else (HTML, JavaScript, SVG, ...) is sent as a download
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
TEXT_SUFFIXES = {".md", ".txt", ".json", ".jsonl", ".csv", ".tsv", ".log", ".yaml", ".yml", ".toml"}
TOKEN_HEADER = "X-Selfplay-Token"
TOKEN_COOKIE = "selfplay_view_token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
MAX_BODY = 64 * 1024  # bytes of a request body: a move is at most PlayLimits.max_move_chars characters
MOVE_WAIT_S = 120.0  # how long a move's request waits for the partner's answer before the page polls


@dataclass(frozen=True)
class Access:
    """Which requests the viewer answers: the Host names it was started for (None: any, on a
    wildcard address such as 0.0.0.0, where the token guards every request), the token a
    state-changing request carries, and whether every request must carry it (an address other
    machines reach)."""

    hosts: frozenset[str] | None
    token: str
    everywhere: bool = False

    @classmethod
    def for_host(cls, host: str, token: str | None = None) -> Access:
        """The access of a viewer listening on `host`: loopback answers its own names with a
        fresh token for the page; any other address needs `token` and asks it of every request."""
        if is_loopback(host):
            return cls(LOOPBACK_NAMES | {host.strip("[]").lower()}, token or secrets.token_urlsafe(24))
        if not token:
            raise ValueError(
                f"--host {host} lets other machines reach the viewer: give --token (a secret to open it with)"
            )
        wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
        return cls(None if wildcard else LOOPBACK_NAMES | {host.strip("[]").lower()}, token, everywhere=True)

    def host_ok(self, request: web.Request) -> bool:
        """The Host header names this viewer: an allowed name and the port it listens on."""
        name, sep, port = (request.host or "").rpartition(":")
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        if not sep or sock is None or port != str(sock[1]):
            return False
        return self.hosts is None or name.strip("[]").lower() in self.hosts

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


ACCESS = web.AppKey("access", Access)


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _error(status: type[web.HTTPException], message: str) -> web.HTTPException:
    return status(text=json.dumps({"error": message}), content_type="application/json")


def _too_large(size: int, message: str) -> web.HTTPException:
    return web.HTTPRequestEntityTooLarge(
        MAX_BODY, size, text=json.dumps({"error": message}), content_type="application/json"
    )


def _lib(request: web.Request) -> Library:
    return request.app[LIBRARY]


def _param(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if value is None:
        raise _error(web.HTTPBadRequest, f"missing query parameter {name!r}")
    return value


def _refusal(request: web.Request) -> str | None:
    """Why the viewer does not answer `request` (None: it does)."""
    access = request.app[ACCESS]
    if not access.host_ok(request):
        return f"this viewer answers requests for its own address only, not Host {request.host!r}"
    if access.everywhere and not (
        access.token_ok(request.cookies.get(TOKEN_COOKIE))
        or access.token_ok(request.headers.get(TOKEN_HEADER))
        or access.token_ok(request.query.get("token"))
    ):
        return "open the viewer with the URL it printed (…/?token=TOKEN)"
    if request.method not in SAFE_METHODS:
        if request.headers.get(hdrs.ORIGIN) != f"{request.scheme}://{request.host}":
            return "a request that changes something must come from the viewer's own page (Origin)"
        if not access.token_ok(request.headers.get(TOKEN_HEADER)):
            return "a request that changes something must carry the token of the viewer's page"
    return None


@web.middleware
async def _guard(request: web.Request, handler):
    """Requests not for this viewer get 403 (`_refusal`); paths outside what is served read as
    absent; every error is a JSON `{"error": ...}` the page shows."""
    refusal = _refusal(request)
    if refusal is not None:
        raise _error(web.HTTPForbidden, refusal)
    try:
        response = await handler(request)
    except OutsideRoot as err:
        raise _error(web.HTTPNotFound, str(err)) from None
    except web.HTTPException as err:
        if err.status < 400 or err.content_type == "application/json":
            raise
        allow = {hdrs.ALLOW: err.headers[hdrs.ALLOW]} if hdrs.ALLOW in err.headers else None
        return web.json_response({"error": f"{err.status} {err.reason}: {err.text}"}, status=err.status, headers=allow)
    except Exception as err:  # a bug or a file that cannot be read: say what, keep serving
        raise _error(web.HTTPInternalServerError, f"{type(err).__name__}: {err}") from None
    access = request.app[ACCESS]
    if access.everywhere and access.token_ok(request.query.get("token")):
        response.set_cookie(TOKEN_COOKIE, access.token, httponly=True, samesite="Strict", path="/")
    return response


async def _secured(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer, errors included, carries the page's security headers (a file's own, stricter
    policy is kept)."""
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"


async def index(request: web.Request) -> web.StreamResponse:
    """The page, with the token its state-changing requests carry (read by no other origin: the
    Host check refuses rebound names, and the same-origin policy the rest)."""
    page = (STATIC / "index.html").read_text()
    token = f'<meta name="selfplay-token" content="{html.escape(request.app[ACCESS].token)}">'
    return web.Response(text=page.replace("<!-- token -->", token), content_type="text/html")


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
    own = lib.games_in(folder)
    rows = []
    metrics = folder / "metrics.json"
    if metrics.is_file():
        try:
            data = json.loads(metrics.read_text())
        except ValueError as err:
            data = {"rows": [], "error": f"{name}/metrics.json: {err}"}
        for row in data.get("rows", []) if isinstance(data, dict) else []:
            source = lib.locate(str(row.get("source", "")), folder) if row.get("source") else None
            files = lib.games_in(source) if source else []
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
    """A file under the root as data: an image as itself, text as text/plain, anything else as a
    download; never as a page or script of the viewer's origin."""
    path = _lib(request).resolve(request.match_info["path"])
    if not path.is_file():
        raise OutsideRoot(f"{request.match_info['path']!r} is not a file")
    suffix = path.suffix.lower()
    headers = {"Content-Security-Policy": FILES_CSP}
    if suffix in IMAGE_TYPES:
        headers[hdrs.CONTENT_TYPE] = IMAGE_TYPES[suffix]
    elif suffix in TEXT_SUFFIXES:
        headers[hdrs.CONTENT_TYPE] = "text/plain; charset=utf-8"
    else:
        headers[hdrs.CONTENT_TYPE] = "application/octet-stream"
        headers[hdrs.CONTENT_DISPOSITION] = f'attachment; filename="{path.name.replace(chr(34), "")}"'
    return web.FileResponse(path, headers=headers)


def _game_options() -> dict[str, Any]:
    """Each game's options a person may pick, with their values (`Game.play_options`)."""
    return {name: {k: list(v) for k, v in games.get(name).play_options.items()} for name in games.names()}


async def play_setup(request: web.Request) -> web.StreamResponse:
    arena = request.app[ARENA]
    opts = arena.opts
    named = opts.get("model") or (None if opts["backend"] not in IN_PROCESS else "")  # "": the embedded model
    model = opts["backend"] + (f" {model_name(named)}" if named is not None else "")
    if opts.get("base_url"):
        model += " at " + " ".join(opts["base_url"])
    return web.json_response(
        {
            "games": games.names(),
            "options": _game_options(),
            "partners": list(PARTNERS),
            "model": model,
            "limits": arena.limits.to_dict(),
        }
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
    except TooManyGames as err:
        raise _error(web.HTTPTooManyRequests, str(err)) from None
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
    out_path = lib.name(out) if lib.serves(out) else None
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
    limit = request.app[ARENA].limits.max_move_chars
    too_long = f"a move is at most {limit:,} characters; shorten it and send it again"
    try:
        text = str((await request.json())["text"])
    except web.HTTPRequestEntityTooLarge as err:
        raise _too_large(err.status, too_long) from None
    except (ValueError, KeyError, TypeError):
        raise _error(web.HTTPBadRequest, 'a move is a JSON object {"text": "..."}') from None
    if len(text) > limit:
        raise _too_large(len(text), f"{too_long} (this one has {len(text):,})")
    if session.done:
        raise _error(web.HTTPConflict, "this game is over: start another one to play again")
    if session.human is None or not session.human.asked:
        raise _error(web.HTTPConflict, "it is not your turn: your partner is still moving")
    session.human.submit(text)
    await asyncio.sleep(0)  # the game takes the turn
    await session.wait(MOVE_WAIT_S)
    return _state(request, session)


def make_app(
    path: str | Path,
    play_opts: dict[str, Any],
    play_out: Path | None = None,
    access: Access | None = None,
    limits: PlayLimits | None = None,
) -> web.Application:
    """The app over `path` (a games file, a report or a run directory). People's games go to
    `play_out` (default: PATH/play/, or play/ beside a games file), played with the seat options
    `play_opts` (those of `selfplay-gen play`) within `limits`; `access` says which requests are
    answered (default: this machine's, as on 127.0.0.1)."""
    lib = Library(path)
    app = web.Application(middlewares=[_guard], client_max_size=MAX_BODY)
    app[LIBRARY] = lib
    app[ACCESS] = access or Access.for_host("127.0.0.1")
    app[ARENA] = Arena(Path(play_out) if play_out else lib.root / "play", play_opts, limits or PlayLimits())
    app.on_response_prepare.append(_secured)

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
