#!/usr/bin/env python3
"""Convert a GGUF file (any architecture transformers reads from GGUF: llama, qwen2, ...) into a
Hugging Face model directory, then check it against the GGUF-loaded model.

    python3 offline_gpu/gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype bfloat16] [--end-of-turn '<|im_end|>']
        [--fp32-reference] [--report FILE.json] [--no-check]

Method: transformers dequantizes the GGUF weights (`from_pretrained(..., gguf_file=...)`, needs
`gguf` and `accelerate`), the weights are copied into a freshly constructed model of the same
class and configuration and saved from there (saving the GGUF-loaded model itself is not reliable
across transformers versions). Special tokens come from the GGUF metadata; `--end-of-turn` makes
that token eos/pad when the metadata names another one. The chat template is the GGUF's.

The check reloads OUT_DIR and compares its logits on a short chat prompt with the GGUF-loaded
model in the same dtype (max |diff|, argmax agreement; `--fp32-reference` also against the
float32 dequantization, which shows the bf16 rounding), and prints a short greedy chat reply.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch
from gguf import GGUFReader
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.initialization import no_init_weights

# Used only if the GGUF file carries no chat template: plain ChatML.
FALLBACK_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CHECK_MESSAGES = [{"role": "user", "content": "Write a Python function that returns the sum of two numbers."}]


def log(message):
    print(f"gguf_to_hf: {message}", file=sys.stderr, flush=True)


def read_metadata(path):
    """Scalar/string GGUF metadata we need, as plain Python values."""
    reader = GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    keys = (
        "general.architecture",
        "general.name",
        "general.license",
        f"{arch}.context_length",
        "tokenizer.chat_template",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.unknown_token_id",
    )
    meta = {}
    for key in keys:
        field = reader.fields.get(key)
        if field is not None:
            value = field.contents()
            meta[key] = value.item() if hasattr(value, "item") else value
    return meta


def fix_tokenizer(tok, meta, end_of_turn):
    """Set bos/eos/pad/unk from the GGUF token ids, eos/pad to end_of_turn if given, and make sure
    a chat template exists."""
    ids = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    for role, key in ids.items():
        if f"tokenizer.ggml.{key}" in meta:
            setattr(tok, f"{role}_token", tok.convert_ids_to_tokens(int(meta[f"tokenizer.ggml.{key}"])))
    if end_of_turn and tok.eos_token != end_of_turn:
        if tok.convert_tokens_to_ids(end_of_turn) in (None, tok.unk_token_id):
            sys.exit(f"gguf_to_hf: the end-of-turn token {end_of_turn!r} is not in the vocabulary")
        log(f"GGUF eos is {tok.eos_token!r}; using the end-of-turn token {end_of_turn!r} as eos")
        tok.eos_token = end_of_turn
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if meta.get("tokenizer.chat_template"):
        tok.chat_template = meta["tokenizer.chat_template"]
    elif not getattr(tok, "chat_template", None):
        log("no chat template in the GGUF file; using plain ChatML")
        tok.chat_template = FALLBACK_CHAT_TEMPLATE
    context = meta.get(f"{meta['general.architecture']}.context_length")
    if context:
        tok.model_max_length = int(context)
    # byte-level BPE: the WordPiece-style space clean-up would alter decoded text
    tok.clean_up_tokenization_spaces = False
    tok.init_kwargs["clean_up_tokenization_spaces"] = False
    return tok


def clean_config(src, tok, dtype):
    """A plain config of the source model's type holding the GGUF model's hyper-parameters."""
    values = src.config.to_dict()
    for key in list(values):
        if key.startswith("_") or key in (
            "architectures",
            "transformers_version",
            "quantization_config",
            "torch_dtype",
            "dtype",
            "model_type",
        ):
            values.pop(key)
    values.update(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config = AutoConfig.for_model(src.config.model_type, **values)
    config.architectures = [type(src).__name__]
    config.dtype = dtype
    return config


def load_gguf(gguf_path, dtype):
    src_dir, name = os.path.split(os.path.abspath(gguf_path))
    return AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=dtype).eval()


def convert(gguf_path, out_dir, dtype, end_of_turn, report):
    gguf_path = os.path.abspath(gguf_path)
    src_dir, name = os.path.split(gguf_path)
    meta = read_metadata(gguf_path)
    report["gguf"] = {k: v for k, v in meta.items() if k != "tokenizer.chat_template"}
    report["gguf"]["has_chat_template"] = bool(meta.get("tokenizer.chat_template"))

    start = time.perf_counter()
    raw = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    report["gguf_tokenizer"] = {"eos": raw.eos_token, "bos": raw.bos_token, "pad": raw.pad_token}
    tok = fix_tokenizer(raw, meta, end_of_turn)
    src = load_gguf(gguf_path, dtype)
    report["seconds_load_gguf"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    config = clean_config(src, tok, dtype)
    # every weight is overwritten below, so a random initialization of them would be wasted work
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    state = dict(src.state_dict())
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - allowed_missing or unexpected:
        sys.exit(f"gguf_to_hf: weight names do not line up: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model.eval()
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )

    # write into a temporary sibling directory, then move into place: OUT_DIR is whole or absent
    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".gguf_to_hf-", dir=parent)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp creates it private
        for entry in os.listdir(tmp):
            os.chmod(os.path.join(tmp, entry), 0o644)
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report["seconds_build_and_save"] = round(time.perf_counter() - start, 1)
    report["parameters"] = sum(p.numel() for p in model.parameters())
    report["architecture"] = config.architectures[0]
    report["tie_word_embeddings"] = bool(config.tie_word_embeddings)
    report["out_files"] = {f: os.path.getsize(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
    log(f"wrote {out_dir} ({report['parameters'] / 1e6:.1f}M parameters, {dtype}, {report['architecture']})")
    del model
    return src


def compare(a, b):
    return {
        "max_abs_diff": (a - b).abs().max().item(),
        "argmax_agreement": (a.argmax(-1) == b.argmax(-1)).float().mean().item(),
    }


@torch.no_grad()
def check(src, gguf_path, out_dir, dtype, end_of_turn, fp32_reference, report):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(out_dir)
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=dtype).to(dev).eval()
    src = src.to(dev)
    prompt = tok.apply_chat_template(CHECK_MESSAGES, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    prompt = {k: v.to(dev) for k, v in prompt.items()}
    ids = prompt["input_ids"]
    logits = model(ids).logits.float()[0]
    same = compare(logits, src(ids).logits.float()[0])
    report["check"] = {"device": dev, "prompt_tokens": ids.shape[1], "saved_vs_gguf_same_dtype": same}
    log(f"saved vs GGUF-loaded ({dtype}), {ids.shape[1]} chat-prompt positions: {same}")
    if same["max_abs_diff"] > 1e-2:
        sys.exit("gguf_to_hf: the saved model does not reproduce the GGUF model")
    if fp32_reference:
        del src
        ref = load_gguf(gguf_path, torch.float32).to(dev)
        report["check"]["saved_vs_gguf_float32"] = ref_cmp = compare(logits, ref(ids).logits.float()[0])
        log(f"saved ({dtype}) vs GGUF-loaded float32: {ref_cmp}")
        del ref

    # tokenizer facts: what ends a turn, and whether the template emits it
    eot = end_of_turn or tok.eos_token
    text = tok.apply_chat_template(CHECK_MESSAGES + [{"role": "assistant", "content": "x"}], tokenize=False)
    report["tokenizer"] = {
        "eos_token": tok.eos_token,
        "eos_token_id": tok.eos_token_id,
        "pad_token": tok.pad_token,
        "pad_token_id": tok.pad_token_id,
        "bos_token": tok.bos_token,
        "end_of_turn": eot,
        "end_of_turn_id": tok.convert_tokens_to_ids(eot),
        "first_prompt_token": tok.convert_ids_to_tokens(int(ids[0, 0])),
        "assistant_turn_ends_with_end_of_turn": text.rstrip("\n").endswith(eot),
        "chat_template_chars": len(tok.chat_template or ""),
        "generation_config_eos": model.generation_config.eos_token_id,
    }
    out = model.generate(**prompt, max_new_tokens=48, do_sample=False)
    reply = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    report["check"]["greedy_reply"] = reply
    report["check"]["seconds"] = round(time.perf_counter() - start, 1)
    log(f"sample chat reply ({dev}): {reply!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", help="path of the .gguf file")
    ap.add_argument("out_dir", help="directory to create (replaced if it exists)")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--end-of-turn", help="token that ends a chat turn; made eos/pad if the GGUF names another")
    ap.add_argument("--fp32-reference", action="store_true", help="also compare with a float32 GGUF load")
    ap.add_argument("--report", help="write the figures (timings, logits comparison, tokenizer) as JSON")
    ap.add_argument("--no-check", action="store_true", help="skip the reload/compare/generate check")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    report = {"gguf_file": os.path.basename(args.gguf), "dtype": args.dtype}
    start = time.perf_counter()
    src = convert(args.gguf, args.out_dir, dtype, args.end_of_turn, report)
    report["seconds_convert"] = round(time.perf_counter() - start, 1)
    if not args.no_check:
        check(src, args.gguf, args.out_dir, dtype, args.end_of_turn, args.fp32_reference, report)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2, default=str)
            f.write("\n")


if __name__ == "__main__":
    main()
