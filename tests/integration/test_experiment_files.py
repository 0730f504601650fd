"""Bad input and damaged files (issue 25): each is a one-line error naming the file, and nothing on
disk is lost or changed by the failing step.

Empty splits at train-tokenizer and binarize; a damaged config.yaml or recipe; a model field of
config.yaml edited after training; the temporary files of a killed save; the missing best checkpoint;
the training lock under many simultaneous starts. Checkpoints whose bytes changed on disk are in
unit/test_checkpoint_damage.py.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import one_line, one_thread, tiny_config, toy_corpus

from mt.atomic_files import write_text_atomic
from mt.config.recipes import load_recipe
from mt.config.schema import ExperimentConfig, save_yaml
from mt.data.binarize import binarize
from mt.data.train_tokenizer import train_tokenizer
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.lock import experiment_lock
from mt.experiment.paths import Experiment
from mt.training.loop import train

pytestmark = pytest.mark.usefixtures("single_thread")


def write_pairs(root: Path, split: str, n: int) -> None:
    src, tgt = toy_corpus(n, seed=len(split))
    for lang, lines in (("de", src), ("en", tgt)):
        (root / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def config(root: Path, splits: tuple[str, ...]) -> ExperimentConfig:
    cfg = tiny_config(root, splits)
    cfg.train.__dict__.update(max_steps=2, log_every=1, valid_every=2, save_every=2)
    cfg.decode.max_len_b = 5
    return cfg


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Experiment:
    """A tiny experiment trained for 2 steps: best.pt, last.pt, step_0000002.pt."""
    root = tmp_path_factory.mktemp("trained")
    for split, n in (("train", 200), ("valid", 10)):
        write_pairs(root, split, n)
    exp = Experiment(root / "exp")
    cfg = config(root, ("train", "valid"))
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    with one_thread():
        train(exp, cfg)
    assert exp.checkpoint_path("best").exists()
    return exp


def copy_of(exp: Experiment, root: Path) -> Experiment:
    shutil.copytree(exp.root, root)
    return Experiment(root)


# -- 1, 2: empty splits ---------------------------------------------------------------------------
@pytest.mark.parametrize("split", ["valid", "test"])
@pytest.mark.parametrize("content", ["", "\n\n\n"])
def test_an_empty_configured_valid_or_test_split_is_refused_by_binarize(trained, tmp_path, split, content):
    for name in ("train", split):
        write_pairs(tmp_path, name, 50)
    for lang in ("de", "en"):
        (tmp_path / f"{split}.{lang}").write_text(content, encoding="utf-8")
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained.tokenizer_dir, exp.tokenizer_dir)
    cfg = config(tmp_path, ("train", split))
    before = files_of(exp.root)
    with pytest.raises(MtError) as info:
        binarize(exp, cfg)
    message = one_line(info, str(tmp_path / f"{split}.de"), str(tmp_path / f"{split}.en"), f"{split} split")
    assert message.startswith(str(tmp_path / f"{split}.de"))
    assert files_of(exp.root) == before and not exp.data_dir.exists()
    assert not list(exp.root.glob(".data-*"))


@pytest.mark.parametrize("content", ["", "\n \n\t\n"])
def test_an_empty_training_corpus_is_refused_by_train_tokenizer_naming_its_files(tmp_path, content):
    for lang in ("de", "en"):
        (tmp_path / f"train.{lang}").write_text(content, encoding="utf-8")
    exp = Experiment(tmp_path / "exp")
    with pytest.raises(MtError) as info:
        train_tokenizer(exp, config(tmp_path, ("train",)))
    message = one_line(info, str(tmp_path / "train.de"), str(tmp_path / "train.en"), "no training text")
    assert "sentences_" not in message and "sentencepiece" not in message
    assert not exp.has_tokenizer()


# -- 4: a damaged config.yaml or recipe -----------------------------------------------------------
DAMAGED_YAML = [
    ("list", b"- data\n- model\n", None, "mapping"),
    ("utf8", b"data:\n  src_lang: de\n  tgt_lang: \xff\xfeen\n", 3, "UTF-8"),
    ("yaml", b"data:\n  src_lang: de\nmodel:\n  d_model: [32\n  d_ff: 64\n", 5, "not valid YAML"),
    ("tab", b"model:\n\td_model: 32\n", 2, "not valid YAML"),
]


@pytest.mark.parametrize("name, text, line, needle", DAMAGED_YAML, ids=[d[0] for d in DAMAGED_YAML])
def test_a_damaged_experiment_config_is_one_line_naming_the_file(tmp_path, name, text, line, needle):
    exp = Experiment(tmp_path / "exp")
    exp.root.mkdir()
    exp.config_path.write_bytes(text)
    with pytest.raises(ConfigError) as info:
        exp.load_config()
    where = f"{exp.config_path}:{line}: " if line else f"{exp.config_path}: "
    assert one_line(info, needle).startswith(where)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(text)
    with pytest.raises(ConfigError) as info:
        load_recipe(recipe)
    assert one_line(info, needle).startswith(where.replace(str(exp.config_path), str(recipe)))


def test_the_cli_prints_a_damaged_config_as_one_line(tmp_path):
    exp = Experiment(tmp_path / "exp")
    exp.root.mkdir()
    exp.config_path.write_bytes(DAMAGED_YAML[2][1])
    done = subprocess.run([sys.executable, "-m", "mt", "binarize", "--exp", str(exp.root)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {exp.config_path}:5: not valid YAML")
    assert exp.config_path.read_bytes() == DAMAGED_YAML[2][1]


# -- 5: a model field of config.yaml edited after training ----------------------------------------
def edit_config(exp: Experiment, old: str, new: str) -> None:
    text = exp.config_path.read_text(encoding="utf-8")
    assert text.count(old) == 1
    exp.config_path.write_text(text.replace(old, new), encoding="utf-8")


def test_an_edited_model_field_is_refused_by_train_and_translate_but_dropout_is_free(trained, tmp_path):
    exp = copy_of(trained, tmp_path / "exp")
    edit_config(exp, "  d_ff: 64\n", "  d_ff: 128\n")
    cfg = exp.load_config()
    cfg.train.max_steps = 4
    before = files_of(exp.root)
    with pytest.raises(MtError) as info, one_thread():
        train(exp, cfg)
    one_line(info, str(exp.config_path), "model.d_ff 128", "64", str(exp.checkpoint_path("last")))
    with pytest.raises(MtError) as info:
        Translator.load(exp, cfg)
    one_line(info, "model.d_ff 128", "64", str(exp.checkpoint_path("best")))
    assert files_of(exp.root) == before
    # A rate of dropout shapes no weight: it may differ, for translating and for training.
    edit_config(exp, "  d_ff: 128\n", "  d_ff: 64\n")
    edit_config(exp, "  dropout: 0.1\n", "  dropout: 0.3\n")
    cfg = exp.load_config()
    assert Translator.load(exp, cfg).translate(["Der hund läuft."])
    cfg.train.max_steps = 3
    with one_thread():
        assert train(exp, cfg)["steps"] == 3


# -- 6: temporary files of a killed save ----------------------------------------------------------
def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_training_removes_the_temporary_files_of_killed_saves(trained, tmp_path):
    """A killed writer's temporary on this host, by its dead pid; one of another host (a shared volume:
    its pids mean nothing here, and a live writer's was removed) or of an earlier version's names only
    once it has lain untouched an hour, or ten minutes."""
    from mt.atomic_files import HOST

    exp = copy_of(trained, tmp_path / "exp")
    ckpt = exp.checkpoints_dir
    day = time.time() - 2 * 86400
    dead = [ckpt / f".step_0000004.pt.{dead_pid()}@{HOST}-k2j3h4g5.tmp"]
    stale = [ckpt / f".step_0000006.pt.{dead_pid()}-k2j3h4g5.tmp", ckpt / ".last.pt.a1b2c3d4.tmp",  # earlier names
             ckpt / ".best.pt.1@other-host-k2j3h4g5.tmp"]
    alive = [ckpt / f".average.pt.{os.getppid()}@{HOST}-q1w2e3r4.tmp",  # a live writer's (`mt average` running)
             ckpt / ".average.pt.1@other-host-q1w2e3r4.tmp"]  # another machine's, writing now
    for path in [*dead, *stale, *alive]:
        path.write_bytes(b"half a checkpoint")
    for path in stale:
        os.utime(path, (day, day))
    cfg = exp.load_config()
    cfg.train.max_steps = 3
    with one_thread():
        train(exp, cfg)
    assert not any(path.exists() for path in [*dead, *stale])
    assert all(path.exists() for path in alive)
    assert not [p for p in ckpt.glob(".*.tmp") if p not in alive]


# -- 7: the missing best checkpoint ---------------------------------------------------------------
def test_a_missing_best_checkpoint_is_reported_as_such(trained, tmp_path):
    exp = copy_of(trained, tmp_path / "exp")
    exp.checkpoint_path("best").unlink()
    assert exp.find_checkpoint("best") == exp.checkpoint_path("last")  # no validation: last is best
    exp.checkpoint_path("last").unlink()
    with pytest.raises(MtError) as info:
        exp.find_checkpoint("best")
    message = one_line(info, "neither best.pt nor last.pt", "step_0000002")
    assert message.startswith(f"{exp.checkpoint_path('best')}: ")


# -- 8: the training lock under simultaneous starts -----------------------------------------------
def _contender(root: str, barrier, holding, most, results) -> None:
    barrier.wait()
    try:
        with experiment_lock(Experiment(root)):
            with holding.get_lock():
                holding.value += 1
                most.value = max(most.value, holding.value)
            time.sleep(0.3)
            with holding.get_lock():
                holding.value -= 1
        results.put((os.getpid(), "held"))
    except MtError as exc:
        results.put((os.getpid(), str(exc)))
    except BaseException as exc:  # anything else is a failure the test reports
        results.put((os.getpid(), f"{type(exc).__name__}: {exc}"))


@pytest.mark.parametrize("stale", [False, True], ids=["no-lock-file", "stale-lock-file"])
def test_simultaneous_starts_let_exactly_one_hold_the_lock(tmp_path, stale):
    context = multiprocessing.get_context("fork")
    exp = Experiment(tmp_path / "exp")
    exp.root.mkdir()
    n = 12
    for _ in range(3):
        if stale:
            exp.lock_path.write_text(f"{dead_pid()}\n")  # a trainer killed by SIGKILL left it
        barrier, holding, most, results = context.Barrier(n), context.Value("i", 0), context.Value("i", 0), context.Queue()
        processes = [context.Process(target=_contender, args=(str(exp.root), barrier, holding, most, results))
                     for _ in range(n)]
        for process in processes:
            process.start()
        outcomes = dict(results.get(timeout=60) for _ in processes)
        for process in processes:
            process.join(timeout=60)
        assert most.value == 1, f"{most.value} processes held the lock at once"
        held = [pid for pid, outcome in outcomes.items() if outcome == "held"]
        assert len(held) >= 1
        for pid, outcome in outcomes.items():
            if outcome != "held":
                assert outcome.startswith(f"{exp.root} is already being trained or binarized by process "), outcome
                assert "\n" not in outcome and str(pid) not in outcome.split("process ")[1].split(" ")[0]
        assert not exp.lock_path.exists()
