"""`selfplay-gen`: play self-play games into JSONL (the default command), plus `init` and `eval`."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from pathlib import Path

import click

# OpenMP threads (llama.cpp's and torch's share one libgomp, set up by whichever loads first) wait
# passively: spinning threads on shared cores starve each other (llamacpp backend, 2 threads on 2
# busy cores: 3.6 tokens/s spinning, 19 waiting passively; bench/results/cpu_engines/notes.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .atomic import write_json_atomic
from .backends.base import BackendError
from .games import GameConfig
from .options import game_from, game_options, generation_options, load_instances, open_seats
from .records import UNNAMED_GAME, GameWriter, RecordError
from .runner import (
    SettingsChanged,
    Summary,
    check_same_settings,
    instances_needed,
    plan_games,
    run_games,
    until_signalled,
)


class DefaultGroup(click.Group):
    """A group whose first argument, when not a subcommand, goes to the default command, so
    `selfplay-gen --num-games 200` plays games while `selfplay-gen init ...` runs `init`. The other
    subcommands are imported when named (`LAZY`), so playing games loads neither pandas nor matplotlib."""

    LAZY = {"eval": "selfplay_gen.evaluation.cli:eval_command", "init": "selfplay_gen.verl.init_data:init_command"}

    def list_commands(self, ctx):
        return sorted({*self.commands, *self.LAZY})

    def get_command(self, ctx, name):
        if name in self.LAZY and name not in self.commands:
            module, attribute = self.LAZY[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def parse_args(self, ctx, args):
        if not args or args[0] not in self.list_commands(ctx) and args[0] not in ("--help", "-h"):
            args = ["play", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Self-play games (DialOp's matching game, or any registered game) with one model in both seats.

    Without a subcommand, plays games (see `selfplay-gen play --help`). `init` writes
    game-initialization data for online verl training; `eval` evaluates models.
    """


@main.command()
@click.option(
    "--num-games",
    "-n",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Games to play (in total, including those already in the file with --resume).",
)
@click.option(
    "--games-per-instance",
    "-k",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Games per instance: one GRPO group. GRPO needs K >= 2 for any signal.",
)
@click.option(
    "--instances",
    type=click.Choice(["random", "human"]),
    default="random",
    show_default=True,
    help="Seeded random hard instances, or the 134 instances people played.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("data/selfplay/games.jsonl"),
    show_default=True,
    help="JSONL file of games; a summary lands next to it.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Complete an interrupted run with the same settings: keep its games, play the missing and the failed ones.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@game_options
@generation_options
def play(num_games, games_per_instance, instances, out, resume, quiet, **opts):
    """Play games and write each one to OUT as it ends.

    Exit status: 0 when games were played, even if some failed (stderr counts them; --resume plays
    them again); 1 when every game of the run failed, when the run stopped early because every
    server was gone, or on an error (another run writing OUT, a full disk); 130/143 when stopped by
    SIGINT/SIGTERM.
    """
    game = game_from(opts)
    run = {"game": game.name, **game.options, "instances": instances, "seed": opts["seed"]}
    run["games_per_instance"] = games_per_instance
    specs = plan_games(
        load_instances(instances, instances_needed(num_games, games_per_instance), opts["seed"], game.name),
        games_per_instance,
        num_games,
    )
    try:
        writer = GameWriter(out, resume=resume)
    except (OSError, RecordError) as err:
        raise click.ClickException(str(err)) from None
    with writer:
        if writer.settings is not None:
            try:
                old = {"game": UNNAMED_GAME, **writer.settings.get("run", {})}  # files from before games had names
                check_same_settings(out, {"run": old}, {"run": run})
            except SettingsChanged as err:
                raise click.UsageError(str(err)) from None
        unplanned = writer.done - {spec.game_id for spec in specs}
        if unplanned:
            raise click.UsageError(
                f"--resume: {out} holds {len(writer.done)} games, {len(unplanned)} of them beyond this run's "
                f"--num-games {num_games} (e.g. {min(unplanned)}); ask for at least {len(writer.done)} games"
            )
        if writer.repaired_bytes:
            click.echo(f"repaired {out}: dropped a torn last line ({writer.repaired_bytes} bytes)", err=True)
        dropped = writer.drop_failed()
        if dropped:
            click.echo(f"{out}: {dropped} failed games are played again", err=True)
        _play(out, specs, game, writer, quiet, run, opts)


async def _say_cost(seating, games: int) -> None:
    """Before a long CPU run starts: what it will cost, from the backend's own measurement."""
    for backend in seating.backends.values():
        if games and hasattr(backend, "estimate"):
            click.echo(await asyncio.to_thread(backend.estimate, games), err=True)


def _play(out: Path, specs, game: GameConfig, writer: GameWriter, quiet: bool, run: dict, opts: dict) -> None:
    """Play `specs` into `writer`, then write and print the summary and set the exit status."""
    summary = Summary()

    async def go():
        async with open_seats(**opts) as seating:
            seating.settings["run"] = run
            await _say_cost(seating, sum(spec.game_id not in writer.done for spec in specs))
            await run_games(
                specs,
                seating.seats,
                game,
                writer,
                seating.concurrency,
                seating.settings,
                progress=not quiet,
                summary=summary,
                halted=seating.halted,
            )
            return seating.backend_stats()

    try:
        backends, caught = asyncio.run(until_signalled(go()))
    except BackendError as err:
        raise click.ClickException(str(err)) from None
    except SettingsChanged as err:
        raise click.UsageError(str(err)) from None
    except OSError as err:
        if err.filename != str(writer.path):
            raise
        raise click.ClickException(  # writing a record failed: the file keeps the whole records before it
            f"cannot write {out}: {(err.strerror or str(err)).lower()}; the {len(writer.done)} "
            "games in it are whole: --resume plays the rest"
        ) from None
    result = {**summary.to_dict(), "out": str(out), "games_in_file": len(writer.done), "backends": backends or {}}
    if caught:
        result["interrupted"] = caught.name
    write_json_atomic(out.with_name(out.stem + ".summary.json"), result)
    click.echo(json.dumps(result, indent=2))
    if caught:
        click.echo(
            f"stopped by {caught.name}: {summary.games} games of this run are in {out} "
            f"({len(writer.done)} in all); --resume plays the rest",
            err=True,
        )
        sys.exit(128 + caught.value)
    failed = sum(summary.failures.values())
    if failed:
        reasons = ", ".join(f"{reason}: {n}" for reason, n in summary.failures.most_common())
        click.echo(
            f"{failed} of {summary.games} games failed ({reasons}); each record's `failure` says why, convert "
            "leaves them out, and --resume plays them again",
            err=True,
        )
    if summary.stopped:
        click.echo(
            f"stopped early: {summary.stopped}; {len(writer.done)} games are in {out}; --resume plays the rest",
            err=True,
        )
    if summary.stopped or failed and failed == summary.games:
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
