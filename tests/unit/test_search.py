"""mt.search: length penalties, greedy and beam search against exhaustive and hand-computed answers.

A tiny random Transformer checks the invariants (beam 1 is greedy, the cache changes nothing, beam
search finds the best sequence when nothing is pruned); a table model whose next-token
probabilities are written out checks the length-penalty flip with exact scores.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from helpers import sources, tiny_model
from torch import nn

from mt.config.schema import DecodeConfig
from mt.model.transformer import Transformer
from mt.search.beam import beam_search
from mt.search.single_path import greedy_search, sample_search
from mt.search.steps import length_penalty, max_lengths, row_topk
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

A, B = 4, 5  # the two real tokens of the small vocabularies below


pytestmark = pytest.mark.usefixtures("single_thread")


# -- length penalties --------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [1, 2, 7, 30])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_length_penalty_values(length, alpha):
    assert length_penalty(float(length), alpha, "gnmt") == pytest.approx(((5 + length) / 6) ** alpha)
    assert length_penalty(float(length), alpha, "length") == pytest.approx(length**alpha)
    assert length_penalty(float(length), alpha, "none") == 1.0
    lengths = torch.tensor([float(length), 3.0])
    torch.testing.assert_close(
        length_penalty(lengths, alpha, "gnmt"), torch.tensor([((5 + length) / 6) ** alpha, (8 / 6) ** alpha])
    )


@pytest.mark.parametrize("kind", ["gnmt", "length"])
def test_a_penalty_past_a_floats_range_is_infinite_for_floats_as_for_tensors(kind):
    assert length_penalty(40000.0, 100.0, kind) == math.inf  # Python's ** raises OverflowError here
    assert length_penalty(torch.tensor([40000.0]), 100.0, kind).item() == math.inf
    from mt.config.schema import MAX_ALPHA  # the largest the config takes: finite in float32 up to 1,024 tokens

    assert math.isfinite(length_penalty(torch.tensor([1024.0]), MAX_ALPHA, kind).item())


def test_unknown_length_penalty_is_an_error():
    with pytest.raises(ValueError, match="unknown length penalty 'wu'"):
        length_penalty(3.0, 0.6, "wu")


# -- invariants on a random tiny Transformer -----------------------------------------------------------


def test_beam_1_equals_greedy():
    model = tiny_model()
    src = sources([3, 9, 1, 6, 12], seed=1)
    greedy = greedy_search(model, src, max_len_a=1.5, max_len_b=5)
    beam = beam_search(model, src, beam=1, max_len_a=1.5, max_len_b=5)
    for g, (b,) in zip(greedy, beam):
        assert b.tokens == g.tokens
        assert b.logprob == pytest.approx(g.logprob, abs=1e-4)
    assert len({tuple(g.tokens) for g in greedy}) > 1  # the model does not say one thing to everything


@pytest.mark.parametrize("beam", [1, 4])
def test_cached_beam_search_equals_full_recomputation(beam):
    model = tiny_model(seed=1)
    src = sources([3, 9, 1, 6, 12], seed=2)
    cached = beam_search(model, src, beam=beam, max_len_a=1.5, max_len_b=5, nbest=beam)
    full = beam_search(model, src, beam=beam, max_len_a=1.5, max_len_b=5, nbest=beam, use_cache=False)
    for hyps_cached, hyps_full in zip(cached, full):
        assert [h.tokens for h in hyps_cached] == [h.tokens for h in hyps_full]
        for c, f in zip(hyps_cached, hyps_full):
            assert c.score == pytest.approx(f.score, abs=1e-4)
            assert c.logprob == pytest.approx(f.logprob, abs=1e-4)


def test_a_sentence_gets_the_same_translation_alone_and_in_a_batch():
    model = tiny_model(seed=2)
    lengths = [3, 9, 1, 6]
    src = sources(lengths, seed=3)
    batch = beam_search(model, src, beam=3, max_len_a=1.0, max_len_b=4)
    for row, n in enumerate(lengths):
        (alone,) = beam_search(model, src[row : row + 1, : n + 1], beam=3, max_len_a=1.0, max_len_b=4)
        assert alone[0].tokens == batch[row][0].tokens
        assert alone[0].score == pytest.approx(batch[row][0].score, abs=1e-4)


def test_nbest_is_sorted_and_scores_are_logprob_over_penalty():
    model = tiny_model(seed=3)
    src = sources([4, 7, 2], seed=4)
    alpha = 0.6
    for hyps in beam_search(model, src, beam=5, alpha=alpha, max_len_a=1.0, max_len_b=3, nbest=5):
        assert len(hyps) == 5
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5
        for h in hyps:
            assert h.score == pytest.approx(h.logprob / ((5 + len(h.tokens) + 1) / 6) ** alpha, rel=1e-6)


@pytest.mark.parametrize("a, b", [(1.0, 2), (0.5, 3), (0.0, 4)])
def test_outputs_respect_the_maximum_length(a, b):
    """At most a * src_len + b generated tokens, EOS included; here the limit is always reached."""
    model = TableModel({}, default={A: 0.6, B: 0.399, EOS_ID: 0.001})  # EOS only when forced
    lengths = [1, 4, 9]
    src = sources(lengths, seed=5)
    limits = [int(a * n + b) for n in lengths]
    for hyps, limit in zip(beam_search(model, src, beam=3, max_len_a=a, max_len_b=b, nbest=3), limits):
        assert max(len(h.tokens) + 1 for h in hyps) == limit
    for hyp, limit in zip(greedy_search(model, src, max_len_a=a, max_len_b=b), limits):
        assert len(hyp.tokens) + 1 == limit
    # The real model too: no hypothesis past the limit.
    real = tiny_model(seed=4)
    for hyps, limit in zip(beam_search(real, src, beam=4, max_len_a=a, max_len_b=b, nbest=4), limits):
        assert all(len(h.tokens) + 1 <= limit for h in hyps)


def test_never_generates_pad_or_bos():
    model = tiny_model(seed=5)
    src = sources([5, 8], seed=6)
    for hyps in beam_search(model, src, beam=4, max_len_a=1.0, max_len_b=5, nbest=4):
        for h in hyps:
            assert PAD_ID not in h.tokens and BOS_ID not in h.tokens and EOS_ID not in h.tokens


# -- exhaustive: beam search with nothing pruned finds the best sequence -----------------------------


def rescore(model: Transformer, src_row: torch.Tensor, tokens: list[int]) -> float:
    """Sum of the model's log-probabilities of tokens + EOS, computed without the search."""
    target = tokens + [EOS_ID]
    with torch.no_grad():
        memory, src_mask = model.encode(src_row[None])
        logits = model.decode(torch.tensor([[BOS_ID] + tokens]), memory, src_mask)[0]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    return sum(float(logprobs[t, tok]) for t, tok in enumerate(target))


def test_beam_search_finds_the_exhaustive_argmax():
    vocab = 6  # PAD UNK BOS EOS A B: search may generate UNK, A, B and EOS
    model = tiny_model(vocab=vocab, seed=4)
    src = sources([2, 5, 3], vocab=vocab, seed=7)
    generable = [UNK_ID, A, B]
    max_len_b = 4  # max_len_a = 0: up to 3 tokens + EOS; EOS forced at the 4th
    candidates = [list(seq) for n in range(max_len_b) for seq in itertools.product(generable, repeat=n)]
    beam = len(candidates)  # 40: wider than every step's candidates, so nothing is pruned
    logprobs = [{tuple(seq): rescore(model, src[row], seq) for seq in candidates} for row in range(len(src))]
    winners = set()
    for alpha, penalty in [(0.0, "gnmt"), (0.6, "gnmt"), (1.0, "gnmt"), (1.0, "length")]:
        found = beam_search(model, src, beam=beam, alpha=alpha, penalty=penalty, max_len_a=0, max_len_b=max_len_b)
        for row, (best,) in enumerate(found):
            scored = sorted(
                (lp / length_penalty(len(seq) + 1.0, alpha, penalty), list(seq))
                for seq, lp in logprobs[row].items()
            )[::-1]
            (top_score, top_seq), (second_score, _) = scored[0], scored[1]
            assert top_score - second_score > 1e-3  # a clear winner, not a float tie
            assert best.tokens == top_seq, f"alpha {alpha} {penalty}, sentence {row}"
            assert best.score == pytest.approx(top_score, abs=1e-4)
            assert best.logprob == pytest.approx(logprobs[row][tuple(top_seq)], abs=1e-4)
            winners.add(tuple(top_seq))
        # A narrow beam may miss the argmax, but what it returns must be scored right.
        for row, hyps in enumerate(beam_search(model, src, beam=2, alpha=alpha, penalty=penalty, max_len_a=0,
                                               max_len_b=max_len_b, nbest=2)):
            for h in hyps:
                assert h.logprob == pytest.approx(logprobs[row][tuple(h.tokens)], abs=1e-4)
    # The case is not trivial: the answer moves with the penalty, and greedy misses it.
    assert len(winners) > 1
    greedy = {tuple(h.tokens) for h in greedy_search(model, src, max_len_a=0, max_len_b=max_len_b)}
    assert not greedy & winners


# -- hand-computed: the length-penalty flip ------------------------------------------------------------


class TableModel(nn.Module):
    """Next-token probabilities that depend only on the generated prefix: table[prefix] or default.

    Implements what search uses of a model: encode, decode (with or without cache), new_cache,
    reorder_cache, max_positions.
    """

    max_positions = 64

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], default: dict[int, float], vocab: int = 6):
        super().__init__()
        self.table, self.default, self.vocab = table, default, vocab

    def encode(self, src_ids):
        return src_ids[:, :, None].float(), (src_ids != PAD_ID)[:, None, None, :]

    def _logits(self, prefix: list[int]) -> torch.Tensor:
        probs = self.table.get(tuple(prefix), self.default)
        logits = torch.full((self.vocab,), -torch.inf)
        for token, p in probs.items():
            logits[token] = math.log(p)
        return logits

    def decode(self, tgt_ids, memory, src_mask, cache=None):
        if cache is not None:
            cache["prefix"] = tgt_ids if "prefix" not in cache else torch.cat([cache["prefix"], tgt_ids], dim=1)
            tgt_ids = cache["prefix"]
        rows = []
        for row in tgt_ids.tolist():  # row[0] is BOS; position t predicts from row[1 : t + 1]
            rows.append(torch.stack([self._logits(row[1 : t + 1]) for t in range(len(row))]))
        return torch.stack(rows)

    def new_cache(self):
        return {}

    def reorder_cache(self, cache, order, source_order=None):
        cache["prefix"] = cache["prefix"].index_select(0, order)  # no source-side cache to move


# "A" then EOS: p = 0.48, 2 tokens. "B B B B" then EOS: p = 0.45, 5 tokens. Everything else far
# worse, and never ending early by default, so that beam 2 does not fill up with finished junk.
FLIP = {
    (): {A: 0.5, B: 0.45, EOS_ID: 0.05},
    (A,): {EOS_ID: 0.96, A: 0.04},
    (B,): {B: 1.0},
    (B, B): {B: 1.0},
    (B, B, B): {B: 1.0},
    (B, B, B, B): {EOS_ID: 1.0},
}
FLIP_DEFAULT = {A: 0.5, B: 0.4, EOS_ID: 0.1}
SHORT_LOGPROB = math.log(0.5 * 0.96)
LONG_LOGPROB = math.log(0.45)


def test_flip_tables_are_what_the_test_says():
    """Without a penalty the short output wins; with gnmt alpha 1 the long one does."""
    assert SHORT_LOGPROB > LONG_LOGPROB
    assert SHORT_LOGPROB / (7 / 6) < LONG_LOGPROB / (10 / 6)


@pytest.mark.parametrize("use_cache", [True, False])
def test_no_penalty_picks_the_short_hypothesis(use_cache):
    model = TableModel(FLIP, FLIP_DEFAULT)
    (best,) = beam_search(model, sources([3]), beam=2, alpha=0.0, max_len_a=0, max_len_b=10, use_cache=use_cache)[0]
    assert best.tokens == [A]
    assert best.logprob == pytest.approx(SHORT_LOGPROB, abs=1e-6)
    assert best.score == pytest.approx(SHORT_LOGPROB, abs=1e-6)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("nbest", [1, 2])  # nbest 1: the search must not stop once "A" has ended
def test_gnmt_penalty_alpha_1_picks_the_long_hypothesis(use_cache, nbest):
    model = TableModel(FLIP, FLIP_DEFAULT)
    hyps = beam_search(
        model, sources([3]), beam=2, alpha=1.0, max_len_a=0, max_len_b=10, nbest=nbest, use_cache=use_cache
    )[0]
    assert [h.tokens for h in hyps] == [[B, B, B, B], [A]][:nbest]
    assert hyps[0].logprob == pytest.approx(LONG_LOGPROB, abs=1e-6)
    assert hyps[0].score == pytest.approx(LONG_LOGPROB / (10 / 6), abs=1e-6)
    if nbest == 2:
        assert hyps[1].score == pytest.approx(SHORT_LOGPROB / (7 / 6), abs=1e-6)


def test_length_penalty_kind_length_also_flips():
    model = TableModel(FLIP, FLIP_DEFAULT)
    (best,) = beam_search(model, sources([3]), beam=2, alpha=1.0, penalty="length", max_len_a=0, max_len_b=10)[0]
    assert best.tokens == [B, B, B, B]
    assert best.score == pytest.approx(LONG_LOGPROB / 5, abs=1e-6)


def test_greedy_takes_the_locally_best_token():
    model = TableModel(FLIP, FLIP_DEFAULT)
    (hyp,) = greedy_search(model, sources([3]), max_len_a=0, max_len_b=10)
    assert hyp.tokens == [A]
    assert hyp.logprob == pytest.approx(SHORT_LOGPROB, abs=1e-6)


def test_each_sentence_of_a_batch_uses_its_own_limit_and_stops_on_its_own():
    """Sentence 0 can reach the long output (limit 5), sentence 1 cannot (limit 3): the short one."""
    model = TableModel(FLIP, FLIP_DEFAULT)
    src = sources([4, 2])  # limits: 1.0 * 4 + 1 = 5 and 1.0 * 2 + 1 = 3 tokens with EOS
    found = beam_search(model, src, beam=2, alpha=1.0, max_len_a=1.0, max_len_b=1, nbest=2)
    assert found[0][0].tokens == [B, B, B, B]
    assert found[1][0].tokens == [A]
    assert found[1][0].score == pytest.approx(SHORT_LOGPROB / (7 / 6), abs=1e-6)
    assert all(len(h.tokens) + 1 <= 3 for h in found[1])


# -- the stopping rule: "early" (fairseq, CTranslate2) against "exact" -----------------------------

# Beam 2. "A" ends at step 2 (p 0.495, 2 tokens), "A A" at step 3 (p 0.0495): two finished hypotheses,
# which is where "early" stops. "B B B" is still alive then (p 0.45) and ends at step 4.
EARLY = {
    (): {A: 0.55, B: 0.45},
    (A,): {EOS_ID: 0.9, A: 0.1},
    (A, A): {EOS_ID: 0.9, A: 0.1},
    (B,): {B: 1.0},
    (B, B): {B: 1.0},
    (B, B, B): {EOS_ID: 1.0},
}
EARLY_DEFAULT = {A: 0.5, B: 0.4, EOS_ID: 0.1}
A_LOGPROB, BBB_LOGPROB = math.log(0.55 * 0.9), math.log(0.45)


def test_early_table_is_what_the_test_says():
    """Under |Y|^1 and gnmt 1.4, "B B B" (4 tokens with EOS) beats "A" (2); without a penalty "A" wins."""
    assert A_LOGPROB > BBB_LOGPROB
    for penalty, alpha in [("length", 1.0), ("gnmt", 1.4)]:
        assert BBB_LOGPROB / length_penalty(4.0, alpha, penalty) > A_LOGPROB / length_penalty(2.0, alpha, penalty)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("penalty,alpha", [("length", 1.0), ("gnmt", 1.4)])
def test_early_stop_returns_the_short_hypothesis_once_beam_have_finished(use_cache, penalty, alpha):
    model = TableModel(EARLY, EARLY_DEFAULT)
    (best,) = beam_search(model, sources([3]), beam=2, alpha=alpha, penalty=penalty, max_len_a=0, max_len_b=10,
                          use_cache=use_cache, stop="early")[0]
    assert best.tokens == [A]
    assert best.score == pytest.approx(A_LOGPROB / length_penalty(2.0, alpha, penalty), abs=1e-6)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("penalty,alpha", [("length", 1.0), ("gnmt", 1.4)])
def test_exact_stop_waits_for_the_live_hypothesis_that_wins(use_cache, penalty, alpha):
    model = TableModel(EARLY, EARLY_DEFAULT)
    hyps = beam_search(model, sources([3]), beam=2, alpha=alpha, penalty=penalty, max_len_a=0, max_len_b=10,
                       nbest=2, use_cache=use_cache, stop="exact")[0]
    assert [h.tokens for h in hyps] == [[B, B, B], [A]]
    assert hyps[0].score == pytest.approx(BBB_LOGPROB / length_penalty(4.0, alpha, penalty), abs=1e-6)
    assert hyps[0].logprob == pytest.approx(BBB_LOGPROB, abs=1e-6)
    assert beam_search(model, sources([3]), beam=2, alpha=alpha, penalty=penalty, max_len_a=0,
                       max_len_b=10)[0][0].tokens == [A]  # early is the default (bench/search_stop.py)


def test_exact_stop_ends_when_no_live_hypothesis_can_win():
    """Without a penalty nothing alive can beat a finished "A" (log 0.495) once live scores are below
    it: the search stops long before the length limit (the table would otherwise run to step 40)."""
    steps = []

    class Counting(TableModel):
        def decode(self, tgt_ids, memory, src_mask, cache=None):
            steps.append(tgt_ids.size(1))
            return super().decode(tgt_ids, memory, src_mask, cache)

    model = Counting(EARLY, EARLY_DEFAULT)
    (best,) = beam_search(model, sources([3]), beam=2, alpha=0.0, max_len_a=0, max_len_b=40, use_cache=False,
                          stop="exact")[0]
    assert best.tokens == [A]
    assert len(steps) <= 4  # step 2 ends "A"; by step 3 or 4 every live log-probability is below it


def test_negative_alpha_and_unknown_stop_rules_are_refused():
    model = TableModel(EARLY, EARLY_DEFAULT)
    with pytest.raises(ValueError, match="negative length penalty"):
        beam_search(model, sources([3]), beam=2, alpha=-0.5)
    with pytest.raises(ValueError, match="unknown stop rule 'soon'"):
        beam_search(model, sources([3]), beam=2, stop="soon")


@pytest.mark.parametrize("beam", [1, 3])
def test_non_finite_scores_are_a_clear_error_not_a_crash_or_garbage(beam):
    from mt.errors import MtError

    model = tiny_model(seed=2)
    with torch.no_grad():
        model.decoder[0].ffn.w2.weight[0, 0] = float("nan")  # as damaged weight bytes would
    search = (lambda: greedy_search(model, sources([4, 6]))) if beam == 1 else \
        (lambda: beam_search(model, sources([4, 6]), beam=beam))
    with pytest.raises(MtError, match="not finite"):
        search()


@pytest.mark.parametrize("width", [8000, 7993, 32001, 300])
@pytest.mark.parametrize("k", [1, 10])
def test_row_topk_by_blocks_gives_topks_values_and_columns_holding_them(width, k):
    """Ties (few distinct values), a row of -inf but one word (a row at its length limit), a best word
    in the columns after the last whole block, and a NaN, which topk ranks first: the same values as
    torch.topk, best first, at distinct columns that hold them."""
    gen = torch.Generator().manual_seed(width + k)
    values = torch.randint(-40, 0, (12, width), generator=gen).float() / 4  # many equal values
    values[1] = -torch.inf
    values[1, 3] = -2.0
    values[2, -1] = 5.0  # past the last whole block when width % 64
    values[3, width // 2] = float("nan")
    top, columns = row_topk(values, k)
    expected = values.topk(k, dim=1).values
    assert torch.equal(top[~top.isnan()], expected[~expected.isnan()]) and torch.equal(top.isnan(), expected.isnan())
    assert torch.equal(values.gather(1, columns)[~top.isnan()], top[~top.isnan()])
    assert all(len(set(row)) == k for row in columns.tolist())
    assert top[2, 0] == 5.0 and columns[2, 0] == width - 1 and columns[1, 0] == 3 and top[3, 0].isnan()


@pytest.mark.parametrize("vocab", [3000, 3008])  # columns after the last whole block of 64, and none
def test_beam_search_over_a_large_vocabulary_is_the_same_with_torchs_topk(monkeypatch, vocab):
    """The block path of row_topk (vocabularies from 4 x 64 x 2 * beam words) against plain topk."""
    import mt.search.steps as steps

    model = tiny_model(vocab=vocab, seed=4)
    src = sources([3, 9, 1, 6, 12], vocab=vocab, seed=5)
    blocks = beam_search(model, src, beam=5, max_len_a=1.5, max_len_b=5, nbest=5)
    monkeypatch.setattr(steps, "row_topk", lambda values, k: values.topk(k, dim=1))
    plain = beam_search(model, src, beam=5, max_len_a=1.5, max_len_b=5, nbest=5)
    assert [[h.tokens for h in hyps] for hyps in blocks] == [[h.tokens for h in hyps] for hyps in plain]
    assert [[h.score for h in hyps] for hyps in blocks] == [[h.score for h in hyps] for hyps in plain]


def test_max_length_defaults_are_the_source_length_plus_50():
    """Sec. 6.1: "maximum output length ... input length + 50", in DecodeConfig, in max_lengths
    (source EOS not counted) and in the search functions' defaults, which reach exactly that."""
    cfg = DecodeConfig()
    assert (cfg.max_len_a, cfg.max_len_b) == (1.0, 50)
    src = sources([3, 10, 1], seed=6)  # each ends in EOS, padded
    assert max_lengths(src, cfg.max_len_a, cfg.max_len_b, 1000).tolist() == [53, 60, 51]
    assert max_lengths(src, cfg.max_len_a, cfg.max_len_b, 55).tolist() == [53, 55, 51]  # the position limit
    model = TableModel({}, default={A: 0.6, B: 0.399, EOS_ID: 0.001})  # EOS only when forced
    assert [len(h.tokens) + 1 for h in greedy_search(model, src)] == [53, 60, 51]
    assert [len(h.tokens) + 1 for h in sample_search(model, src, top_k=2, generator=torch.Generator().manual_seed(0))] == [53, 60, 51]
    assert [max(len(h.tokens) + 1 for h in hyps) for hyps in beam_search(model, src, beam=2, nbest=2)] == [53, 60, 51]


def test_the_length_limit_is_int_of_a_times_length_plus_b_as_the_export_documents():
    """mt export's README tells CTranslate2 users int(a * source pieces + b): float64, as Python computes
    it; the search computed a * length in float32, which gave another limit for 274 of 31,713 pairs."""
    lengths = torch.arange(1, 106)
    src = (torch.arange(107)[None, :] <= lengths[:, None]).long() * 5  # each row: length tokens, EOS, padding
    for tenths in range(0, 302):
        a = tenths / 100
        got = max_lengths(src, a, 5, 10**6).tolist()
        assert got == [max(1, int(a * int(n) + 5)) for n in lengths], a


def test_batches_run_side_by_side_in_order_each_on_its_share_of_the_threads():
    """mt.search.parallel: two workers run two batches at once (each waits for the other at a barrier,
    which one at a time could never pass), on one torch thread each, and hand results back in order;
    torch's threads are given back, and one batch runs here on all of them."""
    import threading

    from mt.search.parallel import search_batches, workers_for

    barrier, seen = threading.Barrier(2, timeout=20), []

    def search(batch: int) -> int:
        seen.append((batch, torch.get_num_threads(), threading.current_thread().name))
        if batch < 2:
            barrier.wait()
        return batch * 10

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert list(search_batches([0, 1, 2, 3], search, 2)) == [0, 10, 20, 30]
        assert sorted(threads for _, threads, _ in seen) == [1, 1, 1, 1]
        assert all(name.startswith("mt-search") for _, _, name in seen)
        assert torch.get_num_threads() == 2
        seen.clear()
        assert list(search_batches([5], search, 2)) == [50]
        assert seen == [(5, 2, threading.current_thread().name)]
        assert workers_for(0, torch.device("cpu")) == 2 and workers_for(0, torch.device("cuda")) == 1
        assert workers_for(3, torch.device("cpu")) == 3
        torch.set_num_threads(16)
        assert workers_for(0, torch.device("cpu")) == 4
    finally:
        torch.set_num_threads(before)


def test_a_failed_batch_stops_the_batches_not_started_and_gives_the_threads_back():
    import time

    from mt.search.parallel import search_batches

    started = []

    def search(batch: int) -> int:
        started.append(batch)
        if batch == 0:
            raise RuntimeError("batch 0 failed")
        time.sleep(0.2)  # all 20 would take 2 s on two workers
        return batch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="batch 0 failed"):
            list(search_batches(list(range(20)), search, 2))
        assert torch.get_num_threads() == 2
        assert len(started) <= 10, started
    finally:
        torch.set_num_threads(before)


def test_balanced_runs_keep_every_sentence_once_in_length_order_and_never_pad_past_the_budget():
    """mt.search.parallel.balanced_for: a call of few length groups is cut into a multiple of the
    workers of about equal source tokens; a call of many groups is left as it is; where a run would
    pad past the limit (one long sentence among short ones), the groups are kept, halved."""
    from mt.data.batching import length_groups
    from mt.search.parallel import BALANCED_GROUPS, balanced_for

    def padded(run, lengths):
        return len(run) * (max(lengths[i] for i in run) + 1)

    lengths = [12, 9, 14, 11, 10, 13, 12, 8, 15, 11, 9, 10]
    groups = length_groups(lengths, 256)
    assert len(groups) == 1
    runs = balanced_for(groups, lengths, 2, 256)
    assert len(runs) == 2 and [i for run in runs for i in run] == groups[0]
    tokens = [sum(lengths[i] + 1 for i in run) for run in runs]
    assert abs(tokens[0] - tokens[1]) <= max(lengths) + 1, tokens
    many = [[i] for i in range(BALANCED_GROUPS * 2)]
    assert balanced_for(many, [5] * len(many), 2, 256) == many
    uneven = [3] * 40 + [100]  # one long sentence: a run that takes it with short ones pads past 256
    groups = length_groups(uneven, 256)
    runs = balanced_for(groups, uneven, 2, 256)
    assert sorted(i for run in runs for i in run) == list(range(len(uneven)))
    assert all(padded(run, uneven) <= 256 for run in runs), [(len(r), padded(r, uneven)) for r in runs]
    loose = balanced_for(groups, uneven, 2, 2000)  # the same call checked against a budget of 2,000
    assert any(padded(run, uneven) > 256 for run in loose)
