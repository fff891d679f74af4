"""`selfplay-gen view PATH`: the command that starts the viewer."""

from __future__ import annotations

import copy
from pathlib import Path

import click

from .. import config_tree
from ..options import Playing, settings
from .play import PlayLimits

# The options of `play` that say what sits in a seat and how it samples; the game (a person picks it), the
# partner's own (--partner-*) and the run's (concurrency, seed) have no meaning for one person's games.
_SECTIONS = ("sampling.", "seats.", "scripted.", "client.")
_UNUSED = {"concurrency", "scripted_strength"}
_SEAT_KNOBS = {
    k.param for k in config_tree.knobs(Playing)
    if k.path.startswith(_SECTIONS) and not k.name.startswith("partner_") and k.name not in _UNUSED
}  # fmt: skip
_PARAMS: list[click.Parameter] = config_tree.options(Playing)(lambda: None).__click_params__  # type: ignore[attr-defined]
SEAT_PARAMS = [p for p in _PARAMS if p.name in _SEAT_KNOBS]
# every setting as a seat's play takes it (`open_seats`), with the tree's defaults
DEFAULTS = settings(Playing())
# here the seat options say what plays against the person, not what plays both seats
_PARTNER_HELP = {
    "backend": "What plays against you when you pick the model as your partner: the model in this process on "
    "CPU through llama.cpp (llamacpp) or transformers (local), an SGLang server, an OpenAI-compatible server, "
    "or scripted players (then both partners are scripted). A scripted partner needs none of these.",
}


def _view_param(param: click.Parameter) -> click.Parameter:
    if param.name not in _PARTNER_HELP:
        return param
    param = copy.copy(param)
    assert isinstance(param, click.Option)
    param.help = _PARTNER_HELP[param.name]
    return param


@click.command("view")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. The default is this machine only (the page answers requests for "
    "127.0.0.1:PORT and localhost:PORT). Any other address (0.0.0.0: every interface) lets other machines "
    "see the games and play against the model: it needs --token, and the page opens at "
    "http://HOST:PORT/?token=TOKEN.",
)
@click.option(
    "--token",
    default=None,
    envvar="SELFPLAY_VIEW_TOKEN",
    help="Secret that opens the viewer when --host is not this machine (also $SELFPLAY_VIEW_TOKEN). On this "
    "machine a fresh one is made at every start and given to the page only.",
)
@click.option(
    "--max-games",
    type=click.IntRange(min=1),
    default=PlayLimits.max_games,
    show_default=True,
    help="Games people may have in progress at once; more are refused until one ends or expires.",
)
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=PlayLimits.idle_s / 60,
    show_default=True,
    help="A game nobody has moved in or looked at for this long expires, unrecorded.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.option(
    "--play-out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the games people play, one file per game and partner (GAME-human-vs-PARTNER.jsonl). "
    "Default: play/ under PATH, so they show up in the viewer too (for a games file: play/ beside it, which "
    "the viewer of that one file does not show).",
)
def view_command(
    path: Path,
    host: str,
    port: int,
    token: str | None,
    max_games: int,
    idle_minutes: float,
    play_out: Path | None,
    **seat: object,
) -> None:
    """Watch recorded games and play a seat yourself, in the browser.

    PATH is a games file (games.jsonl), a report directory (from `selfplay-gen eval`) or a whole
    run directory (run_selfplay_iteration.sh's RUN_DIR: base/, warm/, iter_NNN/, report/). The page
    lists the run's reports with their tables and plots and the games behind each row; replays a
    game turn by turn with both seats' private views, every message, proposal and invalid move
    (with the parser's reason), and the score beside the best possible and what the game adds
    (e.g. a random baseline); and puts two checkpoints' games of the same instance side by side.

    PLAY: take either seat against a scripted partner or against the model that --backend,
    --base-url and --model name (default: the embedded model on CPU, loaded on the first game
    against it). You see exactly what a model in that seat is given, and type moves in the game's
    grammar (at most 2,000 characters a move). Each game is recorded like any other, its seat
    marked "human", so `selfplay-gen eval --from-games` reports it beside model games. At most
    --max-games games are in progress at once, and one left alone for --idle-minutes expires.

    SERVED: a games file alone when PATH is one, else the files under the folder PATH, never
    hidden files or links that lead out of it. Files are served as data (images, plain text or
    downloads), never as pages or scripts. Only this machine is answered, and only the page the
    viewer served may start games, unless --host and --token say otherwise.
    """
    from .app import Access, is_loopback, make_app, serve

    opts = settings(config_tree.resolve(Playing, seat)[0])
    if opts["backend"] in ("sglang", "openai") and not opts["base_url"]:
        raise click.UsageError(f"--backend {opts['backend']} needs --base-url (the server of the model to play)")
    try:
        access = Access.for_host(host, token)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    limits = PlayLimits(idle_s=idle_minutes * 60, max_games=max_games)
    app = make_app(path, opts, play_out, access, limits)
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    if not is_loopback(host):
        click.echo(
            f"warning: --host {host} exposes the viewer (games, reports, files under PATH, and games against "
            "the model) to every machine that reaches this address; anyone with the token can use it",
            err=True,
        )
    url = f"http://{shown}:{port}/" + (f"?token={access.token}" if access.everywhere else "")
    click.echo(f"selfplay-gen view: {url} (Ctrl-C stops)", err=True)
    serve(app, host, port)


for _param in reversed(SEAT_PARAMS):
    view_command.params.append(_view_param(_param))
