"""Were a served model's turns drawn from the model itself? Each chosen turn of a games file is scored again,
token by token, by the same checkpoint loaded with transformers (on the CPU if that is all there is), at the
sampling temperature the games used.

A serving fault (wrong kernels, a corrupted cache, a model folded wrongly) shows as sampled tokens the model
itself gives almost no probability; turns the model really writes score like its other turns. Comparing the
turns of failed games with those of good games tells which of the two a bad evaluation is.

    python bench/analysis/turn_likelihood.py MODEL_DIR GAMES.jsonl --seat 1 --games 5 --turns 2
"""

from __future__ import annotations

import math

import click

from selfplay_gen.records import read_games


def turn_scores(model, token_ids: list[int], prompt_len: int, output_ids: list[int], temperature: float):
    """Per-token log-probabilities of `output_ids` after `token_ids[:prompt_len]`, at `temperature`."""
    import torch

    ids = torch.tensor([token_ids[:prompt_len] + output_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, prompt_len - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return logp[torch.arange(len(output_ids)), torch.tensor(output_ids)]


@click.command(help=__doc__)
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("games", type=click.Path(exists=True, dir_okay=False))
@click.option("--seat", default=1, show_default=True, help="The seat whose turns are scored.")
@click.option("--games", "per_kind", default=5, show_default=True, help="Games of each kind (failed, clean).")
@click.option("--turns", default=2, show_default=True, help="The seat's first turns scored in each game.")
@click.option("--temperature", type=float, default=None, help="Default: the games' own sampling temperature.")
def main(model_dir: str, games: str, seat: int, per_kind: int, turns: int, temperature: float | None) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    records = list(read_games(games))
    failed = [g for g in records if g["outcome"]["termination"] != "accepted"][:per_kind]
    clean = [g for g in records if g["outcome"]["termination"] == "accepted" and g["stats"]["invalid_moves"] == 0]
    temperature = temperature or records[0]["settings"].get("sampling", {}).get("temperature")
    if temperature is None:
        raise click.UsageError(f"{games}: its records name no sampling temperature; give --temperature")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    click.echo(f"# {model_dir}, temperature {temperature}: log-probability a token of seat {seat}'s turns")
    click.echo("kind\tgame\tturn\ttokens\tmean\tmin\tp<0.01\tp<0.001")
    for kind, chosen in (("failed", failed), ("clean", clean[:per_kind])):
        for game in chosen:
            player = game["players"][seat]
            for n, turn in enumerate(player["turns"][:turns]):
                lp = turn_scores(model, player["token_ids"], turn["prompt_len"], turn["output_ids"], temperature)
                click.echo(
                    f"{kind}\t{game['game_id']}\t{n}\t{len(lp)}\t{lp.mean().item():.3f}\t{lp.min().item():.2f}\t"
                    f"{int((lp < math.log(1e-2)).sum())}\t{int((lp < math.log(1e-3)).sum())}"
                )


if __name__ == "__main__":
    main()
