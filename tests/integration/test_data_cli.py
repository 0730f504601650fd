"""The data steps on the command line: train-tokenizer's one-line refusals (an empty data.train, a
weight that is not above 0) with exit 2, and binarize's summary, whose counts add up (pairs read =
kept + every drop reason, rows written apart) and which --quiet silences."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import mt, toy_corpus  # mt: `mt ARGS` in this process, (exit code, stdout, stderr)

from mt import log
from mt.experiment.paths import Experiment


@pytest.fixture(autouse=True)
def speaking(monkeypatch):
    """`mt -q` sets log.quiet for the process: put it back after each test."""
    monkeypatch.setattr(log, "quiet", False)


def one_error(result: tuple[int, str, str], code: int) -> str:
    got, out, err = result
    assert got == code and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """a.de/en and b.de/en holding the same 200 distinct pairs, and valid.de/en."""
    src, tgt = toy_corpus(260, seed=3)
    pairs = list(dict.fromkeys(zip(src, tgt)))
    assert len(pairs) >= 220
    for name, chosen in (("a", pairs[:200]), ("b", pairs[:200]), ("valid", pairs[200:220])):
        for side, lang in enumerate(("de", "en")):
            (tmp_path / f"{name}.{lang}").write_text("".join(p[side] + "\n" for p in chosen), encoding="utf-8")
    return tmp_path


def tokenizer(capsys, monkeypatch, corpus: Path, exp: Path, *train: str) -> None:
    flags = [flag for spec in train for flag in ("--train", spec)]
    code, _, err = mt(capsys, monkeypatch, "-q", "train-tokenizer", "--exp", exp, *flags, "--valid",
                      f"files:{corpus / 'valid'}", "--src-lang", "de", "--tgt-lang", "en", "--vocab-size", "100",
                      "--set", "tokenizer.byte_fallback=false")
    assert code == 0, err


def test_train_tokenizer_without_training_data_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    line = one_error(mt(capsys, monkeypatch, "train-tokenizer", "--exp", tmp_path / "new"), 2)
    assert line == "error: data.train is empty: give a training corpus with --train SPEC (or start from --recipe)"
    assert not (tmp_path / "new").exists()


def test_no_separate_vocab_makes_a_joint_one_where_the_recipe_says_otherwise(corpus, capsys, monkeypatch):
    """Was: --no-separate-vocab did nothing, and a recipe's `joint: false` trained two vocabularies."""
    recipe = corpus / "separate.yaml"
    recipe.write_text(f"tokenizer:\n  joint: false\n  vocab_size: 60\n  byte_fallback: false\ndata:\n"
                      f"  src_lang: de\n  tgt_lang: en\n  train: [files:{corpus / 'a'}]\n", encoding="utf-8")
    code, _, err = mt(capsys, monkeypatch, "-q", "train-tokenizer", "--exp", corpus / "joint", "--recipe", recipe,
                      "--no-separate-vocab")
    assert code == 0, err
    assert (corpus / "joint" / "tokenizer" / "spm.model").exists() and Experiment(corpus / "joint").load_config().tokenizer.joint
    code, _, err = mt(capsys, monkeypatch, "-q", "train-tokenizer", "--exp", corpus / "two", "--recipe", recipe)
    assert code == 0 and (corpus / "two" / "tokenizer" / "spm.src.model").exists(), err


@pytest.mark.parametrize("weight", ["-1", "0", "-0.5"])
def test_a_weight_not_above_0_is_one_line_naming_the_spec(corpus, capsys, monkeypatch, weight):
    spec = f"files:{corpus / 'a'}*{weight}"
    line = one_error(mt(capsys, monkeypatch, "train-tokenizer", "--exp", corpus / "new", "--train", spec), 2)
    assert line.endswith(f"data.train: {spec!r}: a weight must be above 0 and at most 1000 (*{weight})")
    assert not (corpus / "new").exists()


def table_rows(err: str) -> dict[str, list[str]]:
    """The data table on stderr: {label: cells}."""
    table = err[err.index("binarized data"):]
    return {m.group(1).strip(): m.group(2).split() for m in re.finditer(r"^ +(\S+(?: \S+)*?) {2,}(\S.*?)\s*$", table, re.M)}


def test_binarize_summary_adds_up_with_a_subsample_and_duplicates(corpus, capsys, monkeypatch):
    exp = corpus / "exp"
    tokenizer(capsys, monkeypatch, corpus, exp, f"files:{corpus / 'a'}*0.5", f"files:{corpus / 'b'}")
    shutil.copytree(exp, corpus / "quiet")
    code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp)
    assert code == 0 and out == "", err
    train = json.loads((exp / "data" / "stats.json").read_text())["splits"]["train"]
    sampled = train["sources"][0]["kept"]
    # All 200 distinct pairs are kept: the half that a*0.5 sampled, the rest from b.
    assert train["pairs_kept"] == train["kept"] == 200 and 60 < sampled < 140
    line = f"kept 200 of 400 pairs (empty 0, too long 0, subsampled {200 - sampled}, duplicate {sampled})"
    assert f"train: {line} in " in err
    rows = table_rows(err)
    assert rows["pairs read"] == ["400", "20"] and rows["kept"] == ["200", "20"] and rows["dropped"] == ["200", "0"]
    assert rows["empty"] == rows["too long"] == ["0", "0"]
    assert rows["subsampled"] == [str(200 - sampled), "-"] and rows["duplicate"] == [str(sampled), "-"]
    assert "rows written" not in rows  # one row per kept pair
    table = err[err.index("binarized data"):]
    assert max(map(len, table.splitlines())) <= 80 and "…" not in table

    code, out, err = mt(capsys, monkeypatch, "-q", "binarize", "--exp", corpus / "quiet")
    assert (code, out, err) == (0, "", "")  # no status lines, no table
    assert (corpus / "quiet" / "data" / "stats.json").exists()


def test_binarize_summary_tells_rows_from_pairs_when_upsampling(corpus, capsys, monkeypatch):
    exp = corpus / "exp"
    tokenizer(capsys, monkeypatch, corpus, exp, f"files:{corpus / 'a'}*2")
    code, _, err = mt(capsys, monkeypatch, "binarize", "--exp", exp)
    assert code == 0, err
    assert "train: kept 200 of 200 pairs (empty 0, too long 0); 400 rows written (data.train weights) in " in err
    rows = table_rows(err)
    assert rows["kept"] == ["200", "20"] and rows["rows written"] == ["400", "20"]


def test_the_data_table_fits_80_columns_at_wmt_sizes_with_every_reason(capsys):
    from mt.cli.render import print_data_table

    train = {"pairs_in": 4_508_785, "pairs_kept": 4_100_234, "kept": 8_200_468,
             "dropped": {"invalid_utf8": 12, "malformed": 3, "empty": 1_234, "too_long": 12_345, "ratio": 3_456,
                         "subsampled": 100_000, "duplicate": 291_501},
             "src_tokens": 128_500_000_000, "tgt_tokens": 130_200_000_000, "mean_src_len": 27.3, "mean_tgt_len": 28.1,
             "segmentations": {"copies": 2, "sampling_alpha": 0.3}}
    valid = {"pairs_in": 3_000, "kept": 3_000, "dropped": {"empty": 0, "too_long": 0},  # no pairs_kept: an old stats.json
             "src_tokens": 81_000, "tgt_tokens": 84_000, "mean_src_len": 27.0, "mean_tgt_len": 28.0}
    assert train["pairs_kept"] + sum(train["dropped"].values()) == train["pairs_in"]
    print_data_table({"splits": {"train": train, "valid": valid, "test": dict(valid, pairs_in=3_003, kept=3_003)}})
    err = capsys.readouterr().err
    assert max(map(len, err.splitlines())) <= 80 and "…" not in err
    rows = table_rows(err)
    assert rows["kept"] == ["4,100,234", "3,000", "3,003"] and rows["dropped"] == ["408,551", "0", "0"]
    assert rows["invalid utf8"] == ["12", "-", "-"] and rows["duplicate"] == ["291,501", "-", "-"]
    assert rows["rows written"] == ["4,100,234×2", "3,000", "3,003"]


def test_binarize_force_builds_data_again_until_a_model_is_trained_on_it(tmp_path, capsys, monkeypatch):
    from helpers import tiny_experiment

    from mt.data.dataset import ParallelData
    from mt.experiment.paths import Experiment

    exp, _ = tiny_experiment(tmp_path, {"train": 200, "valid": 10, "test": 10}, model={}, train={}, decode={})
    before = len(ParallelData(exp, "train"))
    code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp.root, "--max-len", "6")
    assert code == 2 and "data.max_len" in err and "--force" not in out  # frozen by data/ without --force
    code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp.root, "--force", "--max-len", "2")
    assert code == 1 and "has no usable pairs" in err  # a rebuild that fails leaves data/ as it was
    assert len(ParallelData(exp, "train")) == before and not list(exp.root.glob(".data-*"))
    code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp.root, "--force", "--max-len", "12")
    assert code == 0, err
    after = len(ParallelData(Experiment(exp.root), "train"))
    assert 0 < after < before and exp.load_config().data.max_len == 12
    assert not list(exp.root.glob(".data-*"))  # the old data/ and the build directory are gone
    (exp.checkpoints_dir).mkdir(exist_ok=True)
    (exp.checkpoints_dir / "last.pt").write_bytes(b"trained on it")
    code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp.root, "--force")
    assert code == 1 and "holds a model trained on it" in err and len(err.strip().splitlines()) == 1
    assert len(ParallelData(exp, "train")) == after


def test_binarize_is_refused_while_a_trainer_holds_the_experiment(tmp_path, capsys, monkeypatch):
    """Was: `binarize --force` replaced data/ under a running trainer (no checkpoint yet), whose resume
    then read other data without a word."""
    import subprocess
    import sys

    from helpers import tiny_experiment

    from mt.data.dataset import ParallelData

    exp, _ = tiny_experiment(tmp_path, {"train": 200, "valid": 10, "test": 10}, model={}, train={}, decode={})
    before = len(ParallelData(exp, "train"))
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom mt.experiment.paths import Experiment\n"
                               "from mt.experiment.lock import experiment_lock\n"
                               f"with experiment_lock(Experiment({str(exp.root)!r})):\n"
                               "    print('held', flush=True)\n    time.sleep(60)\n"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out, err = mt(capsys, monkeypatch, "binarize", "--exp", exp.root, "--force", "--max-len", "12")
        assert code == 1 and f"already being trained or binarized by process {holder.pid}" in err
        assert err.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in err, err
        assert len(ParallelData(exp, "train")) == before
        # a tokenizer trained beside it is refused too, and the config is left as it was (was: two
        # train-tokenizer runs at once both wrote, the config of one and the model of the other)
        config = exp.config_path.read_bytes()
        for path in exp.tokenizer_dir.iterdir():
            path.unlink()
        code, out, err = mt(capsys, monkeypatch, "train-tokenizer", "--exp", exp.root, "--vocab-size", "123")
        assert code == 1 and f"already being trained or binarized by process {holder.pid}" in err, err
        assert exp.config_path.read_bytes() == config and not list(exp.tokenizer_dir.iterdir())
    finally:
        holder.kill()
        holder.wait()


def test_counts_in_the_data_table_take_the_unit_of_their_rounded_figure():
    """999,600 tokens showed as "1000k" and 999.96M as "1000.0M"."""
    from mt.cli.render import count

    assert [count(n) for n in (99_999, 100_000, 999_499, 999_600, 1_234_567, 999_960_000, 2_500_000_000)] == [
        "99,999", "100k", "999k", "1.0M", "1.2M", "1.0B", "2.5B"]
