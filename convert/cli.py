"""The `selfplay-convert` command."""

from __future__ import annotations

import json
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import click

from .formats import DPO_PAIRS, FORMATS
from .pipeline import EXIT_NO_ROWS, ConvertError, NoRowsLeft, Options, convert
from .reward import BASELINES


@contextmanager
def _sigterm_unwinds():
    """SIGTERM exits (status 143) the way SIGINT does, through every `with`, so that the
    temporary files are removed on the way out. Signals reach only the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class NothingToTrain(click.ClickException):
    exit_code = EXIT_NO_ROWS


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("games", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where train.parquet, val.parquet and convert_summary.json go [default: next to GAMES].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(FORMATS)),
    default="grpo",
    show_default=True,
    help="grpo: one verl row per group of K games of one instance and seat, replayed by the "
    "selfplay_replay agent loop with rollout.n=K; sft: best games as multi-turn chats; dpo: best "
    "vs worst game per instance and seat.",
)
@click.option(
    "--group-size",
    type=click.IntRange(2),
    help="grpo: K, games per group (= verl's rollout.n, written to the summary as rollout_n). An "
    "instance's games form groups of K; fewer left over are dropped and counted. "
    "[default: the most common number of games per instance]",
)
@click.option(
    "--keep-constant-groups",
    is_flag=True,
    help="grpo: also write groups whose K rewards are all equal (zero advantage, no signal).",
)
@click.option(
    "--max-groups",
    type=click.IntRange(min=1),
    help="grpo: write at most N groups, the first in the file's order, as DAPO fills a batch: games played in "
    "rounds until enough groups differ keep the earliest rounds' groups (the rest counted as beyond_max_groups). "
    "[default: every group]",
)
@click.option(
    "--val-fraction",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.1,
    show_default=True,
    help="Share of instances that go to val.parquet.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the train/val split.")
@click.option(
    "--top-fraction",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.25,
    show_default=True,
    help="sft: share of each group's games kept (those with a positive reward).",
)
@click.option(
    "--valid-moves",
    is_flag=True,
    help="sft: every seat's own valid moves, whatever its game's reward (--top-fraction does not apply): its chat "
    "without its invalid moves and the errors it was told of them, up to its last valid move; a seat with none is "
    "left out. A format start from a model's own responses: the grammar of the moves, with the model's reasoning "
    "and no chosen outcome.",
)
@click.option(
    "--max-prompt-tokens",
    type=click.IntRange(1),
    help="Leave out seat rows whose initial prompt is longer; their games still count in their groups.",
)
@click.option(
    "--max-response-tokens",
    type=click.IntRange(1),
    help="Leave out seat rows with a longer response (everything after the initial prompt); their games "
    "still count in their groups.",
)
@click.option("--model", help="Tokenizer for games with scripted seats [default: the embedded model].")
@click.option(
    "--invalid-move-penalty",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Training reward = normalized reward - PENALTY x the seat's invalid moves / its turns "
    "(as +selfplay.invalid_move_penalty online): GRPO's rewards, filtered BC's and DPO's rankings. Gives all-zero "
    "groups of weak models a signal; the game score in the records is unchanged.",
)
@click.option(
    "--joint-weight",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Training reward += WEIGHT x the game's joint share of the best deal (both seats' points over the most "
    "the two could get together, for a game whose outcome records them), as +selfplay.joint_weight online: pays "
    "a seat of the semi-competitive mode for the deals its partner keeps. GRPO's rewards, filtered BC's and "
    "DPO's rankings; the game score in the records (what evaluation reads) is unchanged, the term's mean is in "
    "the summary.",
)
@click.option(
    "--own-plan-weight",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Training reward += WEIGHT x what the agreed outcome is worth on what the seat sees, as a share of the best "
    "it could plan alone (hidden values guessed; 0 without a deal; for a game whose seats share one reward over "
    "values each sees in part), as +selfplay.own_plan_weight online: pays each seat by its own view alone, where "
    "the shared reward also counts the values it cannot see. GRPO's rewards, "
    "filtered BC's and DPO's rankings; the game score in the records is unchanged, the term's mean is in the "
    "summary.",
)
@click.option(
    "--misstatement-penalty",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Training reward -= PENALTY x the seat's misstatements: its messages that state what the game's state "
    "contradicts (an offer whose halves do not add up to the pool), as +selfplay.misstatement_penalty "
    "online. Such an offer costs the deal only against a partner that takes it at its word; the penalty costs "
    "it in every game. GRPO's rewards, filtered BC's and DPO's rankings; the game score in the records is "
    "unchanged, the term's mean is in the summary.",
)
@click.option(
    "--baseline",
    type=click.Choice(BASELINES),
    default="group",
    show_default=True,
    help="grpo: per-seat subtracts from each seat's training rewards that seat's mean over the file "
    "(a role-conditioned baseline for asymmetric or competitive games). verl's grpo estimator "
    "centers each group, which cancels it: use it with e.g. algorithm.adv_estimator=reinforce_plus_plus.",
)
@click.option(
    "--seat",
    type=click.IntRange(0, 1),
    default=None,
    help="Write only this seat's rows (the trained model's, when the other seat held an opponent); "
    "the other seat's games still count in their groups. [default: both seats]",
)
@click.option(
    "--seats-of",
    metavar="MODEL",
    default=None,
    help="Write only the seats MODEL played (each game's settings.seatN.model): in a league's games, both seats "
    "of a game against a frozen copy of the trained model, seat 0 alone against other opponents.",
)
@click.option(
    "--dpo-pairs",
    type=click.Choice(DPO_PAIRS),
    default="reward",
    show_default=True,
    help="dpo: reward pairs each (group, seat)'s best game with its worst; outcome pairs a game the seat won "
    "(more reward than its partner) with one it lost, as the rules judge competitive play.",
)
@click.option(
    "--dpo-pairs-per-group",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="dpo: the most pairs of one (group, seat), the widest gap first; above 1 a game may sit in several "
    "pairs (every win against every loss of a group), where one pair a group leaves few when most groups are "
    "won or lost alike.",
)
@click.option("--skip-invalid", is_flag=True, help="Convert past malformed lines and report them.")
@click.option("--overwrite", is_flag=True, help="Replace existing outputs.")
def main(
    games: Path,
    out_dir: Path | None,
    fmt: str,
    group_size: int | None,
    keep_constant_groups: bool,
    max_groups: int | None,
    val_fraction: float,
    seed: int,
    top_fraction: float,
    valid_moves: bool,
    max_prompt_tokens: int | None,
    max_response_tokens: int | None,
    model: str | None,
    invalid_move_penalty: float,
    joint_weight: float,
    own_plan_weight: float,
    misstatement_penalty: float,
    baseline: str,
    seat: int | None,
    seats_of: str | None,
    dpo_pairs: str,
    dpo_pairs_per_group: int,
    skip_invalid: bool,
    overwrite: bool,
) -> None:
    """Convert the self-play games in GAMES (JSONL) into verl training parquet. Outputs appear
    whole or not at all; a failed or stopped convert (SIGINT, SIGTERM) leaves no temporary file.

    Exit status: 0 converted; 3 no training rows are left (every game excluded, or every GRPO group
    constant); 1 any other error."""
    try:
        options = Options(
            fmt,
            group_size,
            keep_constant_groups,
            val_fraction,
            seed,
            top_fraction,
            max_prompt_tokens,
            max_response_tokens,
            model,
            skip_invalid,
            invalid_move_penalty,
            baseline,
            (0, 1) if seat is None else (seat,),
            seats_of=seats_of,
            dpo_pairs=dpo_pairs,
            dpo_pairs_per_group=dpo_pairs_per_group,
            max_groups=max_groups,
            joint_weight=joint_weight,
            own_plan_weight=own_plan_weight,
            misstatement_penalty=misstatement_penalty,
            valid_moves=valid_moves,
        )
        with _sigterm_unwinds():
            summary = convert(games, out_dir, options, overwrite=overwrite)
    except NoRowsLeft as err:
        raise NothingToTrain(str(err)) from None
    except (ConvertError, OSError) as err:
        raise click.ClickException(str(err)) from None
    if summary["stale_files_removed"]:
        click.echo(
            f"removed {len(summary['stale_files_removed'])} temporary files of converts that were killed: "
            + ", ".join(summary["stale_files_removed"]),
            err=True,
        )
    for name in ("train", "val"):
        part = summary["split"][name]
        click.echo(
            f"{name}: {part['rows']} rows from {part['games']} games of {part['instances']} instances "
            f"-> {summary['outputs'][name]}"
        )
    if summary["invalid_lines"]:
        click.echo(
            f"skipped {summary['invalid_lines']} invalid lines, the first: {summary['invalid_examples'][0]}", err=True
        )
    if "sft" in summary:
        kept = summary["sft"]["mean_rewards"]
        click.echo(
            "sft rows' games score "
            + " / ".join("-" if k is None else f"{k:.3f}" for k in kept)
            + " (seat 0 / 1; every game: "
            + " / ".join(f"{m:.3f}" for m in summary["mean_rewards"])
            + ")"
        )
    if "grpo" in summary:
        click.echo(
            f"grpo groups: {json.dumps(summary['grpo'])}; replay with actor_rollout_ref.rollout.n="
            f"{summary['rollout_n']}"
        )
    click.echo(
        f"excluded games: {json.dumps(summary['excluded'])}; seats too long: {summary['seats_too_long']}; "
        f"summary -> {summary['outputs']['summary']}"
    )


if __name__ == "__main__":
    main()
