"""Folding a LoRA run's adapter into the directory verl's merger writes (base weights + lora_adapter/)
gives the model that peft computes with the adapter, and refuses a directory without one."""

import shutil

import pytest
import torch
from click.testing import CliRunner
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from selfplay_gen.verl.merge_lora import ADAPTER_DIR, main


@pytest.mark.slow
def test_folded_model_computes_what_the_adapter_does(tmp_path, local_model_dir, tokenizer):
    hf = tmp_path / "hf"
    shutil.copytree(local_model_dir, hf)
    torch.manual_seed(0)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(local_model_dir),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], init_lora_weights=False),
    )  # random B: the adapter changes outputs
    peft_model.save_pretrained(hf / ADAPTER_DIR)
    ids = torch.tensor([tokenizer.encode("Ava Li: GLUE 421, QuAC 779")])
    with torch.no_grad():
        expected = peft_model(ids).logits
        base = AutoModelForCausalLM.from_pretrained(local_model_dir)(ids).logits
    assert not torch.allclose(expected, base, atol=1e-3)

    result = CliRunner().invoke(main, [str(hf)])
    assert result.exit_code == 0, result.output
    with torch.no_grad():
        folded = AutoModelForCausalLM.from_pretrained(hf)(ids).logits
    torch.testing.assert_close(folded, expected, atol=1e-4, rtol=1e-4)
    assert (hf / ADAPTER_DIR / "adapter_config.json").exists() and (hf / "tokenizer_config.json").exists()


def test_refuses_a_directory_without_adapter(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path)])
    assert result.exit_code != 0 and "adapter_config.json not found" in result.output
