"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), Sec. 3.

Encoder and decoder stacks of multi-head attention and position-wise feed-forward sub-layers, each
wrapped in residual + dropout + LayerNorm (post-norm, Sec. 3.1 and 5.4), token embeddings scaled by
sqrt(d_model) plus sinusoidal positions (Sec. 3.4, 3.5), weights shared between the embeddings and
the output projection (Sec. 3.4). Search talks to the model through `encode()` and `decode()`;
`decode()` takes an optional cache of keys/values for incremental decoding, and search reorders that
cache with `reorder_cache()` without the model knowing about beams. Inside `capture_attention()`
the chosen attention layers also keep their weights, for alignments and heatmaps (`mt.attention`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from mt.config import ModelConfig
from mt.dropout import Dropout, dropout

# One decoder layer's cache: "k"/"v" hold self-attention keys/values of all earlier target positions
# (batch, heads, t, d_head); "ck"/"cv" the cross-attention keys/values of the source, computed once.
LayerCache = dict[str, torch.Tensor]
DecoderCache = list[LayerCache]


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


def attention_mask(
    key_mask: torch.Tensor | None, causal: bool, length: int, key_len: int, device: torch.device
) -> torch.Tensor | None:
    """Where each query may attend, True = may: the key mask (batch, 1, 1, key_len) AND, if causal,
    query i of the last `length` positions sees keys up to its own position; None when neither."""
    if not causal:
        return key_mask
    seen = torch.ones(length, key_len, dtype=torch.bool, device=device).tril(key_len - length)
    return seen if key_mask is None else key_mask & seen


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Sec. 3.2.2) through F.scaled_dot_product_attention.

    Self-attention projects queries, keys and values with one fused matrix; cross-attention projects
    the query alone and keys/values with one fused matrix, once per source. With `store_weights`
    (see `capture_attention`) the same attention is computed explicitly and its weights kept in
    `weights`, (batch, heads, len, key_len); the normal path never materialises them.
    """

    store_weights = False  # set per instance by capture_attention()
    use_sdpa: bool | None = None  # None: SDPA off the CPU, written out on it; True/False forces one

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float, self_attention: bool):
        super().__init__()
        self.weights: torch.Tensor | None = None
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.self_attention = self_attention
        self.attention_dropout = attention_dropout
        if self_attention:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        # (batch, len, d_model) -> (batch, heads, len, d_head)
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention keys and values of the encoder output, each (batch, heads, src_len, d_head)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)

    def forward(
        self,
        x: torch.Tensor,  # (batch, len, d_model): the queries' input
        memory: torch.Tensor | None = None,  # (batch, src_len, d_model): cross-attention source
        key_mask: torch.Tensor | None = None,  # (batch, 1, 1, key_len) bool, True = may attend
        causal: bool = False,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        if self.self_attention:
            q, k, v = (self.split_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
            if cache is not None:  # incremental: keys/values of earlier positions come from the cache
                if "k" in cache:
                    if q.size(2) > 1:
                        raise ValueError("incremental decoding takes one new position per call")
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
                causal = causal and q.size(2) > 1  # one new query may see every cached position
        else:
            q = self.split_heads(self.q(x))
            if cache is not None and "ck" in cache:
                k, v = cache["ck"], cache["cv"]
            else:
                k, v = self.project_kv(memory)
                if cache is not None:  # contiguous once, or every step's attention would copy it again
                    cache["ck"], cache["cv"] = k.contiguous(), v.contiguous()
        sdpa = self.use_sdpa if self.use_sdpa is not None else q.device.type != "cpu"
        if self.store_weights or not sdpa:
            context = self.attend_explicit(q, k, v, key_mask, causal)
        else:
            context = self._attend_sdpa(q, k, v, key_mask, causal)  # (batch, heads, len, d_head)
        batch, _, length, _ = context.shape
        return self.out(context.transpose(1, 2).reshape(batch, length, -1))

    def _attend_sdpa(self, q, k, v, key_mask, causal) -> torch.Tensor:
        """F.scaled_dot_product_attention under the mask of `attention_mask`; a query whose keys are
        all masked gets zeros: it attends to every key (no NaN, forward or backward), then is zeroed."""
        dropout_p = self.attention_dropout if self.training else 0.0
        length, key_len = q.size(2), k.size(2)
        if key_mask is None and (not causal or length == key_len):  # SDPA's is_causal is top-left aligned
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal)
        mask = attention_mask(key_mask, causal, length, key_len, q.device)
        empty = ~mask.any(dim=-1, keepdim=True)  # (batch or 1, 1, len or 1, 1)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty, dropout_p=dropout_p)
        return context.masked_fill(empty, 0.0)

    def attend_explicit(self, q, k, v, key_mask, causal) -> torch.Tensor:
        """softmax(Q K^T / sqrt(d_head) + mask) V written out (Sec. 3.2.1), the softmax in fp32.

        Used on the CPU, and wherever the weights are wanted (`store_weights`: kept in `weights`).
        For sentence-length inputs in bf16 SDPA's CPU kernel is several times slower than this; in
        fp32 the kernel alone is faster but whole training steps are not, so the CPU keeps one path
        (figures: docs/performance-notes.md, from bench/cpu_kernels.py and bench/throughput.py).
        The heads go into the batch dimension of contiguous 3-d tensors: torch.matmul on the 4-d
        views would fall back to one small product per head in the backward pass.
        """
        batch, heads, length, d_head = q.shape
        key_len = k.size(2)
        q = (q * (1.0 / math.sqrt(d_head))).reshape(batch * heads, length, d_head)
        k = k.reshape(batch * heads, key_len, d_head)
        v = v.reshape(batch * heads, key_len, d_head)
        scores = torch.bmm(q, k.transpose(1, 2)).view(batch, heads, length, key_len).float()
        mask = attention_mask(key_mask, causal, length, key_len, scores.device)
        if mask is not None:
            scores = scores.masked_fill(~mask, -torch.inf)
        weights = scores.softmax(dim=-1)
        if key_mask is not None:  # a query whose keys are all masked: zeros instead of softmax's NaN
            empty = ~mask.any(dim=-1, keepdim=True)
            if empty.any():
                weights = weights.masked_fill(empty, 0.0)
        if self.store_weights:
            self.weights = weights
        weights = dropout(weights, self.attention_dropout, self.training).to(v.dtype)
        return torch.bmm(weights.view(batch * heads, length, key_len), v).view(batch, heads, length, d_head)


@contextmanager
def capture_attention(modules: Iterable[MultiHeadAttention]) -> Iterator[list[MultiHeadAttention]]:
    """Within the block, each of `modules` keeps the weights of its last call in `.weights`
    (batch, heads, len, key_len); read them inside the block: they are dropped when it ends."""
    modules = list(modules)
    for module in modules:
        module.store_weights, module.weights = True, None
    try:
        yield modules
    finally:
        for module in modules:
            module.store_weights, module.weights = False, None


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

    def forward(self, x, memory, src_mask, cache: LayerCache | None = None,
                self_mask: torch.Tensor | None = None) -> torch.Tensor:
        # Causal self-attention: position i sees positions <= i only (Sec. 3.2.3). Target padding
        # sits at the end, so real positions never see it, and padded positions are not scored.
        # self_mask (batch, 1, 1, cached + 1): which cached positions are real, when rows of one
        # incremental call started at different steps (mt.continuous_search).
        x = self.self_block(x, lambda h: self.self_attn(h, key_mask=self_mask, causal=True, cache=cache))
        x = self.cross_block(x, lambda h: self.cross_attn(h, memory, key_mask=src_mask, cache=cache))
        return self.ffn_block(x, self.ffn)


class Transformer(nn.Module):
    """Encoder-decoder Transformer; components take plain arguments (see `build_model`)."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        d_ff: int = 2048,
        n_heads: int = 8,
        enc_layers: int = 6,
        dec_layers: int = 6,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        pre_norm: bool = False,
        tie_embeddings: bool = True,
        shared_vocab: bool = True,
        max_positions: int = 1024,
        pad_id: int = 0,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.max_positions = max_positions
        tgt_tokens = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        # Sec. 3.4: "we share the same weight matrix between the two embedding layers and the
        # pre-softmax linear transformation" -- possible only when both sides share one vocabulary.
        if tie_embeddings and shared_vocab:
            if src_vocab_size != tgt_vocab_size:
                raise ValueError("a shared vocabulary needs src_vocab_size == tgt_vocab_size")
            src_tokens = tgt_tokens
        else:
            src_tokens = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.src_embed = Embedding(src_tokens, d_model, max_positions, dropout)
        self.tgt_embed = Embedding(tgt_tokens, d_model, max_positions, dropout)
        layer_args = (d_model, d_ff, n_heads, dropout, attention_dropout, activation_dropout, pre_norm)
        self.encoder = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(dec_layers))
        # Pre-norm stacks need a final LayerNorm; post-norm outputs are already normalised.
        self.enc_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.dec_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._reset_parameters()
        if tie_embeddings:
            self.output.weight = tgt_tokens.weight

    def _reset_parameters(self) -> None:
        # Xavier-uniform projections, zero biases; embeddings N(0, d^-1/2) so that after the
        # sqrt(d) scale they have unit variance and, tied, give unit-scale logits (as tensor2tensor).
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif param.dim() == 2 and "tokens" not in name:
                nn.init.xavier_uniform_(param)
        for embed in {self.src_embed.tokens, self.tgt_embed.tokens}:
            nn.init.normal_(embed.weight, mean=0.0, std=self.d_model**-0.5)
            with torch.no_grad():
                embed.weight[self.pad_id].zero_()

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (batch, src_len) -> memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)."""
        src_mask = (src_ids != self.pad_id)[:, None, None, :]  # True where a key may be attended to
        x = self.src_embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.enc_norm(x), src_mask

    def decode(
        self,
        tgt_ids: torch.Tensor,  # (batch, tgt_len); with a cache, only the new positions
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        cache: DecoderCache | None = None,
        positions: torch.Tensor | None = None,
        self_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits over the target vocabulary, (batch, tgt_len, vocab). With a cache, `positions`
        (batch,) and `self_mask` (batch, 1, 1, cached + 1) let each row be at its own step."""
        return self.output(self.decode_hidden(tgt_ids, memory, src_mask, cache, positions, self_mask))

    def decode_hidden(self, tgt_ids, memory, src_mask, cache: DecoderCache | None = None,
                      positions: torch.Tensor | None = None, self_mask: torch.Tensor | None = None) -> torch.Tensor:
        start: int | torch.Tensor = 0
        if positions is not None:
            start = positions
        elif cache is not None and cache and "k" in cache[0]:
            start = cache[0]["k"].size(2)
        x = self.tgt_embed(tgt_ids, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, src_mask, cache[i] if cache is not None else None, self_mask)
        return self.dec_norm(x)

    def new_cache(self) -> DecoderCache:
        return [{} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: DecoderCache, order: torch.Tensor, source_order: torch.Tensor | None = None) -> None:
        """Row i of the self-attention cache becomes old row order[i]; the cross-attention keys and
        values (which depend on the source only) are reordered only when `source_order` is given."""
        for layer_cache in cache:
            for key, value in layer_cache.items():
                if key in ("k", "v"):
                    layer_cache[key] = value.index_select(0, order)
                elif source_order is not None:
                    layer_cache[key] = value.index_select(0, source_order)

    def forward(self, src_ids: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_in, memory, src_mask)


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, shared_vocab: bool) -> Transformer:
    """Map the typed config to the model's plain arguments."""
    return Transformer(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        d_model=cfg.d_model,
        d_ff=cfg.d_ff,
        n_heads=cfg.n_heads,
        enc_layers=cfg.enc_layers,
        dec_layers=cfg.dec_layers,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        pre_norm=cfg.pre_norm,
        tie_embeddings=cfg.tie_embeddings,
        shared_vocab=shared_vocab,
        max_positions=cfg.max_positions,
    )


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (tied matrices counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
