"""mt.decoding.shortlist: a search over a shortlist that holds every token is the unrestricted search,
bit for bit (fp32, int8, ensembles, greedy, sampling, n-best); over a real shortlist, every token
chosen is a candidate and beam and greedy search find what the unrestricted search finds with the
other tokens banned."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import sources, tiny_model
from torch import nn

from mt.data.shortlist import LexicalTable
from mt.decoding.models import set_precision
from mt.decoding.shortlist import Shortlist, cut_projection, shortlisted, to_indices, to_tokens
from mt.errors import MtError
from mt.search.beam import beam_search
from mt.search.constrained import constrained_beam_search
from mt.search.ensemble import Ensemble
from mt.search.single_path import greedy_search, sample_search

VOCAB = 40
pytestmark = pytest.mark.usefixtures("single_thread")


def model(seed: int = 0) -> nn.Module:
    # Dropout 0 and a bias on the output: the cut must carry the bias rows too.
    m = tiny_model(VOCAB, seed=seed, dropout=0.0)
    m.output.bias = nn.Parameter(torch.randn(VOCAB) * 0.5)
    return m.eval()


def searches(m: nn.Module, src: torch.Tensor) -> dict[str, list]:
    """Every search's hypotheses as (tokens, score, logprob) tuples."""

    def rows(found):
        return [[(h.tokens, h.score, h.logprob) for h in hyps] for hyps in found]

    return {
        "beam": rows(beam_search(m, src, beam=4, alpha=0.6, max_len_b=12, nbest=3)),
        "greedy": rows([[h] for h in greedy_search(m, src, max_len_b=12)]),
        "sample": rows([[h] for h in sample_search(m, src, max_len_b=12, generator=torch.Generator().manual_seed(3))]),
    }


def mapped(m: nn.Module, vocab: torch.Tensor, src: torch.Tensor) -> dict[str, list]:
    """`searches` over the shortlisted model, its hypotheses mapped back to token ids."""
    cut = shortlisted(m, vocab)
    found = {
        "beam": beam_search(cut, src, beam=4, alpha=0.6, max_len_b=12, nbest=3),
        "greedy": [[h] for h in greedy_search(cut, src, max_len_b=12)],
        "sample": [[h] for h in sample_search(cut, src, max_len_b=12, generator=torch.Generator().manual_seed(3))],
    }
    return {
        name: [[(h.tokens, h.score, h.logprob) for h in hyps] for hyps in to_tokens(vocab, hyps)]
        for name, hyps in found.items()
    }


@pytest.mark.parametrize("kind", ["fp32", "int8", "ensemble"])
def test_a_shortlist_of_every_token_is_the_unrestricted_search_exactly(kind):
    m = model()
    if kind == "int8":
        m = set_precision(m, "fp32", "int8", torch.device("cpu"))
    elif kind == "ensemble":
        m = Ensemble([model(0), model(1)]).eval()
    src = sources([5, 9, 3], VOCAB)
    assert mapped(m, torch.arange(VOCAB), src) == searches(m, src)


class Banned(nn.Module):
    """The reference: the whole model, with -inf for every token outside `vocab`."""

    def __init__(self, model: nn.Module, vocab: torch.Tensor):
        super().__init__()
        self.model, self.max_positions = model, model.max_positions
        self.ban = torch.full((VOCAB,), -torch.inf)
        self.ban[vocab] = 0.0

    def encode(self, src_ids):
        return self.model.encode(src_ids)

    def decode(self, tgt_ids, memory, src_mask, cache=None):
        return self.model.decode(tgt_ids, memory, src_mask, cache) + self.ban

    def new_cache(self):
        return self.model.new_cache()

    def reorder_cache(self, cache, order, source_order=None):
        self.model.reorder_cache(cache, order, source_order)


def test_over_a_small_shortlist_tokens_are_candidates_and_the_search_is_the_banned_one():
    m, src = model(), sources([6, 8, 4], VOCAB)
    vocab = torch.tensor([0, 1, 2, 3, 7, 9, 11, 20, 21, 33, 39])
    ours, reference = mapped(m, vocab, src), searches(Banned(m, vocab), src)
    allowed = set(vocab.tolist())
    for name in ours:
        for hyps, expected in zip(ours[name], reference[name]):
            assert all(set(tokens) <= allowed for tokens, _, _ in hyps), name
            if name == "sample":  # drawn from a distribution over other columns: other random numbers
                continue
            assert [tokens for tokens, _, _ in hyps] == [tokens for tokens, _, _ in expected], name
            assert [s for _, s, _ in hyps] == pytest.approx([s for _, s, _ in expected], abs=1e-4), name
    assert any(tokens for hyps in ours["beam"] for tokens, _, _ in hyps), "the searches must emit tokens"


def test_constraints_are_searched_as_candidate_indices():
    m, src = model(), sources([6, 5], VOCAB)
    vocab = torch.tensor([0, 1, 2, 3, 8, 12, 30])
    constraints = [[[30, 8]], [[12]]]
    cut = shortlisted(m, vocab)
    indexed = [[to_indices(vocab, phrase) for phrase in c] for c in constraints]
    found = constrained_beam_search(cut, src, indexed, beam=3, alpha=0.6, max_len_b=12)
    for result, wanted in zip(found, constraints):
        tokens = to_tokens(vocab, [result.hypotheses])[0][0].tokens
        assert result.all_met and set(tokens) <= set(vocab.tolist())
        text = " ".join(map(str, tokens))
        assert all(" ".join(map(str, phrase)) in text for phrase in wanted)


def test_a_cut_quantized_projection_gives_the_rows_of_the_whole_one():
    m = set_precision(model(), "fp32", "int8", torch.device("cpu"))
    hidden = torch.randn(7, 16)
    vocab = torch.tensor([0, 1, 2, 3, 5, 17, 38])
    assert torch.equal(cut_projection(m.output, vocab)(hidden), m.output(hidden)[:, vocab])


def test_int8_linears_give_torchs_dynamic_quantization_bit_for_bit():
    """--quantize int8 is torch's dynamic quantization with its linears called more directly
    (mt.decoding.models.Int8Linear): the same logits, every layer swapped, the shortlist's cut too."""
    import copy
    import warnings

    from torch.ao.quantization import quantize_dynamic

    from mt.decoding.models import Int8Linear, QuantizedLinear

    whole = model()
    src, tgt = sources([5, 6, 3], VOCAB), sources([4, 5, 2], VOCAB, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torchs = quantize_dynamic(copy.deepcopy(whole), {nn.Linear}, dtype=torch.qint8)
    ours = set_precision(whole, "fp32", "int8", torch.device("cpu"))
    linears = [m for m in ours.modules() if isinstance(m, (nn.Linear, QuantizedLinear))]
    assert linears and all(type(m) is Int8Linear for m in linears)
    with torch.no_grad():
        assert torch.equal(ours(src, tgt), torchs(src, tgt))
    assert type(cut_projection(ours.output, torch.tensor([0, 4, 9]))) is Int8Linear


def table(rows: dict[int, list[int]], frequent: list[int], top: int = 3) -> LexicalTable:
    candidates = np.full((VOCAB, top), -1, dtype=np.int32)
    for source, targets in rows.items():
        candidates[source, : len(targets)] = targets
    return LexicalTable(candidates, np.array(frequent, dtype=np.int32), {})


def test_a_batch_vocabulary_is_its_sources_candidates_the_frequent_and_special_tokens():
    shortlist = Shortlist(table({5: [10, 11], 6: [12], 7: [30, 31, 32]}, [20, 21]), VOCAB)
    src = torch.tensor([[5, 6, 3], [6, 3, 0]])  # 7 is in no sentence; padding selects nothing
    assert shortlist.batch_vocabulary(src).tolist() == [0, 1, 2, 3, 10, 11, 12, 20, 21]
    assert shortlist.batch_vocabulary(src, [39, 10]).tolist() == [0, 1, 2, 3, 10, 11, 12, 20, 21, 39]


def test_a_table_of_another_vocabulary_is_refused():
    with pytest.raises(MtError, match="past the vocabulary"):
        Shortlist(table({5: [45]}, []), VOCAB)
