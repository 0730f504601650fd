"""train.compile (issue #5) and the per-phase split of a training step (mt.training.profile).

A compiled run must save the same checkpoint keys as a plain one (mt.training.setup compiles the loss
wrapper in place, never the model it saves), and `--compile` must reach the config. The phase
split must give every phase some time and never more, together, than the step took.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from toy import tiny_experiment

from mt.experiment import Experiment
from mt.training.checkpoints import save_training
from mt.training.profile import PHASES, profile_phases
from mt.training.setup import build_training

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("single_thread")


def _experiment(root: Path, dropout: float):
    return tiny_experiment(root, {"train": 120, "valid": 10}, dict(enc_layers=1, dec_layers=1, dropout=dropout),
                           dict(max_tokens=200, warmup_steps=5, save_every=1000), {})


def _saved_keys(exp: Experiment, cfg, compile: bool) -> tuple[list[str], float]:
    """Two updates on one fixed batch (one compilation, no recompile for a new shape), then save."""
    cfg.train.compile = compile
    run = build_training(exp, cfg)
    trainer = run.trainer
    batch = trainer.stream.next_batch()
    losses = [trainer.step([batch])["loss"] for _ in range(2)]
    save_training(run)
    state = torch.load(exp.checkpoint_path("last"), map_location="cpu", weights_only=True)
    return list(state["model"]), losses[-1]


@pytest.mark.slow
def test_compiled_training_saves_the_same_checkpoint_keys(tmp_path):
    if not hasattr(torch.nn.Module, "compile"):
        pytest.skip("this torch has no nn.Module.compile")
    # No dropout: compiled and plain runs would draw different masks, and the losses must agree.
    exp, cfg = _experiment(tmp_path, dropout=0.0)
    plain_keys, plain_loss = _saved_keys(exp, cfg, compile=False)
    compiled_keys, compiled_loss = _saved_keys(exp, cfg, compile=True)
    assert compiled_keys == plain_keys
    assert not any("_orig_mod" in key for key in compiled_keys)
    assert math.isfinite(compiled_loss)
    assert compiled_loss == pytest.approx(plain_loss, rel=1e-3)  # same seed, same batch, same math


@pytest.mark.slow
def test_compile_flag_reaches_the_config(tmp_path):
    exp, _ = _experiment(tmp_path, dropout=0.1)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "mt", "-q", "train", "--exp", str(exp.root), "--compile",
                           "--max-steps", "0"], cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Experiment(exp.root).load_config().train.compile is True
    assert '"key": "train.compile"' in exp.overrides_path.read_text()


def test_phases_cover_the_step_and_sum_to_no_more(tmp_path):
    exp, cfg = _experiment(tmp_path, dropout=0.1)
    trainer = build_training(exp, cfg).trainer
    trainer.step()  # first-call allocations out of the way
    phases = profile_phases(trainer, steps=2)
    assert set(phases) == {*PHASES, "other", "step"}
    for phase in PHASES:
        assert phases[phase] > 0, phase
    assert sum(phases[phase] for phase in PHASES) <= phases["step"]
    assert phases["other"] >= 0
    # The hooks and scopes are gone: the Trainer and its model are as before.
    assert not {"finish_gradients", "apply_update"} & set(vars(trainer)) and "next_batch" not in vars(trainer.stream)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in trainer.model.modules())
    assert trainer.state.step == 3
