"""offline_gpu/gguf_to_hf.py on the embedded SmolLM2 GGUF: the directory it writes is the GGUF's model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from selfplay_gen.models import gguf_file

SCRIPT = Path(__file__).resolve().parent.parent / "offline_gpu" / "gguf_to_hf.py"


def test_the_saved_model_holds_the_gguf_weights_and_passes_its_own_check(tmp_path):
    """Every saved tensor equals the GGUF-loaded one (the model is built without a random initialization,
    so a weight the copy missed would show as garbage here), and the script's logits check passes."""
    gguf = gguf_file()
    out, report = tmp_path / "hf", tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(gguf), str(out), "--end-of-turn", "<|im_end|>", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(report.read_text())
    same = facts["check"]["saved_vs_gguf_same_dtype"]
    assert same["max_abs_diff"] <= 1e-2 and same["argmax_agreement"] == 1.0
    assert facts["tokenizer"]["end_of_turn"] == "<|im_end|>"

    saved = load_file(out / "model.safetensors")
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    expected = src.state_dict()
    if facts["tie_word_embeddings"]:
        expected.pop("lm_head.weight")
    assert set(saved) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(saved[name], tensor), name
