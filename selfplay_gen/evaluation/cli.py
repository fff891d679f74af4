"""`selfplay-gen eval`: evaluate models on the human benchmark or on held-out instances, or
evaluate games already played (`--from-games`), and write a report directory.

Each game has its own metrics and report (`Game.evaluation`, in its package): e.g. a cooperative
game's compare models with the people who played its instances and a random floor, a competitive
game's count points, deals and cross-play wins. Playing (self-play and cross-play in both seat
orders) is the same for all.

Seeded instances come from one of two evaluation splits (`splits`): development instances
(`--instances dev`, or its old name `heldout`; seeds 10**9 + --seed on) for every choice, and test
instances (`--instances test`; seeds 2 x 10**9 + --seed on) to report final models only. Training
seeds stay below 10**9, and converting games on evaluation instances into training data is refused.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pandas as pd

from .. import config_tree
from .. import games as registry
from ..backends.base import BackendError
from ..games import GameConfig
from ..games.base import GameInstance
from ..options import QUIET, RESUME, Eval, configuration, game_from, load_instances, open_seats, settings
from ..records import GameWriter, Record, RecordError, read_numbered_games
from ..runner import SeatFactory, SettingsChanged, plan_games, run_games, until_signalled
from . import people as people_games
from .protocol import Evaluation, evaluation_of
from .splits import DEFAULT_INSTANCES, EvaluationSeedError, split_name, split_seeds


def evaluation(game: str) -> Evaluation:
    """The evaluation of the game registered as `game`; a game without one is a usage error."""
    try:
        return evaluation_of(game)
    except ValueError as err:
        raise click.UsageError(str(err)) from None


@dataclass(frozen=True)
class GamesInput:
    """A games file and the models in its seats (the same label twice for self-play)."""

    path: Path
    seats: tuple[str, str]


def parse_input(spec: str) -> GamesInput:
    """`FILE`, `NAME=FILE` (self-play of NAME) or `A,B=FILE` (A in seat 0, B in seat 1)."""
    names, sep, file = spec.partition("=")
    if not sep or Path(spec).exists():
        return GamesInput(Path(spec), (str(Path(spec).with_suffix("")),) * 2)
    seats = tuple(n.strip() for n in names.split(","))
    if len(seats) == 1:
        seats *= 2
    if len(seats) != 2 or not all(seats):
        raise click.BadParameter(f"{spec!r}: expected FILE, NAME=FILE or A,B=FILE", param_hint="--from-games")
    return GamesInput(Path(file), seats)


def read_inputs(
    inputs: list[GamesInput], game_table: Callable[..., pd.DataFrame]
) -> tuple[pd.DataFrame, list[str], list[dict]]:
    """All games as one table (rows by `game_table`), the self-play models in the order first
    given, and what each input held."""
    models = list(dict.fromkeys(i.seats[0] for i in inputs if i.seats[0] == i.seats[1]))
    tables, described = [], []
    for given in inputs:
        unknown = [s for s in given.seats if s not in models]
        if unknown:
            raise click.UsageError(
                f"--from-games {given.path}: unknown model label {unknown[0]!r}: cross-play labels "
                f"must name models that have self-play games (known: {', '.join(models) or 'none'})"
            )
        if not given.path.is_file():
            raise click.UsageError(f"--from-games: no such file: {given.path}")
        try:
            records, failed = finished_games(given.path)
            table = game_table(records, given.seats)
        except RecordError as err:
            raise click.UsageError(f"--from-games: {err}") from None
        except ValueError as err:
            raise click.UsageError(f"--from-games: {given.path}: {err}") from None
        if failed:
            click.echo(
                f"{given.path}: {sum(failed.values())} failed games left out of every figure "
                f"({', '.join(f'{reason}: {n}' for reason, n in failed.most_common())}); "
                "their rewards say nothing about the model, and playing with --resume plays them again",
                err=True,
            )
        if table.empty:
            raise click.UsageError(
                f"--from-games: {given.path} holds no games"
                + (f" that did not fail ({sum(failed.values())} failed)" if failed else "")
            )
        tables.append(table)
        described.append(
            {
                "file": str(given.path),
                "seats": list(given.seats),
                "games": len(table),
                "failed_left_out": sum(failed.values()),
            }
        )
    return pd.concat(tables, ignore_index=True), models, described


def finished_games(path: Path) -> tuple[list[Record], Counter[str]]:
    """The games of `path` that count: each game once and none that failed (a backend error or
    a broken token invariant ends a game at 0 whatever the model did), with the failed ones
    counted by reason. A game id seen twice is an error naming both lines: a file written by one
    run holds each game once, so a repeat means files were joined by hand, and counting it twice
    would weigh its instance more."""
    first_line: dict[str, int] = {}
    kept: list[Record] = []
    failed: Counter[str] = Counter()
    for line, record in read_numbered_games(path):
        game_id = record["game_id"]
        if game_id in first_line:
            raise ValueError(
                f"line {line}: field 'game_id': {game_id!r} is already the game of line {first_line[game_id]}; "
                "each game counts once: remove the repeated line"
            )
        first_line[game_id] = line
        failure = record.get("failure")
        if failure:
            failed[failure["reason"]] += 1
        else:
            kept.append(record)
    return kept, failed


async def generate_games(
    out_path: Path,
    instances: list[GameInstance],
    games_per_instance: int,
    seats: tuple[SeatFactory, SeatFactory],
    game: GameConfig,
    concurrency: int,
    settings: dict,
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Play `games_per_instance` games on every instance into `out_path` with the runner (with
    `resume`, the missing and the failed ones)."""
    specs = plan_games(instances, games_per_instance, len(instances) * games_per_instance)
    with GameWriter(out_path, resume=resume) as writer:
        writer.drop_failed()
        await run_games(specs, seats, game, writer, concurrency, settings, progress=progress)
    return out_path


def seat_label(seat: dict) -> str:
    """A readable default label for the model in a seat."""
    if seat["backend"] == "scripted" and "strength" in seat:
        return f"scripted-strength-{seat['strength']:g}"
    if seat["backend"] == "scripted":
        return f"scripted-{seat['share']:g}" if seat["policy"] == "share" else f"scripted-{seat['policy']}"
    return Path(str(seat["model"]).rstrip("/")).name or seat["backend"]


def file_name(seats: tuple[str, str]) -> str:
    return re.sub(r"[^\w.+-]+", "_", "__".join(seats)) + ".jsonl"


async def play_pairings(
    games_dir: Path,
    instances: list[GameInstance],
    games_per_instance: int,
    game: GameConfig,
    labels: tuple,
    resume: bool,
    progress: bool,
    opts: dict,
) -> list[GamesInput]:
    """Self-play of the seat-0 model; with a different partner also the partner's self-play and
    cross-play in both seat orders, all on the same instances."""
    async with open_seats(**opts) as seating:
        factories, settings, concurrency = seating.seats, seating.settings, seating.concurrency
        sides = [settings["seat0"], settings["seat1"]]
        names = [labels[0] or seat_label(sides[0]), labels[1] or seat_label(sides[1])]
        pairings = [(0, 0)] if sides[0] == sides[1] else [(0, 0), (1, 1), (0, 1), (1, 0)]
        if len(pairings) > 1 and names[0] == names[1]:
            raise click.UsageError(
                f"both seats would be labeled {names[0]!r}; name them with --label and --partner-label"
            )
        inputs = []
        for a, b in pairings:
            seats = (names[a], names[b])
            path = games_dir / file_name(seats)
            pairing_settings = {
                "seat0": sides[a],
                "seat1": sides[b],
                "sampling": settings["sampling"],
                "eval": {"seats": list(seats)},
            }
            await generate_games(
                path,
                instances,
                games_per_instance,
                (factories[a], factories[b]),
                game,
                concurrency,
                pairing_settings,
                resume,
                progress,
            )
            inputs.append(GamesInput(path, seats))
        return inputs


@click.command("eval")
@click.option(
    "--from-games",
    "from_games",
    multiple=True,
    metavar="[NAME=]FILE",
    help="Evaluate games already played instead of playing. Repeat for several models, in iteration "
    "order. NAME=FILE labels a model's self-play; A,B=FILE holds cross-play with A in seat 0 and "
    "B in seat 1 (A and B need self-play files too). Default label: the file path. Games people "
    "played (selfplay-gen view) are reported apart, the person's seat beside the partner's: "
    "NAME=FILE labels the person, NAME,PARTNER=FILE both.",
)
@config_tree.command(Eval, RESUME, QUIET)
def eval_command(from_games: tuple[str, ...], resume: bool, quiet: bool, **given):
    """Evaluate models with the game's own metrics (its package's evaluation): rewards with
    bootstrap intervals over instances, agreement, moves, invalid moves, endings, diversity,
    cross-play and ratings, side by side with people on the instances they played where the game
    has them; a competitive game adds cross-play win/tie/loss rates and ratings from wins.
    Writes OUT/metrics.json, OUT/report.md and plots. --resume completes interrupted games files under
    OUT/games.

    Settings: flags, SELFPLAY_ variables, --config FILE (YAML, as --print-config prints it) and OVERRIDES
    (`sampling.temperature=0.9`)."""
    cfg = configuration(Eval, given)
    if cfg is None:
        return
    if cfg.out is None:
        raise click.UsageError("Missing option '--out' (the report directory).")
    opts = settings(cfg)
    out, append_to, instances, num_instances = cfg.out, cfg.append_to, cfg.instances, cfg.num_instances
    games_per_instance, label, partner_label = cfg.games_per_instance, cfg.label, cfg.partner_label
    game = game_from(opts)
    chosen_evaluation = evaluation(game.name)
    human_games = registry.get(game.name).human_games
    instances = instances or ("human" if human_games else "dev")
    if from_games:
        inputs = [parse_input(spec) for spec in from_games]
    else:
        if instances == "human":
            count = num_instances or human_games
            if human_games and count > human_games:
                raise click.UsageError(f"--limit-instances: there are {human_games} human instances, not {count}")
            chosen = load_instances("human", count, opts["seed"], game.name)
        else:
            split = split_name(instances)
            try:
                seeds = split_seeds(split, num_instances or DEFAULT_INSTANCES[split], opts["seed"])
            except EvaluationSeedError as err:
                raise click.UsageError(f"--instances {instances} with --seed {opts['seed']}: {err}") from None
            chosen = load_instances("random", len(seeds), seeds.start, game.name)
        try:
            played, caught = asyncio.run(
                until_signalled(
                    play_pairings(
                        out / "games", chosen, games_per_instance, game, (label, partner_label), resume, not quiet, opts
                    )
                )
            )
        except (BackendError, OSError, RecordError) as err:
            raise click.ClickException(str(err)) from None
        except SettingsChanged as err:
            raise click.UsageError(str(err)) from None
        if caught is not None:
            click.echo(
                f"stopped by {caught.name}: the finished games are in {out / 'games'}; --resume completes them",
                err=True,
            )
            sys.exit(128 + caught.value)
        assert played is not None  # until_signalled returns the result unless a signal stopped the work
        inputs = played
    people = [given for given in inputs if given.path.is_file() and people_games.holds_people(given.path)]
    inputs = [given for given in inputs if given not in people]
    written = evaluate_models(inputs, chosen_evaluation, out, append_to, cfg.bootstrap, opts["seed"]) if inputs else []
    if people:
        if append_to is not None and not inputs:
            raise click.UsageError("--append-to adds a model's self-play to a run; games people played are not one")
        metrics, described = read_people(people, game.name, cfg.bootstrap, opts["seed"])
        written = people_games.write_report(out, metrics, described, written)
        click.echo(people_games.summary_text(metrics))
    click.echo("wrote " + ", ".join(str(p) for p in written) + (f"; appended to {append_to}" if append_to else ""))


def read_people(inputs: list[GamesInput], game: str, resamples: int, seed: int) -> tuple[dict, list[dict]]:
    """The figures of games people played, each side apart (`people`), and what each input held."""
    tables, described = [], []
    for given in inputs:
        try:
            records, failed = finished_games(given.path)
            table = people_games.people_table(records, given.seats, game)
        except RecordError as err:
            raise click.UsageError(f"--from-games: {err}") from None
        except ValueError as err:
            raise click.UsageError(f"--from-games: {given.path}: {err}") from None
        if table.empty:
            raise click.UsageError(f"--from-games: {given.path} holds no games that did not fail")
        tables.append(table)
        left_out = sum(failed.values())
        described.append({"file": str(given.path), "seats": list(given.seats), "games": len(table) // 2})
        described[-1]["failed_left_out"] = left_out
    return people_games.evaluate(tables, game, resamples, seed), described


def evaluate_models(
    inputs: list[GamesInput],
    chosen_evaluation: Evaluation,
    out: Path,
    append_to: Path | None,
    resamples: int,
    seed: int,
) -> list[Path]:
    """Models' games: the game's own metrics and report (and the run's row with `append_to`)."""
    games, models, described = read_inputs(inputs, chosen_evaluation.table)
    metrics = chosen_evaluation.evaluate(games, models, resamples, seed)
    for given in described:  # the failed games left out of the figures are still counted
        label, partner = given["seats"]
        if label == partner and "failed_games" in metrics["models"].get(label, {}):
            metrics["models"][label]["failed_games"] += given["failed_left_out"]
    written = chosen_evaluation.write(out, metrics, games, described)
    if append_to is not None:
        try:
            chosen_evaluation.append(append_to, metrics, str(out))
        except ValueError as err:
            raise click.UsageError(str(err)) from None
    click.echo(chosen_evaluation.summary(metrics))
    return written
