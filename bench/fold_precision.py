"""How much of each stage's update a served model keeps, by the precision its weights are folded and served in.

A chain of LoRA adapters (a run's warm start, then its iterations, each trained on the model the one before made)
is folded onto the raw model three ways, and each stage's change to the weights, the served model minus the
model it started from, is compared with the change its adapter makes in exact arithmetic:

- bf16 fold: the weights in bfloat16, as verl's merger writes them, and the adapter folded into them in
  bfloat16;
- fp32 fold, served fp16: the weights kept in float32, as `merge_lora` keeps them, and cast to float16 by the
  server (SGLang's `--dtype float16`, as the runs serve);
- fp32 fold, served bf16: the same weights cast to bfloat16.

Per stage: the share of the weights its adapter changes that the served model leaves as they were, the error
of the served change against the exact change (norm over norm), and the share of the exact change the served
change carries (projection; 1: all of it). Prints a table and writes OUT/fold_precision.{json,md}.

    python bench/fold_precision.py --adapters WARM --adapters ITER ... [--model DIR] [--out DIR] [--quick]
"""

from __future__ import annotations

from pathlib import Path

import click
from benchmark import out_option, quick_option, write

WAYS = ("bf16 fold", "fp32 fold, served fp16", "fp32 fold, served bf16")


def chains(model: Path, adapters: list[Path], quick: bool = False) -> dict[str, list[dict]]:
    """Each way's weights after each stage, beside the exact ones (float64 from float32 folds), as state
    dicts of the adapted weights only (`quick`: the first layer's): {"exact": [...], way: [...]}, with the raw
    model first."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    def adapted(state: dict, names: set[str]) -> dict:
        return {k: v.detach().clone() for k, v in state.items() if k in names}

    exact_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    bf16_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16)
    names = {k for k in exact_model.state_dict() if k.endswith("proj.weight") and (not quick or ".layers.0." in k)}
    exact, bf16 = [adapted(exact_model.state_dict(), names)], [adapted(bf16_model.state_dict(), names)]
    for adapter in adapters:
        exact_model = PeftModel.from_pretrained(exact_model, adapter).merge_and_unload()
        bf16_model = PeftModel.from_pretrained(bf16_model, adapter).merge_and_unload()
        exact.append(adapted(exact_model.state_dict(), names))
        bf16.append(adapted(bf16_model.state_dict(), names))
    return {
        "exact": exact,
        WAYS[0]: bf16,
        WAYS[1]: [{k: v.half() for k, v in s.items()} for s in exact],
        WAYS[2]: [{k: v.bfloat16() for k, v in s.items()} for s in exact],
    }


def kept(exact_before: dict, exact_after: dict, before: dict, after: dict) -> dict:
    """One stage, one way: the served change (after - before) against the exact one."""
    norm2 = error2 = along = 0.0
    changed = unchanged = 0
    for k, start in exact_before.items():
        change = exact_after[k].double() - start.double()
        moved = change != 0
        served = after[k].double() - before[k].double()
        norm2 += float(change.pow(2).sum())
        error2 += float((served - change).pow(2).sum())
        along += float((served * change).sum())
        changed += int(moved.sum())
        unchanged += int((moved & (served == 0)).sum())
    return {
        "unchanged": unchanged / changed,
        "error": (error2 / norm2) ** 0.5,
        "kept": along / norm2,
    }


@click.command(help=__doc__)
@click.option("--model", type=click.Path(exists=True, file_okay=False, path_type=Path), help="[default: embedded raw]")
@click.option(
    "--adapters", multiple=True, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The chain's LoRA adapters, first to last.",
)  # fmt: skip
@out_option
@quick_option
def main(model: Path | None, adapters: tuple[Path, ...], out, quick: bool) -> None:
    from selfplay_gen import models

    model = model or Path(models.resolve(models.RAW_MODEL))
    weights = chains(model, list(adapters), quick)
    exact = weights["exact"]
    rows = []
    for n, adapter in enumerate(adapters, 1):
        for way in WAYS:
            row = kept(exact[n - 1], exact[n], weights[way][n - 1], weights[way][n])
            rows.append({"stage": n, "adapter": adapter.name, "way": way, **row})
    lines = ["| stage | adapter | way | weights changed, left unchanged | error / change | change kept |"]
    lines.append("|---|---|---|---|---|---|")
    lines += [
        f"| {r['stage']} | {r['adapter']} | {r['way']} | {r['unchanged']:.1%} | {r['error']:.3f} | {r['kept']:.3f} |"
        for r in rows
    ]
    table = "\n".join(lines)
    print(table)
    note = (
        "Change: the stage's served weights minus those it started from, on every adapted projection; exact: the "
        "float32 folds compared in float64. Unchanged: weights the adapter moves that the served model leaves as "
        "they were. Error: norm of (served change - exact change) over norm of the exact change. Kept: the served "
        "change projected on the exact one, over its square norm (1: carried in full, 0: lost)."
    )
    settings = {"model": model.name, "adapters": [str(a) for a in adapters], "weights": "layer 0" if quick else "all"}
    paths = write("fold_precision", out, "How much of each stage's update a served model keeps", settings,
                  {"rows": rows}, table, note)  # fmt: skip
    click.echo(f"wrote {paths[0]} and {paths[1]}")


if __name__ == "__main__":
    main()
