"""The parts every search is made of: hypotheses and their scores (the length penalty), the length
limit, a step's log-probabilities, the candidates a beam keeps, finishing hypotheses and the test
of when a sentence stops searching. `mt.search.beam`, `mt.search.single_path`, `mt.search.constrained`
and `mt.search.continuous` are built from them.

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

import math
from dataclasses import dataclass
from typing import get_args

import torch

from mt.config.schema import LengthPenalty, StopRule
from mt.errors import MtError
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

STOP_RULES = get_args(StopRule)  # the config checks decode.stop; these raise for library callers


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, EOS not included
    score: float  # log-probability / length penalty: what the search ranks by
    logprob: float  # sum of token log-probabilities, EOS included


def length_penalty(length: torch.Tensor | float, alpha: float, kind: LengthPenalty) -> torch.Tensor | float:
    """The divisor of a hypothesis' log-probability; `length` counts tokens including EOS. Past a
    float's range it is infinite, for a tensor as for a Python float (whose ** would raise)."""
    if kind == "none":
        return length * 0 + 1.0
    if kind not in ("gnmt", "length"):
        raise ValueError(f"unknown length penalty {kind!r}")
    base = (5.0 + length) / 6.0 if kind == "gnmt" else length  # "length": fairseq, Marian, CTranslate2
    try:
        return base**alpha
    except OverflowError:
        return math.inf


def max_lengths(src_ids: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Maximum number of generated tokens (EOS included) per sentence: int(a * source length + b), in
    float64 as Python computes it, so that the limit `mt export` documents for CTranslate2 is this one
    (float32 gave another for 274 of 31,713 pairs of a and length)."""
    src_len = (src_ids != PAD_ID).sum(dim=1) - 1  # without the source EOS
    return (src_len.double() * a + b).long().clamp(min=1, max=limit)


def ban_repeats(logits: torch.Tensor, tokens: torch.Tensor, n: int) -> None:
    """The repetition guard (`no_repeat_ngram`, as fairseq's and CTranslate2's no_repeat_ngram_size):
    in each row of `logits` (rows, vocab), -inf for every token that would complete an n-gram the
    row's prefix `tokens` (rows, t) already holds. A runaway loop cannot go round twice."""
    if n < 1 or tokens.size(1) < n:
        return
    grams = tokens.unfold(1, n, 1)  # (rows, t - n + 1, n)
    if n == 1:
        seen = torch.ones(grams.shape[:2], dtype=torch.bool, device=tokens.device)
    else:
        seen = (grams[:, :, :-1] == tokens[:, None, tokens.size(1) - n + 1 :]).all(dim=-1)
    blocked = torch.where(seen, -torch.inf, torch.inf).to(logits.dtype)
    logits.scatter_reduce_(1, grams[:, :, -1], blocked, "amin")


def step_logprobs(model, tokens, memory, src_mask, cache, no_repeat: int = 0) -> torch.Tensor:
    """Log-probabilities of the next token for each row, (rows, vocab), in float32; with `no_repeat`,
    the repeated n-grams banned (`ban_repeats`)."""
    if cache is None:  # full recomputation over the whole prefix: the reference the cache must match
        logits = model.decode(tokens, memory, src_mask)[:, -1]
    else:
        logits = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]
    if no_repeat:
        logits = logits.float()
        ban_repeats(logits, tokens, no_repeat)
    logprobs = log_softmax_over(logits)
    check_finite(logprobs.amax(dim=-1))
    logprobs[:, PAD_ID] = -torch.inf  # never generate padding or a second BOS
    logprobs[:, BOS_ID] = -torch.inf
    return logprobs


NOT_FINITE = (
    "the model's scores are not finite (NaN or inf): the checkpoint is damaged, or the "
    "precision overflows (try --precision fp32)"
)


def log_softmax_over(logits: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of next-token logits (rows, vocab) in float32, written over the logits where
    they are already contiguous float32: no new vocabulary-sized tensor a step (less memory)."""
    logits = logits.float().contiguous()
    return torch.log_softmax(logits, dim=-1, out=logits)


def check_finite(values: torch.Tensor) -> None:
    """A model whose scores are NaN or infinite cannot be searched: say so instead of printing garbage."""
    if not bool(torch.isfinite(values).all()):
        raise MtError(NOT_FINITE)


def force_eos(logprobs: torch.Tensor, rows: torch.Tensor) -> None:
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


def check_stopping(alpha: float, stop: str) -> None:
    """The config refuses these too; library callers get a ValueError."""
    if alpha < 0:
        raise ValueError(f"alpha {alpha}: a negative length penalty makes the stopping bound invalid")
    if stop not in STOP_RULES:
        raise ValueError(f"unknown stop rule {stop!r}: expected {' or '.join(STOP_RULES)}")


def expand(model, tokens, memory, src_mask, cache, scores, at_limit, beam, no_repeat: int = 0):
    """Each sentence's 2*beam best continuations: (scores, parent beam, token), each (sentences, 2*beam);
    with `no_repeat`, none that repeats an n-gram of its beam (`ban_repeats`)."""
    if cache is None:  # full recomputation over the whole prefix: the reference the cache must match
        logits = model.decode(tokens, memory, src_mask)[:, -1]
    else:
        logits = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]  # (rows, vocab)
    if no_repeat:
        logits = logits.float()
        ban_repeats(logits, tokens, no_repeat)
    return top_candidates(logits, scores, at_limit, beam)


def top_candidates(logits, scores, at_limit, beam):
    """`expand` from the next-token logits of every row, (rows, vocab); overwrites `logits`
    (`log_softmax_over`).

    The best 2*beam of a sentence's beam * vocab candidates are among the 2*beam best tokens of each
    of its beams, so only those are ranked across beams (`row_topk`). log_softmax over the vocabulary is
    one fused pass, about 4x faster on the CPU than logsumexp for the normaliser alone.
    """
    logprobs = log_softmax_over(logits)
    logprobs[:, PAD_ID] = -torch.inf  # never generate padding or a second BOS
    logprobs[:, BOS_ID] = -torch.inf
    force_eos(logprobs, at_limit)
    k = min(2 * beam, logprobs.size(1))
    row_logprobs, row_tokens = row_topk(logprobs, k)  # (rows, k)
    if bool(row_logprobs[:, 0].isnan().any()):  # topk ranks NaN first; one NaN or inf logit makes its row NaN
        raise MtError(NOT_FINITE)
    candidates = scores.view(-1)[:, None] + row_logprobs
    sentences = scores.size(0)
    top_scores, top_ids = candidates.view(sentences, beam * k).topk(min(2 * beam, beam * k), dim=1)
    return top_scores, top_ids // k, row_tokens.view(sentences, beam * k).gather(1, top_ids)


def row_topk(values: torch.Tensor, k: int, block: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """`values.topk(k, dim=1)` (values first, best first) by way of blocks of `block` columns, on the CPU.

    torch's CPU topk visits every element in a scalar loop; a vectorised max per block costs a
    fraction of that. The k best of a row lie in the k blocks with the best maxima, so topk runs over
    those blocks only, and the columns after the last whole block. 2.6x faster on a step of 845 rows
    of 8,000 words (bench/decode_profile.py prints both); exact, though equal values may come in
    another order.
    """
    rows, width = values.shape
    blocks = width // block
    if values.device.type != "cpu" or blocks < 4 * k:
        return values.topk(k, dim=1)
    whole = blocks * block
    grid = values[:, :whole].view(rows, blocks, block)
    best = grid.amax(dim=2).topk(k, dim=1).indices  # (rows, k): the blocks that hold a row's k best
    picked = grid[torch.arange(rows)[:, None], best].view(rows, k * block)
    if whole < width:
        picked = torch.cat([picked, values[:, whole:]], dim=1)
    top, where = picked.topk(k, dim=1)
    in_blocks = where < k * block
    column = best.gather(1, (where // block).clamp(max=k - 1)) * block + where % block
    return top, torch.where(in_blocks, column, where - k * block + whole)


def select_beams(
    top_scores: torch.Tensor, top_beam: torch.Tensor, top_token: torch.Tensor, beam: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence's next beams from its candidates (`top_candidates`: sentences x 2*beam): the `beam`
    best that did not end (at most `beam` of 2*beam can). Returns their scores (sentences, beam), the
    rows they continue (sentences * beam,) and their new tokens (sentences * beam,)."""
    rank = torch.arange(top_token.size(1), device=top_token.device).expand_as(top_token)
    keep = (rank + (top_token == EOS_ID) * top_token.size(1)).argsort(dim=1)[:, :beam]
    sentence_rows = torch.arange(top_token.size(0), device=top_token.device)[:, None] * beam
    return (
        top_scores.gather(1, keep),
        (sentence_rows + top_beam.gather(1, keep)).view(-1),
        top_token.gather(1, keep).view(-1),
    )


@dataclass
class Finished:
    """Each sentence's finished hypotheses, with their count and nbest-th best score as tensors."""

    hypotheses: list[list[Hypothesis]]
    count: torch.Tensor  # (sentences,) long
    kth_score: torch.Tensor  # (sentences,) the nbest-th best finished score, -inf while fewer have finished
    nbest: int


def finish(
    done: Finished, active, tokens, top_scores, top_beam, top_token, beam, alpha, penalty, step: int | torch.Tensor
) -> None:
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


def still_searching(done: Finished, active, scores, limit, step, beam, alpha, penalty, stop) -> torch.Tensor:
    """Which active sentences go on: not at their length limit, a live hypothesis that could still
    beat the `nbest`-th finished one, and (stop "early") fewer than `beam` finished hypotheses."""
    still = step < limit[active]
    best_live = scores.max(dim=1).values / length_penalty(limit[active].float(), alpha, penalty)
    count = done.count[active]
    if stop == "early":
        still &= count < beam
    return still & ~((count >= done.nbest) & (best_live <= done.kth_score[active]))
