"""The merge of a LoRA run's checkpoint into the model SGLang serves, two ways side by side on one checkpoint:
verl's model merger command then `merge_lora HF_DIR` (two processes, as iterate ran it), and
`merge_lora --checkpoint LOCAL_DIR HF_DIR` (one process). Alternating, ROUNDS times each; wall seconds per way.

    python bench/results/merge_one_process_cpu_2026-11-29/measure.py OUT_DIR [ROUNDS]

The checkpoint: SmolLM2-135M-Instruct with an all-linear LoRA adapter of rank 16, wrapped by FSDP2 on a
one-process CPU mesh as verl's engine wraps it, saved by verl's FSDPCheckpointManager (tests/test_fsdp_strategy.py
builds and checks the same)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def checkpoint(out: Path) -> Path:
    import torch
    import torch.distributed as dist
    from omegaconf import OmegaConf
    from peft import LoraConfig, get_peft_model
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.fsdp_utils import apply_fsdp2

    from selfplay_gen import models

    model_dir = models.resolve(models.RAW_MODEL)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    apply_fsdp2(model, {"mesh": init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))}, {})
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    contents = OmegaConf.create({"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model"]})
    manager = FSDPCheckpointManager(model, optimizer, None, AutoTokenizer.from_pretrained(model_dir), contents)
    local = out / "checkpoints" / "global_step_1" / "actor"
    manager.save_checkpoint(str(local), global_step=1)
    dist.destroy_process_group()
    return local


def timed(commands: list[list[str]]) -> float:
    started = time.monotonic()
    for command in commands:
        subprocess.run(command, check=True, capture_output=True, text=True)
    return time.monotonic() - started


def main(out: Path, rounds: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    local = checkpoint(out)
    target = out / "hf"
    py = sys.executable
    ways = {
        "two processes (verl.model_merger, then merge_lora)": lambda: [
            [py, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(local),
             "--target_dir", str(target)],
            [py, "-m", "selfplay_gen.verl.merge_lora", str(target)],
        ],
        "one process (merge_lora --checkpoint)": lambda: [
            [py, "-m", "selfplay_gen.verl.merge_lora", "--checkpoint", str(local), str(target)],
        ],
    }  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, commands in ways.items():
            shutil.rmtree(target, ignore_errors=True)
            seconds[name].append(round(timed(commands()), 2))
    two, one = (statistics.median(s) for s in seconds.values())
    result = {"rounds": rounds, "seconds": seconds, "median_s": [two, one], "ratio_two_over_one": round(two / one, 2)}
    (out / "merge_seconds.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
