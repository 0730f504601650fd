"""`mt plot` and `mt report` on a tiny trained and evaluated experiment.

The curves are one real PNG for one or several experiments, resumed logs are read as one run, and
the report is one HTML page whose images are embedded PNGs, with every section filled in (and a
note, not a failure, where an input is missing).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import mt as run_mt  # `mt ARGS` in this process: (exit code, stdout, stderr)
from helpers import one_thread

from mt.apps.evaluate import evaluate_split
from mt.apps.report.info import experiment_info, experiment_record
from mt.apps.report.page import build_report, report
from mt.apps.report.plot import plot
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.training.train_log import load_train_log


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def experiment(trained_experiment, tmp_path_factory) -> Experiment:
    """A copy of conftest's trained experiment (40 steps, validation every 15) with its test split
    translated and scored."""
    exp = Experiment(tmp_path_factory.mktemp("report") / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    with one_thread():
        evaluate_split(exp, exp.load_config(), "test")
    return exp


@pytest.mark.slow
def test_curves_of_one_and_several_experiments(experiment, tmp_path):
    path = plot([experiment], tmp_path / "one.png")
    width, height = png_size(path.read_bytes())
    assert width >= 800 and height >= 800 and path.stat().st_size > 20_000
    other = Experiment(tmp_path / "other")
    other.root.mkdir()
    shutil.copy(experiment.train_log_path, other.train_log_path)
    both = plot([experiment, other], tmp_path / "two.png")
    assert png_size(both.read_bytes()) == (width, height)
    assert both.read_bytes() != path.read_bytes()
    with pytest.raises(MtError, match="exists.*--force"):
        plot([experiment], path)
    plot([experiment], path, force=True)
    with pytest.raises(MtError, match="no training log"):
        plot([Experiment(tmp_path)], tmp_path / "none.png")


def test_a_resumed_log_reads_as_one_run(tmp_path):
    records = [{"step": s, "loss": 10 - s, "ppl": 9.0, "lr": 1e-4, "elapsed": s} for s in (10, 20, 30)]
    records.append({"step": 20, "elapsed": 20, "valid_loss": 5.0, "valid_ppl": 7.0, "valid_nll": 2.0})
    records += [{"step": s, "loss": 1.0, "ppl": 3.0, "lr": 2e-4, "elapsed": s} for s in (30, 40)]  # resumed at 20
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + '\n{"step": 50, "lo')  # cut by a kill
    train, valid = load_train_log(path)
    assert [r["step"] for r in train] == [10, 20, 30, 40]
    assert train[2]["loss"] == 1.0
    assert [r["step"] for r in valid] == [20]


def test_info_reads_a_resumed_log_as_plot_does(experiment, tmp_path):
    resumed = Experiment(tmp_path / "exp")
    resumed.root.mkdir()
    shutil.copy(experiment.config_path, resumed.config_path)
    records = [{"step": s, "loss": 10.0 - s, "ppl": 9.0, "tgt_tokens_per_s": 100, "elapsed": s} for s in (10, 20, 30)]
    records.append({"step": 30, "valid_loss": 0.2, "valid_nll": 0.1, "valid_ppl": 1.11, "elapsed": 30})
    records += [{"step": 20, "loss": 1.5, "ppl": 4.5, "tgt_tokens_per_s": 200, "elapsed": 20},  # resumed at 20
                {"step": 20, "valid_loss": 1.2, "valid_nll": 1.0, "valid_ppl": 2.72, "elapsed": 20}]
    resumed.train_log_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    training = experiment_info(resumed)["training"]
    assert training["last step"] == 20 and training["train loss / ppl"] == "1.500 / 4.50"
    assert training["best valid ppl"] == "2.72 (step 20)"  # step 30's validation belonged to the superseded run


def test_report_is_one_page_with_every_section(experiment, tmp_path):
    path = report(experiment, tmp_path / "report.html", samples=5)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for title in ("Experiment", "Data", "Training", "Scores", "Sample translations", "Attention"):
        assert f"<h2>{title}</h2>" in page
    assert "not available" not in page, re.findall(r"not available[^<]*", page)
    assert not re.search(r"(src|href)=['\"](?!data:)", page)  # nothing outside the page
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(images) == 3  # curves, alignment, every layer
    for data in images:
        width, height = png_size(base64.b64decode(data))
        assert width >= 200 and height >= 150
    score = json.loads(experiment.score_path("test").read_text())
    assert score["bleu_signature"] in page and f"{score['bleu']:.2f}" in page
    hyps = experiment.hyp_path("test").read_text().splitlines()
    shown = [h for h in hyps if f"<td class=hyp>{h}</td>" in page]
    assert len(shown) >= 3  # sample rows (two samples may share a translation)
    assert "kept" in page and "20" in page
    with pytest.raises(MtError, match="exists"):
        report(experiment, path)


def test_report_notes_what_is_missing(experiment, tmp_path):
    bare = Experiment(tmp_path / "bare")
    bare.root.mkdir()
    shutil.copy(experiment.config_path, bare.config_path)
    page = build_report(bare)
    assert page.count("class='missing'") == 5  # all but the config: nothing trained, binarized or scored
    assert "mt evaluate" in page and "mt binarize" in page


@pytest.mark.slow
def test_cli_report_and_plot(experiment, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MT_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "mt", "plot", "--exp", str(experiment.root), "--exp",
                           str(tmp_path / "missing"), "-o", str(tmp_path / "c.png")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "missing" in done.stderr
    assert not (tmp_path / "c.png").exists()
    done = subprocess.run([sys.executable, "-m", "mt", "report", "--exp", str(experiment.root), "-o",
                           str(tmp_path / "r.html"), "--samples", "2", "--threads", "1"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "r.html") and (tmp_path / "r.html").stat().st_size > 50_000


def test_the_scores_record_how_they_were_decoded(experiment):
    from mt.apps.evaluate import decode_record
    from mt.decoding.options import DecodeOptions

    saved = json.loads(experiment.score_path("test").read_text())
    assert saved["decode"] == decode_record(DecodeOptions().resolved(experiment.load_config().decode))  # as `mt run` compares


def one_line_cli_error(code: int, out: str, err: str, *needles: str) -> str:
    assert code != 0 and out == "" and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def test_report_refuses_a_named_checkpoint_or_sentence_it_cannot_use(experiment, tmp_path, capsys, monkeypatch):
    page = tmp_path / "r.html"
    truncated = tmp_path / "trunc.pt"
    data = experiment.checkpoint_path("last").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(MtError, match="truncated") as info:
        report(experiment, page, checkpoint=str(truncated))
    assert str(info.value).startswith(f"{truncated}: ") and "\n" not in str(info.value)
    for sentence in ("", "   "):
        with pytest.raises(MtError, match="--sentence is empty"):
            report(experiment, page, sentence=sentence)
    flags = [["--checkpoint", str(truncated)], ["--checkpoint", "nope"], ["--sentence", ""],
             ["--sentence", " ", "--checkpoint", "last"]]
    needles = [str(truncated), "no checkpoint 'nope'", "--sentence is empty", "--sentence is empty"]
    for args, needle in zip(flags, needles):
        done = run_mt(capsys, monkeypatch, "report", "--exp", experiment.root, "-o", page, "--threads", "1", *args)
        one_line_cli_error(*done, needle)
        assert not page.exists() and not list(tmp_path.glob(".r.html.*"))
    # A sentence with nothing the tokenizer reads (zero-width spaces), or no checkpoint to translate it
    # with: refused (the page was written, its attention "not available", exit 0).
    with pytest.raises(MtError, match="nothing to translate"):
        report(experiment, page, sentence="\u200b\u200b")
    bare = Experiment(tmp_path / "bare")
    bare.root.mkdir()
    shutil.copy(experiment.config_path, bare.config_path)
    shutil.copytree(experiment.root / "tokenizer", bare.root / "tokenizer")
    with pytest.raises(MtError, match="train first"):
        report(bare, page, sentence="Ein Mann läuft.")
    assert not page.exists()
    # Named and usable: the page shows that checkpoint's attention.
    report(experiment, page, samples=1, sentence="Ein Mann läuft.", checkpoint="last")
    text = page.read_text(encoding="utf-8")
    assert "not available" not in text.split("<h2>Attention</h2>")[1] and "Ein Mann läuft." in text
    assert "<td>last.pt</td>" in text


def test_report_refuses_a_directory_as_output(experiment, tmp_path):
    (tmp_path / "r.html").mkdir()
    for force in (False, True):
        with pytest.raises(MtError, match="is a directory"):
            report(experiment, tmp_path / "r.html", force=force)


@pytest.mark.parametrize("content", ['{"bleu": 1.0, "chrf": 2.0}', "[1, 2]", '"text"', '{"bleu": "x", "chrf": 1}'])
def test_info_names_a_scores_file_it_cannot_read_as_report_notes_it(experiment, tmp_path, capsys, monkeypatch,
                                                                       content):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, exp.root, ignore=shutil.ignore_patterns("checkpoints"))
    scores = exp.score_path("test")
    scores.write_text(content, encoding="utf-8")
    with pytest.raises(MtError) as info:
        experiment_info(exp)
    assert str(info.value).startswith(f"{scores}: unexpected content") and "\n" not in str(info.value)
    for json_flag in ([], ["--json"]) if content[0] != "{" else ([],):  # --json prints an object as it was saved
        one_line_cli_error(*run_mt(capsys, monkeypatch, "info", "--exp", exp.root, *json_flag), str(scores))
    page = build_report(exp, samples=0)  # the report notes it and goes on
    assert "<h2>Scores</h2>\n<p class='missing'>not available" in page
    # Damaged data statistics are named the same way.
    exp.data_stats_path.write_text('{"splits": {"train": {"pairs_in": 3}}}', encoding="utf-8")
    scores.unlink()
    with pytest.raises(MtError, match=f"^{re.escape(str(exp.data_stats_path))}: unexpected content"):
        experiment_info(exp)


def test_a_resumed_runs_first_training_record_ends_the_validations_logged_after_its_checkpoint(tmp_path):
    """A run killed while saving at step 30 left its validation there; resumed from step 20, its records
    replace the training records from 24 on, and now the validation at 30 too (it stayed, the best of a
    step that no longer exists, until the resumed run validated again)."""
    records = [{"step": s, "loss": 2.0, "ppl": 7.4, "elapsed": s} for s in (10, 20, 30)]
    records.append({"step": 30, "valid_loss": 1.0, "valid_nll": 1.0, "valid_ppl": 2.7, "elapsed": 30})
    records.append({"step": 24, "loss": 1.5, "ppl": 4.5, "elapsed": 24})  # the resumed run's first
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    train, valid = load_train_log(path)
    assert [r["step"] for r in train] == [10, 20, 24] and valid == []


def test_info_shows_what_a_log_holds_without_a_traceback_or_a_nan_best(experiment, tmp_path, capsys, monkeypatch):
    """A record without a field, or with text for a number, was a KeyError's or a ValueError's
    traceback; a NaN validation was "the best" (every comparison with NaN is false); --json wrote NaN,
    which JSON readers refuse."""
    odd = Experiment(tmp_path / "exp")
    odd.root.mkdir()
    shutil.copy(experiment.config_path, odd.config_path)
    records = [{"step": 10, "loss": 2.0, "ppl": 7.4, "tgt_tokens_per_s": 100, "elapsed": 10},
               {"step": 10, "valid_loss": float("nan"), "valid_nll": float("nan"), "valid_ppl": float("nan")},
               {"step": 20, "valid_loss": 1.0, "valid_nll": 1.0, "valid_ppl": 2.72},
               {"step": 30, "loss": "2.0", "ppl": float("inf")}]  # text for a number, fields missing
    odd.train_log_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    training = experiment_info(odd)["training"]
    assert training["best valid ppl"] == "2.72 (step 20)"
    assert training["train loss / ppl"].startswith("- / inf") and training["tgt tokens/s"] == "-"
    code, out, err = run_mt(capsys, monkeypatch, "info", "--exp", str(odd.root), "--json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out, err
    assert json.loads(out)["training"]["train_ppl"] is None
    # plot draws what it can: an elapsed time that is no number was a TypeError's traceback; `--exp .`
    # names the run by its directory (the legend and the report's title were empty)
    with odd.train_log_path.open("a") as log:
        log.write(json.dumps({"step": 40, "loss": 1.5, "ppl": 4.5, "elapsed": None}) + "\n")
    monkeypatch.chdir(odd.root)
    code, out, err = run_mt(capsys, monkeypatch, "plot", "--exp", ".", "-o", str(tmp_path / "c.png"))
    assert code == 0 and (tmp_path / "c.png").is_file(), err
    from mt.apps.report.plot import run_names

    assert run_names([Experiment(".")]) == ["exp"]


def test_info_names_the_best_validation_by_the_metric_that_made_best_pt(experiment, tmp_path):
    """With train.best_metric bleu, "best valid ppl (step 100)" pointed at the lowest NLL's step while
    best.pt was the highest BLEU's (step 200)."""
    from mt.config.schema import save_yaml

    exp = Experiment(tmp_path / "exp")
    exp.root.mkdir()
    cfg = experiment.load_config()
    cfg.train.valid_bleu, cfg.train.best_metric = True, "bleu"
    exp.config_path.write_text(save_yaml(cfg))
    records = [{"step": 100, "valid_loss": 2.0, "valid_nll": 2.0, "valid_ppl": 7.39, "valid_bleu": 25.0},
               {"step": 200, "valid_loss": 2.1, "valid_nll": 2.1, "valid_ppl": 8.17, "valid_bleu": 27.0}]
    exp.train_log_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    training = experiment_info(exp)["training"]
    assert training["best valid BLEU / ppl"] == "27.00 / 8.17 (step 200)" and "best valid ppl" not in training
    assert experiment_record(exp)["training"]["best_valid_bleu"] == 27.0


def test_text_with_dollars_is_drawn_as_written(experiment, tmp_path):
    """matplotlib read "$...$" in a sentence, token or run name as TeX math: a parser's traceback, or
    text drawn garbled."""
    named = Experiment(tmp_path / "run_$^$")
    named.root.mkdir()
    shutil.copy(experiment.train_log_path, named.train_log_path)
    assert plot([named], tmp_path / "dollars.png").stat().st_size > 0


def test_report_shows_tokenized_scores(experiment, tmp_path):
    """`mt evaluate --tokenized` writes scores/SPLIT.tokenized.json, which `mt info` shows; the report
    said there were no scores."""
    scored = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, scored.root)
    shutil.rmtree(scored.root / "scores")
    with one_thread():
        evaluate_split(scored, scored.load_config(), "test", tokenized=True)
    page = build_report(scored)
    assert "test (tokenized)" in page and "no scores in" not in page and "stale" not in page
    # a checkpoint saved after them: stale in the report as in `mt info` (the report said nothing)
    record = scored.score_path("test.tokenized")
    os.utime(record, (record.stat().st_atime - 3600, record.stat().st_mtime - 3600))
    checkpoint = scored.checkpoints_dir / json.loads(record.read_text())["checkpoint"]
    shutil.copy(scored.step_checkpoints()[0], checkpoint)  # another model saved under its name
    assert experiment_record(scored)["scores"]["test.tokenized"]["stale"]
    assert "stale: " in build_report(scored)


def test_scores_of_a_checkpoint_saved_again_while_they_were_made_are_stale(experiment, tmp_path):
    """Evaluated while training went on: the checkpoint was read, saved again, then the scores written.
    Its time was older than theirs, so they were shown (and `mt run` kept them) as the new model's."""
    from mt.apps.evaluate import stale

    scored = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, scored.root)
    cfg = scored.load_config()
    with one_thread():
        record = evaluate_split(scored, cfg, "test")
    assert stale(scored, cfg, "test", record) == []
    checkpoint = scored.checkpoints_dir / record["checkpoint"]
    written = scored.score_path("test").stat().st_mtime_ns
    os.utime(checkpoint, ns=(written - 10**9, written - 10**9))  # copied without its times: the same file
    assert stale(scored, cfg, "test", record) == []
    shutil.copy(scored.step_checkpoints()[0], checkpoint)  # training saved it again meanwhile
    os.utime(checkpoint, ns=(written - 10**9, written - 10**9))  # before the scores were written
    assert stale(scored, cfg, "test", record) == [f"{checkpoint.name} saved since"]


def test_sample_sentence_bleu_tokenizes_as_the_target_language_does():
    """The report's sentence BLEU (its samples' table, now through sacrebleu_bleu with the pair's target)
    used 13a for every target: a Chinese sentence one character off its reference scored 0.0."""
    from mt.metrics import sacrebleu_bleu

    hyp, ref = "我今天很喜欢这只小猫。", "我今天很喜欢那只小猫。"
    assert sacrebleu_bleu("zh", effective_order=True).sentence_score(hyp, [ref]).score > 50
    assert sacrebleu_bleu("en", effective_order=True).sentence_score(hyp, [ref]).score == 0.0  # 13a: one word


def test_references_changed_while_a_split_is_translated_make_its_scores_stale(experiment, tmp_path, monkeypatch):
    """The split's digest was taken after the search: references fixed meanwhile were recorded as the
    ones scored, and the old scores passed as current."""
    from mt.apps.evaluate import stale
    from mt.decoding.translator import Translator

    scored = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, scored.root)
    cfg = scored.load_config()
    (source,) = cfg.data.sources("test")
    copies = [tmp_path / Path(path).name for path in source.paths]  # the shared experiment's files stay
    for path, copy in zip(source.paths, copies):
        shutil.copy(path, copy)
    cfg.data.test = [f"files:{copies[0]}|{copies[1]}"]
    translator = Translator.load(scored, cfg)
    search = translator.search

    def search_then_fix_the_references(*args, **kwargs):
        found = search(*args, **kwargs)
        copies[1].write_text(copies[1].read_text(encoding="utf-8").replace("e", "E"), encoding="utf-8")
        return found

    monkeypatch.setattr(translator, "search", search_then_fix_the_references)
    with one_thread():
        record = evaluate_split(scored, cfg, "test", translator)
    assert stale(scored, cfg, "test", record) == ["the test split's lines changed since"]


def test_a_log_axis_labels_its_ticks_as_plain_numbers():
    """The perplexity panel's ticks read "$\\mathdefault{10^{2}}$": a log axis writes them as TeX, which
    mt's figures draw as written."""
    from mt.apps.report.plot import training_curves

    train = [{"step": s, "loss": 9.0 - s / 100, "ppl": 6000.0 / s, "lr": 1e-3, "elapsed": s} for s in range(10, 400, 10)]
    valid = [{"step": s, "valid_loss": 8.0 - s / 100, "valid_ppl": 5000.0 / s, "elapsed": s} for s in (100, 200, 300)]
    fig = training_curves([("run", train, valid)])
    fig.canvas.draw()
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels(which="both") if t.get_text()]
    assert labels and not any("$" in label or "mathdefault" in label for label in labels), labels
    assert any(label in ("10", "20", "50", "100", "200", "500") for label in labels), labels
