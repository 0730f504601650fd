"""The Transformer's layers (Sec. 3.1-3.5): embeddings with sinusoidal positions, the position-wise
feed-forward network, the residual + dropout + LayerNorm wrapper (post-norm as in the paper, or
pre-norm), and the encoder and decoder layers built from them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mt.model.attention import LayerCache, MultiHeadAttention
from mt.model.dropout import Dropout


def sinusoid_table(n_positions: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))  (Sec. 3.5)."""
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (n, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (n, d/2)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


class Embedding(nn.Module):
    """Token embedding * sqrt(d_model) + sinusoidal position, then dropout (Sec. 3.4, 3.5, 5.4)."""

    def __init__(self, tokens: nn.Embedding, d_model: int, max_positions: int, dropout: float):
        super().__init__()
        self.tokens = tokens
        self.scale = math.sqrt(d_model)
        self.register_buffer("positions", sinusoid_table(max_positions, d_model), persistent=False)
        self.dropout = Dropout(dropout)

    def _apply(self, fn, recurse=True):
        # The position table stays fp32 whatever `.to(dtype)` does to the weights: training adds it in
        # fp32 (autocast leaves embeddings alone), so bf16/fp16 inference must not round it first.
        positions = self.positions
        super()._apply(fn, recurse)
        if self.positions.dtype != positions.dtype:
            self.positions = positions.to(device=self.positions.device)
        return self

    def forward(self, ids: torch.Tensor, start: int | torch.Tensor = 0) -> torch.Tensor:
        # ids: (batch, len); start: position of ids[:, 0] (non-zero during incremental decoding), or
        # one position per row, (batch,), for a single new token each (rows at different steps)
        length = ids.size(1)
        if isinstance(start, torch.Tensor):
            if length != 1:
                raise ValueError("positions per row take one new token per row")
            if start.numel() and int(start.max()) >= self.positions.size(0):
                raise ValueError(f"position {int(start.max())} exceeds max_positions={self.positions.size(0)}")
            positions = self.positions[start][:, None]
        else:
            if start + length > self.positions.size(0):
                raise ValueError(
                    f"sequence of {start + length} positions exceeds max_positions={self.positions.size(0)}"
                )
            positions = self.positions[start : start + length]
        tokens = self.tokens(ids)  # the sum in fp32 (a no-op in training), then the weights' dtype
        x = (tokens.float() * self.scale + positions).to(tokens.dtype)
        return self.dropout(x)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2  (Sec. 3.3)."""

    def __init__(self, d_model: int, d_ff: int, activation_dropout: float):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(F.relu(self.w1(x))))


class Residual(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))) as in Sec. 3.1/5.4, or x + Dropout(Sublayer(LayerNorm(x))) pre-norm."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, d_ff, n_heads, dropout, attention_dropout, activation_dropout, pre_norm):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, self_attention=True)
        self.ffn = FeedForward(d_model, d_ff, activation_dropout)
        self.attn_block = Residual(d_model, dropout, pre_norm)
        self.ffn_block = Residual(d_model, dropout, pre_norm)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attn_block(x, lambda h: self.self_attn(h, key_mask=src_mask))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, d_ff, n_heads, dropout, attention_dropout, activation_dropout, pre_norm):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, self_attention=True)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, self_attention=False)
        self.ffn = FeedForward(d_model, d_ff, activation_dropout)
        self.self_block = Residual(d_model, dropout, pre_norm)
        self.cross_block = Residual(d_model, dropout, pre_norm)
        self.ffn_block = Residual(d_model, dropout, pre_norm)

    def forward(
        self, x, memory, src_mask, cache: LayerCache | None = None, self_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        # Causal self-attention: position i sees positions <= i only (Sec. 3.2.3). Target padding
        # sits at the end, so real positions never see it, and padded positions are not scored.
        # self_mask (batch, 1, 1, cached + 1): which cached positions are real, when rows of one
        # incremental call started at different steps (mt.search.continuous).
        x = self.self_block(x, lambda h: self.self_attn(h, key_mask=self_mask, causal=True, cache=cache))
        x = self.cross_block(x, lambda h: self.cross_attn(h, memory, key_mask=src_mask, cache=cache))
        return self.ffn_block(x, self.ffn)
