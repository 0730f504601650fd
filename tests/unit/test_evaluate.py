"""mt.metrics: sacrebleu scores and signatures, and reading hypothesis/reference files."""

from __future__ import annotations

import pytest
import sacrebleu

from mt.data.text_files import read_lines
from mt.errors import MtError
from mt.metrics import score

REFS = [
    "The cat sat on the mat.",
    "There is a dog in the garden, and it is barking loudly.",
    "We will meet again tomorrow morning at nine o'clock.",
]
HYPS = [
    "The cat sat on a mat.",
    "A dog is in the garden and it barks loudly.",
    "We meet again tomorrow at nine in the morning.",
]


def test_identical_text_scores_100():
    scores = score(REFS, REFS)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)
    assert scores["sentences"] == 3


def test_matches_sacrebleu_directly():
    scores = score(HYPS, REFS)
    bleu = sacrebleu.corpus_bleu(HYPS, [REFS])
    chrf = sacrebleu.corpus_chrf(HYPS, [REFS])
    assert scores["bleu"] == pytest.approx(bleu.score)
    assert scores["chrf"] == pytest.approx(chrf.score)
    assert scores["bleu_detail"] == str(bleu)
    assert 0.0 < scores["bleu"] < 100.0


def test_signatures():
    scores = score(HYPS, REFS)
    assert "nrefs:1" in scores["bleu_signature"] and "tok:13a" in scores["bleu_signature"]
    assert "nrefs:1" in scores["chrf_signature"] and "nc:6" in scores["chrf_signature"]
    assert f"version:{sacrebleu.__version__}" in scores["bleu_signature"]


def test_mismatched_or_empty():
    with pytest.raises(MtError, match="3 hypotheses but 2 references"):
        score(HYPS, REFS[:2])
    with pytest.raises(MtError, match="nothing to score"):
        score([], [])


def test_read_lines(tmp_path):
    path = tmp_path / "hyp.en"
    path.write_bytes("Grüße aus Köln\r\n\nzwei\n".encode("utf-8"))
    assert read_lines(path) == ["Grüße aus Köln", "", "zwei"]
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"ok\n\xc3\x28 broken\n")
    with pytest.raises(MtError, match=r"bad\.en:2: not valid UTF-8"):
        read_lines(bad)
    with pytest.raises(MtError, match=r"missing\.en: no such file"):
        read_lines(tmp_path / "missing.en")


def test_run_prints_each_direction_where_target_languages_are_tokenized_apart():
    """`mt run`'s result lines for a split whose directions' signatures differ (zh is tokenized as
    tok:zh, de as 13a): no signature is the mean's (was a KeyError after scoring valid, every run)."""
    from mt.apps.evaluate import _mean
    from mt.apps.run import score_lines

    chinese = ["我们明天早上九点再见面。"]
    mixed = _mean({"en-de": score(REFS, REFS, "de"), "en-zh": score(chinese, chinese, "zh")})
    lines = score_lines("valid", mixed)
    assert len(lines) == 3 and "tok:zh" in lines[1] and "tok:13a" in lines[0]
    assert lines[0].startswith("valid en-de: BLEU 100.00") and lines[2].startswith("valid: BLEU 100.00")
    assert "the mean of 2 directions" in lines[2]
    # one signature for all: each direction's line too, and the mean said as one (it read as a plain score)
    same = _mean({"en-de": score(REFS, HYPS, "de"), "en-fr": score(REFS, HYPS, "fr")})
    lines = score_lines("test", same)
    assert len(lines) == 3 and lines[0].startswith("test en-de: BLEU") and lines[1].startswith("test en-fr: BLEU")
    assert lines[2] == (f"test: BLEU {same['bleu']:.2f}  chrF {same['chrf']:.2f}  (the mean of 2 directions, "
                        f"{same['bleu_signature']})")
    plain = score(REFS, HYPS, "de")  # one direction: its score and signature, as before
    assert score_lines("test", plain) == [f"test: BLEU {plain['bleu']:.2f}  chrF {plain['chrf']:.2f}  ({plain['bleu_signature']})"]


def test_chinese_of_any_code_is_scored_with_sacrebleus_tokenizer_and_several_references_count(capsys):
    """zho_Hans (FLORES), cmn, zho: read as "zho", no language to sacrebleu, scored with 13a (BLEU 0);
    a second --ref replaced the first (click keeps the last); --tokenized Chinese was BLEU ~0."""
    from mt.errors import ConfigError
    from mt.metrics import score_tokenized

    hyps, refs = ["我们明天上午九点再见面。", "他在家。"], ["我们明天早上九点再见面。", "他在家里。"]
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh").score
    for code in ("zh", "zh-Hant", "zho_Hans", "cmn", "zho"):
        found = score(hyps, refs, code)
        assert found["bleu"] == pytest.approx(expected) and "tok:zh" in found["bleu_signature"], code
    assert capsys.readouterr().err == ""
    assert score(hyps, refs)["bleu"] == 0.0  # no language given: 13a, and said
    assert "give their language (--lang zh, ja or ko)" in " ".join(capsys.readouterr().err.split())
    with pytest.raises(ConfigError, match="--tokenized into zho_Hans"):
        score_tokenized(hyps, refs, "zho_Hans")
    both = score(HYPS, REFS, "en", [HYPS])  # the hypotheses as a second reference: 100
    assert both["bleu"] == pytest.approx(100.0) and both["bleu_signature"].startswith("nrefs:2|")
    with pytest.raises(MtError, match="pair up"):
        score(HYPS, REFS, "en", [HYPS[:2]])


def test_a_read_only_experiment_is_refused_before_its_split_is_decoded(tmp_path, monkeypatch):
    """A read-only copy was decoded whole, then refused at its first write, its scores never shown."""
    import os

    import pytest

    from mt.apps.evaluate import check_writable
    from mt.errors import MtError
    from mt.experiment.paths import Experiment

    exp = Experiment(tmp_path / "exp")
    exp.root.mkdir()
    check_writable(exp)  # a writable one passes, its folders not made yet
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as a read-only mount answers
    with pytest.raises(MtError, match=r"exp: not writable; mt evaluate saves its translations and scores"):
        check_writable(exp)
