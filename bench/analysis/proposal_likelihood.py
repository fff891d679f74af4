"""Does a matching model's proposal follow the table its seat sees, before the reward says so?

For development instances, seat 0's opening prompt (the game's own first messages in the model's chat template)
is scored against candidate proposals: the seat's own best plan (own-plan share 1), random matchings, and the
identity. A model that proposes whatever the table says gives its own plan and the random matchings worth more on
its table higher log-probability; one that ignores the table gives all of them alike. The figures:

- `r`: within an instance, the correlation between a random matching's log-probability and its own-plan share,
  averaged over instances (about 0 for a model that ignores its table);
- `own plan above`: the share of the random matchings the seat's own plan out-scores, averaged (0.5: no
  preference);
- the mean log-probability of each kind of candidate.

The common prefix of every candidate (the move's tag) cancels in these comparisons, so a model that opens with a
message rather than a proposal is measured all the same. A model served from LoRA is read with `--adapter`.

    python bench/analysis/proposal_likelihood.py MODEL_DIR [--adapter ADAPTER_DIR] --instances 32 --random 16 \
        [--rows ROWS.tsv]
"""

from __future__ import annotations

import click
import numpy as np
import pandas as pd

from selfplay_gen.evaluation.splits import split_seeds
from selfplay_gen.games import GameConfig
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.token_context import token_context
from selfplay_gen.verl.init_data import initial_messages

SEAT = 0


def candidates(instance: Instance, random: int, rng: np.random.Generator) -> list[tuple[str, list[tuple[int, int]]]]:
    """(kind, pairs) of the proposals scored for `instance`: the seat's own best plan, `random` matchings, the
    identity."""
    drawn = [("random", [(r, int(p)) for r, p in enumerate(rng.permutation(8))]) for _ in range(random)]
    return [("own plan", instance.own_plan(SEAT)), *drawn, ("identity", [(i, i) for i in range(8)])]


def proposal_logprobs(model, tokenizer, prompt: list[int], texts: list[str]) -> list[float]:
    """The summed log-probability of each of `texts` (with the end of the turn) after `prompt`: the prompt is read
    once, and the texts in one batch after it from its cache."""
    import torch

    end = token_context(tokenizer).end_of_turn_id
    outputs = [tokenizer.encode(text, add_special_tokens=False) + [end] for text in texts]
    width = max(map(len, outputs))
    ids = torch.zeros((len(texts), width), dtype=torch.long)
    mask = torch.ones((len(texts), len(prompt) + width), dtype=torch.long)
    for row, output in enumerate(outputs):
        ids[row, : len(output)] = torch.tensor(output)
        mask[row, len(prompt) + len(output) :] = 0
    with torch.no_grad():
        read = model(torch.tensor([prompt]), use_cache=True)
        cache = read.past_key_values
        cache.batch_repeat_interleave(len(texts))
        after = model(ids, attention_mask=mask, past_key_values=cache).logits.float()
    first = torch.log_softmax(read.logits[0, -1].float(), -1)
    rest = torch.log_softmax(after, -1)
    return [
        float(first[output[0]] + rest[row, torch.arange(len(output) - 1), torch.tensor(output[1:])].sum())
        for row, output in enumerate(outputs)
    ]


def instance_row(model, tokenizer, instance: Instance, random: int, rng: np.random.Generator) -> dict:
    """One instance's figures (see the module docstring)."""
    chat = initial_messages(GameConfig("matching"), instance, SEAT)
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False)
    scored = candidates(instance, random, rng)
    logps = proposal_logprobs(model, tokenizer, prompt, [f"[propose] {render_proposal(p)}" for _, p in scored])
    shares = [instance.own_plan_share(SEAT, pairs) for _, pairs in scored]
    drawn = [i for i, (kind, _) in enumerate(scored) if kind == "random"]
    own = logps[0]
    return {
        "own plan": own,
        "random": float(np.mean([logps[i] for i in drawn])),
        "identity": logps[-1],
        "r": float(np.corrcoef([logps[i] for i in drawn], [shares[i] for i in drawn])[0, 1]),
        "own plan above": float(np.mean([own > logps[i] for i in drawn])),
    }


@click.command(help=__doc__)
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--adapter", type=click.Path(exists=True, file_okay=False), help="A LoRA adapter on MODEL_DIR.")
@click.option("--instances", default=32, show_default=True, help="Development instances, the first of the split.")
@click.option("--random", "random_count", default=16, show_default=True, help="Random matchings an instance.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random matchings.")
@click.option(
    "--rows",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write each instance's figures here (TSV): two models read with one --seed score the same "
    "candidates, so their rows pair by instance.",
)
def main(model_dir: str, adapter: str | None, instances: int, random_count: int, seed: int, rows: str | None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    model.eval()
    rng = np.random.default_rng(seed)
    seeds = split_seeds("dev", instances)
    figures = pd.DataFrame(
        [instance_row(model, tokenizer, Instance.from_seed(s), random_count, rng) for s in seeds],
        index=pd.Index(seeds, name="seed"),
    )
    if rows:
        figures.to_csv(rows, sep="\t", float_format="%.4f")
    click.echo(f"# {model_dir}" + (f" + {adapter}" if adapter else "") + f": seat {SEAT}, {instances} instances")
    click.echo("measure\tmean\tsd")
    for name in ("r", "own plan above", "own plan", "random", "identity"):
        click.echo(f"{name}\t{figures[name].mean():.3f}\t{figures[name].std(ddof=0):.3f}")


if __name__ == "__main__":
    main()
