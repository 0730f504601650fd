"""mt.training.launch: `mt train`'s checks before any process starts, and the line that ends a training run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint, saved_step
from mt.experiment.paths import Experiment
from mt.training import launch


def never(*_):
    raise AssertionError("the config must not be resolved when the flags are refused")


def test_nproc_below_one_and_nproc_under_torchrun_are_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="--nproc 0: expected at least 1"):
        launch.train_processes(tmp_path / "exp", never, nproc=0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launch.launched_by_torchrun()
    with pytest.raises(ConfigError, match="started by torchrun already; drop --nproc"):
        launch.train_processes(tmp_path / "exp", never, nproc=2)
    assert not (tmp_path / "exp").exists()


def test_the_stop_line_says_where_why_and_what_was_skipped(capsys):
    launch.report_stop({"steps": 30, "stopped_by": "max_steps", "seconds": 12.4, "skipped": 0})
    launch.report_stop({"steps": 7, "stopped_by": "max_time", "seconds": 90.0, "skipped": 2, "valid_ppl": 3.14159})
    with pytest.raises(KeyboardInterrupt):  # train() said what it saved; the command exits 130
        launch.report_stop({"steps": 9, "stopped_by": "SIGTERM", "seconds": 1.0, "skipped": 0})
    assert capsys.readouterr().err.splitlines() == [
        "stopped at step 30 (max_steps) after 12s",
        "stopped at step 7 (max_time) after 90s; valid ppl 3.14; 2 updates skipped (non-finite)",
    ]


def test_cpu_workers_share_the_cores_unless_omp_num_threads_says_otherwise(monkeypatch):
    """torchrun sets OMP_NUM_THREADS=1 for each worker when it is unset: --nproc 2 trained on 2 cores of 16."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert launch.worker_threads(2, "cpu") == max(1, cores // 2)
    assert launch.worker_threads(4 * cores, "cpu") == 1
    assert launch.worker_threads(2, "cuda") is None  # a GPU worker's threads only feed it
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert launch.worker_threads(2, "cpu") is None  # the user's, as torchrun passes it on


def test_the_step_a_training_checkpoint_holds_is_read_without_loading_it(trained_experiment, tmp_path):
    """What `mt train --nproc N` says after a signal: the step last.pt holds (it said "saved" even when
    torchrun had killed a worker still validating)."""
    last = trained_experiment.checkpoint_path("last")
    assert saved_step(last) == load_checkpoint(last)["step"] > 0
    assert saved_step(tmp_path / "none.pt") is None
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert saved_step(tmp_path / "bad.pt") is None


@pytest.mark.slow
def test_a_resume_with_another_process_count_is_refused_before_any_process_starts(trained_experiment, tmp_path,
                                                                                  monkeypatch):
    for name in ("WORLD_SIZE", "TORCHELASTIC_RUN_ID", "RANK"):
        monkeypatch.delenv(name, raising=False)
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    config = exp.config_path.read_text()
    with pytest.raises(MtError, match=r"last\.pt: saved by 1 training process\(es\), now 2; .*--nproc 1"):
        launch.train_processes(exp.root, never, nproc=2)  # never: the config is not even resolved
    done = subprocess.run([sys.executable, "-m", "mt", "train", "--exp", str(exp.root), "--nproc", "2", "--seed", "1"],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=120)
    assert done.returncode == 1 and exp.config_path.read_text() == config
    assert done.stderr.strip().splitlines() == [f"error: {exp.checkpoint_path('last')}: saved by 1 training "
                                                f"process(es), now 2; resume with the same number (`mt train "
                                                f"--nproc 1` or torchrun)"]  # one line: no torchrun banners
    state = load_checkpoint(exp.checkpoint_path("last"))
    save_checkpoint(exp.checkpoint_path("last"), {**state, "world_size": 2})
    with pytest.raises(MtError, match="saved by 2 training process\\(es\\), now 1"):
        launch.train_processes(exp.root, never)
    launch.refuse_other_world_size(exp.root, 2)  # as many as saved it: no objection
