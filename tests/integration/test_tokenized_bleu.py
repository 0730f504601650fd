"""BLEU on Moses-tokenized text, as the Multi30k papers report it (mt.metrics.score_tokenized), and
`mt evaluate --tokenized` on files and on an experiment, whose scores are filed apart from sacreBLEU's.
"""

from __future__ import annotations

import json

import pytest
from helpers import build_experiment, copy_experiment
from helpers import mt_process as mt
from sacrebleu.metrics import BLEU

from mt.metrics import score, score_tokenized
from mt.training.loop import train

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_experiment(tmp_path_factory.mktemp("tokenized_bleu"))


# -- tokenized BLEU --------------------------------------------------------------------------------
def test_tokenized_bleu_scores_moses_tokens_and_says_so():
    hyps = ["Ein Mann, der auf einer Bank sitzt.", "Zwei Hunde spielen im Schnee!"]
    refs = ["Ein Mann sitzt auf einer Bank.", "Zwei hunde spielen im Schnee!"]
    result = score_tokenized(hyps, refs, "de")
    moses_hyps = ["Ein Mann , der auf einer Bank sitzt .", "Zwei Hunde spielen im Schnee !"]
    moses_refs = ["Ein Mann sitzt auf einer Bank .", "Zwei hunde spielen im Schnee !"]
    expected = BLEU(tokenize="none", force=True).corpus_score(moses_hyps, [moses_refs]).score
    assert result["bleu_tokenized"] == pytest.approx(expected)
    assert "tok:none" in result["bleu_tokenized_signature"] and result["bleu_tokenized_signature"].endswith("pretok:moses-de")
    assert "bleu" not in result and "chrf" not in result  # never mistaken for sacreBLEU's
    lowered = score_tokenized(hyps, refs, "de", lowercase=True)
    assert lowered["bleu_tokenized"] > result["bleu_tokenized"] and "case:lc" in lowered["bleu_tokenized_signature"]
    # Where Moses and sacreBLEU's 13a split differently (English clitics), the two metrics differ.
    english = (["The man's dog isn't here."], ["The man's cat isn't here."])
    assert score(*english)["bleu"] != pytest.approx(score_tokenized(*english, "en")["bleu_tokenized"])


def test_sacrebleu_tokenizes_each_target_language_as_sacrebleu_l_does():
    """Was: 13a whatever the language; a Chinese sentence, without spaces, was one word (BLEU 0 for a
    hypothesis sacrebleu -l en-zh scores 80)."""
    hyps, refs = ["我很喜欢这只小猫。", "今天天气很好。"], ["我非常喜欢这只小猫。", "今天天气很好。"]
    chinese = score(hyps, refs, "zh")
    assert "tok:zh" in chinese["bleu_signature"]
    assert chinese["bleu"] == pytest.approx(BLEU(tokenize="zh").corpus_score(hyps, [refs]).score) and chinese["bleu"] > 50
    assert score(hyps, refs)["bleu"] < 1 and "tok:13a" in score(hyps, refs, "de")["bleu_signature"]


def test_evaluate_refuses_what_it_would_ignore(tmp_path):
    """Was: a search flag, --checkpoint or --split with --hyp/--ref were ignored, exit 0."""
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Ein Hund läuft.\n", encoding="utf-8")
    ref.write_text("Ein Hund rennt.\n", encoding="utf-8")
    for flags, words in ((["--beam", "7"], "a search flag is for translating a split"),
                         (["--checkpoint", "best"], "--checkpoint is for translating a split"),
                         (["--split", "valid"], "--split is for translating a split"),
                         (["--threads", "4"], "--threads is for translating a split")):
        done = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), *flags)
        assert done.returncode != 0 and words in done.stderr.strip().splitlines()[-1], done.stderr


@pytest.mark.slow
def test_evaluate_tokenized_on_files_and_its_flag_errors(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Ein Hund läuft.\nZwei Katzen!\n", encoding="utf-8")
    ref.write_text("Ein Hund rennt.\nZwei Katzen!\n", encoding="utf-8")
    done = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--tokenized", "--lowercase", "--lang", "de")
    assert done.returncode == 0, done.stderr
    first, signature = done.stdout.splitlines()[:2]
    assert first.startswith("tokenized BLEU ") and "not sacreBLEU" in first and "chrF" not in done.stdout
    assert "case:lc" in signature and "pretok:moses-de" in signature
    no_lang = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--tokenized")
    assert no_lang.returncode != 0 and "--lang" in no_lang.stderr.strip().splitlines()[-1]
    lower_alone = mt("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--lowercase")
    assert lower_alone.returncode != 0 and "--lowercase goes with --tokenized" in lower_alone.stderr


@pytest.mark.slow
def test_evaluate_tokenized_on_an_experiment_files_its_scores_apart(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=4)
    train(exp, cfg)
    done = mt("evaluate", "--exp", str(exp.root), "--checkpoint", "last", "--tokenized", "--json", "--beam", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "bleu_tokenized" in result and "bleu" not in result
    assert exp.score_path("test.tokenized").exists() and not exp.score_path("test").exists()


def test_evaluate_reads_hyp_from_stdin_as_dash(tmp_path):
    """`mt translate ... | mt evaluate --hyp - --ref REF` said "-: no such file"."""
    import subprocess
    import sys

    ref = tmp_path / "ref.de"
    ref.write_text("Ein Hund rennt.\nZwei Katzen!\n", encoding="utf-8")
    args = [sys.executable, "-m", "mt", "evaluate", "--hyp", "-", "--ref", str(ref), "--json"]
    done = subprocess.run(args, input="Ein Hund rennt.\nZwei Katzen!\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and '"bleu": 100.0' in done.stdout, done.stderr
    both = mt("evaluate", "--hyp", "-", "--ref", "-")
    assert both.returncode == 2 and "only one of them can be stdin" in both.stderr
