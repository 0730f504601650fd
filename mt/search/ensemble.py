"""Several models translating together: each step uses the mean of their log-probabilities.

An `Ensemble` offers the interface search uses (`encode`, `decode`, `new_cache`, `reorder_cache`,
`max_positions`), so greedy, sampling and beam search run on it unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Ensemble(nn.Module):
    def __init__(self, models: list[nn.Module]):
        super().__init__()
        self.models = nn.ModuleList(models)
        self.max_positions = min(m.max_positions for m in models)

    def encode(self, src_ids: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        states = [m.encode(src_ids) for m in self.models]
        return [memory for memory, _ in states], [mask for _, mask in states]

    def decode(self, tgt_ids, memories, src_masks, cache=None) -> torch.Tensor:
        """Mean log-probabilities over the models, (batch, tgt_len, vocab)."""
        logprobs = [
            F.log_softmax(m.decode(tgt_ids, memory, mask, cache[i] if cache is not None else None).float(), dim=-1)
            for i, (m, memory, mask) in enumerate(zip(self.models, memories, src_masks))
        ]
        return torch.stack(logprobs).mean(dim=0)

    def new_cache(self) -> list:
        return [m.new_cache() for m in self.models]

    def reorder_cache(self, cache: list, order: torch.Tensor, source_order: torch.Tensor | None = None) -> None:
        for m, model_cache in zip(self.models, cache):
            m.reorder_cache(model_cache, order, source_order)
