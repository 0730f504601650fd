"""A save that fails part-way leaves files that agree with each other, and the run goes on from them
to the result an uninterrupted run reaches. The fault is injected where mt writes (a full disk,
ENOSPC, at one named file), then the command is run again, as a user would.

Also here: the writer's commit points reach the disk (the file and its directory are fsynced), one
seed gives one initial model whatever the vocabularies, and `mt distill` records how it translates
before its first chunk.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import assert_same, build_experiment, copy_experiment, one_thread

from mt import atomic_files
from mt.decoding.options import DecodeOptions
from mt.errors import MtError
from mt.experiment import checkpoint_file as checkpoint
from mt.experiment.checkpoint_file import load_checkpoint
from mt.experiment.config import ConfigChange
from mt.experiment.paths import Experiment
from mt.training.loop import train

pytestmark = pytest.mark.usefixtures("single_thread")

STEPS = 8  # saves at 2, 4, 6, 8: step_N, best (each validation), ema and last each time


class DiskFull:
    """ENOSPC from the `nth` atomic write of a file named `name` (mt's writers all go through
    mt.atomic_files: the checkpoint writer binds write_bytes_atomic itself, the others look it up)."""

    def __init__(self, monkeypatch, name: str, nth: int = 1):
        self.name, self.nth, self.seen = name, nth, 0
        real = atomic_files.write_bytes_atomic

        def write(path, data):
            if Path(path).name == self.name:
                self.seen += 1
                if self.seen == self.nth:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            return real(path, data)

        monkeypatch.setattr(atomic_files, "write_bytes_atomic", write)
        monkeypatch.setattr(checkpoint, "write_bytes_atomic", write)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("faults"))


def training_copy(base: Experiment, root: Path) -> tuple[Experiment, object]:
    return copy_experiment(base, root, max_steps=STEPS, save_every=2, valid_every=2, keep_last=0, ema_decay=0.9)


@pytest.fixture(scope="module")
def straight(base, tmp_path_factory) -> dict:
    """What an uninterrupted run leaves: each checkpoint's state."""
    exp, cfg = training_copy(base, tmp_path_factory.mktemp("straight") / "exp")
    with one_thread():  # as the tests (single_thread), which a module's fixture precedes
        train(exp, cfg)
    return {path.name: load_checkpoint(path) for path in sorted(exp.checkpoints_dir.glob("*.pt"))}


@pytest.mark.parametrize("name", ["last.pt", "best.pt", "step_0000004.pt", "ema.pt"])
def test_a_save_that_fails_at_any_file_resumes_to_the_uninterrupted_result(base, straight, tmp_path, monkeypatch, name):
    exp, cfg = training_copy(base, tmp_path / "exp")
    fault = DiskFull(monkeypatch, name, nth=2 if name != "step_0000004.pt" else 1)  # the save at step 4
    with pytest.raises(OSError, match="No space left on device"):
        train(exp, cfg)
    assert fault.seen == fault.nth
    last = load_checkpoint(exp.checkpoint_path("last"))
    assert last["step"] == 2  # the commit point: the save at step 4 did not happen
    best = load_checkpoint(exp.checkpoint_path("best"))
    assert best["best_valid"] <= last["best_valid"]  # the best last.pt vouches for is on disk (or a newer one)
    monkeypatch.undo()
    train(exp, cfg)  # the user runs it again
    resumed = {path.name: load_checkpoint(path) for path in sorted(exp.checkpoints_dir.glob("*.pt"))}
    assert resumed.keys() == straight.keys()
    for key in resumed:  # bitwise, but for the seconds each run took
        for state in (resumed[key], straight[key]):
            state.pop("elapsed", None)
        assert_same(resumed[key], straight[key], key)


def test_a_config_change_that_cannot_be_written_leaves_the_config_as_it_was(base, tmp_path, monkeypatch):
    exp, _ = training_copy(base, tmp_path / "exp")
    before = exp.config_path.read_bytes()
    fault = DiskFull(monkeypatch, "config.yaml")
    with pytest.raises(OSError, match="No space left on device"):
        ConfigChange(exp).resolve({"train.max_steps": 99})
    assert fault.seen == fault.nth  # the fault was hit, not another error
    assert exp.config_path.read_bytes() == before and not list(exp.root.glob(".config.yaml.*"))


def test_binarize_that_cannot_write_its_manifest_leaves_no_data_and_runs_again(base, tmp_path, monkeypatch):
    from mt.data.binarize import binarize

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(base.root / "tokenizer", exp.tokenizer_dir)
    shutil.copy(base.config_path, exp.config_path)
    fault = DiskFull(monkeypatch, "manifest.json")
    with pytest.raises(OSError, match="No space left on device"):
        binarize(exp, exp.load_config())
    assert fault.seen == fault.nth  # the fault was hit, not another error
    assert not exp.has_data()  # data/ appears whole or not at all
    monkeypatch.undo()
    binarize(exp, exp.load_config())
    for path in sorted(base.data_dir.iterdir()):
        if path.suffix == ".npy":
            assert path.read_bytes() == (exp.data_dir / path.name).read_bytes(), path.name


def test_a_distill_chunk_that_cannot_be_written_resumes_to_the_same_corpus(trained_experiment, tmp_path, monkeypatch):
    from mt.apps.distill import distill

    straight = distill([trained_experiment], Experiment(tmp_path / "straight"), DecodeOptions(beam=1), chunk_lines=100)
    student = Experiment(tmp_path / "student")
    fault = DiskFull(monkeypatch, "000002.tgt")
    with pytest.raises(OSError, match="No space left on device"):
        distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=100)
    assert fault.seen == fault.nth  # the fault was hit, not another error
    monkeypatch.undo()
    resumed = distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=100)
    for name in ("train.de", "train.en"):
        assert (student.root / "distill" / name).read_bytes() == (tmp_path / "straight" / "distill" / name).read_bytes()
    assert straight["teachers"] == resumed["teachers"]


def test_distill_records_how_it_translates_before_its_first_chunk(trained_experiment, tmp_path, monkeypatch):
    """A kill between the first chunk and the state file let a resume with other teachers pass."""
    from mt.apps.chunked import state_path
    from mt.apps.distill import distill, distill_dir

    student = Experiment(tmp_path / "student")
    fault = DiskFull(monkeypatch, "000001.tgt")  # the second chunk fails: the state recorded how the first was made
    with pytest.raises(OSError, match="No space left on device"):
        distill([trained_experiment], student, DecodeOptions(beam=1), chunk_lines=100)
    assert fault.seen == fault.nth  # the fault was hit, not another error
    assert state_path(distill_dir(student)).is_file()
    monkeypatch.undo()
    with pytest.raises(MtError, match="beam"):
        distill([trained_experiment], student, DecodeOptions(beam=2), chunk_lines=100)
    # With no chunk done, nothing was translated one way: a retry may choose another.
    other = Experiment(tmp_path / "other")
    fault = DiskFull(monkeypatch, "000000.tgt")
    with pytest.raises(OSError, match="No space left on device"):
        distill([trained_experiment], other, DecodeOptions(beam=1), chunk_lines=100)
    assert fault.seen == fault.nth  # the fault was hit, not another error
    monkeypatch.undo()
    assert distill([trained_experiment], other, DecodeOptions(beam=2), chunk_lines=100)["decode"]["beam"] == 2


def test_a_commit_point_is_fsynced_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_files.write_text_atomic(tmp_path / "config.yaml", "a: 1\n")
    assert synced == ["file", "directory"]
    synced.clear()
    with atomic_files.atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("translation\n")
    assert synced == ["file", "directory"]


SEEDED_INIT = """
import sys, torch
from mt.config.schema import ModelConfig
from mt.model.transformer import build_model
kept = []
for k, path in enumerate(sys.argv[2:]):
    kept.append([[] for _ in range(int(sys.argv[1]) + 7 * k)])  # other objects first: other addresses, another id() order
    torch.manual_seed(7)
    model = build_model(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2), 50, 60, False)
    torch.save(model.state_dict(), path)
    kept.append(model)  # alive: the next model's objects go elsewhere
"""


@pytest.mark.slow
def test_one_seed_gives_one_initial_model_with_separate_vocabularies(tmp_path):
    """The embeddings were initialised in a set's order (by id()): 2 of 8 runs swapped them."""
    paths = [tmp_path / f"init{i}.pt" for i in range(8)]
    for i in range(2):  # fresh processes, each with its objects at other addresses, four models each
        subprocess.run([sys.executable, "-c", SEEDED_INIT, str(i * 3), *map(str, paths[4 * i : 4 * i + 4])],
                       check=True, timeout=120)
    states = [torch.load(path, weights_only=True) for path in paths]
    for state in states[1:]:
        assert_same(state, states[0], "initial weights")
