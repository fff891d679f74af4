"""Whether our training processes let PyTorch's SDPA run on its cuDNN backend.

On Hopper, PyTorch (2.10 and later, with a recent cuDNN) tries cuDNN first for
`scaled_dot_product_attention`. cuDNN builds an execution plan for every new shape of q, k and v,
and verl's padded micro-batches (token-budget batching, no padding removal) take a new shape almost
every micro-batch. A profiled LoRA SFT step of the 135M model spent several times longer in SDPA's CPU
side than in its attention kernels (bench/results/two_gpu_h200_2026-11-26/). With the backend off,
PyTorch uses its flash or memory-efficient kernels, which build no plan.

verl's workers are other processes (torchrun's ranks, Ray's actors), so the choice travels in the
environment variable `ENV` and each process applies it at start (`configure`).
"""

from __future__ import annotations

import os

ENV = "SELFPLAY_CUDNN_ATTENTION"
OFF = "off"


def configure() -> None:
    """Turn SDPA's cuDNN backend off in this process when `ENV` says `OFF`; otherwise leave PyTorch's choice."""
    if os.environ.get(ENV) == OFF:
        import torch

        torch.backends.cuda.enable_cudnn_sdp(False)
