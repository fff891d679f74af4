"""`python -m selfplay_gen.train.dpo`: DPO (Rafailov et al. 2023) on the preference pairs that
`selfplay-convert --format dpo` writes, with TRL's `DPOTrainer`, LoRA or full, saved as a plain
Hugging Face directory that any engine serves (the LoRA adapter folded in, kept beside it in
`lora_adapter/`, as `selfplay_gen.verl.merge_lora` leaves verl's runs).

verl 0.9.1 trains DPO only online, inside its PPO loop; an offline step on pairs of recorded games
fits TRL's trainer. Two things differ from TRL's defaults, both because a pair holds whole
multi-turn games:

- Only the seat's own turns count. A pair's `chosen` / `rejected` continue the shared prompt with
  the rest of each game, partner messages and game feedback included; TRL would score every
  completion token, so the policy would also be pushed to predict its partner's words. Here each
  row is tokenized as the seat built its context during play (`TokenContext.retokenize`: the first
  prompt, then each own turn and its end-of-turn token, each other message as a template delta),
  and the loss mask covers the seat's own turns only (`OwnTurnsCollator`).
- The ids are re-encoded from the messages, not the sampled ids of the records (the pair rows
  keep messages only). They differ only where a sampler produced a non-canonical split of some
  text; policy and reference score the same ids, so the preference step compares the two games
  on equal terms, which is what an offline preference step needs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..models import resolve
from ..token_context import common_prefix, token_context
from ..verl.merge_lora import ADAPTER_DIR

# LoRA targets of the other trainers (verl's `target_modules: all-linear` minus the LM head,
# whose adapter TRL's fused log-prob path would never train)
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LOG_FILE = "dpo_log.jsonl"


def pair_tokens(row: dict[str, Any], tokenizer, where: str = "pairs") -> dict[str, list[int]]:
    """One DPO row as ids: the shared prompt (up to the seat's first turn), each game's rest, and
    over each rest a mask of the seat's own ids (1) against partner and feedback ids (0)."""
    context = token_context(tokenizer)
    prompt = list(row["prompt"])
    out: dict[str, list[int]] = {}
    halves = {}
    for role in ("chosen", "rejected"):
        messages = prompt + list(row[role])
        if not any(m["role"] == "assistant" for m in row[role]):
            raise ValueError(f"{where}: field {role!r} holds no turn of the seat: {[m['role'] for m in row[role]]}")
        ids, turns = context.retokenize(messages)
        own = [0] * len(ids)
        for at, output in turns:
            own[at : at + len(output)] = [1] * len(output)
        halves[role] = (ids, own, turns[0][0])
    (c_ids, _, c_start), (r_ids, _, r_start) = halves["chosen"], halves["rejected"]
    start = min(common_prefix(c_ids, r_ids), c_start, r_start)
    out["prompt_ids"] = c_ids[:start]
    for role, (ids, own, _) in halves.items():
        out[f"{role}_ids"], out[f"{role}_own"] = ids[start:], own[start:]
    return out


def read_pairs(path: Path, tokenizer):
    """The pairs of a `--format dpo` parquet as a tokenized `datasets.Dataset`."""
    import pyarrow.parquet as pq
    from datasets import Dataset
    from tqdm import tqdm

    table = pq.read_table(path)
    missing = {"prompt", "chosen", "rejected"} - set(table.column_names)
    if missing:
        raise ValueError(
            f"{path}: no column {', '.join(sorted(missing))}: not a `selfplay-convert --format dpo` output "
            f"(columns: {', '.join(table.column_names)})"
        )
    if table.num_rows == 0:
        raise ValueError(f"{path}: no pairs (every seat scored the same in all its games of an instance?)")
    rows = [
        pair_tokens(row, tokenizer, f"{path}: row {i}")
        for i, row in enumerate(tqdm(table.to_pylist(), desc="tokenizing pairs", unit="pair", leave=False))
    ]
    return Dataset.from_list(rows)


def own_turns_collator(pad_token_id: int, max_length: int | None):
    """TRL's preference collator with the loss mask narrowed to the seat's own ids."""
    import torch
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    @dataclass
    class OwnTurnsCollator(DataCollatorForPreference):
        def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
            batch = super().torch_call(examples)
            mask = torch.zeros_like(batch["completion_mask"])
            rows = [[0] * len(e["prompt_ids"]) + e[f"{role}_own"] for role in ("chosen", "rejected") for e in examples]
            for i, own in enumerate(rows):
                own = own[: self.max_length] if self.max_length is not None else own  # keep_start, like the ids
                mask[i, : len(own)] = torch.tensor(own, dtype=mask.dtype)
            batch["completion_mask"] = mask
            return batch

    return OwnTurnsCollator(pad_token_id=pad_token_id, max_length=max_length, truncation_mode="keep_start")


def trainer_class():
    """TRL's `DPOTrainer` taking rows already tokenized by `pair_tokens` as they are."""
    from trl import DPOTrainer

    class PretokenizedDPOTrainer(DPOTrainer):
        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if args.max_length is not None:  # as TRL drops them: a prompt filling max_length leaves no signal
                dataset = dataset.filter(lambda row: len(row["prompt_ids"]) < args.max_length)
            return dataset

    return PretokenizedDPOTrainer


@dataclass(frozen=True)
class DpoSettings:
    """What one DPO step is run with; `lora_rank` 0 trains every weight."""

    lora_rank: int = 16
    lora_alpha: int = 32
    lr: float = 5e-6
    beta: float = 0.1
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 4
    grad_accum: int = 1
    max_length: int | None = 4096
    seed: int = 0


def train(model: str | None, pairs: Path, out: Path, settings: DpoSettings = DpoSettings()) -> list[dict[str, Any]]:
    """Train `model` (a directory, or an embedded model's name) with DPO on `pairs`, write the trained
    model to `out` (plain weights and tokenizer; with LoRA the adapter also in `out/lora_adapter`)
    and return TRL's log (one dict per logged step: loss, rewards/margins, logps/chosen, ...),
    also written to `out/dpo_log.jsonl`. `out` appears whole: it is written beside and renamed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig

    source = resolve(model)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = read_pairs(pairs, tokenizer)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    config = DPOConfig(
        output_dir=str(partial / "trainer"),
        learning_rate=settings.lr,
        beta=settings.beta,
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        max_length=settings.max_length,
        truncation_mode="keep_start",
        remove_unused_columns=False,  # the own-turn masks travel to the collator
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=settings.seed,
        bf16=False,
        gradient_checkpointing=False,  # games of a few thousand tokens fit; recomputing costs a third more time
        disable_tqdm=False,
    )
    peft_config = None
    if settings.lora_rank > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=settings.lora_rank,
            lora_alpha=settings.lora_alpha,
            target_modules=list(LORA_TARGETS),
            task_type="CAUSAL_LM",
        )
    policy = AutoModelForCausalLM.from_pretrained(source, dtype="auto")
    use_cache = policy.config.use_cache  # the trainer turns the KV cache off; the exported model is served
    trainer = trainer_class()(
        model=policy,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=own_turns_collator(tokenizer.pad_token_id, settings.max_length),
        peft_config=peft_config,
    )
    trainer.train()
    log = [entry for entry in trainer.state.log_history if "loss" in entry]
    trained = trainer.model
    if peft_config is not None:
        trained.save_pretrained(partial / ADAPTER_DIR)
        trained = trained.merge_and_unload()
    # the source's config as it was: a server playing the source takes this model's weights in place
    # (`update_weights_from_disk`) only when the two config.json files agree
    trained.config.use_cache = use_cache
    trained.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(partial / "trainer", ignore_errors=True)
    (partial / LOG_FILE).write_text("".join(json.dumps(entry) + "\n" for entry in log))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return log


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", default=None, help="Model directory to start from [default: the embedded warm-started model].")
@click.option(
    "--pairs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="train.parquet of `selfplay-convert --format dpo` (each seat's best game of an instance against its worst).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the trained model (replaced whole when done).",
)
@click.option(
    "--lora-rank",
    type=click.IntRange(min=0),
    default=DpoSettings.lora_rank,
    show_default=True,
    help="LoRA rank (folded into the weights when done); 0 trains every weight.",
)
@click.option("--lora-alpha", type=click.IntRange(min=1), default=DpoSettings.lora_alpha, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=DpoSettings.lr, show_default=True)
@click.option(
    "--beta",
    type=click.FloatRange(min=0, min_open=True),
    default=DpoSettings.beta,
    show_default=True,
    help="DPO's beta: how far the policy may move from the starting model (smaller: further).",
)
@click.option("--epochs", type=click.FloatRange(min=0, min_open=True), default=DpoSettings.epochs, show_default=True)
@click.option(
    "--max-steps", type=int, default=DpoSettings.max_steps, show_default=True, help="Optimizer steps; -1: by --epochs."
)
@click.option("--batch-size", type=click.IntRange(min=1), default=DpoSettings.batch_size, show_default=True)
@click.option("--grad-accum", type=click.IntRange(min=1), default=DpoSettings.grad_accum, show_default=True)
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    default=DpoSettings.max_length,
    show_default=True,
    help="Tokens per game; longer games are cut at the end, a prompt this long drops the pair.",
)
@click.option("--seed", type=int, default=DpoSettings.seed, show_default=True)
def main(model: str | None, pairs: Path, out: Path, **options: Any) -> None:
    """Train a model of any game with DPO on convert's preference pairs: each seat's
    best game of an instance is preferred over its worst, and only the seat's own turns are scored."""
    try:
        log = train(model, pairs, out, DpoSettings(**options))
    except ValueError as err:
        raise click.ClickException(str(err)) from err
    last = log[-1] if log else {}
    click.echo(
        f"wrote {out} after {len(log)} steps; last loss {last.get('loss')}, margin {last.get('rewards/margins')}"
    )


if __name__ == "__main__":
    main()
