"""How much of a small weight update survives a bf16 checkpoint.

    python bench/analysis/bf16_updates.py [OUT.json]

verl trains in fp32 but its model merger writes bf16, and the next iteration (and SGLang) starts
from that file. This adds an update of size eps with random signs to the embedded warm start's
weights (rounded to bf16, as the served model is) and rounds the result back to bf16: the share of
weights that change and the cosine between the update made and the update kept. GRPO's full
fine-tuning moves each weight by about lr per Adam step, so at lr 5e-6 a whole iteration is lost.
"""

from __future__ import annotations

import json
import sys

import torch
from safetensors.torch import load_file

from selfplay_gen.models import resolve

EPS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3)


def main() -> dict:
    state = load_file(f"{resolve(None)}/model.safetensors")
    w = torch.cat([t.flatten() for k, t in state.items() if t.dim() == 2 and "embed" not in k]).bfloat16().float()
    generator = torch.Generator().manual_seed(0)
    rows = {}
    for eps in EPS:
        update = eps * torch.sign(torch.randn(w.shape, generator=generator))
        kept = (w + update).bfloat16().float() - w
        rows[f"{eps:g}"] = {
            "weights_changed": float((kept != 0).float().mean()),
            "cosine_kept_vs_made": float(torch.dot(kept, update) / kept.norm() / update.norm()),
            "norm_kept_over_made": float(kept.norm() / update.norm()),
        }
    return {"weights": w.numel(), "median_abs_weight": float(w.abs().median()), "update_per_weight": rows}


if __name__ == "__main__":
    result = json.dumps(main(), indent=1)
    print(result)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(result + "\n")
