"""mt.model.dropout: the CPU dropout mask drawn from 15-bit lanes of random words."""

import pytest
import torch

from mt.model.attention import MultiHeadAttention
from mt.model.dropout import Dropout, dropout, dropout_mask, quantised_rate


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_mask_drops_at_the_rate_and_keeps_the_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(400, 1000)
    mask = dropout_mask(x, p)
    dropped = (mask == 0).float().mean().item()
    assert abs(dropped - p) < 0.004  # 400k draws: ~6 standard deviations
    kept = mask[mask != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / (1 - quantised_rate(p))))
    assert abs(mask.mean().item() - 1.0) < 0.01


def test_every_lane_of_a_word_is_random():
    """Four elements share one 64-bit word; a lane stuck at keep (or drop) would show here."""
    torch.manual_seed(1)
    mask = dropout_mask(torch.ones(200_000, 4), 0.5)
    for lane in range(4):
        assert abs((mask[:, lane] == 0).float().mean().item() - 0.5) < 0.01


def test_rate_is_rounded_to_fifteen_bits():
    assert quantised_rate(0.1) == 3277 / 32768
    assert quantised_rate(0.0) == 0.0 and quantised_rate(1.0) == 1.0


def test_gradient_is_the_mask_and_masks_follow_the_seed():
    x = torch.randn(64, 33, requires_grad=True)
    torch.manual_seed(5)
    y = dropout(x, 0.2, training=True)
    y.sum().backward()
    scale = 1 / (1 - quantised_rate(0.2))
    kept = y.detach() != 0
    torch.testing.assert_close(x.grad, kept.float() * scale)
    torch.testing.assert_close(y.detach()[kept], x.detach()[kept] * scale)
    torch.manual_seed(5)
    torch.testing.assert_close(dropout(x, 0.2, training=True), y)


def test_identity_in_eval_and_at_zero_and_odd_sizes_and_bf16():
    x = torch.randn(3, 5, 7)
    module = Dropout(0.3).eval()
    assert module(x) is x
    assert dropout(x, 0.0, training=True) is x
    y = dropout(x.bfloat16(), 0.3, training=True)  # 105 elements: not a multiple of four lanes
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    assert (dropout(x, 1.0, training=True) == 0).all()
    with pytest.raises(ValueError):
        Dropout(1.5)


@pytest.mark.parametrize("causal", [False, True])
def test_explicit_bf16_attention_matches_sdpa_in_fp32(causal):
    """On the CPU in bf16 attention is written out (faster than SDPA there); same result as fp32 SDPA."""
    torch.manual_seed(2)
    attn = MultiHeadAttention(32, 4, 0.0, self_attention=True).eval()
    x = torch.randn(6, 9, 32)
    key_mask = None if causal else (torch.arange(9) < torch.tensor([9, 5, 7, 9, 2, 8])[:, None])[:, None, None, :]
    reference = attn(x, key_mask=key_mask, causal=causal)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast = attn(x, key_mask=key_mask, causal=causal)
    assert fast.dtype == torch.bfloat16
    torch.testing.assert_close(fast.float(), reference, atol=0.05, rtol=0.05)


def test_a_rate_that_rounds_to_one_drops_without_dividing_by_zero():
    """Rates above 1 - 2^-16 round to a threshold of 2^15 lanes: no ZeroDivisionError, finite values."""
    p = 1 - 2**-17
    assert quantised_rate(p) == 1.0
    x = torch.ones(10_000)
    assert (dropout_mask(x, p) == 0).all()
    for out in (dropout(x, p, training=True), Dropout(p).train()(x)):
        assert torch.isfinite(out).all()
        assert (out == 0).float().mean() > 0.99
