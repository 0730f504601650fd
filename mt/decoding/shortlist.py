"""Decoding with the lexical shortlist (`decode.shortlist`, `--shortlist`): each batch's decoder steps
score only its candidate target tokens, not the whole vocabulary.

A batch's candidates (`batch_vocabulary`) are the union of its source tokens' rows of the lexical
table (mt.data.shortlist), the table's frequent tokens, the special ids 0..3 and any constraint's
tokens, sorted: since the special ids are the smallest, candidate i is token i for each of them.
`Shortlisted` is the model with its output projection cut to those rows (a gathered slice of the
weight matrix, and bias, once per batch; int8-quantized projections keep their quantized rows and
scales), offering the interface search uses (`encode`, `decode`, `new_cache`, `reorder_cache`,
`max_positions`): every search (beam, greedy, sampling, constrained; an ensemble, member by member)
runs on it unchanged, over candidate indices instead of token ids, log_softmax and top-k over the
candidates only. `decode` maps the indices it is given back to token ids for the embedding, and
`to_tokens` maps the hypotheses found back at the end.

What changes: a hypothesis' log-probability is normalised over the candidates (the tokens left out
carry no probability), so scores are a little higher than without the shortlist, and a
translation may differ where the model's best token is not a candidate. Sampling draws among the
candidates. With a table that holds every token, the search is the unrestricted one, exactly
(tests/unit/test_shortlist.py).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mt.data.shortlist import SPECIALS, LexicalTable
from mt.decoding.models import Int8Linear, QuantizedLinear
from mt.errors import MtError
from mt.search.ensemble import Ensemble
from mt.search.steps import Hypothesis
from mt.tokenizer import PAD_ID


class Shortlist:
    """A lexical table ready for batches: its rows and frequent tokens as tensors on `device`."""

    def __init__(self, table: LexicalTable, tgt_vocab: int, device: torch.device | str = "cpu"):
        if max(table.candidates.max(initial=-1), table.frequent.max(initial=-1)) >= tgt_vocab:
            raise MtError(f"the shortlist names target ids past the vocabulary of {tgt_vocab}: built for another model")
        self.table = table
        self.tgt_vocab = tgt_vocab
        # Padded with -1, which `batch_vocabulary` never selects; a source id past the rows has no candidates.
        self.rows = torch.from_numpy(np.ascontiguousarray(table.candidates)).long().to(device)
        self.always = torch.cat([torch.arange(SPECIALS), torch.from_numpy(table.frequent).long()]).to(device)

    def batch_vocabulary(self, src_ids: torch.Tensor, extra: list[int] | None = None) -> torch.Tensor:
        """The sorted target ids a batch (sentences, src_len) may emit (module docstring); `extra`:
        ids that must be among them (constraints)."""
        chosen = torch.zeros(self.tgt_vocab, dtype=torch.bool, device=self.rows.device)
        source = src_ids[(src_ids != PAD_ID) & (src_ids < len(self.rows))]
        found = self.rows.index_select(0, source).view(-1)
        chosen[found[found >= 0]] = True
        chosen[self.always] = True
        if extra:
            chosen[torch.tensor(extra, dtype=torch.long, device=chosen.device)] = True
        return chosen.nonzero().squeeze(1)


def cut_projection(output: nn.Module, vocab: torch.Tensor) -> nn.Module:
    """The output projection for the target ids `vocab` only: row i of the result is row vocab[i]."""
    if isinstance(output, QuantizedLinear):  # torch's dynamic int8 quantization (--quantize int8)
        weight, bias = output.weight(), output.bias()
        rows = weight.int_repr().index_select(0, vocab)
        if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            cut = torch._make_per_tensor_quantized_tensor(rows, weight.q_scale(), weight.q_zero_point())
        else:  # per channel: one scale per output row
            cut = torch._make_per_channel_quantized_tensor(
                rows,
                weight.q_per_channel_scales().index_select(0, vocab),
                weight.q_per_channel_zero_points().index_select(0, vocab),
                0,
            )
        layer = Int8Linear(output.in_features, len(vocab), dtype=torch.qint8)
        layer.set_weight_bias(cut, None if bias is None else bias.index_select(0, vocab))
        return layer
    if isinstance(output, nn.Linear):
        bias = None if output.bias is None else output.bias.detach().index_select(0, vocab)
        return _Rows(output.weight.detach().index_select(0, vocab), bias)
    raise MtError(f"--shortlist: cannot cut an output projection of type {type(output).__name__}")


class _Rows(nn.Module):
    """A linear layer of a gathered slice of another's weight rows (and bias)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight, self.bias = weight, bias

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.weight, self.bias)


class Shortlisted(nn.Module):
    """A Transformer whose decoder scores only the target ids `vocab` (sorted, 0..3 first): search
    runs on it over candidate indices (module docstring)."""

    def __init__(self, model: nn.Module, vocab: torch.Tensor):
        super().__init__()
        if not hasattr(model, "decode_hidden") or not hasattr(model, "output"):
            raise MtError(f"--shortlist: a {type(model).__name__} has no output projection to cut")
        self.model = model
        self.vocab = vocab
        self.max_positions = model.max_positions
        self.project = cut_projection(model.output, vocab)

    def encode(self, src_ids: torch.Tensor):
        return self.model.encode(src_ids)

    def decode(self, tgt_ids, memory, src_mask, cache=None, positions=None, self_mask=None) -> torch.Tensor:
        """Logits over the candidates, (batch, tgt_len, candidates); `tgt_ids` are candidate indices."""
        hidden = self.model.decode_hidden(self.vocab[tgt_ids], memory, src_mask, cache, positions, self_mask)
        return self.project(hidden)

    def new_cache(self):
        return self.model.new_cache()

    def reorder_cache(self, cache, order: torch.Tensor, source_order: torch.Tensor | None = None) -> None:
        self.model.reorder_cache(cache, order, source_order)


def shortlisted(model: nn.Module, vocab: torch.Tensor) -> nn.Module:
    """`model` (a Transformer, or an Ensemble of them: each member cut alike) deciding among `vocab`."""
    if isinstance(model, Ensemble):
        return Ensemble([Shortlisted(member, vocab) for member in model.models]).eval()
    return Shortlisted(model, vocab).eval()


def to_indices(vocab: torch.Tensor, ids: list[int]) -> list[int]:
    """Token ids (each among `vocab`) as candidate indices."""
    return torch.searchsorted(vocab, torch.tensor(ids, dtype=vocab.dtype, device=vocab.device)).tolist()


def to_tokens(vocab: torch.Tensor, hypotheses: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
    """Hypotheses over candidate indices as hypotheses over token ids."""
    ids = vocab.tolist()
    return [[Hypothesis([ids[i] for i in h.tokens], h.score, h.logprob) for h in hyps] for hyps in hypotheses]
