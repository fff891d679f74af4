"""Forward + backward time of verl's log-prob fallback against selfplay_gen's chunked one, on the
shape verl's FSDP engine hands it: one micro-batch flattened to (tokens, vocab).

    python bench/logprobs.py OUT.json [--tokens 8192] [--repeats 3]

Run side by side on the same device (GPU: bench/results/learning/logprobs_gpu.json)."""

import json
import time

import click
import torch
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


@click.command()
@click.argument("out", type=click.Path(dir_okay=False))
@click.option(
    "--tokens", default=8192, show_default=True, help="Rows: tokens of one micro-batch (verl's max_token_len_per_gpu)."
)
@click.option("--vocab", default=49152, show_default=True, help="SmolLM2's vocabulary.")
@click.option("--repeats", default=3, show_default=True)
def main(out: str, tokens: int, vocab: int, repeats: int) -> None:
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
    json.dump(result, open(out, "w"), indent=1)
    click.echo(json.dumps(result))


if __name__ == "__main__":
    main()
