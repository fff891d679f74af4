"""FSDP_STRATEGY: which FSDP version verl's training engines wrap the model with, checked with verl's
own config composition and wrapping functions on the real model. With LoRA, FSDP1's wrap policy
makes every adapter matrix its own unit, and each unit runs FSDP's hooks on every micro-batch;
FSDP2 wraps the decoder layers and the root."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hydra import compose, initialize_config_module

from selfplay_gen.iterate.cli import train_command

LAYERS = 30  # SmolLM2-135M's decoder layers
ADAPTED = 7  # its linear layers a layer, each with LoRA's A and B under all-linear


def dry_train(mode: str, *args: str) -> list[str]:
    common = ["--dry-run", "--mode", mode, "--model_path", "/m", "--verl.python", sys.executable, "--lora_rank", "16"]
    result = CliRunner().invoke(train_command, [*common, *args])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if "sft_trainer" in line or "main_ppo" in line]
    return line.split()


@pytest.mark.parametrize("strategy", ["fsdp", "fsdp2"])
def test_the_strategy_reaches_the_engine_config_of_sft_and_of_the_grpo_actor(strategy):
    from verl.utils.config import omega_conf_to_dataclass

    sft = [w for w in dry_train("sft", "--verl.fsdp_strategy", strategy) if w.startswith("engine.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        assert compose("sft_trainer_engine", overrides=sft).engine.strategy == strategy
    ppo = [w for w in dry_train("online", "--verl.fsdp_strategy", strategy) if w.startswith("actor_rollout_ref.actor.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        actor = compose("ppo_trainer", overrides=ppo).actor_rollout_ref.actor
    # verl's actor config hands its strategy to the engine config its workers build the engine from
    assert omega_conf_to_dataclass(actor).engine.strategy == strategy


@pytest.mark.parametrize("recompute", ["false", "true"])
def test_gradient_checkpointing_reaches_the_model_config_of_sft_and_of_the_grpo_actor(recompute):
    """One setting for both trainers (verl's default differs between them: off for SFT, on for PPO)."""
    sft = [w for w in dry_train("sft", "--verl.gradient_checkpointing", recompute) if w.startswith("model.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        assert compose("sft_trainer_engine", overrides=sft).model.enable_gradient_checkpointing is (recompute == "true")
    ppo = dry_train("online", "--verl.gradient_checkpointing", recompute)
    ppo = [w for w in ppo if w.startswith("actor_rollout_ref.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        model = compose("ppo_trainer", overrides=ppo).actor_rollout_ref.model
    assert model.enable_gradient_checkpointing is (recompute == "true")


def test_training_defaults_to_fsdp2_and_an_sft_step_in_few_micro_batches():
    sft = dry_train("sft")
    assert "engine.strategy=fsdp2" in sft and "data.max_token_len_per_gpu=32768" in sft
    assert "actor_rollout_ref.actor.strategy=fsdp2" in dry_train("online")


def test_fsdp2_wraps_the_decoder_layers_where_fsdp1_wraps_every_adapter_matrix(local_model_dir, process_group):
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.distributed.fsdp import FSDPModule
    from transformers import AutoModelForCausalLM
    from verl.utils.fsdp_utils import get_fsdp_wrap_policy

    def lora_model():
        model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
        return get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))

    # FSDP1 needs an accelerator to wrap, so its policy (verl's, as the engine calls it) is asked per module
    model = lora_model()
    policy = get_fsdp_wrap_policy(model, {"min_num_params": 0}, is_lora=True)
    wrapped = [m for m in model.modules() if policy(module=m, recurse=False, nonwrapped_numel=0)]
    assert len(wrapped) == LAYERS * ADAPTED * 2 + LAYERS  # 420 adapter matrices, 30 layers; with the root 451
    model = lora_model()
    fsdp2_on_cpu(model)
    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    assert len(units) == LAYERS + 1
    ids = torch.tensor([[1, 2, 3, 4]])
    model(input_ids=ids, labels=ids).loss.backward()  # the wrapped model trains its adapters
    grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert len(grads) == LAYERS * ADAPTED * 2 and all(g is not None for g in grads)


def saved_and_merged(actor, optimizer, model_dir: str, out: Path, lora_rank: int) -> dict:
    """What the iteration does after an fsdp2 job: verl's checkpoint manager saves the sharded `actor`
    (already wrapped by FSDP2) into out/checkpoints, and `merge` runs verl's model merger (and, with
    LoRA, folds the adapter); the served model's weights."""
    from omegaconf import OmegaConf
    from safetensors.torch import load_file
    from transformers import AutoTokenizer
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    from selfplay_gen.iterate.config import TrainJob, Verl
    from selfplay_gen.iterate.shell import Shell
    from selfplay_gen.iterate.verl_jobs import merge

    contents = OmegaConf.create({"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model"]})
    manager = FSDPCheckpointManager(actor, optimizer, None, AutoTokenizer.from_pretrained(model_dir), contents)
    job = TrainJob("offline", model_dir, "", "", out_dir=out, experiment="x", lr="1e-5", lora_rank=lora_rank)
    manager.save_checkpoint(str(out / "checkpoints" / "global_step_1" / "actor"), global_step=1)
    merge(Shell(), job, Verl(python=sys.executable), None, out / "hf")
    return load_file(out / "hf" / "model.safetensors")


def fsdp2_on_cpu(model) -> None:
    """Wrap `model` as verl's engine does with FSDP2, on a one-process CPU mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from verl.utils.fsdp_utils import apply_fsdp2

    apply_fsdp2(model, {"mesh": init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))}, {})


@pytest.mark.slow
def test_an_fsdp2_lora_checkpoint_merges_into_the_trained_model(local_model_dir, trained_lora, process_group, tmp_path):
    """The served model is base + adapter in float32: an adapter whose change to a weight is mostly below that
    weight's bfloat16 rounding step (as an iteration's is) keeps all of it."""
    import torch
    from safetensors.torch import load_file

    actor, folded = trained_lora(16, std=2e-4)  # changes of about 1e-5, under bf16's step of about 1e-4
    fsdp2_on_cpu(actor)
    optimizer = torch.optim.AdamW([p for p in actor.parameters() if p.requires_grad])
    served = saved_and_merged(actor, optimizer, local_model_dir, tmp_path, lora_rank=16)

    before = load_file(Path(local_model_dir) / "model.safetensors")
    assert set(served) == set(folded) - {"lm_head.weight"}  # tied to the embeddings
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.29.mlp.down_proj.weight"):
        assert served[name].dtype == torch.float32
        change = folded[name] - before[name].float()
        assert (folded[name].bfloat16().float() - before[name].bfloat16().float() == 0).float().mean() > 0.5
        error = (served[name] - folded[name]).norm()
        assert error < change.norm() / 1000, (name, error, change.norm())


@pytest.mark.slow
def test_an_fsdp2_full_checkpoint_merges_into_the_trained_model(local_model_dir, process_group, tmp_path):
    """Offline GRPO trains the whole model (no LoRA): the served model is the trained float32 weights, a step
    smaller than bfloat16's rounding included."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    actor = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
    fsdp2_on_cpu(actor)
    optimizer = torch.optim.SGD(actor.parameters(), lr=1e-3)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    actor(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    trained = {name: p.full_tensor().detach() for name, p in actor.named_parameters()}
    served = saved_and_merged(actor, optimizer, local_model_dir, tmp_path, lora_rank=0)

    before = load_file(Path(local_model_dir) / "model.safetensors")
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"):
        assert served[name].dtype == torch.float32
        assert torch.equal(served[name], trained[name]) and not torch.equal(trained[name], before[name].float())


def qwen_like(path: Path) -> str:
    """A checkpoint as Qwen2.5-Coder-1.5B's looks to the defaults: its config, and 3.1 GB of bfloat16 weights in a
    sparse file (no data written)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2", "vocab_size": 151936, "dtype": "bfloat16"}))
    with (path / "model.safetensors").open("wb") as f:
        f.truncate(3_087_467_520)
    return str(path)


def test_a_larger_model_trains_in_micro_batches_for_its_vocabulary_and_with_recomputed_activations(
    tmp_path, local_model_dir
):
    """Qwen2.5-1.5B's logits are three times SmolLM2's a token, and without recomputation its activations, each
    sequence padded to the limits, took 120 to 130 GB of an H200 in online GRPO: the defaults follow the model
    (SmolLM2's are the measured ones), and a setting given is kept."""
    qwen = qwen_like(tmp_path / "qwen")
    sft = dry_train("sft", "--model_path", qwen)
    assert "data.max_token_len_per_gpu=10240" in sft and "model.enable_gradient_checkpointing=True" in sft
    ppo = dry_train("online", "--model_path", qwen)
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=5120" in ppo
    assert "actor_rollout_ref.model.enable_gradient_checkpointing=True" in ppo
    small = dry_train("online", "--model_path", local_model_dir)  # SmolLM2-135M in float32
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384" in small
    assert "actor_rollout_ref.model.enable_gradient_checkpointing=False" in small
    assert "data.max_token_len_per_gpu=32768" in dry_train("sft", "--model_path", local_model_dir)
    given = dry_train(
        "online", "--model_path", qwen, "--verl.ppo_micro_tokens", "8192", "--verl.gradient_checkpointing", "false"
    )
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192" in given
    assert "actor_rollout_ref.model.enable_gradient_checkpointing=False" in given
