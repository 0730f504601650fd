"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), Sec. 3.

Encoder and decoder stacks of multi-head attention and position-wise feed-forward sub-layers, each
wrapped in residual + dropout + LayerNorm (post-norm, Sec. 3.1 and 5.4), token embeddings scaled by
sqrt(d_model) plus sinusoidal positions (Sec. 3.4, 3.5), weights shared between the embeddings and
the output projection (Sec. 3.4). Search talks to the model through `encode()` and `decode()`;
`decode()` takes an optional cache of keys/values for incremental decoding, and search reorders that
cache with `reorder_cache()` without the model knowing about beams. The layers are in
`mt.model.layers`, attention in `mt.model.attention`.
"""

from __future__ import annotations

import torch
from torch import nn

from mt.config.schema import ModelConfig
from mt.model.attention import DecoderCache, reorder_self_cache, settle_self_cache
from mt.model.layers import DecoderLayer, Embedding, EncoderLayer


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
        # Source first, then target (once when shared): a set's order would follow id() and change
        # which embedding gets which random numbers from run to run.
        for embed in dict.fromkeys([self.src_embed.tokens, self.tgt_embed.tokens]):
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
        """Logits over the target vocabulary, (batch, tgt_len, vocab). `memory` may have fewer rows,
        batch / group: then each group of consecutive target rows reads one source (a sentence's beams).
        With a cache, `positions` (batch,) and `self_mask` (batch, 1, 1, cached + 1) let each row be at
        its own step."""
        return self.output(self.decode_hidden(tgt_ids, memory, src_mask, cache, positions, self_mask))

    def decode_hidden(
        self,
        tgt_ids,
        memory,
        src_mask,
        cache: DecoderCache | None = None,
        positions: torch.Tensor | None = None,
        self_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
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
        values (which depend on the source only, one row per source) are reordered only when
        `source_order` is given: row i becomes old source row source_order[i]."""
        for layer_cache in cache:
            reorder_self_cache(layer_cache, order)  # made at the next step, with its new position
            if source_order is not None:
                for key in ("ck", "cv"):
                    if key in layer_cache:
                        layer_cache[key] = layer_cache[key].index_select(0, source_order)

    @staticmethod
    def settle_cache(cache: DecoderCache) -> None:
        """Make the self-attention cache's pending reorder now (`reorder_cache` leaves it to the next
        step): for a caller that changes the cache's rows itself."""
        for layer_cache in cache:
            settle_self_cache(layer_cache)

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
