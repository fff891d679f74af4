"""Restoring a run carried as LoRA adapters alone (`offline_gpu/gpu_learning.sh ... restore`): the chain of
stages folded one at a time, each from the files the last fold wrote (the previous model's files copied
in, then `merge_lora HF_DIR`), against the whole chain in one process (`merge_lora --onto MODEL HF_DIR...`),
side by side on the same adapters, the final stage's weights checked equal. Prints a table and writes
OUT/fold_chain.{json,md}.

    python bench/fold_chain.py [--out DIR] [--quick] [--model DIR] [--adapters A1 --adapters A2 ...]

Without --adapters, --stages random LoRA adapters (rank 16 on every linear layer, as the runs train them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
from benchmark import out_option, quick_option, write

ADAPTER = "lora_adapter"


def random_adapters(model: Path, stages: int, into: Path) -> list[Path]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model, dtype="auto")
    modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    out = []
    for stage in range(stages):
        torch.manual_seed(stage)
        config = LoraConfig(r=16, lora_alpha=32, target_modules=modules, init_lora_weights=False)
        peft = get_peft_model(base, config)
        peft.save_pretrained(into / f"adapter_{stage}")
        base = peft.unload()
        out.append(into / f"adapter_{stage}")
    return out


def stage_dirs(root: Path, adapters: list[Path]) -> list[Path]:
    """ROOT/iter_NNN/train/hf/lora_adapter for each adapter, as a carried run holds them."""
    dirs = []
    for i, adapter in enumerate(adapters, 1):
        hf = root / f"iter_{i:03d}" / "train" / "hf"
        shutil.copytree(adapter, hf / ADAPTER)
        dirs.append(hf)
    return dirs


def stage_name(adapter: Path) -> str:
    """RUN/NAME/STAGE of a run's .../RUN/NAME/STAGE/train/hf/lora_adapter; else the directory's own name."""
    parts = adapter.parts
    return "/".join(parts[-6:-3]) if parts[-3:] == ("train", "hf", ADAPTER) else adapter.name


def merge_lora(*args: str | Path) -> None:
    subprocess.run([sys.executable, "-m", "selfplay_gen.verl.merge_lora", *map(str, args)], check=True)


def one_at_a_time(model: Path, stages: list[Path]) -> None:
    previous = model
    for hf in stages:
        for path in previous.iterdir():
            if path.name != ADAPTER:
                (shutil.copytree if path.is_dir() else shutil.copy)(path, hf / path.name)
        merge_lora(hf)
        previous = hf


def same_weights(a: Path, b: Path) -> bool:
    from safetensors.torch import load_file

    def weights(d: Path) -> dict:
        return {k: v for f in sorted(d.glob("*.safetensors")) for k, v in load_file(f).items()}

    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)


@click.command(help=__doc__)
@click.option("--model", type=click.Path(exists=True, file_okay=False, path_type=Path), help="[default: embedded]")
@click.option("--adapters", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--stages", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), help="Scratch space [default: a temp dir].")
@out_option
@quick_option
def main(model: Path | None, adapters: tuple[Path, ...], stages: int, work: Path | None, out, quick: bool) -> None:
    from selfplay_gen import models

    model = model or Path(models.resolve(None))
    stages = 2 if quick and not adapters else stages
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        tmp = Path(scratch)
        chain = list(adapters) or random_adapters(model, stages, tmp / "adapters")
        seconds = {}
        finals = {}
        for method in ("one at a time", "one process"):
            root = tmp / method.replace(" ", "_")
            dirs = stage_dirs(root, chain)
            start = time.perf_counter()
            if method == "one at a time":
                one_at_a_time(model, dirs)
            else:
                merge_lora("--onto", model, *dirs)
            seconds[method] = time.perf_counter() - start
            finals[method] = dirs[-1]
        if not same_weights(finals["one at a time"], finals["one process"]):
            raise RuntimeError("the chain folded in one process gave the last stage other weights")
        size = sum(f.stat().st_size for f in model.glob("*.safetensors")) / 2**30
    base = seconds["one at a time"]
    rows = [{"method": m, "seconds": s, "speedup": base / s} for m, s in seconds.items()]
    lines = ["| method | stages | seconds | speed-up |", "|---|---|---|---|"]
    lines += [f"| {r['method']} | {len(chain)} | {r['seconds']:.1f} | {r['speedup']:.2f}x |" for r in rows]
    table = "\n".join(lines)
    print(table)
    note = (
        "One at a time: each stage gets the previous model's files copied in, then `merge_lora HF_DIR` loads, "
        "folds and writes it. One process: `merge_lora --onto MODEL HF_DIR...` loads MODEL once and writes each "
        "stage. The last stage's weights are checked equal, tensor by tensor. Both write every stage's model."
    )
    settings = {"model": model.name, "model_gib": round(size, 2), "stages": len(chain)}
    settings["adapters"] = [stage_name(p) for p in adapters] if adapters else "random, rank 16, every linear layer"
    title = "Restoring a run's models from its adapters"
    paths = write("fold_chain", out, title, settings, {"rows": rows}, table, note)
    click.echo(f"wrote {paths[0]} and {paths[1]}")


if __name__ == "__main__":
    main()
