"""Searches that follow one path per sentence over `model.encode()` / `model.decode()` with an
incremental cache: greedy search (the most probable token at every step; beam 1) and sampling (a
token drawn from the step's distribution: back-translation, Edunov et al., 2018).

The steps they share with beam search are in `mt.search.steps`.
"""

from __future__ import annotations

import torch

from mt.search.steps import Hypothesis, force_eos, max_lengths, select_rows, step_logprobs
from mt.tokenizer import BOS_ID, EOS_ID


@torch.inference_mode()
def greedy_search(
    model, src_ids: torch.Tensor, max_len_a: float = 1.0, max_len_b: int = 50, no_repeat_ngram: int = 0
) -> list[Hypothesis]:
    """The most probable token at every step, for each sentence of src_ids (batch, src_len); with
    `no_repeat_ngram`, none that repeats an n-gram (`mt.search.steps.ban_repeats`)."""
    # max's indices are argmax's (the first of equals, NaN above all), and torch's CPU max over rows is
    # several times faster than its argmax (bench/decode_profile.py times both)
    return _single_path(
        model, src_ids, max_len_a, max_len_b, lambda logprobs: logprobs.max(dim=-1).indices, no_repeat_ngram
    )


@torch.inference_mode()
def sample_search(
    model,
    src_ids: torch.Tensor,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    no_repeat_ngram: int = 0,
) -> list[Hypothesis]:
    """One sampled translation per sentence (e.g. for back-translation): the next token is drawn
    from the model's distribution at `temperature`, restricted to the `top_k` most probable tokens
    and/or the smallest set whose probability reaches `top_p` (nucleus sampling)."""

    def pick(logprobs: torch.Tensor) -> torch.Tensor:
        logits = logprobs / max(temperature, 1e-6)
        if top_k > 0:
            kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, -torch.inf)
        if top_p < 1.0:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(dim=-1)
            drop_sorted = probs.cumsum(dim=-1) - probs >= top_p  # the mass before it already reaches top_p
            drop = torch.empty_like(drop_sorted).scatter_(1, order, drop_sorted)
            logits = logits.masked_fill(drop, -torch.inf)
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)

    return _single_path(model, src_ids, max_len_a, max_len_b, pick, no_repeat_ngram)


def _single_path(model, src_ids, max_len_a, max_len_b, pick, no_repeat_ngram: int = 0) -> list[Hypothesis]:
    """Greedy or sampled decoding: one hypothesis per sentence; finished sentences leave the batch."""
    model.eval()
    batch = src_ids.size(0)
    device = src_ids.device
    memory, src_mask = model.encode(src_ids)
    limit = max_lengths(src_ids, max_len_a, max_len_b, model.max_positions - 1)
    cache = model.new_cache()
    tokens = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=device)
    logprob = torch.zeros(batch, device=device)
    active = torch.arange(batch, device=device)
    hyps: list[Hypothesis | None] = [None] * batch
    step = 0
    while active.numel() > 0:
        step += 1
        logprobs = step_logprobs(model, tokens, memory, src_mask, cache, no_repeat_ngram)
        force_eos(logprobs, step >= limit[active])
        token = pick(logprobs)
        logprob += logprobs.gather(1, token[:, None]).squeeze(1)
        tokens = torch.cat([tokens, token[:, None]], dim=1)
        ended = token == EOS_ID
        if ended.any():
            for row in ended.nonzero().squeeze(1).tolist():
                hyps[int(active[row])] = Hypothesis(
                    tokens[row, 1:-1].tolist(), float(logprob[row]), float(logprob[row])
                )
            keep = (~ended).nonzero().squeeze(1)
            tokens, logprob, active = tokens[keep], logprob[keep], active[keep]
            memory, src_mask = select_rows(memory, keep), select_rows(src_mask, keep)
            model.reorder_cache(cache, keep, keep)
    return hyps
