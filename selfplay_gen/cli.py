"""`selfplay-gen`: play self-play games into JSONL (the default command), plus `init` and `eval`."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

import click

from .atomic import write_json_atomic
from .backends.base import BackendError
from .options import game_from, game_options, generation_options, load_instances, open_seats
from .records import GameWriter, read_games
from .runner import Summary, instances_needed, plan_games, run_games, until_signalled


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


def _check_resume(out: Path, run: dict) -> None:
    """Resuming only makes sense with the settings that planned the file's games."""
    for record in read_games(out):
        old = {"game": record["game"], **record["settings"].get("run", {})}
        diff = {k: (old.get(k), v) for k, v in run.items() if old.get(k) != v}
        if diff:
            raise click.UsageError(
                f"--resume: {out} was made with other settings "
                + ", ".join(f"{k}={a!r} (now {b!r})" for k, (a, b) in diff.items())
            )
        return


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
@click.option("--resume", is_flag=True, help="Complete an interrupted run: keep its games, play the missing ones.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@game_options
@generation_options
def play(num_games, games_per_instance, instances, out, resume, quiet, **opts):
    """Play games and write each one to OUT as it ends."""
    game = game_from(opts)
    run = {"game": game.name, **game.options, "instances": instances, "seed": opts["seed"]}
    run["games_per_instance"] = games_per_instance
    specs = plan_games(
        load_instances(instances, instances_needed(num_games, games_per_instance), opts["seed"], game.name),
        games_per_instance,
        num_games,
    )
    if out.exists() and out.stat().st_size and resume:
        _check_resume(out, run)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        writer = GameWriter(out, resume=resume)
    except (FileExistsError, OSError) as err:
        raise click.ClickException(str(err)) from None
    unplanned = writer.done - {spec.game_id for spec in specs}
    if unplanned:
        writer.close()
        raise click.UsageError(
            f"--resume: {out} holds {len(writer.done)} games, {len(unplanned)} of them beyond this run's "
            f"--num-games {num_games} (e.g. {min(unplanned)}); ask for at least {len(writer.done)} games"
        )
    if writer.repaired_bytes:
        click.echo(f"repaired {out}: dropped a torn last line ({writer.repaired_bytes} bytes)", err=True)

    summary = Summary()

    async def go():
        async with open_seats(**opts) as seating:
            seating.settings["run"] = run
            await run_games(
                specs,
                seating.seats,
                game,
                writer,
                seating.concurrency,
                seating.settings,
                progress=not quiet,
                summary=summary,
            )
            return seating.backend_stats()

    try:
        with writer:
            backends, caught = asyncio.run(until_signalled(go()))
    except BackendError as err:
        raise click.ClickException(str(err)) from None
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
    if summary.failures:
        reasons = ", ".join(f"{reason}: {n}" for reason, n in summary.failures.most_common())
        click.echo(
            f"{sum(summary.failures.values())} of {summary.games} games failed ({reasons}); each record's "
            f"`failure` says why, and convert leaves them out",
            err=True,
        )


if __name__ == "__main__":
    sys.exit(main())
