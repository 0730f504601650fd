"""mt.search.constrained: every constraint appears in every output, no constraints is plain beam search,
a batch equals one sentence at a time, and what happens at the length limit; `mt translate --constraints`.

A random tiny Transformer is searched with constraints of random tokens (which it would never choose
by itself); the trained toy experiment takes real phrases through the CLI.
"""

from __future__ import annotations

import subprocess

import pytest
import torch
from helpers import mt as in_process
from helpers import sources, tiny_model

from mt.search.beam import beam_search
from mt.search.constrained import Progress, allocate, constrained_beam_search, split_constrained_line
from mt.tokenizer import BOS_ID, EOS_ID

pytestmark = pytest.mark.usefixtures("single_thread")


def contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


def test_progress_follows_phrases_and_starts_over_when_one_breaks():
    phrases = [[7, 8, 9], [5]]
    p = Progress().advance(7, phrases).advance(8, phrases)
    assert p.partial == {(0, 2)} and p.tokens_met(phrases) == 2 and p.next_tokens(phrases) == {9, 7, 5}
    broken = p.advance(4, phrases)
    assert broken.partial == frozenset() and broken.tokens_met(phrases) == 0
    assert p.advance(7, phrases).partial == {(0, 1)}  # a broken phrase may start again at once
    done = p.advance(9, phrases).advance(5, phrases)
    assert done.all_met(phrases) and done.tokens_met(phrases) == 4 and done.next_tokens(phrases) == set()


def test_progress_follows_phrases_that_share_a_start_and_a_phrase_that_overlaps_itself():
    shared = [[3, 4], [3, 6]]  # "New York", "New Delhi"
    after = Progress().advance(3, shared)
    assert after.partial == {(0, 1), (1, 1)}
    assert after.advance(6, shared).met == {1} and after.advance(6, shared).partial == frozenset()
    overlapping = [[2, 2, 5]]  # met by 2 2 2 5
    p = Progress()
    for token in (2, 2, 2, 5):
        p = p.advance(token, overlapping)
    assert p.all_met(overlapping)


def test_a_phrase_given_twice_is_met_by_two_occurrences():
    twice = [[7, 8], [5], [7, 8]]
    p = Progress()
    for token in (7, 8, 5):
        p = p.advance(token, twice)
    assert len(p.met) == 2 and not p.all_met(twice) and p.tokens_met(twice) == 3
    assert p.next_tokens(twice) == {7}
    p = p.advance(7, twice)
    assert p.partial == {(2, 1)} and p.tokens_met(twice) == 4
    assert p.advance(8, twice).all_met(twice)
    model = tiny_model(seed=4)
    src = sources([6, 4], seed=7)
    twice_each = [[[17], [17]], [[9, 10], [9, 10], [21]]]
    results = constrained_beam_search(model, src, twice_each, beam=4, max_len_a=1.0, max_len_b=6)
    assert results[0].all_met and all(h.tokens.count(17) >= 2 for h in results[0].hypotheses)
    occurrences = [sum(h.tokens[i : i + 2] == [9, 10] for i in range(len(h.tokens))) for h in results[1].hypotheses]
    assert results[1].all_met and min(occurrences) >= 2


def test_allocation_shares_the_beam_among_banks_and_fills_what_a_bank_leaves():
    candidates = [(-1.0, 0, "a"), (-1.5, 0, "b"), (-2.0, 0, "c"), (-3.0, 2, "d"), (-4.0, 1, "e"), (-5.0, 0, "f")]
    chosen = allocate(candidates, beam=4, banks=3)  # slots: bank 0: 1, bank 1: 1, bank 2: 2
    assert [c[2] for c in chosen] == ["a", "b", "d", "e"]  # bank 2 has one candidate: its second slot goes to "b"
    assert [c[2] for c in allocate([c for c in candidates if c[1] == 0], beam=2, banks=1)] == ["a", "b"]


@pytest.mark.parametrize("beam", [2, 4])
def test_every_output_contains_every_constraint(beam):
    model = tiny_model(seed=4)
    src = sources([3, 9, 1, 6, 12], seed=5)
    constraints = [[[17]], [[9, 10], [21]], [[30, 31, 30]], [], [[12], [13], [14]]]
    results = constrained_beam_search(model, src, constraints, beam=beam, max_len_a=1.0, max_len_b=5, nbest=beam)
    for result, phrases in zip(results, constraints):
        assert result.all_met and result.hypotheses
        for hyp in result.hypotheses:
            assert all(contains(hyp.tokens, phrase) for phrase in phrases), (hyp.tokens, phrases)
        assert [h.score for h in result.hypotheses] == sorted((h.score for h in result.hypotheses), reverse=True)
    plain = beam_search(model, src, beam=beam, max_len_a=1.0, max_len_b=5)
    # Without them the search finds outputs that miss them: the constraints changed something.
    assert any(not all(contains(p[0].tokens, ph) for ph in cs) for p, cs in zip(plain, constraints) if cs)


@pytest.mark.parametrize("stop", ["early", "exact"])
def test_without_constraints_it_is_plain_beam_search(stop):
    model = tiny_model(seed=5)
    src = sources([3, 9, 1, 6, 12], seed=6)
    plain = beam_search(model, src, beam=4, alpha=0.6, max_len_a=1.5, max_len_b=5, nbest=3, stop=stop)
    constrained = constrained_beam_search(model, src, [[]] * 5, beam=4, alpha=0.6, max_len_a=1.5, max_len_b=5,
                                          nbest=3, stop=stop)
    for ours, theirs in zip(constrained, plain):
        assert [h.tokens for h in ours.hypotheses] == [h.tokens for h in theirs]
        assert [h.score for h in ours.hypotheses] == pytest.approx([h.score for h in theirs], abs=1e-5)


def test_a_batch_equals_one_sentence_at_a_time():
    model = tiny_model(seed=6)
    lengths = [3, 9, 1, 6]
    src = sources(lengths, seed=7)
    constraints = [[[11]], [[5, 6]], [], [[20], [22]]]
    batch = constrained_beam_search(model, src, constraints, beam=3, max_len_a=1.0, max_len_b=4)
    for row, n in enumerate(lengths):
        (alone,) = constrained_beam_search(model, src[row : row + 1, : n + 1], [constraints[row]], beam=3,
                                           max_len_a=1.0, max_len_b=4)
        assert alone.hypotheses[0].tokens == batch[row].hypotheses[0].tokens
        assert alone.hypotheses[0].score == pytest.approx(batch[row].hypotheses[0].score, abs=1e-4)


def test_the_limit_grows_by_the_constraints_and_a_full_table_returns_the_best_partial_hypothesis():
    model = tiny_model(seed=7, max_positions=8)  # room for 7 tokens: the limit is cut to the positions
    src = sources([2], seed=8)
    phrase = [9, 10, 11, 12, 13, 14, 15, 16, 17]  # 9 tokens and EOS cannot fit in 7
    (result,) = constrained_beam_search(model, src, [[phrase]], beam=3, max_len_a=0.0, max_len_b=1)
    assert not result.all_met and len(result.hypotheses) == 1
    # the most it could meet: as many of the phrase's tokens as the 7 positions hold with an end (was:
    # none, an empty output)
    assert result.hypotheses[0].tokens == phrase[:6]
    # its log-probability is that of the output with its end, as a finished hypothesis's (was: without EOS)
    memory, src_mask = model.encode(src)
    with torch.inference_mode():
        steps = model.decode(torch.tensor([[BOS_ID, *phrase[:6]]]), memory, src_mask).float().log_softmax(-1)
    expected = sum(float(steps[0, i, t]) for i, t in enumerate([*phrase[:6], EOS_ID]))
    assert result.hypotheses[0].logprob == pytest.approx(expected, abs=1e-4)
    # Without the positions' cap, a*len+b = 1 would leave no room: the constraint's tokens are added to it.
    (fits,) = constrained_beam_search(tiny_model(seed=7), src, [[[9, 10, 11]]], beam=3, max_len_a=0.0, max_len_b=1)
    assert fits.all_met and contains(fits.hypotheses[0].tokens, [9, 10, 11])


def test_split_constrained_line():
    assert split_constrained_line("Ein Hund.\tdog\t  \tthe cat") == ("Ein Hund.", ["dog", "the cat"])
    assert split_constrained_line("Ein Hund.") == ("Ein Hund.", [])


def test_mt_translate_constraints_puts_the_phrases_in_and_leaves_other_lines_alone(
    trained_experiment, capsys, monkeypatch
):
    exp = str(trained_experiment.root)

    def mt(*args: str, stdin: str) -> subprocess.CompletedProcess:  # in this process: the command's output, not a process's
        code, out, err = in_process(capsys, monkeypatch, *args, "--threads", "1", stdin=stdin)
        return subprocess.CompletedProcess([], code, out, err)

    lines = ["Der Hund läuft im Park.", "Eine Katze sitzt auf dem Haus.", "Die Frau spielt."]
    plain = mt("translate", "--exp", exp, "--beam", "4", stdin="\n".join(lines) + "\n")
    assert plain.returncode == 0, plain.stderr
    constrained_input = [lines[0] + "\tblue house", lines[1], lines[2] + "\tred\tsmall dog"]
    done = mt("translate", "--exp", exp, "--beam", "4", "--constraints", stdin="\n".join(constrained_input) + "\n")
    assert done.returncode == 0, done.stderr
    out, before = done.stdout.splitlines(), plain.stdout.splitlines()
    assert len(out) == 3
    assert "blue house" in out[0] and "red" in out[2] and "small dog" in out[2]
    assert out[1] == before[1]  # an unconstrained line is unchanged
    blank = mt("translate", "--exp", exp, "--beam", "4", "--constraints", stdin="\tblue house\n")
    assert blank.returncode == 0 and blank.stdout == "\n"  # nothing to translate: said, not silent
    assert "input line 1: no source to translate: its constraints are not used" in blank.stderr
    refused = mt("translate", "--exp", exp, "--constraints", "--sample", stdin="x\n")
    assert refused.returncode != 0 and "--constraints needs beam search" in refused.stderr


def test_at_beam_1_a_constrained_lines_score_is_its_log_probability_as_greedys(trained_experiment):
    """Beam 1 sends the lines without phrases to greedy search, whose SCORE is the log-probability; the
    lines with phrases were scored divided by the length penalty: one output, two scales."""
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator

    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    line, word = "Der Hund läuft im Park.", "dog"
    (found,) = translator.search([f"{line}\t{word}"], DecodeOptions(beam=1, constraints=True))
    options = DecodeOptions(beam=1, constraints=True).resolved(translator.decode_cfg)
    src_ids = translator.pad_sources(translator.src_tok.encode([line]))
    (result,) = translator._search_constrained(src_ids, [translator.tgt_tok.encode([word])], options)
    best = result.hypotheses[0]
    assert best.score != pytest.approx(best.logprob)  # the penalty divides it: this test can tell them apart
    assert found[0][1] == pytest.approx(best.logprob) and found[0][0] == translator.tgt_tok.decode([best.tokens])[0]
