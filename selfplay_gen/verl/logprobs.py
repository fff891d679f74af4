"""Token log-probabilities computed in row chunks, installed into verl's training processes.

Without flash-attn (not in the GPU bundles), verl 0.9.1 computes log-probs with
`verl.utils.torch_functional.logprobs_from_logits_v2`, which loops over the first dimension of
the logits. Its FSDP engine first flattens every micro-batch to (tokens, vocab), so that loop runs
once per token: tens of thousands of tiny kernels forward and backward per step, most of an SFT
step's time (bench/results/learning/). `install()`
replaces it with the same computation over chunks of rows; the result is unchanged.

`selfplay_gen.verl.worker_setup` installs it: GRPO's workers import that module as verl's
`external_lib` of the actor's model, and `python -m selfplay_gen.verl.sft_trainer` imports it too.
"""

from __future__ import annotations

import torch

CHUNK_ROWS = 2048


def chunked_logprobs(logits: torch.Tensor, labels: torch.Tensor, chunk_rows: int = CHUNK_ROWS) -> torch.Tensor:
    """log softmax(logits)[labels] over any leading shape, a few thousand rows per kernel, so the
    peak extra memory stays one chunk's log-softmax while the launches stay few."""
    rows = logits.reshape(-1, logits.shape[-1])
    targets = labels.reshape(-1, 1)
    parts = [
        torch.log_softmax(chunk, dim=-1).gather(-1, ids).squeeze(-1)
        for chunk, ids in zip(rows.split(chunk_rows), targets.split(chunk_rows))
    ]
    return torch.cat(parts).view(labels.shape)


def install() -> None:
    """Route verl's log-prob fallback (used when flash-attn is absent) through `chunked_logprobs`."""
    from verl.utils import torch_functional

    torch_functional.logprobs_from_logits_v2 = chunked_logprobs
