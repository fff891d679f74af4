"""`selfplay-gen`: play self-play games into JSONL (the default command), plus `init` and `eval`."""

from __future__ import annotations

import asyncio
import difflib
import importlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import click

# OpenMP threads (llama.cpp's and torch's share one libgomp, set up by whichever loads first) wait
# passively: spinning threads on shared cores starve each other (llamacpp backend, 2 threads on 2
# busy cores: 3.6 tokens/s spinning, 19 waiting passively; bench/results/cpu_engines/notes.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import config_tree, games
from .atomic import write_json_atomic
from .backends.base import BackendError
from .games import GameConfig
from .options import QUIET, RESUME, Play, configuration, games_from, load_instances, open_seats, settings
from .records import UNNAMED_GAME, GameWriter, RecordError
from .runner import (
    GameSpec,
    SettingsChanged,
    Summary,
    check_same_settings,
    instances_needed,
    plan_games,
    run_games,
    until_signalled,
)
from .sampling import GROUP_SIZE


class DefaultGroup(click.Group):
    """A group whose first argument, when not a subcommand, goes to the default command, so
    `selfplay-gen --num-games 200` plays games while `selfplay-gen init ...` runs `init`. The other
    subcommands are imported when named (`LAZY`), so playing games loads neither pandas nor matplotlib."""

    LAZY = {
        "eval": "selfplay_gen.evaluation.cli:eval_command",
        "init": "selfplay_gen.verl.init_data:init_command",
        "iterate": "selfplay_gen.iterate.cli:iterate_command",
        "generate": "selfplay_gen.iterate.cli:generate_command",
        "train": "selfplay_gen.iterate.cli:train_command",
        "view": "selfplay_gen.viewer.cli:view_command",
        "doctor": "selfplay_gen.doctor:doctor_command",
        "retention": "selfplay_gen.evaluation.retention:retention_command",
    }

    def list_commands(self, ctx):
        return sorted({*self.commands, *self.LAZY})

    def get_command(self, ctx, name):
        if name in self.LAZY and name not in self.commands:
            module, attribute = self.LAZY[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def parse_args(self, ctx, args):
        """`play` is the default only when no command is named: the first argument is an option
        (or there is none). A first word that names no command is refused, listing the commands,
        rather than handed to `play` (where `view --help` would print play's help)."""
        if not args or args[0].startswith("-") and args[0] not in ("--help", "-h"):
            args = ["play", *args]
        elif args[0] not in ("--help", "-h") and args[0] not in self.list_commands(ctx):
            commands = self.list_commands(ctx)
            close = difflib.get_close_matches(args[0], commands, n=1)
            raise click.UsageError(
                f"no such command {args[0]!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; the commands are {', '.join(commands)}, and without one `selfplay-gen [OPTIONS]` plays games",
                ctx,
            )
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Self-play games of any registered game (--game) with one model in both seats.

    Without a subcommand, plays games (see `selfplay-gen play --help`). `init` writes
    game-initialization data for online verl training; `eval` evaluates models; `retention` checks
    that a model keeps its general abilities (perplexity, multiple choice). `iterate` runs the
    whole self-play loop (serving, games, conversion, verl training, evaluation); `generate` and
    `train` are its two halves on their own. `view` replays games and lets a person play a seat,
    in the browser. `doctor` checks that the GPU loop can run on this machine and names what is missing.
    """


@main.command()
@config_tree.command(Play, RESUME, QUIET)
def play(resume: bool, quiet: bool, **given):
    """Play games and write each one to OUT as it ends.

    Exit status: 0 when games were played, even if some failed (stderr counts them; --resume plays
    them again); 1 when every game of the run failed, when the run stopped early because every
    server was gone, or on an error (another run writing OUT, a full disk); 130/143 when stopped by
    SIGINT/SIGTERM.

    Settings: flags, SELFPLAY_ variables, --config FILE (YAML, as --print-config prints it) and OVERRIDES
    (`sampling.temperature=0.9`).
    """
    cfg = configuration(Play, given)
    if cfg is None:
        return
    opts = settings(cfg)
    num_games, games_per_instance, instances, out = cfg.num_games, cfg.games_per_instance, cfg.instances, cfg.out
    first_game_index = cfg.first_game_index
    mix = games_from(opts)
    game = mix[0]
    if len(mix) > 1 and instances == "human":
        raise click.BadParameter(
            "a mix of games plays seeded instances, not the ones people played", param_hint="--instances"
        )
    if num_games % games_per_instance:
        uneven = (
            f"--num-games {num_games} is not a multiple of -k/--games-per-instance {games_per_instance}: the last "
            f"instance gets {num_games % games_per_instance} games, a smaller GRPO group than the others"
        )
        lower, upper = num_games - num_games % games_per_instance, num_games + (-num_games) % games_per_instance
        if given["games_per_instance"] is not None or games_per_instance != GROUP_SIZE:
            asked = f"{lower} or {upper}" if lower else f"{upper}"
            raise click.UsageError(f"{uneven}; ask for {asked} games, or another -k")
        if not quiet:  # the default K with a few games (a trial run): said, not refused
            click.echo(f"note: {uneven} (-k sets the group size)", err=True)
    run = {"game": games.MIX.join(g.name for g in mix), **game.options, "instances": instances, "seed": opts["seed"]}
    run["games_per_instance"] = games_per_instance
    needed = instances_needed(num_games, games_per_instance)
    if instances == "random":
        _note_evaluation_seeds(opts["seed"], needed)
    seeds = range(opts["seed"], opts["seed"] + needed)
    specs = plan_mix(mix, instances, seeds, games_per_instance, num_games, first_game_index)
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


def plan_mix(
    mix: list[GameConfig], kind: str, seeds: range, games_per_instance: int, num_games: int, first_index: int = 0
) -> list[GameSpec]:
    """`plan_games` for one game, or for a mix of games: each game gets its even share of the instances
    (`games.shares`: contiguous seeds of its own), the games in the mix's order, each spec naming its game;
    an instance's games numbered from `first_index`."""
    if len(mix) == 1:
        instances = load_instances(kind, len(seeds), seeds.start, mix[0].name)
        return plan_games(instances, games_per_instance, num_games, first_index)
    by_name = {g.name: g for g in mix}
    played = [
        (instance, by_name[part])
        for part, share in games.shares(games.MIX.join(by_name), seeds)
        for instance in load_instances(kind, len(share), share.start, part)
    ]
    specs = plan_games([instance for instance, _ in played], games_per_instance, num_games, first_index)
    return [replace(spec, game=played[spec.group][1]) for spec in specs]


def _note_evaluation_seeds(seed: int, count: int) -> None:
    """Games on development or test instances are fine to analyse but never to train on: say so
    now rather than when selfplay-convert refuses them."""
    from .evaluation.splits import EvaluationSeedError, check_training_seeds

    try:
        check_training_seeds(seed, count, "--seed/--num-games")
    except EvaluationSeedError as err:
        click.echo(f"note: {err}; selfplay-convert refuses these games as training data", err=True)


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
