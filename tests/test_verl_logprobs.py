"""Chunked log-probs (selfplay_gen/verl/logprobs.py) agree with verl's own fallback in value and
gradient, for verl's flattened (tokens, vocab) and padded (batch, seq, vocab) shapes, and install()
makes verl's dispatcher use them."""

import pytest
import torch
from verl.utils import torch_functional

from selfplay_gen.verl.logprobs import chunked_logprobs, install


@pytest.mark.parametrize("shape", [(37, 50), (3, 11, 50)])
def test_same_values_and_gradients_as_verls_loop(shape):
    torch.manual_seed(0)
    logits = (3 * torch.randn(*shape, dtype=torch.float64)).requires_grad_()
    labels = torch.randint(0, shape[-1], shape[:-1])
    expected = torch_functional.logprobs_from_logits_naive(logits, labels)
    (grad_expected,) = torch.autograd.grad(expected.sum(), logits)
    got = chunked_logprobs(logits, labels, chunk_rows=8)  # several chunks and a ragged last one
    (grad_got,) = torch.autograd.grad(got.sum(), logits)
    assert got.shape == labels.shape
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(grad_got, grad_expected)


def test_bfloat16_matches_verls_row_loop():
    torch.manual_seed(1)
    logits, labels = torch.randn(20, 64, dtype=torch.bfloat16), torch.randint(0, 64, (20,))
    torch.testing.assert_close(
        chunked_logprobs(logits, labels, chunk_rows=7), torch_functional.logprobs_from_logits_v2(logits, labels)
    )


def test_install_routes_verls_fallback(monkeypatch):
    monkeypatch.setattr(torch_functional, "logprobs_from_logits_v2", torch_functional.logprobs_from_logits_v2)
    monkeypatch.setattr(torch_functional, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    install()
    assert torch_functional.logprobs_from_logits_v2 is chunked_logprobs
    logits, labels = torch.randn(5, 9), torch.randint(0, 9, (5,))
    torch.testing.assert_close(
        torch_functional.logprobs_from_logits(logits, labels),
        torch_functional.logprobs_from_logits_naive(logits, labels),
    )
