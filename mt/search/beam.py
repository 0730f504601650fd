"""Beam search over `model.encode()` / `model.decode()` with an incremental cache.

Beam search as in Sec. 6.1 of the paper: beam size 4 and length penalty alpha 0.6, the GNMT penalty
lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al., 2016); |Y| counts the generated tokens including EOS.
Beams are laid out as (sentences x beam) rows of one tensor; the encoder runs once per sentence and
its output is shared by the beams.

The steps they share, and when a sentence stops searching, are in `mt.search.steps`.
"""

from __future__ import annotations

import torch

from mt.config.schema import LengthPenalty, StopRule
from mt.search.steps import (
    Finished,
    Hypothesis,
    check_stopping,
    expand,
    finish,
    max_lengths,
    select_beams,
    select_rows,
    still_searching,
)
from mt.tokenizer import BOS_ID


@torch.inference_mode()
def beam_search(
    model,
    src_ids: torch.Tensor,  # (batch, src_len), each source ending in EOS, right-padded
    beam: int = 4,
    alpha: float = 0.6,
    penalty: LengthPenalty = "gnmt",
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    nbest: int = 1,
    use_cache: bool = True,
    stop: StopRule = "early",
    no_repeat_ngram: int = 0,
) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses of each sentence, best first; `stop` as in the module docstring;
    `no_repeat_ngram` N > 0: no hypothesis holds an N-gram twice (`mt.search.steps.ban_repeats`)."""
    check_stopping(alpha, stop)
    model.eval()
    device = src_ids.device
    batch = src_ids.size(0)
    nbest = min(nbest, beam)
    memory, src_mask = model.encode(src_ids)
    limit = max_lengths(src_ids, max_len_a, max_len_b, model.max_positions - 1)
    # The beam rows of a sentence read its encoder output together (`Transformer.decode`): memory,
    # src_mask and the cross-attention cache keep one row per sentence, never copied per beam.
    cache = model.new_cache() if use_cache else None
    tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
    # Only the first beam of each sentence is live at the start; the others would duplicate it.
    scores = torch.full((batch, beam), -torch.inf, device=device)
    scores[:, 0] = 0.0
    active = torch.arange(batch, device=device)  # original index of each sentence still searching
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # Per original sentence, kept as tensors so that the stopping test is one vectorised step:
    # how many hypotheses have finished, and the nbest-th best finished score (-inf until nbest have).
    done = Finished(
        finished,
        torch.zeros(batch, dtype=torch.long, device=device),
        torch.full((batch,), -torch.inf, device=device),
        nbest,
    )

    step = 0
    while active.numel() > 0:
        step += 1
        top_scores, top_beam, top_token = expand(
            model,
            tokens,
            memory,
            src_mask,
            cache,
            scores,
            (step >= limit[active]).repeat_interleave(beam),
            beam,
            no_repeat_ngram,
        )

        finish(done, active, tokens, top_scores, top_beam, top_token, beam, alpha, penalty, step)
        scores, rows, new_tokens = select_beams(top_scores, top_beam, top_token, beam)
        tokens = torch.cat([tokens[rows], new_tokens[:, None]], dim=1)

        still = still_searching(done, active, scores, limit, step, beam, alpha, penalty, stop)
        kept = None
        if not still.all():  # finished sentences leave the batch
            rows = rows.view(len(active), beam)[still].view(-1)
            kept = still.nonzero().squeeze(1)
            tokens = tokens.view(len(active), beam, -1)[still].flatten(0, 1)
            scores, active = scores[still], active[still]
            memory, src_mask = select_rows(memory, kept), select_rows(src_mask, kept)
        if cache is not None:
            # The cross-attention cache (one row per sentence) moves only with the sentence, the
            # self-attention cache follows each beam's parent.
            model.reorder_cache(cache, rows, kept)

    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]
