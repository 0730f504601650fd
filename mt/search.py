"""Greedy and beam search over `model.encode()` / `model.decode()` with an incremental cache.

Beam search as in Sec. 6.1 of the paper: beam size 4 and length penalty alpha 0.6, the GNMT penalty
lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al., 2016); |Y| counts the generated tokens including EOS.
Beams are laid out as (sentences x beam) rows of one tensor; the encoder runs once per sentence and
its output is shared by the beams.

When a sentence stops searching (`stop`):
- "exact": when no live hypothesis, even at its best possible score under the length penalty in
  use, can beat the `nbest`-th finished one, or at its maximum length (a * source length + b; the
  paper: source length + 50). The returned hypotheses are then the best-scoring the beam can find.
- "early" (the default): also as soon as `beam` hypotheses have finished, as fairseq and
  CTranslate2 do (Hugging Face's `early_stopping=True`). With a length-normalising penalty this can
  return a shorter translation while a higher-scoring one is still alive. It is the default because
  exact search was measured slower at no BLEU gain, and at the recipe's alpha 1.4 its higher-scoring
  outputs were longer and worse (bench/search_stop.py; docs/translating.md).
The bound: log-probabilities only fall as a hypothesis grows and, for alpha >= 0, the penalty only
grows up to the length limit, so a live hypothesis can at best reach logprob / lp(limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import torch

from mt.config import LengthPenalty, StopRule
from mt.errors import MtError
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

STOP_RULES = get_args(StopRule)  # the config checks decode.stop; these raise for library callers


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, EOS not included
    score: float  # log-probability / length penalty: what the search ranks by
    logprob: float  # sum of token log-probabilities, EOS included


def length_penalty(length: torch.Tensor | float, alpha: float, kind: LengthPenalty) -> torch.Tensor | float:
    """The divisor of a hypothesis' log-probability; `length` counts tokens including EOS."""
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if kind == "length":  # fairseq, Marian, CTranslate2
        return length**alpha
    if kind == "none":
        return length * 0 + 1.0
    raise ValueError(f"unknown length penalty {kind!r}")


def max_lengths(src_ids: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Maximum number of generated tokens (EOS included) per sentence: a * source length + b."""
    src_len = (src_ids != PAD_ID).sum(dim=1) - 1  # without the source EOS
    return (src_len.float() * a + b).long().clamp(min=1, max=limit)


def _step_logprobs(model, tokens, memory, src_mask, cache) -> torch.Tensor:
    """Log-probabilities of the next token for each row, (rows, vocab), in float32."""
    if cache is None:  # full recomputation over the whole prefix: the reference the cache must match
        logits = model.decode(tokens, memory, src_mask)[:, -1]
    else:
        logits = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    _check_finite(logprobs.amax(dim=-1))
    logprobs[:, PAD_ID] = -torch.inf  # never generate padding or a second BOS
    logprobs[:, BOS_ID] = -torch.inf
    return logprobs


NOT_FINITE = ("the model's scores are not finite (NaN or inf): the checkpoint is damaged, or the "
              "precision overflows (try --precision fp32)")


def _check_finite(values: torch.Tensor) -> None:
    """A model whose scores are NaN or infinite cannot be searched: say so instead of printing garbage."""
    if not bool(torch.isfinite(values).all()):
        raise MtError(NOT_FINITE)


def _force_eos(logprobs: torch.Tensor, rows: torch.Tensor) -> None:
    """Rows at their length limit may only end: every token but EOS gets -inf."""
    if rows.any():
        eos = logprobs[rows, EOS_ID].clone()
        logprobs[rows] = -torch.inf
        logprobs[rows, EOS_ID] = eos


def select_rows(state, rows: torch.Tensor):
    """Rows of an encoder state: a tensor, or (nested) tuples/lists of them (ensembles)."""
    if isinstance(state, torch.Tensor):
        return state.index_select(0, rows)
    return type(state)(select_rows(item, rows) for item in state)


@torch.no_grad()
def greedy_search(model, src_ids: torch.Tensor, max_len_a: float = 1.0, max_len_b: int = 50) -> list[Hypothesis]:
    """The most probable token at every step, for each sentence of src_ids (batch, src_len)."""
    return _single_path(model, src_ids, max_len_a, max_len_b, lambda logprobs: logprobs.argmax(dim=-1))


@torch.no_grad()
def sample_search(
    model,
    src_ids: torch.Tensor,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
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

    return _single_path(model, src_ids, max_len_a, max_len_b, pick)


def _single_path(model, src_ids, max_len_a, max_len_b, pick) -> list[Hypothesis]:
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
        logprobs = _step_logprobs(model, tokens, memory, src_mask, cache)
        _force_eos(logprobs, step >= limit[active])
        token = pick(logprobs)
        logprob += logprobs.gather(1, token[:, None]).squeeze(1)
        tokens = torch.cat([tokens, token[:, None]], dim=1)
        ended = token == EOS_ID
        if ended.any():
            for row in ended.nonzero().squeeze(1).tolist():
                hyps[int(active[row])] = Hypothesis(tokens[row, 1:-1].tolist(), float(logprob[row]), float(logprob[row]))
            keep = (~ended).nonzero().squeeze(1)
            tokens, logprob, active = tokens[keep], logprob[keep], active[keep]
            memory, src_mask = select_rows(memory, keep), select_rows(src_mask, keep)
            model.reorder_cache(cache, keep, keep)
    return hyps


@torch.no_grad()
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
) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses of each sentence, best first; `stop` as in the module docstring."""
    _check_stopping(alpha, stop)
    model.eval()
    device = src_ids.device
    batch = src_ids.size(0)
    nbest = min(nbest, beam)
    memory, src_mask = model.encode(src_ids)
    limit = max_lengths(src_ids, max_len_a, max_len_b, model.max_positions - 1)
    # Every beam row of a sentence reads the same encoder output: (batch * beam, src_len, d_model).
    beam_rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory, src_mask = select_rows(memory, beam_rows), select_rows(src_mask, beam_rows)
    cache = model.new_cache() if use_cache else None
    tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
    # Only the first beam of each sentence is live at the start; the others would duplicate it.
    scores = torch.full((batch, beam), -torch.inf, device=device)
    scores[:, 0] = 0.0
    active = torch.arange(batch, device=device)  # original index of each sentence still searching
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # Per original sentence, kept as tensors so that the stopping test is one vectorised step:
    # how many hypotheses have finished, and the nbest-th best finished score (-inf until nbest have).
    done = Finished(finished, torch.zeros(batch, dtype=torch.long, device=device),
                    torch.full((batch,), -torch.inf, device=device), nbest)

    step = 0
    while active.numel() > 0:
        step += 1
        top_scores, top_beam, top_token = _expand(
            model, tokens, memory, src_mask, cache, scores, (step >= limit[active]).repeat_interleave(beam), beam
        )

        _finish(done, active, tokens, top_scores, top_beam, top_token, beam, alpha, penalty, step)
        # The next beams: the best `beam` candidates that did not end (at most `beam` of 2*beam can).
        is_eos = top_token == EOS_ID
        rank = torch.arange(top_token.size(1), device=device).expand_as(top_token)
        keep = (rank + is_eos * top_token.size(1)).argsort(dim=1)[:, :beam]
        scores = top_scores.gather(1, keep)
        rows = (torch.arange(len(active), device=device)[:, None] * beam + top_beam.gather(1, keep)).view(-1)
        tokens = torch.cat([tokens[rows], top_token.gather(1, keep).view(-1, 1)], dim=1)

        still = _still_searching(done, active, scores, limit, step, beam, alpha, penalty, stop)
        source_rows = None
        if not still.all():  # finished sentences leave the batch
            rows = rows.view(len(active), beam)[still].view(-1)
            source_rows = torch.arange(len(active) * beam, device=device).view(-1, beam)[still].view(-1)
            tokens, scores, active = tokens[source_rows], scores[still], active[still]
            memory, src_mask = select_rows(memory, source_rows), select_rows(src_mask, source_rows)
        if cache is not None:
            # Rows of one sentence share their source: its cross-attention cache moves only with
            # the sentence, the self-attention cache follows each beam's parent.
            model.reorder_cache(cache, rows, source_rows)

    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _check_stopping(alpha: float, stop: str) -> None:
    """The config refuses these too; library callers get a ValueError."""
    if alpha < 0:
        raise ValueError(f"alpha {alpha}: a negative length penalty makes the stopping bound invalid")
    if stop not in STOP_RULES:
        raise ValueError(f"unknown stop rule {stop!r}: expected {' or '.join(STOP_RULES)}")


def _expand(model, tokens, memory, src_mask, cache, scores, at_limit, beam):
    """Each sentence's 2*beam best continuations: (scores, parent beam, token), each (sentences, 2*beam)."""
    if cache is None:  # full recomputation over the whole prefix: the reference the cache must match
        logits = model.decode(tokens, memory, src_mask)[:, -1]
    else:
        logits = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]  # (rows, vocab)
    return top_candidates(logits, scores, at_limit, beam)


def top_candidates(logits, scores, at_limit, beam):
    """`_expand` from the next-token logits of every row, (rows, vocab).

    The best 2*beam of a sentence's beam * vocab candidates are among the 2*beam best tokens of each
    of its beams, so only those are ranked across beams. log_softmax over the vocabulary is one fused
    pass, about 4x faster on the CPU than logsumexp for the normaliser alone (bench/decode_profile.py).
    """
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    logprobs[:, PAD_ID] = -torch.inf  # never generate padding or a second BOS
    logprobs[:, BOS_ID] = -torch.inf
    _force_eos(logprobs, at_limit)
    k = min(2 * beam, logprobs.size(1))
    row_logprobs, row_tokens = logprobs.topk(k, dim=1)  # (rows, k)
    if bool(row_logprobs[:, 0].isnan().any()):  # topk ranks NaN first; one NaN or inf logit makes its row NaN
        raise MtError(NOT_FINITE)
    candidates = scores.view(-1)[:, None] + row_logprobs
    sentences = scores.size(0)
    top_scores, top_ids = candidates.view(sentences, beam * k).topk(min(2 * beam, beam * k), dim=1)
    return top_scores, top_ids // k, row_tokens.view(sentences, beam * k).gather(1, top_ids)


@dataclass
class Finished:
    """Each sentence's finished hypotheses, with their count and nbest-th best score as tensors."""

    hypotheses: list[list[Hypothesis]]
    count: torch.Tensor  # (sentences,) long
    kth_score: torch.Tensor  # (sentences,) the nbest-th best finished score, -inf while fewer have finished
    nbest: int


def _finish(done: Finished, active, tokens, top_scores, top_beam, top_token, beam, alpha, penalty,
            step: int | torch.Tensor) -> None:
    """Set aside hypotheses that end with EOS among each sentence's `beam` best candidates.

    `step`: tokens generated with this one, for all sentences or one per active sentence (rows of a
    continuous search, whose shorter rows end in padding after BOS and their tokens)."""
    ended = (top_token[:, :beam] == EOS_ID) & torch.isfinite(top_scores[:, :beam])
    where = ended.nonzero()
    if where.numel() == 0:
        return
    s, j = where[:, 0], where[:, 1]
    # One gather per field, then plain lists: no tensor indexing per hypothesis.
    sentences = active[s].tolist()
    logprobs = top_scores[s, j].tolist()
    prefixes = tokens[s * beam + top_beam[s, j], 1:].tolist()
    if isinstance(step, torch.Tensor):
        divisors = [float(length_penalty(float(n), alpha, penalty)) for n in step[s].tolist()]
        prefixes = [[t for t in prefix if t != PAD_ID] for prefix in prefixes]
    else:
        divisors = [float(length_penalty(float(step), alpha, penalty))] * len(sentences)
    touched = set()
    for sentence, logprob, prefix, divisor in zip(sentences, logprobs, prefixes, divisors):
        done.hypotheses[sentence].append(Hypothesis(prefix, logprob / divisor, logprob))
        touched.add(sentence)
    for sentence in touched:
        hyps = done.hypotheses[sentence]
        done.count[sentence] = len(hyps)
        if len(hyps) >= done.nbest:
            done.kth_score[sentence] = sorted((h.score for h in hyps), reverse=True)[done.nbest - 1]


def _still_searching(done: Finished, active, scores, limit, step, beam, alpha, penalty, stop) -> torch.Tensor:
    """Which active sentences go on: not at their length limit, a live hypothesis that could still
    beat the `nbest`-th finished one, and (stop "early") fewer than `beam` finished hypotheses."""
    still = step < limit[active]
    best_live = scores.max(dim=1).values / length_penalty(limit[active].float(), alpha, penalty)
    count = done.count[active]
    if stop == "early":
        still &= count < beam
    return still & ~((count >= done.nbest) & (best_live <= done.kth_score[active]))
