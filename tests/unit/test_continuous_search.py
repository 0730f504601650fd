"""mt.search.continuous: sentences that join and leave a running search get beam_search's answers.

A random tiny Transformer (its outputs run to the length limit or stop anywhere: every path of the
bookkeeping is taken) searched alone by `beam_search` is the reference for each sentence; the
continuous search takes the same sentences at staggered steps, in other orders and alongside others.
"""

from __future__ import annotations

import random

import pytest
import torch
from helpers import tiny_model

from mt.search.beam import beam_search
from mt.search.continuous import ContinuousBeamSearch
from mt.tokenizer import EOS_ID, PAD_ID

pytestmark = pytest.mark.usefixtures("single_thread")


def source_ids(lengths: list[int], vocab: int = 32, seed: int = 0) -> list[torch.Tensor]:
    """One (1, n + 1) source per length: real tokens then EOS."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.cat([torch.randint(4, vocab, (n,), generator=gen), torch.tensor([EOS_ID])])[None] for n in lengths]


def batch(sources: list[torch.Tensor]) -> torch.Tensor:
    width = max(s.size(1) for s in sources)
    ids = torch.full((len(sources), width), PAD_ID)
    for row, s in enumerate(sources):
        ids[row, : s.size(1)] = s[0]
    return ids


def alone(model, sources, **options) -> list[list]:
    return [beam_search(model, s, **options)[0] for s in sources]


def run(engine: ContinuousBeamSearch, sources, arrivals: list[int], group: int = 1) -> tuple[dict, int]:
    """Add sources[i] before step arrivals[i] (several at once when their steps coincide); step until
    all have finished. Returns {index: hypotheses} and the most sentences active at one step."""
    pending = sorted(range(len(sources)), key=lambda i: arrivals[i])
    results, most, step = {}, 0, 0
    while pending or engine.active:
        ready = [i for i in pending if arrivals[i] <= step]
        for start in range(0, len(ready), group):
            chunk = ready[start:start + group]
            engine.add(batch([sources[i] for i in chunk]), chunk)
        pending = [i for i in pending if i not in ready]
        most = max(most, engine.active)
        for key, hyps in engine.step():
            assert key not in results
            results[key] = hyps
        step += 1
    return results, most


def same(found, expected) -> None:
    assert [h.tokens for h in found] == [h.tokens for h in expected]
    for f, e in zip(found, expected):
        assert f.score == pytest.approx(e.score, rel=1e-5, abs=1e-5)
        assert f.logprob == pytest.approx(e.logprob, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("options", [
    dict(beam=4, alpha=0.6, penalty="gnmt", stop="early"),
    dict(beam=3, alpha=1.0, penalty="length", stop="exact", nbest=3),
    dict(beam=2, alpha=0.0, penalty="none", stop="early", max_len_a=0.5, max_len_b=3),
])
def test_sentences_joining_at_staggered_steps_get_what_they_get_alone(options):
    model = tiny_model(seed=3)
    sources = source_ids([1, 7, 3, 12, 5, 2, 9, 4, 15, 6], seed=1)
    expected = alone(model, sources, **options)
    rng = random.Random(0)
    arrivals = [rng.randrange(0, 12) for _ in sources]
    engine_options = {k: v for k, v in options.items()}
    engine = ContinuousBeamSearch(model, **engine_options)
    results, most = run(engine, sources, arrivals)
    assert most >= 3  # sentences did overlap, at different steps
    for i, hyps in results.items():
        same(hyps, expected[i])
    assert sorted(results) == list(range(len(sources)))


def test_a_batch_added_at_once_equals_beam_search_on_the_batch():
    model = tiny_model(seed=5)
    sources = source_ids([4, 9, 2, 6], seed=2)
    expected = beam_search(model, batch(sources), beam=4, alpha=0.6)
    results, _ = run(ContinuousBeamSearch(model, beam=4, alpha=0.6), sources, [0] * 4, group=4)
    for i in range(4):
        same(results[i], expected[i])


def test_longer_sources_joining_later_and_the_search_emptying_between_arrivals():
    model = tiny_model(seed=7, dropout=0.0)
    sources = source_ids([2, 20, 3, 25, 1], seed=4)
    expected = alone(model, sources, beam=3, alpha=0.6)
    engine = ContinuousBeamSearch(model, beam=3, alpha=0.6)
    results, _ = run(engine, sources, [0, 2, 40, 41, 120])  # 40 and 120: after the search has emptied
    for i in range(len(sources)):
        same(results[i], expected[i])
    assert engine.active == 0 and engine.tokens.size(0) == 0  # nothing kept once empty


def test_state_shrinks_to_what_the_rows_still_need():
    model = tiny_model(seed=11)
    sources = source_ids([30, 2], seed=6)
    # 25 tokens at most for either: the long sentence, 20 steps ahead, leaves first (with 1.0 * len + 5 it
    # was the last to finish, and the checks below never ran)
    engine = ContinuousBeamSearch(model, beam=2, alpha=0.6, max_len_a=0.0, max_len_b=25)
    engine.add(batch(sources[:1]), ["long"])
    for _ in range(20):
        assert not engine.step()
    engine.add(batch(sources[1:]), ["short"])
    assert engine.src_mask.size(-1) == 31
    found, checked = {}, 0
    while engine.active:
        found.update(engine.step())
        if "long" in found and engine.active:
            # the long sentence has left: its cached positions and source columns went with it
            assert engine.valid.size(1) == int(engine.generated.max())
            assert engine.src_mask.size(-1) == 3
            assert engine.cache[0]["ck"].size(2) == 3
            checked += 1
    assert set(found) == {"long", "short"} and checked > 0


def test_refuses_what_it_cannot_search():
    model = tiny_model()
    engine = ContinuousBeamSearch(model, beam=2)
    with pytest.raises(ValueError, match="2 keys for 1 sentences"):
        engine.add(batch(source_ids([3])), ["a", "b"])
    with pytest.raises(ValueError, match="negative length penalty"):
        ContinuousBeamSearch(model, alpha=-1.0)
    assert engine.step() == []  # nothing to search
