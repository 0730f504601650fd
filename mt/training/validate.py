"""Validation during training: loss and perplexity on the validation set, and greedy BLEU on a sample."""

from __future__ import annotations

import math

import numpy as np
import torch

from mt.data.batching import collate, length_groups, make_batches
from mt.data.dataset import ParallelData
from mt.metrics import score
from mt.model.transformer import Transformer
from mt.search.single_path import greedy_search
from mt.tokenizer import Tokenizer
from mt.training.distributed import Distributed
from mt.training.loss import autocast, batch_loss


@torch.no_grad()
def validate(
    model: Transformer,
    data: ParallelData,
    max_tokens: int,
    precision: str,
    label_smoothing: float,
    device: torch.device,
    group: Distributed | None = None,
) -> dict[str, float]:
    """Validation loss (smoothed, per token), NLL per token and perplexity exp(NLL); each process
    scores its share of the batches and the sums are added up. Batches as training makes them
    (max_tokens), in length order; `precision` as training runs (train.precision, decided)."""
    group = group or Distributed(device=device)
    model.eval()
    loss_sum = nll_sum = 0.0
    tokens = 0
    # Unshuffled: the seed and epoch are unused, the batches the same at every validation.
    batches = make_batches(data.src_lens, data.tgt_lens, max_tokens, 0, 0, shuffle=False)
    for indices in batches[group.rank :: group.world_size]:
        batch = collate(data, indices).to(device)
        with autocast(precision, device):
            loss, nll, n = batch_loss(model, batch, label_smoothing)
        loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + int(n)
    model.train()
    loss_sum, nll_sum, tokens = group.all_sum([loss_sum, nll_sum, tokens])
    nll = nll_sum / max(tokens, 1)
    return {"valid_loss": loss_sum / max(tokens, 1), "valid_nll": nll, "valid_ppl": math.exp(min(nll, 50.0))}


class BleuSample:
    """BLEU during training: greedy translations of a fixed sample of the binarized validation
    sources, detokenized, against the raw reference lines (sacreBLEU, as `mt evaluate`).

    refs: the raw reference line of each row of `data` (binarize may have dropped pairs, so the
    caller maps rows to corpus lines); size: how many rows (train.valid_bleu_sentences); max_tokens,
    max_len_a, max_len_b: decoding's limits (decode.*); precision: training's (train.precision)."""

    def __init__(
        self,
        data: ParallelData,
        refs: list[str],
        tgt_tok: Tokenizer,
        size: int,
        max_tokens: int,
        max_len_a: float,
        max_len_b: int,
        precision: str,
        lang: str | None = None,  # the target language, for BLEU's tokenizer (mt.metrics.sacrebleu_bleu)
        targets: list[str] | None = None,  # a multilingual model's: each direction's target, by data.directions
    ):
        size = min(size, len(data))
        # The same sentences at every validation, so that the scores compare; a private generator
        # leaves the global ones (saved in checkpoints) alone.
        self.indices = np.sort(np.random.default_rng(0).choice(len(data), size, replace=False))
        self.refs = [refs[int(i)] for i in self.indices]
        self.data, self.tgt_tok = data, tgt_tok
        self.max_tokens, self.max_len_a, self.max_len_b, self.precision = max_tokens, max_len_a, max_len_b, precision
        self.lang = lang
        # Several directions: each scored with its own target's tokenizer (zh's is not 13a: a Chinese
        # target scored about 0 pooled with the others), and their mean is the sample's, as `mt evaluate`.
        self.targets = targets or []
        self.by_direction: dict[int, list[int]] = {}  # direction -> its rows of the sample
        if targets:
            for k, direction in enumerate(data.directions[self.indices].tolist()):
                self.by_direction.setdefault(int(direction), []).append(k)

    @torch.no_grad()
    def score(self, model: Transformer, device: torch.device, group: Distributed) -> tuple[float, list[str]]:
        """BLEU and the hypotheses in sample order; each process translates its share."""
        mine = np.arange(len(self.indices))[group.rank :: group.world_size]
        hyps: dict[int, str] = {}
        lengths = self.data.src_lens[self.indices[mine]].tolist()
        for run in length_groups(lengths, self.max_tokens):  # similar lengths together
            positions = mine[run]
            src_ids = collate(self.data, self.indices[positions]).src_ids.to(device)
            with autocast(self.precision, device):
                found = greedy_search(model, src_ids, self.max_len_a, self.max_len_b)
            hyps.update(zip(positions.tolist(), self.tgt_tok.decode([h.tokens for h in found])))
        model.train()
        for part in group.all_gather(hyps):
            hyps.update(part)
        ordered = [hyps[i] for i in range(len(self.indices))]
        if not self.by_direction:
            return score(ordered, self.refs, self.lang)["bleu"], ordered
        each = [
            score([ordered[k] for k in rows], [self.refs[k] for k in rows], self.targets[direction])["bleu"]
            for direction, rows in self.by_direction.items()
        ]
        return sum(each) / len(each), ordered
