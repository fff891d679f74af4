"""Folding a LoRA run's adapter into the directory verl's merger writes (base weights + lora_adapter/)
gives the model that peft computes with the adapter, and refuses a directory without one."""

import re
import shutil
from pathlib import Path

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


def random_adapter(model_dir, out, seed: int) -> None:
    torch.manual_seed(seed)
    get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], init_lora_weights=False),
    ).save_pretrained(out)


@pytest.mark.slow
def test_a_chain_folded_in_one_process_gives_each_stage_the_weights_of_folding_one_at_a_time(tmp_path, local_model_dir):
    """A run restored from its adapters alone: stage 2's adapter was trained on stage 1's model. Folding the
    chain in memory (--onto) writes each stage the same weights as folding stage by stage from files."""
    one_at_a_time, chain = tmp_path / "one", tmp_path / "chain"
    for root in (one_at_a_time, chain):
        for stage, seed in (("s1", 1), ("s2", 2)):
            random_adapter(local_model_dir, root / stage / ADAPTER_DIR, seed)
    previous = Path(local_model_dir)
    for stage in ("s1", "s2"):  # the previous model's files copied in, then folded: one fold a process
        for path in previous.iterdir():
            if path.name != ADAPTER_DIR:
                (shutil.copytree if path.is_dir() else shutil.copy)(path, one_at_a_time / stage / path.name)
        assert CliRunner().invoke(main, [str(one_at_a_time / stage)]).exit_code == 0
        previous = one_at_a_time / stage
    result = CliRunner().invoke(main, ["--onto", str(local_model_dir), str(chain / "s1"), str(chain / "s2")])
    assert result.exit_code == 0, result.output
    # where a restore's time goes: the first model read once, then each stage's fold and write
    assert re.search(rf"read {re.escape(str(local_model_dir))} in \d+\.\d s", result.output)
    for stage in ("s1", "s2"):
        assert re.search(rf"into {re.escape(str(chain / stage))} \(fold \d+\.\d s, write \d+\.\d s\)", result.output)
    for stage in ("s1", "s2"):
        want = AutoModelForCausalLM.from_pretrained(one_at_a_time / stage).state_dict()
        got = AutoModelForCausalLM.from_pretrained(chain / stage).state_dict()
        assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
        assert (chain / stage / ADAPTER_DIR / "adapter_config.json").exists()
        assert (chain / stage / "tokenizer_config.json").exists() and not (chain / f"{stage}.folding").exists()
    base = AutoModelForCausalLM.from_pretrained(local_model_dir).state_dict()
    s1 = AutoModelForCausalLM.from_pretrained(chain / "s1").state_dict()
    s2 = AutoModelForCausalLM.from_pretrained(chain / "s2").state_dict()
    changed = [k for k in base if not torch.equal(base[k], s1[k])]
    assert changed and all(not torch.equal(s1[k], s2[k]) for k in changed)  # stage 2 folded onto stage 1


def test_a_chain_with_a_stage_lacking_its_adapter_writes_nothing(tmp_path, local_model_dir):
    random_adapter(local_model_dir, tmp_path / "s1" / ADAPTER_DIR, 1)
    (tmp_path / "s2").mkdir()
    result = CliRunner().invoke(main, ["--onto", str(local_model_dir), str(tmp_path / "s1"), str(tmp_path / "s2")])
    assert result.exit_code != 0 and f"{tmp_path}/s2/lora_adapter/adapter_config.json not found" in result.output
    assert sorted(p.name for p in (tmp_path / "s1").iterdir()) == [ADAPTER_DIR]


def test_a_checkpoint_merges_into_one_directory_and_not_onto_a_chain(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.verl.merge_lora import main

    args = ["--checkpoint", str(tmp_path), str(tmp_path / "a"), str(tmp_path / "b")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--checkpoint merges into one HF_DIR" in result.output
    result = CliRunner().invoke(main, ["--checkpoint", str(tmp_path), "--onto", str(tmp_path), str(tmp_path / "a")])
    assert result.exit_code == 2 and "without --onto" in result.output


def test_a_fold_keeps_an_update_smaller_than_the_models_bfloat16_rounding(tmp_path, local_model_dir):
    """A model stored in bfloat16 (Qwen's checkpoints, verl's merger's output) gets an adapter whose changes
    are smaller than a weight's bfloat16 rounding step: the folded model carries the whole change, in float32."""
    from transformers import LlamaForCausalLM

    from selfplay_gen.models import fold_adapter

    model = tiny_llama(tmp_path / "base", local_model_dir, torch.bfloat16)
    adapted = get_peft_model(
        LlamaForCausalLM.from_pretrained(tmp_path / "base", dtype=torch.float32),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], init_lora_weights=False),
    )
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.mul_(1e-4)
    adapted.save_pretrained(tmp_path / "adapter")
    expected = {k: v.clone() for k, v in adapted.merge_and_unload().state_dict().items()}

    fold_adapter(tmp_path / "base", tmp_path / "adapter", tmp_path / "folded")
    folded = LlamaForCausalLM.from_pretrained(tmp_path / "folded", dtype="auto").state_dict()
    name = "model.layers.0.self_attn.q_proj.weight"
    base = model.state_dict()[name].float()
    change = expected[name] - base
    assert (base + change).bfloat16().float().eq(base).float().mean() > 0.5  # mostly lost in bfloat16
    assert folded[name].dtype == torch.float32
    torch.testing.assert_close(folded[name] - base, change, atol=1e-7, rtol=1e-4)


def tiny_llama(out: Path, local_model_dir, dtype: torch.dtype):
    """A one-layer Llama saved to `out` in `dtype` with the real tokenizer's files: folds in milliseconds."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2,
    )  # fmt: skip
    model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(out)
    for tokenizer_file in Path(local_model_dir).glob("tokenizer*"):
        shutil.copy(tokenizer_file, out)
    return model


def test_a_scaled_fold_lies_that_far_along_the_update(tmp_path, local_model_dir):
    """--scale 0.5 folds half of each adapter's update: the model halfway between the one the adapter was trained
    on and the trained one, weight by weight; the adapter kept beside it is the whole one."""
    base = tiny_llama(tmp_path / "base", local_model_dir, torch.float32).state_dict()
    for soup in ("whole", "half"):
        random_adapter(tmp_path / "base", tmp_path / soup / ADAPTER_DIR, seed=3)
    assert CliRunner().invoke(main, ["--onto", str(tmp_path / "base"), str(tmp_path / "whole")]).exit_code == 0
    result = CliRunner().invoke(main, ["--onto", str(tmp_path / "base"), "--scale", "0.5", str(tmp_path / "half")])
    assert result.exit_code == 0, result.output
    assert f"into {tmp_path / 'half'} at scale 0.5 (fold" in result.output
    whole = AutoModelForCausalLM.from_pretrained(tmp_path / "whole").state_dict()
    half = AutoModelForCausalLM.from_pretrained(tmp_path / "half").state_dict()
    changed = [k for k in base if not torch.equal(base[k], whole[k])]
    assert changed
    for k in base:
        torch.testing.assert_close(half[k], base[k] + 0.5 * (whole[k] - base[k]), atol=1e-6, rtol=1e-5)
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (tmp_path / "half" / ADAPTER_DIR / name).read_bytes() == (
            tmp_path / "whole" / ADAPTER_DIR / name
        ).read_bytes()
    result = CliRunner().invoke(main, ["--scale", "-1", str(tmp_path / "half")])
    assert result.exit_code == 2 and "-1.0 is not in the range x>=0" in result.output
