"""Continuous beam search: sentences join a running search between its steps and leave as they finish.

`mt.search.beam.beam_search` takes a batch, searches until its last sentence has finished, and returns:
a server's batch then waits for its longest sentence while the requests that came meanwhile queue.
Here, as in the continuous batching of LLM servers (Orca's iteration-level scheduling), a search
takes new sentences before any step and hands back each sentence the step it finishes, so the rows
of one decoder call stay full. `mt.apps.serve.queue` drives it for `mt serve`.

Rows are at different steps, so each row carries its own state:
- its position: the decoder's position table is read per row (`Transformer.decode(positions=)`);
- its self-attention cache: the cache holds as many positions as the longest row has tokens; the
  earlier columns of a younger row are padding, masked by `valid` (`decode(self_mask=)`);
- its source: the cross-attention keys and values, one row per sentence that its beam rows read
  together, are padded to the longest source, masked by `src_mask` (one row per sentence too);
- its tokens: BOS at column 0, then its tokens, padding after them (stripped when it finishes).
Search itself is `mt.search.beam.beam_search`'s (candidates, finishing, the stopping rules), with the
step count per sentence: a sentence gets the hypotheses it would get searched alone (tests).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from mt.config.schema import LengthPenalty, StopRule
from mt.search.steps import Finished, Hypothesis, check_stopping, finish, max_lengths, still_searching, top_candidates
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID


class ContinuousBeamSearch:
    """A beam search over a changing set of sentences: `add` some, `step` until `active` is 0.

    Takes a `mt.model.transformer.Transformer` (not an ensemble: its decoder reads positions and masks per row).
    Decoding options are fixed per instance; a caller with other options waits until it is empty.
    """

    def __init__(
        self,
        model,
        beam: int = 4,
        alpha: float = 0.6,
        penalty: LengthPenalty = "gnmt",
        max_len_a: float = 1.0,
        max_len_b: int = 50,
        nbest: int = 1,
        stop: StopRule = "early",
    ):
        check_stopping(alpha, stop)
        self.model = model.eval()
        self.beam, self.alpha, self.penalty, self.stop = beam, alpha, penalty, stop
        self.max_len_a, self.max_len_b, self.nbest = max_len_a, max_len_b, min(nbest, beam)
        self.device = model.tgt_embed.tokens.weight.device
        self.steps_taken = 0
        self._empty()

    def _empty(self) -> None:
        device = self.device
        self.keys: list[Any] = []  # the caller's key of each active sentence
        self.source_tokens: list[int] = []  # its source length with EOS, for the caller's token budget
        self.cache = self.model.new_cache()
        self.src_mask = torch.zeros(0, 1, 1, 0, dtype=torch.bool, device=device)  # (sentences, 1, 1, src_len)
        self.valid = torch.zeros(0, 0, dtype=torch.bool, device=device)  # (rows, cached positions)
        self.tokens = torch.zeros(0, 1, dtype=torch.long, device=device)  # (rows, 1 + longest generated)
        self.generated = torch.zeros(0, dtype=torch.long, device=device)  # tokens so far, per sentence
        self.limit = torch.zeros(0, dtype=torch.long, device=device)  # the most it may generate, EOS included
        self.scores = torch.zeros(0, self.beam, device=device)  # (sentences, beam)
        self.done = Finished(
            [], torch.zeros(0, dtype=torch.long, device=device), torch.zeros(0, device=device), self.nbest
        )

    @property
    def active(self) -> int:
        """Sentences still searching."""
        return len(self.keys)

    @torch.inference_mode()
    def add(self, src_ids: torch.Tensor, keys: list[Any]) -> None:
        """Start searching `src_ids` (sentences, src_len), each source ending in EOS and right-padded;
        `keys` name them in what `step` returns."""
        if len(keys) != src_ids.size(0):
            raise ValueError(f"{len(keys)} keys for {src_ids.size(0)} sentences")
        if not keys:
            return
        model, beam, new = self.model, self.beam, len(keys)
        src_ids = src_ids.to(self.device)
        memory, src_mask = model.encode(src_ids)
        width = max(self.src_mask.size(-1), src_ids.size(1))
        model.settle_cache(self.cache)  # a reorder not made yet, made before rows are added
        for layer, layer_cache in zip(model.decoder, self.cache):
            k, v = layer.cross_attn.project_kv(memory)  # once per sentence, read by its beams together
            for name, value in (("ck", k), ("cv", v)):
                value = _pad_to(value, width, dim=2)
                old = layer_cache.get(name)
                layer_cache[name] = (
                    value if old is None else torch.cat([_pad_to(old, width, dim=2), value])
                ).contiguous()
            if "k" in layer_cache:  # the new rows have no earlier positions: zeros, masked by `valid`
                for name in ("k", "v"):
                    old = layer_cache[name]
                    layer_cache[name] = torch.cat([old, old.new_zeros((new * beam, *old.shape[1:]))])
        self.src_mask = torch.cat(
            [_pad_to(self.src_mask, width, dim=3, value=False), _pad_to(src_mask, width, dim=3, value=False)]
        )
        self.valid = torch.cat([self.valid, self.valid.new_zeros(new * beam, self.valid.size(1))])
        tokens = torch.full((new * beam, self.tokens.size(1)), PAD_ID, dtype=torch.long, device=self.device)
        tokens[:, 0] = BOS_ID
        self.tokens = torch.cat([self.tokens, tokens])
        self.generated = torch.cat([self.generated, self.generated.new_zeros(new)])
        limit = max_lengths(src_ids, self.max_len_a, self.max_len_b, model.max_positions - 1)
        self.limit = torch.cat([self.limit, limit])
        scores = torch.full((new, beam), -torch.inf, device=self.device)
        scores[:, 0] = 0.0  # only the first beam of a new sentence is live; the others would repeat it
        self.scores = torch.cat([self.scores, scores])
        done = self.done  # one entry per active sentence, in their order
        done.hypotheses.extend([] for _ in range(new))
        done.count = torch.cat([done.count, done.count.new_zeros(new)])
        done.kth_score = torch.cat([done.kth_score, torch.full((new,), -torch.inf, device=self.device)])
        self.keys.extend(keys)
        self.source_tokens.extend(int(n) for n in (src_ids != PAD_ID).sum(dim=1).tolist())

    @torch.inference_mode()
    def step(self) -> list[tuple[Any, list[Hypothesis]]]:
        """One decoder step for every active sentence; returns (key, its `nbest` hypotheses, best
        first) for each sentence that finished at this step."""
        if not self.keys:
            return []
        beam, count = self.beam, len(self.keys)
        rows = torch.arange(count * beam, device=self.device)
        row_generated = self.generated.repeat_interleave(beam)
        last = self.tokens[rows, row_generated][:, None]  # BOS or the row's last token
        valid = torch.cat([self.valid, self.valid.new_ones(count * beam, 1)], dim=1)
        self_mask = None if bool(valid.all()) else valid[:, None, None, :]
        logits = self.model.decode(last, None, self.src_mask, self.cache, positions=row_generated, self_mask=self_mask)[
            :, -1
        ]
        step = self.generated + 1  # tokens generated with this one, per sentence
        top_scores, top_beam, top_token = top_candidates(
            logits, self.scores, (step >= self.limit).repeat_interleave(beam), beam
        )
        everyone = torch.arange(count, device=self.device)
        finish(self.done, everyone, self.tokens, top_scores, top_beam, top_token, beam, self.alpha, self.penalty, step)
        # The next beams, as beam_search picks them; each row's new token goes after its own tokens.
        is_eos = top_token == EOS_ID
        rank = torch.arange(top_token.size(1), device=self.device).expand_as(top_token)
        keep = (rank + is_eos * top_token.size(1)).argsort(dim=1)[:, :beam]
        self.scores = top_scores.gather(1, keep)
        parents = (torch.arange(count, device=self.device)[:, None] * beam + top_beam.gather(1, keep)).view(-1)
        tokens = F.pad(self.tokens.index_select(0, parents), (0, 1), value=PAD_ID)
        tokens[rows, step.repeat_interleave(beam)] = top_token.gather(1, keep).view(-1)
        self.tokens, self.valid, self.generated = tokens, valid, step
        self.steps_taken += 1

        done = self.done
        still = still_searching(
            done, everyone, self.scores, self.limit, step, beam, self.alpha, self.penalty, self.stop
        )
        finished = []
        kept_sentences = None
        if not still.all():
            for i in (~still).nonzero().squeeze(1).tolist():
                finished.append((self.keys[i], sorted(done.hypotheses[i], key=lambda h: -h.score)[: self.nbest]))
            kept = still.nonzero().squeeze(1).tolist()
            if not kept:
                self._empty()
                return finished
            parents = parents.view(count, beam)[still].view(-1)
            self._keep(still, kept, rows.view(count, beam)[still].view(-1))
            kept_sentences = still.nonzero().squeeze(1)
        self.model.reorder_cache(self.cache, parents, kept_sentences)
        self._trim()
        return finished

    def remove(self, leaving: Callable[[Any], bool]) -> int:
        """Stop searching the sentences whose key `leaving` is true of (a caller that went away): their
        rows leave the batch and the cache now, unanswered. Returns how many left."""
        if not self.keys:
            return 0
        still = torch.tensor([not leaving(key) for key in self.keys], device=self.device)
        kept = still.nonzero().squeeze(1).tolist()
        gone = len(self.keys) - len(kept)
        if not kept:
            self._empty()
        elif gone:
            rows = torch.arange(len(self.keys) * self.beam, device=self.device).view(-1, self.beam)[still].view(-1)
            self._keep(still, kept, rows)
            self.model.reorder_cache(self.cache, rows, still.nonzero().squeeze(1))
            self._trim()
        return gone

    def _keep(self, still: torch.Tensor, kept: list[int], rows: torch.Tensor) -> None:
        """Keep the sentences `still` marks (their indices `kept`, their rows `rows`); the cache is the
        caller's to reorder."""
        done = self.done
        self.keys = [self.keys[i] for i in kept]
        self.source_tokens = [self.source_tokens[i] for i in kept]
        done.hypotheses = [done.hypotheses[i] for i in kept]
        done.count, done.kth_score = done.count[still], done.kth_score[still]
        self.tokens, self.valid = self.tokens[rows], self.valid[rows]
        self.src_mask = self.src_mask[still]
        self.scores, self.generated, self.limit = self.scores[still], self.generated[still], self.limit[still]

    def _trim(self) -> None:
        """Drop the columns no row needs any more: cached positions older than the oldest row's first,
        token columns past the longest row's, source columns past the longest source."""
        longest = int(self.generated.max())
        drop = self.valid.size(1) - longest
        if drop > 0:
            self.valid = self.valid[:, drop:]
            for layer_cache in self.cache:
                for name in ("k", "v"):
                    layer_cache[name] = layer_cache[name][:, :, drop:]
        self.tokens = self.tokens[:, : longest + 1]
        width = max(self.source_tokens)
        if self.src_mask.size(-1) > width:
            self.src_mask = self.src_mask[..., :width]
            for layer_cache in self.cache:
                for name in ("ck", "cv"):
                    layer_cache[name] = layer_cache[name][:, :, :width].contiguous()


def _pad_to(tensor: torch.Tensor, width: int, dim: int, value: float | bool = 0) -> torch.Tensor:
    """`tensor` padded at the end of `dim` to `width`."""
    missing = width - tensor.size(dim)
    if missing <= 0:
        return tensor
    pad = [0, 0] * (tensor.dim() - 1 - dim) + [0, missing]
    if tensor.dtype == torch.bool:
        return F.pad(tensor.to(torch.uint8), pad, value=int(value)).bool()
    return F.pad(tensor, pad, value=value)
