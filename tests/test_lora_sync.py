"""How a LoRA actor's weights reach the SGLang rollout engine, checked with verl's own config and
classes: our GRPO settings must keep verl 0.9.1 off its adapter sync, whose request SGLang 0.5.12
does not take (see `selfplay_gen.iterate.config.LORA_SYNC`)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import torch
import verl
from hydra import compose, initialize_config_module
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig
from verl.workers.rollout.sglang_rollout.utils import lora_rank_of, lora_served_as_adapter

from selfplay_gen.iterate.config import LORA_SYNC, PolicyLoss

# SGLang 0.5.12's LoadLoRAAdapterFromTensorsReqInput (sglang/srt/managers/io_struct.py), read from its
# wheel: SGLang is not installed here, so its fields are written out.
SGLANG_0_5_12_LORA_FROM_TENSORS = {
    "lora_name",
    "config_dict",
    "serialized_tensors",
    "pinned",
    "added_tokens_config",
    "lora_id",
    "load_format",
}


def model_config(model_dir: str, loss: PolicyLoss) -> HFModelConfig:
    """verl's HFModelConfig as its workers build it, from verl's trainer config with our overrides."""
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=[f"actor_rollout_ref.model.path={model_dir}", *loss.overrides()])
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.model, dataclass_type=HFModelConfig)


def test_lora_grpo_syncs_merged_weights_not_an_adapter(local_model_dir):
    lora = model_config(local_model_dir, PolicyLoss(lora_rank=32))
    assert lora_rank_of(lora) == 32 and lora.lora.get("merge") is True
    # verl's own test of the sync path: SGLang gets no adapter (no enable_lora, no lora_path, full
    # weight updates), as for full fine-tuning
    assert not lora_served_as_adapter(lora)
    assert not lora_served_as_adapter(model_config(local_model_dir, PolicyLoss()))
    without_merge = dataclasses.replace(lora, lora={**lora.lora, "merge": False})
    assert lora_served_as_adapter(without_merge)  # what the run did before: the adapter path


def test_verls_adapter_request_is_not_sglang_0_5_12s():
    """The cause, kept in view: verl 0.9.1's adapter sync names a field SGLang 0.5.12 lacks. If a
    verl upgrade changes this, LORA_SYNC may no longer be needed."""
    # verl's module imports SGLang, so it is read, not imported
    path = Path(verl.__file__).parent / "workers" / "rollout" / "sglang_rollout" / "sglang_rollout.py"
    calls = [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LoadLoRAAdapterFromTensorsReqInput"
    ]
    assert len(calls) == 1, f"{path}: expected one LoadLoRAAdapterFromTensorsReqInput(...), found {len(calls)}"
    fields = {keyword.arg for keyword in calls[0].keywords}
    assert fields == {"lora_name", "config_dict", "serialized_named_tensors"}
    assert fields - SGLANG_0_5_12_LORA_FROM_TENSORS == {"serialized_named_tensors"}
    assert LORA_SYNC.split("=") == ["actor_rollout_ref.model.lora.merge", "True"]


def test_the_merged_sync_sends_the_folded_model_and_keeps_the_adapter_apart(trained_lora, process_group, monkeypatch):
    """verl's FSDP engine with model.lora.merge streams base + adapter under the base model's names, what
    peft's own fold gives in bf16 (what the exported model serves), and leaves the actor's adapter apart.
    The model is sharded with FSDP2 on the CPU; verl's two CUDA-only probes (the device id, the memory
    log) are pointed at the CPU."""
    from verl.workers.engine.fsdp import transformer_impl

    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "log_gpu_memory_usage", lambda *args, **kwargs: None)
    actor, folded = trained_lora(8)
    before = {k: v.clone() for k, v in actor.state_dict().items()}
    mesh = init_device_mesh("cpu", (1,))
    for layer in actor.base_model.model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(actor, mesh=mesh)

    engine = SimpleNamespace(module=actor, _is_offload_param=False)
    sent = dict(transformer_impl.FSDPEngine._merged_lora_per_tensor_param(engine))

    assert set(sent) == set(folded)  # the base model's names, no lora_A/lora_B, no base_layer
    q = "model.layers.0.self_attn.q_proj.weight"
    for name in (q, "model.layers.29.mlp.down_proj.weight", "model.embed_tokens.weight"):
        assert torch.equal(sent[name], folded[name].to(torch.bfloat16)), name
    assert not torch.equal(sent[q], before[f"base_model.model.{q.replace('.weight', '.base_layer.weight')}"].bfloat16())
    after = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in actor.state_dict().items()}
    assert all(torch.equal(after[k], before[k]) for k in before)  # the actor trains on, unmerged
