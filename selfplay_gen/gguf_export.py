"""A Hugging Face model directory as a GGUF file for llama.cpp, with the weights it holds.

llama.cpp reads GGUF only, and the model the tool plays by default is not one: it is the embedded
GGUF (SmolLM2-135M-Instruct, Q4_1) dequantized by transformers, with the warm-start adapter folded
in (`models.resolve`). To play the same model, the folded weights are written back into a GGUF in
float32: every tensor exactly as the local backend holds it. The metadata (architecture,
tokenizer, rope settings) is the embedded GGUF's, so only models of its shape can be exported:
the embedded ones and checkpoints trained from them.

transformers un-permutes llama's q and k projections when it reads a GGUF (llama.cpp's rope
pairs the dimensions differently from Hugging Face's); writing them back permutes them again, as
llama.cpp's own `convert_hf_to_gguf.py` does. Names are mapped by gguf's `TensorNameMap`.

The file is cached next to the Hugging Face copies (`models.cache_dir()`), named after the model
directory and its weights' size and time, so a retrained checkpoint is exported again.

Files in other precisions (bf16, q8_0, q4_0) are made from the float32 export by llama.cpp's own
`llama_model_quantize` and cached beside it. They decode faster on CPU; their logits differ
from the float32 weights' (and so from the `local` backend's), in q4_0 enough to change how the
warm model plays, while records stay exact to what was sampled: the ids drawn and the logprobs of
the distribution they were drawn from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from . import models

EXPORTED = ("f32", "f16")  # written here from the Hugging Face weights
QUANTIZED = ("bf16", "q8_0", "q4_0")  # made from the f32 export by llama.cpp (bf16 is not quantized, only rounded)
DTYPES = EXPORTED + QUANTIZED


def gguf_for(model: str | None, dtype: str = "f32") -> Path:
    """The GGUF file llama.cpp plays for `model` (a `.gguf` file itself, an embedded model name, or
    a Hugging Face directory of the embedded model's shape), exported once and cached. A `.gguf`
    file is played as it is, whatever `dtype`."""
    if model and model.endswith(".gguf"):
        if not Path(model).is_file():
            raise FileNotFoundError(f"GGUF file '{model}' does not exist")
        return Path(model)
    if dtype not in DTYPES:
        raise ValueError(f"unknown GGUF dtype {dtype!r}; choose one of {DTYPES}")
    if dtype in QUANTIZED:
        return quantized(gguf_for(model, "f32"), dtype)
    hf_dir = Path(models.resolve(model))
    weights = sorted(hf_dir.glob("*.safetensors"))
    if not weights:
        raise FileNotFoundError(f"{hf_dir} holds no *.safetensors weights to export to GGUF")
    stamp = json.dumps([[w.name, w.stat().st_size, w.stat().st_mtime_ns] for w in weights])
    digest = hashlib.sha256(f"{hf_dir.resolve()}\n{stamp}".encode()).hexdigest()[:12]
    target = models.cache_dir() / "gguf" / f"{hf_dir.name}-{digest}.{dtype}.gguf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        export(hf_dir, partial, dtype=dtype)
        partial.replace(target)
    return target


def quantized(f32: Path, dtype: str) -> Path:
    """`f32` (a float32 export) quantized to `dtype` by llama.cpp, once, cached beside it."""
    from .backends.llama_binding import import_llama_cpp

    target = f32.with_name(f32.name.removesuffix(".f32.gguf") + f".{dtype}.gguf")
    if not target.exists():
        llama_cpp = import_llama_cpp()
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{dtype.upper()}")
        partial = target.with_name(target.name + ".partial")
        if llama_cpp.llama_model_quantize(str(f32).encode(), str(partial).encode(), params) != 0:
            raise RuntimeError(f"llama_model_quantize could not write {partial} from {f32}")
        partial.replace(target)
    return target


def hf_tensors(hf_dir: Path) -> dict[str, np.ndarray]:
    """Every tensor of a Hugging Face directory's safetensors files, as float32 numpy arrays."""
    from safetensors import safe_open

    tensors = {}
    for path in sorted(hf_dir.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                tensors[name] = f.get_tensor(name).float().numpy()
    return tensors


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face's rotary layout of a q or k projection to llama.cpp's (convert_hf_to_gguf.py's)."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def gguf_tensors(hf_dir: Path, template) -> dict[str, np.ndarray]:
    """The tensors of `hf_dir` under their GGUF names and in llama.cpp's layout, checked against
    the names and shapes of `template` (a `gguf.GGUFReader` of a model of the same shape)."""
    import gguf

    config = json.loads((hf_dir / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ValueError(
            f"{hf_dir}/config.json: model_type {config.get('model_type')!r} is not 'llama'; the llamacpp backend "
            "exports only models of the embedded SmolLM2 shape (give it a .gguf file for others)"
        )
    n_head = config["num_attention_heads"]
    n_head_kv = config.get("num_key_value_heads") or n_head
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    expected = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in template.tensors}
    out = {}
    for name, value in hf_tensors(hf_dir).items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings") and "token_embd.weight" in expected:
            continue  # tied to the embeddings, which the GGUF holds once
        mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ValueError(f"{hf_dir}: tensor {name!r} has no GGUF name in llama's tensor map")
        if name.endswith("q_proj.weight"):
            value = permute(value, n_head)
        elif name.endswith("k_proj.weight"):
            value = permute(value, n_head_kv)
        if expected.get(mapped) != value.shape:
            raise ValueError(
                f"{hf_dir}: tensor {name!r} ({mapped}) has shape {value.shape}, the embedded GGUF's has "
                f"{expected.get(mapped)}; the llamacpp backend exports only models of the embedded model's shape"
            )
        out[mapped] = value
    missing = sorted(set(expected) - set(out))
    if missing:
        raise ValueError(f"{hf_dir}: no weights for the GGUF tensors {missing[:5]}")
    return out


def export(hf_dir: Path, out: Path, dtype: str = "f32") -> None:
    """Write the weights of `hf_dir` as a GGUF of the embedded model's metadata to `out`."""
    import gguf

    template = gguf.GGUFReader(models.gguf_file())
    tensors = gguf_tensors(Path(hf_dir), template)
    file_type = gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16
    writer = gguf.GGUFWriter(out, arch="llama")
    for field in template.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_file_type(file_type)
            continue
        kind = field.types[0]
        writer.add_key_value(
            field.name, field.contents(), kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        )
    for tensor in template.tensors:  # the template's order
        value = tensors[tensor.name]
        # llama.cpp wants norms (1-d tensors) in float32 whatever the file type
        writer.add_tensor(tensor.name, value if dtype == "f32" or value.ndim == 1 else value.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
