"""The `selfplay-convert` command."""
from __future__ import annotations

import json
from pathlib import Path

import click

from .formats import FORMATS
from .groups import NORMALIZE
from .pipeline import ConvertError, Options, convert

GROUP_BY_GAME_WARNING = ("warning: --group-by game groups the two seats of one game; the game is cooperative, "
                         "so both get the same reward and every group has zero advantage (no learning signal)")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("games", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where train.parquet, val.parquet and convert_summary.json go [default: next to GAMES].")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="grpo", show_default=True,
              help="grpo: verl RL rows replayed by the selfplay_replay agent loop; sft: best games as "
                   "multi-turn chats; dpo: best vs worst game per instance and seat.")
@click.option("--group-by", type=click.Choice(["instance", "game"]), default="instance", show_default=True,
              help="GRPO group: the games of one instance, or the two seats of one game.")
@click.option("--normalize", type=click.Choice(NORMALIZE), default="mean-std", show_default=True,
              help="Advantage: r - mean, (r - mean) / (population std + 1e-6), or r itself.")
@click.option("--drop-constant-groups", is_flag=True, help="Leave out groups whose games all scored the same.")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True,
              help="Share of instances that go to val.parquet.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the train/val split.")
@click.option("--top-fraction", type=click.FloatRange(0, 1, min_open=True), default=0.25, show_default=True,
              help="sft: share of each group's games kept (those with a positive reward).")
@click.option("--max-prompt-tokens", type=click.IntRange(1), help="Leave out games whose initial prompt is longer.")
@click.option("--max-response-tokens", type=click.IntRange(1),
              help="Leave out games with a longer response (everything after the initial prompt).")
@click.option("--model", help="Tokenizer for games with scripted seats [default: the embedded model].")
@click.option("--valid-move-bonus", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Training reward shaping: add BONUS x the game's share of valid moves to the normalized "
                   "reward before group normalization. For models too weak to ever agree (all-zero groups). "
                   "The game score in the records is unchanged.")
@click.option("--skip-invalid", is_flag=True, help="Convert past malformed lines and report them.")
@click.option("--overwrite", is_flag=True, help="Replace existing outputs.")
def main(games: Path, out_dir: Path | None, fmt: str, group_by: str, normalize: str, drop_constant_groups: bool,
         val_fraction: float, seed: int, top_fraction: float, max_prompt_tokens: int | None,
         max_response_tokens: int | None, model: str | None, valid_move_bonus: float, skip_invalid: bool,
         overwrite: bool) -> None:
    """Convert the self-play games in GAMES (JSONL) into verl training parquet."""
    try:
        options = Options(fmt, group_by, normalize, drop_constant_groups, val_fraction, seed, top_fraction,
                          max_prompt_tokens, max_response_tokens, model, skip_invalid, valid_move_bonus)
        if group_by == "game":
            click.echo(GROUP_BY_GAME_WARNING, err=True)
        summary = convert(games, out_dir, options, overwrite=overwrite)
    except (ConvertError, OSError) as err:
        raise click.ClickException(str(err)) from None
    for name in ("train", "val"):
        part = summary["split"][name]
        click.echo(f"{name}: {part['rows']} rows from {part['games']} games of {part['instances']} instances "
                   f"-> {summary['outputs'][name]}")
    if summary["invalid_lines"]:
        click.echo(f"skipped {summary['invalid_lines']} invalid lines, the first: {summary['invalid_examples'][0]}",
                   err=True)
    click.echo(f"excluded games: {json.dumps(summary['excluded'])}; constant groups: "
               f"{summary['groups']['constant']} of {summary['groups']['count']}; summary -> {summary['outputs']['summary']}")


if __name__ == "__main__":
    main()
