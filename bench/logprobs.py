"""Forward + backward time of verl's log-prob fallback against selfplay_gen's chunked one, on the
shape verl's FSDP engine hands it: one micro-batch flattened to (tokens, vocab).

    python bench/logprobs.py [--out DIR] [--quick] [--tokens 8192] [--repeats 3]

Both run side by side on the same device (a GPU when there is one; the H100's figures are in
bench/results/learning/logprobs_gpu.json)."""

from __future__ import annotations

import time
from pathlib import Path

import click
import torch
from benchmark import out_option, quick_option, write
from verl.utils.torch_functional import logprobs_from_logits_v2

from selfplay_gen.verl.logprobs import chunked_logprobs


def seconds(fn, logits: torch.Tensor, labels: torch.Tensor, repeats: int) -> float:
    """Best of `repeats` forward + backward passes, synchronized."""
    best = float("inf")
    for _ in range(repeats):
        logits.grad = None
        if logits.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(logits, labels).sum().backward()
        if logits.is_cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


@click.command(help=__doc__)
@click.option(
    "--tokens", default=8192, show_default=True, help="Rows: tokens of one micro-batch (verl's max_token_len_per_gpu)."
)
@click.option("--vocab", default=49152, show_default=True, help="SmolLM2's vocabulary.")
@click.option("--repeats", default=3, show_default=True)
@out_option
@quick_option
def main(tokens: int, vocab: int, repeats: int, out: Path, quick: bool) -> None:
    if quick:
        tokens, repeats = 1024, 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    logits = torch.randn(tokens, vocab, device=device, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device=device)
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "tokens": tokens,
        "vocab": vocab,
        "dtype": "bfloat16",
        "verl_logprobs_from_logits_v2_s": seconds(logprobs_from_logits_v2, logits, labels, repeats),
        "chunked_logprobs_s": seconds(chunked_logprobs, logits, labels, repeats),
    }
    result["speedup"] = result["verl_logprobs_from_logits_v2_s"] / result["chunked_logprobs_s"]
    text = (
        "| log-probs of one micro-batch, forward + backward | seconds |\n|---|---:|\n"
        f"| verl's logprobs_from_logits_v2 | {result['verl_logprobs_from_logits_v2_s']:.3f} |\n"
        f"| selfplay_gen's chunked_logprobs | {result['chunked_logprobs_s']:.3f} |\n\n"
        f"chunked / verl: {result['speedup']:.1f}x on {result['device']}"
    )
    click.echo(text)
    settings = {k: result[k] for k in ("device", "tokens", "vocab", "dtype")} | {"repeats": repeats}
    write("logprobs", out, "Log-probs from logits: verl's fallback against the chunked one", settings, result, text)


if __name__ == "__main__":
    main()
