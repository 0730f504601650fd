"""train.compile and the per-phase split of a training step (bench/throughput.py, --phases).

A compiled run must compile once for batches of every shape, without graph breaks, train as a plain
one does and save the same checkpoint keys (mt.training.setup compiles the encoder and decoder inside
the loss module, never the model it saves), and `--compile` must reach the config. The phase
split must give every phase some time and never more, together, than the step took.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO, tiny_experiment

from bench.throughput import PHASES, profile_phases
from mt.experiment.paths import Experiment
from mt.training.checkpoints import save_training
from mt.training.setup import build_training

pytestmark = pytest.mark.usefixtures("single_thread")


def _experiment(root: Path, dropout: float):
    return tiny_experiment(root, {"train": 120, "valid": 10}, dict(enc_layers=1, dec_layers=1, dropout=dropout),
                           dict(max_tokens=200, warmup_steps=5, save_every=1000), {})


def _saved_keys(exp: Experiment, cfg, compile: bool, batches=None) -> tuple[list[str], list[float], list]:
    """Three updates on batches of different shapes (the plain run's own, or `batches`), then save:
    the keys, the losses and the batches. (A compiled run's own batches are padded to a few shapes.)"""
    cfg.train.compile = compile
    run = build_training(exp, cfg)
    trainer = run.trainer
    batches = batches or [trainer.stream.next_batch() for _ in range(3)]
    losses = [trainer.step([batch])["loss"] for batch in batches]
    save_training(run)
    state = torch.load(exp.checkpoint_path("last"), map_location="cpu", weights_only=True)
    return list(state["model"]), losses, batches


@pytest.mark.slow
def test_compiled_training_is_one_graph_for_every_shape_and_saves_the_same_checkpoint(tmp_path):
    from torch._dynamo.utils import counters

    # No dropout: compiled and plain runs would draw different masks, and the losses must agree.
    exp, cfg = _experiment(tmp_path, dropout=0.0)
    plain_keys, plain_losses, batches = _saved_keys(exp, cfg, compile=False)
    torch._dynamo.reset()
    counters.clear()
    compiled_keys, compiled_losses, _ = _saved_keys(exp, cfg, compile=True, batches=batches)
    shapes = {(*batch.src_ids.shape, *batch.tgt_in.shape) for batch in batches}
    assert len(shapes) == 3  # token-budget batches: a new shape at every step
    assert not counters["graph_break"], dict(counters["graph_break"])  # e.g. a Python int read off a tensor
    assert counters["stats"]["unique_graphs"] == 1  # dynamic shapes: compiled once, not once per shape
    assert compiled_keys == plain_keys
    assert not any("_orig_mod" in key for key in compiled_keys)
    assert compiled_losses == pytest.approx(plain_losses, rel=1e-3)  # same seed, same batches, same math


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
