"""The repetition guard (decode.no_repeat_ngram): no hypothesis of beam, greedy or sampled search holds
an n-gram twice; off, an untrained model loops."""

from __future__ import annotations

import torch
from helpers import sources, tiny_model

from mt.search.beam import beam_search
from mt.search.single_path import greedy_search, sample_search
from mt.search.steps import ban_repeats


def repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def test_ban_repeats_bans_the_tokens_that_complete_a_seen_ngram():
    prefix = torch.tensor([[1, 5, 6, 5, 6, 7, 5]])
    logits = torch.zeros(1, 10)
    ban_repeats(logits, prefix, 2)  # after 5: 6 was seen
    assert torch.isinf(logits).nonzero()[:, 1].tolist() == [6]
    logits = torch.zeros(1, 10)
    ban_repeats(logits, prefix, 3)  # (7, 5) never came before
    assert not torch.isinf(logits).any()


def test_no_hypothesis_repeats_an_ngram():
    model, src = tiny_model(seed=4), sources([3, 7, 12], seed=5)
    looping = [h.tokens for h in greedy_search(model, src, max_len_a=0.0, max_len_b=40)]
    assert any(repeats(tokens, 2) for tokens in looping), "the untrained model must loop for this to mean anything"
    for n in (2, 3):
        found = [h.tokens for hyps in beam_search(model, src, 4, 0.6, "gnmt", 0.0, 40, nbest=4, no_repeat_ngram=n)
                 for h in hyps]
        found += [h.tokens for h in greedy_search(model, src, 0.0, 40, no_repeat_ngram=n)]
        found += [h.tokens for h in sample_search(model, src, 0.0, 40, generator=torch.Generator().manual_seed(1),
                                                  no_repeat_ngram=n)]
        assert found and not any(repeats(tokens, n) for tokens in found)


def test_a_negative_guard_is_refused_in_the_flags_words():
    import pytest

    from mt.decoding.options import DecodeOptions
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match="--no-repeat-ngram"):
        DecodeOptions(no_repeat_ngram=-1)
    assert DecodeOptions(no_repeat_ngram=3).record()["no_repeat_ngram"] == 3
    assert "no_repeat_ngram" not in DecodeOptions(beam=4).record()  # off: records as before
