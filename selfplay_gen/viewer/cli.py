"""`selfplay-gen view PATH`: the command that starts the viewer."""

from __future__ import annotations

from pathlib import Path

import click

from ..options import generation_options

# The options of `play` that say what sits in a seat and how it samples; the partner's own
# (--partner-*) and the run's (concurrency, seed) have no meaning for one person's games.
_UNUSED = {"concurrency", "seed", "scripted_strength"}
_PARAMS: list[click.Parameter] = generation_options(lambda: None).__click_params__
SEAT_PARAMS = [p for p in _PARAMS if p.name and not p.name.startswith("partner_") and p.name not in _UNUSED]
DEFAULTS = {p.name: p.default for p in _PARAMS if p not in SEAT_PARAMS}
DEFAULTS["partner_base_url"] = ()


@click.command("view")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. The default is this machine only; 0.0.0.0 lets anyone on the network see "
    "the games and play against the model.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.option(
    "--play-out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the games people play, one file per game and partner (GAME-human-vs-PARTNER.jsonl). "
    "Default: play/ under PATH (beside PATH for a games file), so they show up in the viewer too.",
)
def view_command(path: Path, host: str, port: int, play_out: Path | None, **seat: object) -> None:
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
    grammar. Each game is recorded like any other, its seat marked "human", so
    `selfplay-gen eval --from-games` reports it beside model games.

    Only files under PATH are served, and only to this machine unless --host says otherwise.
    """
    from .app import make_app, serve

    if seat["backend"] in ("sglang", "openai") and not seat["base_url"]:
        raise click.UsageError(f"--backend {seat['backend']} needs --base-url (the server of the model to play)")
    opts = {**DEFAULTS, **seat}
    app = make_app(path, opts, play_out)
    click.echo(f"selfplay-gen view: http://{host}:{port}/ (Ctrl-C stops)", err=True)
    serve(app, host, port)


for _param in reversed(SEAT_PARAMS):
    view_command.params.append(_param)
