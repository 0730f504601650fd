"""Dropout (Sec. 5.4) whose random mask is cheap on the CPU.

torch's CPU dropout draws one random float per element through `bernoulli_`: about 9 ms per million
elements on this machine's two cores, ~10% of a training step of the benchmark preset. Here one
64-bit random word feeds four elements (15 bits each), and the mask is applied as one multiply that
autograd differentiates as usual: ~1 ms per million elements. The rate is rounded to a multiple of
2^-15 (0.1 becomes 0.100006) and kept values are scaled by 1 / (1 - that rate), so the expectation
is exact. On CUDA, torch's fused dropout is already fast and is used as is; so is F.dropout under
torch.compile, whose generated code draws the mask itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_LANE_BITS = 15  # int16 lanes of a 64-bit word; random_() leaves each word's top bit 0, so use 15 bits
_LANE_RANGE = 1 << _LANE_BITS


def quantised_rate(p: float) -> float:
    """The drop rate actually applied on the CPU: p rounded to a multiple of 2^-15."""
    return round(p * _LANE_RANGE) / _LANE_RANGE


def dropout_mask(like: torch.Tensor, p: float) -> torch.Tensor:
    """A tensor shaped and typed like `like`: 0 with probability ~p, else 1 / (1 - p)."""
    n = like.numel()
    threshold = round(p * _LANE_RANGE)
    if threshold >= _LANE_RANGE:  # p within 2^-16 of 1 rounds to 1: everything is dropped
        return torch.zeros_like(like)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=like.device).random_()
    lanes = words.view(torch.int16)[:n].view(like.shape)
    keep = (lanes & (_LANE_RANGE - 1)).ge_(threshold)
    return keep.to(like.dtype).mul_(_LANE_RANGE / (_LANE_RANGE - threshold))


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout's contract (zero with probability p, scale the rest by 1 / (1 - p)), faster on the CPU."""
    if not training or p == 0.0:
        return x
    # A rate that rounds to 1 (above 1 - 2^-16) has no 15-bit mask: F.dropout applies it exactly.
    if x.device.type != "cpu" or quantised_rate(p) >= 1.0 or torch.compiler.is_compiling():
        return F.dropout(x, p, True)  # under torch.compile, inductor generates its own fused mask
    return x * dropout_mask(x, p)


class Dropout(nn.Module):
    """nn.Dropout with the CPU mask of `dropout`."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout rate must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
