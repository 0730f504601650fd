"""mt.launch: `mt train`'s checks before any process starts, and the line that ends a training run."""

from __future__ import annotations

import pytest

from mt import launch
from mt.errors import ConfigError


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
    launch.log_stopped({"steps": 30, "stopped_by": "max_steps", "seconds": 12.4, "skipped": 0})
    launch.log_stopped({"steps": 7, "stopped_by": "max_time", "seconds": 90.0, "skipped": 2, "valid_ppl": 3.14159})
    launch.log_stopped({"steps": 9, "stopped_by": "SIGTERM", "seconds": 1.0, "skipped": 0})  # train() said it
    assert capsys.readouterr().err.splitlines() == [
        "stopped at step 30 (max_steps) after 12s",
        "stopped at step 7 (max_time) after 90s; valid ppl 3.14; 2 updates skipped (non-finite)",
    ]
