"""mt backtranslate: target-language text translated by a reverse model into tagged synthetic pairs, in
chunks that survive a kill; the <BT> tag reaches the tokenizer whole and only the synthetic sources;
the recipe step chains it and is skipped when done."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import unicodedata

import pytest
from helpers import toy_corpus

from mt.apps.backtranslate import backtranslate, noisy
from mt.apps.chunked import chunk_paths
from mt.apps.run import run_recipe
from mt.config.sources import parse_source
from mt.data.binarize import binarize
from mt.data.dataset import ParallelData
from mt.data.train_tokenizer import train_tokenizer
from mt.decoding.options import DecodeOptions, Sampling
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import BACK_TRANSLATION_TAG, NOISE_FILLER, Tokenizer

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
pytestmark = pytest.mark.usefixtures("single_thread")


def mt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=ENV, timeout=300)


def german_text(tmp_path, n: int = 60, empty: int = 0) -> tuple:
    """A monolingual German file (the reverse model's source language), with `empty` blank lines among it."""
    lines = toy_corpus(n, seed=7)[0]
    written = lines[:10] + [""] * empty + lines[10:]
    path = tmp_path / "mono.de"
    path.write_text("\n".join(written) + "\n", encoding="utf-8")
    return path, lines


def test_backtranslation_writes_the_reverse_models_translations_and_a_reversed_config(trained_experiment, tmp_path):
    reverse = trained_experiment  # de -> en
    path, lines = german_text(tmp_path, empty=2)
    path.write_bytes(path.read_bytes() + b"\xff kaputt\n")  # not text: left out, counted
    final = Experiment(tmp_path / "en-de")
    manifest = backtranslate(reverse, final, [f"text:{path}"], DecodeOptions(beam=2), chunk_lines=25)
    out = final.root / "backtranslate"
    reverse_cfg = reverse.load_config()
    reverse_cfg.decode.beam = 2
    assert (out / "train.de").read_text(encoding="utf-8").splitlines() == lines  # the real text, empty lines left out
    assert (out / "train.en").read_text(encoding="utf-8").splitlines() == Translator.load(reverse, reverse_cfg).translate(lines)
    assert manifest["lines"] == 60 and manifest["empty_lines_skipped"] == 2 and manifest["chunks"] == 3
    assert manifest["invalid_lines_skipped"] == 1
    assert manifest["search"] == "beam" and manifest["beam"] == 2 and manifest["tagged"] is True
    cfg = final.load_config()
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("en", "de")
    assert cfg.data.train == [*reverse_cfg.data.train, f"bt:files:{out.resolve() / 'train'}"] == [*reverse_cfg.data.train, manifest["corpus"]]
    assert cfg.data.test == reverse_cfg.data.test  # read en -> de: files:PREFIX names both sides
    assert cfg.decode == reverse.load_config().decode  # --beam 2 was the reverse model's search only
    # Done: a second call says so and translates nothing, whatever it is asked.
    assert backtranslate(reverse, final, [f"text:{path}"], DecodeOptions(beam=3)) == manifest



def test_a_line_without_letters_is_copied_not_made_up(trained_experiment, tmp_path):
    """Searched, "12345" or a rule of dashes came back an invented sentence: a synthetic source of
    content not there. Copied, as `mt translate` copies it."""
    path, lines = german_text(tmp_path, n=6)
    path.write_text("\n".join([lines[0], "12345", "-----", lines[1]]) + "\n", encoding="utf-8")
    final = Experiment(tmp_path / "en-de")
    backtranslate(trained_experiment, final, [f"text:{path}"], DecodeOptions(beam=2))
    sources = (final.root / "backtranslate" / "train.en").read_text(encoding="utf-8").splitlines()
    assert sources[1:3] == ["12345", "-----"]
    reverse_cfg = trained_experiment.load_config()
    reverse_cfg.decode.beam = 2
    assert [sources[0], sources[3]] == Translator.load(trained_experiment, reverse_cfg).translate([lines[0], lines[1]])


def test_the_tag_reaches_the_tokenizer_whole_and_only_the_synthetic_sources(trained_experiment, tmp_path):
    path, lines = german_text(tmp_path)
    final = Experiment(tmp_path / "en-de")
    backtranslate(trained_experiment, final, [f"text:{path}"], DecodeOptions(beam=1), noise=True)
    cfg = final.load_config()
    cfg.tokenizer.vocab_size = 120
    train_tokenizer(final, cfg)
    tokenizer = Tokenizer.load(final.spm_model_path("joint"))
    tag = tokenizer.symbol_id(BACK_TRANSLATION_TAG)
    pieces = tokenizer.pieces(tokenizer.encode([f"Haus {BACK_TRANSLATION_TAG} Haus"])[0])
    assert tag is not None and pieces.count(BACK_TRANSLATION_TAG) == 1 and not any("BT" in p for p in pieces if p != BACK_TRANSLATION_TAG)
    filler = tokenizer.symbol_id(NOISE_FILLER)
    assert filler is not None and tokenizer.encode([f"a {NOISE_FILLER} b"])[0].count(filler) == 1
    stats = binarize(final, cfg)
    data = ParallelData(final, "train")
    tagged = [i for i in range(len(data)) if data.src(i)[0] == tag]
    synthetic = stats["splits"]["train"]["sources"][1]
    assert synthetic["source"].startswith("bt:") and len(tagged) == synthetic["rows"] > 0  # its own counts
    assert tagged == list(range(len(data) - len(tagged), len(data)))  # the real pairs (first) have no tag
    assert all(tag not in data.src(i)[1:] for i in range(len(data)))


def test_untagged_backtranslation_adds_plain_pairs(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=20)
    final = Experiment(tmp_path / "en-de")
    manifest = backtranslate(trained_experiment, final, [f"text:{path}"], DecodeOptions(beam=1), tagged=False, weight=2)
    assert manifest["corpus"] == f"files:{(final.root / 'backtranslate' / 'train').resolve()}*2"
    cfg = final.load_config()
    assert cfg.data.train[-1] == manifest["corpus"]
    train_tokenizer(final, cfg)
    assert Tokenizer.load(final.spm_model_path("joint")).symbol_id(BACK_TRANSLATION_TAG) is None


def test_the_target_side_of_a_parallel_spec_is_monolingual_text(trained_experiment, tmp_path):
    german_lines, english_lines = toy_corpus(20, seed=7)
    (tmp_path / "par.de").write_text("\n".join(german_lines) + "\n", encoding="utf-8")
    (tmp_path / "par.en").write_text("\n".join(english_lines) + "\n", encoding="utf-8")
    parallel = f"files:{tmp_path / 'par'}"  # files:PREFIX: PREFIX.de is the German side
    final = Experiment(tmp_path / "en-de")
    manifest = backtranslate(trained_experiment, final, [parallel], DecodeOptions(beam=1))
    german = (final.root / "backtranslate" / "train.de").read_text(encoding="utf-8")
    assert german == (tmp_path / "par.de").read_text(encoding="utf-8")
    assert manifest["lines"] == 20 and manifest["held_out_lines_skipped"] == 0
    # The valid split itself as monolingual text: its references, nothing to back-translate (was: taken)
    with pytest.raises(MtError, match="every line is a reference of the valid or test split"):
        backtranslate(trained_experiment, Experiment(tmp_path / "leak"), [trained_experiment.load_config().data.valid[0]])


def test_sampled_backtranslation_differs_from_beam_and_draws_per_chunk(trained_experiment, tmp_path):
    path, lines = german_text(tmp_path, n=40)
    beam = backtranslate(trained_experiment, Experiment(tmp_path / "beam"), [f"text:{path}"], DecodeOptions(beam=1), chunk_lines=20)
    sampled = backtranslate(trained_experiment, Experiment(tmp_path / "sampled"), [f"text:{path}"],
                            options=DecodeOptions(sampling=Sampling()), chunk_lines=20)
    assert beam["search"] == "beam" and sampled["search"] == "sampling" and sampled["seed"] == 1
    read = [(tmp_path / name / "backtranslate" / "train.en").read_text(encoding="utf-8").splitlines() for name in ("beam", "sampled")]
    assert read[0] != read[1] and len(read[1]) == 40


def test_a_killed_backtranslation_resumes_to_the_same_corpus(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=200)
    reverse = str(trained_experiment.root)
    args = ["--reverse", reverse, "--mono", f"text:{path}", "--chunk-lines", "20", "--sample", "--top-k", "5"]
    straight = mt("backtranslate", "--exp", str(tmp_path / "straight"), *args)
    assert straight.returncode == 0, straight.stderr
    assert straight.stdout.strip() == f"bt:files:{(tmp_path / 'straight' / 'backtranslate' / 'train').resolve()}"
    killed = Experiment(tmp_path / "killed")
    process = subprocess.Popen([sys.executable, "-m", "mt", "backtranslate", "--exp", str(killed.root), *args], env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not chunk_paths(killed.root / "backtranslate", 1)[1].exists():
        assert process.poll() is None and time.time() < deadline, "the second chunk never appeared"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed.root / "backtranslate" / "manifest.json").exists()
    resumed = mt("backtranslate", "--exp", str(killed.root), *args)
    assert resumed.returncode == 0, resumed.stderr
    assert "done already" in resumed.stderr and " 0 done already" not in resumed.stderr
    for name in ("train.en", "train.de"):
        assert (killed.root / "backtranslate" / name).read_bytes() == (tmp_path / "straight" / "backtranslate" / name).read_bytes()
    # Other search flags on a resume are refused: the chunks done were drawn otherwise.
    (killed.root / "backtranslate" / "manifest.json").unlink()
    changed = mt("backtranslate", "--exp", str(killed.root), *args[:-1], "6")
    assert changed.returncode == 2 and "top_k 5 (now 6)" in changed.stderr and "Traceback" not in changed.stderr


def test_noise_deletes_replaces_and_shuffles_locally():
    rng = random.Random(3)
    words = [f"w{i}" for i in range(50)]
    deleted = filled = 0
    for _ in range(400):
        out = noisy(" ".join(words), rng).split()
        kept = [w for w in out if w != NOISE_FILLER]
        deleted += 50 - len(out)
        filled += len(out) - len(kept)
        order = [int(w[1:]) for w in kept]
        # A word moves at most 3 places against the others that were kept (fillers hold places too).
        survivors = sorted(order)
        assert all(abs(survivors.index(n) - i) <= 3 for i, n in enumerate(order))
    assert 0.08 < deleted / 20000 < 0.12 and 0.08 < filled / 20000 < 0.12
    assert noisy("a b c d", random.Random(1)) == noisy("a b c d", random.Random(1))
    # A line without spaces (Chinese) was one word: deleted whole one time in ten, else left as it was.
    chinese = "我们今天去北京看长城然后吃晚饭" * 3
    outs = [noisy(chinese, random.Random(seed)) for seed in range(200)]
    fillers = re.compile(rf"{re.escape(NOISE_FILLER)}(?: {re.escape(NOISE_FILLER)})*")
    assert all(outs) and not any(" " in fillers.sub("", out) for out in outs)  # a space between fillers alone
    kept = sum(len(out.replace(NOISE_FILLER, "")) for out in outs) / (200 * len(chinese))
    assert 0.75 < kept < 0.85 and sum(out.count(NOISE_FILLER) for out in outs) / (200 * len(chinese)) > 0.08
    # Thai's vowel signs and tone marks stay with their letter (one came first in a line, or after a space)
    for seed in range(100):
        out = noisy("ภาษาไทย ง่ายนิดเดียว", random.Random(seed))
        marks = [k for k, char in enumerate(out) if unicodedata.category(char).startswith("M")]
        assert all(k > 0 and not out[k - 1].isspace() and out[k - 1] != ">" for k in marks), out

    class Still(random.Random):  # no word deleted, replaced or moved
        def random(self):
            return 0.5

        def uniform(self, a, b):
            return 0.0

    for line in ("ภาษาไทย ง่ายนิดเดียว", "使用 Python 编程很有趣。", "a b c"):  # the spaces stay where they were
        assert noisy(line, Still()) == line


def test_refusals_are_one_line_and_write_nothing(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=10)
    mono = [f"text:{path}"]
    with pytest.raises(ConfigError, match="choose one"):
        backtranslate(trained_experiment, Experiment(tmp_path / "a"), mono, options=DecodeOptions(sampling=Sampling()), noise=True)
    with pytest.raises(MtError, match="no such file"):
        backtranslate(trained_experiment, Experiment(tmp_path / "b"), [f"text:{tmp_path / 'missing.de'}"])
    blank = tmp_path / "blank.de"
    blank.write_text("\n\n", encoding="utf-8")
    with pytest.raises(MtError, match="no text to back-translate"):
        backtranslate(trained_experiment, Experiment(tmp_path / "c"), [f"text:{blank}"])
    same_way = Experiment(tmp_path / "de-en")  # a config of the reverse's own direction
    same_way.root.mkdir()
    same_way.config_path.write_text(trained_experiment.config_path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError, match="not en->de, the reverse of --exp"):
        backtranslate(trained_experiment, same_way, mono)
    with pytest.raises(ConfigError, match="valid and test are real text"):
        parse_source("bt:files:x", "valid", ("en", "de"))
    for name in ("a", "b", "c"):  # refused before anything was written
        assert not (tmp_path / name).exists(), name
    assert not (tmp_path / "de-en" / "backtranslate").exists()
    with pytest.raises(ConfigError, match="--chunk-lines 0"):
        backtranslate(trained_experiment, Experiment(tmp_path / "e"), mono, chunk_lines=0)
    with pytest.raises(ConfigError, match="leave out --no-tag"):
        backtranslate(trained_experiment, Experiment(tmp_path / "f"), mono, noise=True, tagged=False)
    with pytest.raises(ConfigError, match="--mono 'tsv:"):
        backtranslate(trained_experiment, Experiment(tmp_path / "g"), ["tsv:x.tsv:fr-it"])
    # A weight the corpus spec cannot hold (was: a config.yaml nothing could load, and "done")
    with pytest.raises(ConfigError, match="--weight 5000.0: must be above 0 and at most 1000"):
        backtranslate(trained_experiment, Experiment(tmp_path / "h"), mono, weight=5000.0)
    with pytest.raises(ConfigError, match="--seed 18446744073709551615: must be from 0 to"):  # was: a traceback
        Sampling(seed=2**64 - 1)
    assert not any((tmp_path / name).exists() for name in "efgh")
    done = mt("backtranslate", "--exp", str(tmp_path / "d"), "--reverse", str(trained_experiment.root), "--mono",
              f"text:{path}", "--top-k", "3")
    assert done.returncode == 2 and "go with --sample" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_an_experiment_with_a_tokenizer_is_refused_the_synthetic_pairs(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=10)
    first = Experiment(tmp_path / "first")
    backtranslate(trained_experiment, first, [f"text:{path}"], DecodeOptions(beam=1))
    cfg = first.load_config()
    cfg.data.train = cfg.data.train[:1]  # its own config, without the synthetic corpus, and a tokenizer made
    final = Experiment(tmp_path / "final")
    final.root.mkdir()
    from mt.config.schema import save_yaml

    final.config_path.write_text(save_yaml(cfg), encoding="utf-8")
    train_tokenizer(final, cfg)
    before = final.config_path.read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match="has a tokenizer made without the back-translation"):
        backtranslate(trained_experiment, final, [f"text:{path}"])
    assert final.config_path.read_text(encoding="utf-8") == before


def test_the_recipe_step_backtranslates_then_is_skipped(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=30)
    train = trained_experiment.load_config().data.train[0]
    exp = tmp_path / "bt"
    recipe = tmp_path / "bt.yaml"
    recipe.write_text(json.dumps({
        "exp": str(exp), "steps": ["backtranslate", "train-tokenizer", "binarize"],
        "reverse": str(trained_experiment.root), "mono": [f"text:{path}"],
        "data": {"src_lang": "en", "tgt_lang": "de", "train": [train, f"bt:files:{exp}/backtranslate/train"],
                 "valid": [train], "test": [train]},
        "tokenizer": {"vocab_size": 120, "byte_fallback": False},
    }), encoding="utf-8")
    run_recipe(recipe, None, {}, print_result=lambda line: None)
    assert (exp / "backtranslate" / "manifest.json").exists() and Experiment(exp).has_data()
    stamp = (exp / "backtranslate" / "train.en").stat().st_mtime_ns
    run_recipe(recipe, None, {}, print_result=lambda line: None)  # every step done: nothing redone
    assert (exp / "backtranslate" / "train.en").stat().st_mtime_ns == stamp
    # The recipe edited to other monolingual text: refused as `mt backtranslate` refuses it (was "done
    # already", the old corpus silently kept)
    (tmp_path / "other-mono").mkdir()
    other, _ = german_text(tmp_path / "other-mono", n=30)
    edited = tmp_path / "edited.yaml"
    edited.write_text(recipe.read_text(encoding="utf-8").replace(str(path), str(other)), encoding="utf-8")
    with pytest.raises(MtError, match="back-translated from"):
        run_recipe(edited, None, {}, print_result=lambda line: None)
    assert (exp / "backtranslate" / "train.en").stat().st_mtime_ns == stamp
    # A recipe that needs itself first: one line (was a RecursionError's traceback)
    looped = tmp_path / "looped.yaml"
    fields = json.loads(recipe.read_text(encoding="utf-8").replace(str(exp), str(tmp_path / "loop")))
    looped.write_text(json.dumps({**fields, "reverse": str(looped)}), encoding="utf-8")
    with pytest.raises(ConfigError, match="a recipe that needs itself to run first"):
        run_recipe(looped, None, {}, print_result=lambda line: None)
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text(recipe.read_text(encoding="utf-8").replace("bt:files:", "files:ignored"), encoding="utf-8")
    with pytest.raises(ConfigError, match="add bt:files:.*to the recipe's data.train"):
        run_recipe(unnamed, tmp_path / "other", {}, print_result=lambda line: None)


def test_the_reversed_config_names_a_tsvs_columns_in_every_split(tmp_path):
    from mt.apps.backtranslate import final_config
    from mt.config.schema import ExperimentConfig

    reverse_cfg = ExperimentConfig()  # de -> en
    reverse_cfg.data.train = ["tsv:corpus.tsv*2", "tsv:named.tsv:en-de", "files:prefix", "files:a.de|a.en*3",
                              "bt:files:its-own-synthetic"]
    reverse_cfg.data.valid, reverse_cfg.data.test = ["tsv:valid.tsv"], ["tsv:test.tsv"]
    cfg = final_config(reverse_cfg, Experiment(tmp_path / "en-de"), "bt:files:x")
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("en", "de")
    assert cfg.data.train == ["tsv:corpus.tsv:de-en*2", "tsv:named.tsv:en-de", "files:prefix", "files:a.en|a.de*3",
                              "bt:files:x"]  # the reverse model's own back-translation is not real German
    assert cfg.data.valid == ["tsv:valid.tsv:de-en"] and cfg.data.test == ["tsv:test.tsv:de-en"]
    # Read en -> de, the first column is still the German one.
    assert parse_source(cfg.data.valid[0], "valid", ("en", "de")).columns == (1, 0)


def test_a_damaged_manifest_is_a_one_line_error_naming_it(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=10)
    final = Experiment(tmp_path / "en-de")
    manifest = final.root / "backtranslate" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    for damage, what in ((b"{bad", "not valid JSON"), (b"{}", "no 'lines'"), (b'{"lines": 1, "seconds": 2}', "no 'corpus'")):
        manifest.write_bytes(damage)
        with pytest.raises(MtError, match=f"{manifest}: {what}.*rerun `mt backtranslate`"):
            backtranslate(trained_experiment, final, [f"text:{path}"])
        assert manifest.read_bytes() == damage
    done = mt("backtranslate", "--exp", str(final.root), "--reverse", str(trained_experiment.root), "--mono", f"text:{path}")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "no 'corpus'" in lines[0] and "Traceback" not in done.stderr


def test_a_reverse_model_that_does_not_load_leaves_no_experiment_behind(trained_experiment, tmp_path):
    path, _ = german_text(tmp_path, n=10)
    truncated = tmp_path / "truncated.pt"
    whole = trained_experiment.checkpoint_path("last").read_bytes()
    truncated.write_bytes(whole[:len(whole) // 2])
    final = Experiment(tmp_path / "en-de")
    with pytest.raises(MtError, match="truncated"):
        backtranslate(trained_experiment, final, [f"text:{path}"], checkpoint=str(truncated))
    assert not final.root.exists()  # no config, no chunk state: a retry with another --chunk-lines starts clean


def test_a_tagged_corpus_at_the_allowed_max_len_trains(tmp_path):
    """<BT> comes before a synthetic source after the length filter: with data.max_len at its allowed
    most (model.max_positions - 1) a source of max_len tokens became max_len + 2 positions with EOS,
    and training died mid-run ("sequence of 13 positions exceeds max_positions=12"). The filter counts it."""
    from helpers import one_thread, tiny_config

    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml, validate
    from mt.training.loop import train

    src, tgt = toy_corpus(200, seed=1)
    for name, (de, en) in {"train": (src, tgt), "synth": (src[:60], src[:60])}.items():  # both sides German
        (tmp_path / f"{name}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
        (tmp_path / f"{name}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    cfg = tiny_config(tmp_path, ("train",))
    cfg.data.train = [f"files:{tmp_path / 'train'}", f"bt:files:{tmp_path / 'synth'}"]
    exp = Experiment(tmp_path / "exp")
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    lengths = [len(ids) for ids in exp.load_tokenizers(True)[0].encode(src[:60])]
    cfg.data.train = [f"bt:files:{tmp_path / 'synth'}"]  # only tagged pairs: every epoch reaches the longest
    cfg.data.max_len, cfg.model.max_positions = max(lengths), max(lengths) + 1
    validate(cfg, "test")  # an allowed config
    write_text_atomic(exp.config_path, save_yaml(cfg))
    stats = binarize(exp, cfg)
    assert stats["splits"]["train"]["dropped"]["too_long"] == lengths.count(max(lengths))
    data = ParallelData(exp, "train")
    assert max(len(data.src(i)) for i in range(len(data))) <= cfg.data.max_len  # <BT> included
    with one_thread():
        train(exp, cfg)  # 10 updates, several epochs
    assert exp.checkpoint_path("last").exists()


def test_the_references_of_the_valid_and_test_splits_are_not_back_translated(trained_experiment, tmp_path):
    """Monolingual text that holds the test split's references (the reverse model's test sources):
    trained on as targets they would be scored against themselves; they are left out, counted."""
    import unicodedata

    test_sources = (trained_experiment.root.parent / "test.de").read_text(encoding="utf-8").splitlines()
    path, lines = german_text(tmp_path, n=20)
    # as binarize will clean them, the same lines (was: a doubled space or a decomposed letter let one in)
    spaced = [test_sources[5].replace(" ", "  ", 1), " " + unicodedata.normalize("NFD", test_sources[6]) + "\t"]
    path.write_text("\n".join(lines + test_sources[:5] + spaced) + "\n", encoding="utf-8")
    final = Experiment(tmp_path / "en-de")
    manifest = backtranslate(trained_experiment, final, [f"text:{path}"], DecodeOptions(beam=1))
    written = (final.root / "backtranslate" / "train.de").read_text(encoding="utf-8").splitlines()
    assert not set(written) & set(test_sources)
    assert manifest["held_out_lines_skipped"] == len(set(lines + test_sources[:5]) & set(test_sources)) + 2 >= 7
    assert manifest["lines"] == len(written)


def test_a_done_backtranslation_of_other_text_or_another_model_is_refused(trained_experiment, tmp_path):
    """Done is done whatever the search flags say, but not for other monolingual text or another
    reverse model (a recipe edited): it said "done already" and trained on the old corpus."""
    path, _ = german_text(tmp_path, n=10)
    final = Experiment(tmp_path / "en-de")
    backtranslate(trained_experiment, final, [f"text:{path}"], DecodeOptions(beam=1))
    other = tmp_path / "other.de"
    other.write_text("Ein Hund.\n", encoding="utf-8")
    with pytest.raises(MtError, match=r"back-translated from --mono text:.*mono\.de, not text:.*other\.de"):
        backtranslate(trained_experiment, final, [f"text:{other}"])
    copy = Experiment(tmp_path / "copy")
    shutil.copytree(trained_experiment.root, copy.root)
    with pytest.raises(MtError, match="back-translated by .* not .*copy"):
        backtranslate(copy, final, [f"text:{path}"])
    # Done, but asked to be read otherwise: refused as before the corpus existed (was: "done", the
    # flags ignored, the config as it was)
    with pytest.raises(ConfigError, match="without the tag; give --no-tag|with the tag; give --tag"):
        backtranslate(trained_experiment, final, [f"text:{path}"], tagged=False)
    with pytest.raises(ConfigError, match="--weight: "):
        backtranslate(trained_experiment, final, [f"text:{path}"], weight=2.0)
    assert backtranslate(trained_experiment, final, [f"text:{path}"])["mono"] == [f"text:{path}"]  # as it was: done
    # The same file name with other text, or the reverse model saved again: not this corpus (was "done")
    path.write_text(path.read_text(encoding="utf-8").replace("a", "e", 1), encoding="utf-8")
    with pytest.raises(MtError, match="has changed since it was back-translated"):
        backtranslate(trained_experiment, final, [f"text:{path}"])


def test_a_mono_line_that_is_not_utf_8_is_left_out_with_a_warning(tmp_path, capsys):
    """One bad byte in a crawl of millions of lines stopped the back-translation (binarize leaves such a
    pair out of training and says so)."""
    from mt.apps.backtranslate import read_mono

    mono = tmp_path / "mono.en"
    mono.write_bytes(b"A man sleeps.\n\xff broken\nTwo dogs run.\n")
    lines, empty, invalid, _ = read_mono([f"text:{mono}"], "en", ("de", "en"))
    assert lines == ["A man sleeps.", "Two dogs run."] and (empty, invalid) == (0, 1)
    assert f"1 lines that are not text left out (first: {mono}:2: not valid UTF-8" in " ".join(capsys.readouterr().err.split())
    read_mono([f"text:{mono}"], "en", ("de", "en"), quiet=True)  # a done back-translation's check: said once
    assert "not text" not in capsys.readouterr().err


def test_monolingual_lines_keep_where_they_were_read(tmp_path):
    """A warning about a line of --mono named its place among the kept lines ("input line 3" for the
    file's 5th, past an empty and an invalid line); read_mono and without_held_out keep each line's
    FILE:LINE for the search's warnings."""
    from mt.apps.backtranslate import read_mono

    path = tmp_path / "mono.de"
    path.write_bytes(b"eins\n\nzwei\n\xff kaputt\ndrei\n")
    lines, empty, invalid, origins = read_mono([f"text:{path}"], "de", ("en", "de"), quiet=True)
    assert lines == ["eins", "zwei", "drei"] and (empty, invalid) == (1, 1)
    assert origins.names(0, 3) == [f"{path}:1", f"{path}:3", f"{path}:5"]
    assert origins.kept([True, False, True]).names(0, 2) == [f"{path}:1", f"{path}:5"]
