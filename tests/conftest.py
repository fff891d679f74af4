"""Session-wide fixtures: the embedded model's tokenizer and the raw model's directory (loaded once).

Backend and loop tests run the raw SmolLM2-135M-Instruct: they test plumbing (batching, budgets,
multi-turn contexts) with short turns, which the raw model's invalid moves give; the default, warm-
started model is tested playing in test_embedded_model.py."""

from pathlib import Path

import pytest

from selfplay_gen import models


@pytest.fixture(scope="session")
def tokenizer():
    return models.load_tokenizer()


@pytest.fixture(scope="session")
def local_model_dir() -> str:
    return models.resolve(models.RAW_MODEL)


@pytest.fixture(scope="session")
def eos_apart_dir(tokenizer, tmp_path_factory) -> Path:
    """A tokenizer directory shipped as most instruct models are: eos `<|endoftext|>`, while the
    chat template (the embedded one, ChatML) closes each turn with `<|im_end|>`."""
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("eos_apart")
    tokenizer.save_pretrained(path)
    AutoTokenizer.from_pretrained(path, eos_token="<|endoftext|>").save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def eos_apart(eos_apart_dir):
    tokenizer = models.load_tokenizer(str(eos_apart_dir))
    assert tokenizer.eos_token == "<|endoftext|>" != "<|im_end|>" in tokenizer.chat_template
    return tokenizer


@pytest.fixture
def process_group(monkeypatch):
    """A one-process gloo group, as verl's FSDP workers have (of one GPU each); its variables are
    this test's only."""
    import torch.distributed as dist
    from fake_sglang import free_port

    for name, value in dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1").items():
        monkeypatch.setenv(name, value)
    dist.init_process_group("gloo")
    yield
    dist.destroy_process_group()


@pytest.fixture
def trained_lora(local_model_dir):
    """`trained_lora(rank, std=0.02)`: the raw model in fp32 with an all-linear LoRA adapter of `rank` whose B
    matrices are drawn with `std` (B starts at zero, so a fresh adapter changes nothing), and what peft's own
    fold of that adapter gives: the weights a merged, exported model should have."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    def make(rank: int, std: float = 0.02):
        model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
        actor = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear"))
        torch.manual_seed(0)
        for name, parameter in actor.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(parameter, std=std)
        return actor, copy.deepcopy(actor).merge_and_unload().state_dict()

    return make
