"""Whether SmolLM2-135M learns the by-reviewer teacher's pick better as one maximum over the line's cells or
one comparison at a time.

The 135M warm start picks other than the largest value of its own line in about a third of its proposer's
lines (`proposer_lines.py`). This teaches the raw embedded model, with the same LoRA, rows and steps, one
of three ways to end a line of known cells, and scores its greedy picks on rows of other instances:

  argmax   `Ava Li: GLUE 421, QuAC 779, SQuAD 385 -> QuAC` (the by-reviewer plan)
  records  `Ava Li: GLUE 421, QuAC 779, SQuAD 385 | GLUE 421 < QuAC 779 -> QuAC` (by-reviewer-records)
  chain    `Ava Li: ... | GLUE 421 | QuAC 779 > 421: QuAC 779 | SQuAD 385 < 779 -> QuAC` (every comparison)

Rows are each reviewer's known cells after the first message (both seats' cells of an instance), at least
two. It runs on the CPU, with two threads. Example:
  python bench/analysis/pick_formats.py records --seed 1 --out pick_formats.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from selfplay_gen import models
from selfplay_gen.games.matching.instance import PAPERS, Instance
from selfplay_gen.games.matching.prompts import render_row
from selfplay_gen.games.matching.scripted import render_records

FORMATS = ("argmax", "records", "chain")
TRAIN_SEEDS = range(10**9, 10**9 + 2000)  # development instances
TEST_SEEDS = range(3 * 10**9, 3 * 10**9 + 80)  # apart from both the development and the test split

Row = tuple[int, list[tuple[int, int]]]  # reviewer, its known (paper, value) cells in paper order


def rows(seeds: range) -> list[Row]:
    out = []
    for seed in seeds:
        instance = Instance.from_seed(seed)
        for r, (a, b) in enumerate(zip(instance.view(0), instance.view(1))):
            known = {p: v for p, v in enumerate(a) if v is not None} | {p: v for p, v in enumerate(b) if v is not None}
            if len(known) >= 2:
                out.append((r, sorted(known.items())))
    return out


def prefix(row: Row) -> str:
    """The line as the teacher starts it: the reviewer's cells."""
    return render_row(*row)


def ending(cells: list[tuple[int, int]], fmt: str) -> str:
    """What the model learns to write after the cells, up to the line's end."""
    best = max(cells, key=lambda cell: cell[1])
    if fmt == "argmax":
        return f" -> {PAPERS[best[0]]}\n"
    if fmt == "records":
        return f" | {render_records(cells)} -> {PAPERS[best[0]]}\n"
    (p0, v0), top = cells[0], cells[0][1]
    parts = [f"{PAPERS[p0]} {v0}"]
    for p, v in cells[1:]:
        parts.append(f"{PAPERS[p]} {v} > {top}: {PAPERS[p]} {v}" if v > top else f"{PAPERS[p]} {v} < {top}")
        top = max(top, v)
    return " | " + " | ".join(parts) + f" -> {PAPERS[best[0]]}\n"


def train(pairs: list[tuple[str, str]], steps: int, batch: int, lr: float, seed: int) -> tuple[Any, Any, float]:
    """The raw embedded model with a LoRA r16 adapter (alpha 32, all linear layers) trained with AdamW at `lr`
    on `steps` batches of (prefix, ending) pairs in their order, the loss on each ending only, on two CPU
    threads: (model, tokenizer, training seconds)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    path = models.resolve(models.RAW_MODEL)
    tok = AutoTokenizer.from_pretrained(path)
    model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    started = time.time()
    model.train()
    for step in range(steps):
        ids, labels = [], []
        for head, tail in pairs[step * batch : (step + 1) * batch]:
            a, b = tok(head).input_ids, tok(tail).input_ids
            ids.append(a + b)
            labels.append([-100] * len(a) + b)
        width = max(map(len, ids))
        pad = tok.pad_token_id or 0
        loss = model(
            input_ids=torch.tensor([s + [pad] * (width - len(s)) for s in ids]),
            attention_mask=torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in ids]),
            labels=torch.tensor([s + [-100] * (width - len(s)) for s in labels]),
        ).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f} {time.time() - started:.0f}s", flush=True)
    return model, tok, time.time() - started


def greedy_lines(model: Any, tok: Any, prefixes: list[str], max_new_tokens: int = 160, lines: int = 1) -> list[str]:
    """The trained model's greedy continuation of each prefix, up to the end of its `lines`-th line."""
    model.eval()
    tok.padding_side = "left"
    newline = tok("\n").input_ids[-1]
    texts: list[str] = []
    for i in range(0, len(prefixes), 32):
        enc = tok(prefixes[i : i + 32], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                eos_token_id=newline if lines == 1 else tok.eos_token_id,
            )  # fmt: skip
        for seq in out[:, enc.input_ids.shape[1] :]:
            texts.append("\n".join(tok.decode(seq, skip_special_tokens=True).split("\n")[:lines]))
    return texts


def run(fmt: str, steps: int, batch: int, lr: float, seed: int, test_rows: int) -> dict:
    random.seed(seed)
    train_rows = rows(TRAIN_SEEDS)
    random.shuffle(train_rows)
    test = rows(TEST_SEEDS)[:test_rows]
    pairs = [(prefix(row), ending(row[1], fmt)) for row in train_rows[: steps * batch]]
    model, tok, train_s = train(pairs, steps, batch, lr, seed)
    by_cells: dict[int, list[int]] = {}
    for (_, cells), text in zip(test, greedy_lines(model, tok, [prefix(row) for row in test])):
        pick = text.rsplit("-> ", 1)[-1].strip() if "-> " in text else ""
        right, total = by_cells.setdefault(len(cells), [0, 0])
        by_cells[len(cells)] = [right + (pick == PAPERS[max(cells, key=lambda c: c[1])[0]]), total + 1]
    return {
        "format": fmt, "seed": seed, "steps": steps, "batch": batch, "lr": lr, "train_rows": steps * batch,
        "test_rows": len(test), "accuracy": sum(r for r, _ in by_cells.values()) / len(test),
        "train_s": round(train_s), "by_cells": {n: round(r / t, 3) for n, (r, t) in sorted(by_cells.items())},
        "example": prefix(test[0]) + ending(test[0][1], fmt).rstrip(),
    }  # fmt: skip


def main(doc: str, formats: Sequence[str], run: Callable[..., dict], test_rows: int, rows_are: str) -> None:
    """The command line of a format experiment: train and score one format, print and append its result."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("format", choices=formats)
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--batch", type=int, default=16, help="rows a step (default 16)")
    parser.add_argument("--lr", type=float, default=1e-3, help="LoRA r16 learning rate (default 1e-3)")
    parser.add_argument("--seed", type=int, default=0, help="the adapter's initialization and the rows' order")
    parser.add_argument("--test-rows", type=int, default=test_rows, help=f"{rows_are} scored (default {test_rows})")
    parser.add_argument("--out", help="append the result as one JSON line to this file")
    args = parser.parse_args()
    result = run(args.format, args.steps, args.batch, args.lr, args.seed, args.test_rows)
    print(json.dumps(result), flush=True)
    if args.out:
        with open(args.out, "a") as sink:
            sink.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(__doc__, FORMATS, run, 400, "rows of other instances")
