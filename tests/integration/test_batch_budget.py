"""A run's batch: the shapes a compiled step sees (bucketed, masked padding), `train.max_tokens: auto`
and `train.lr_scaling` through build_training, resume and the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import REPO, build_experiment, copy_experiment

from mt.data.batching import BatchStream, bucket_width, collate
from mt.experiment.checkpoint_file import load_checkpoint
from mt.experiment.paths import Experiment
from mt.training.checkpoints import resume_training, save_training
from mt.training.loss import batch_loss
from mt.training.setup import build_training
from mt.training.token_budget import CPU_TOKENS, ROUND, longest_pairs

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("budget"))


def test_padding_a_batch_to_its_bucket_changes_no_loss_and_no_gradient(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0)
    model = build_training(exp, cfg).trainer.model
    data = BatchStream(build_training(exp, cfg).train_data, 300, seed=1).data
    indices = np.arange(5, 14)
    results = []
    for bucket_tokens in (None, 300):
        batch = collate(data, indices, bucket_tokens)
        model.zero_grad()
        loss, nll, count = batch_loss(model, batch, 0.1)
        loss.backward()
        results.append(
            (batch.src_ids.shape, loss.item(), nll.item(), int(count), [p.grad.clone() for p in model.parameters()])
        )
    (plain_shape, *plain), (padded_shape, *padded) = results
    assert padded_shape[0] > plain_shape[0] and padded_shape[1] >= plain_shape[1]  # more rows, wider
    assert padded[2] == plain[2]  # the same tokens scored
    assert padded[0] == pytest.approx(plain[0], rel=1e-5) and padded[1] == pytest.approx(plain[1], rel=1e-5)
    for a, b in zip(plain[3], padded[3]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_a_compiled_runs_batches_take_one_shape_per_rung(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", compile=True, max_tokens=300)
    run = build_training(exp, cfg)  # torch.compile is lazy: nothing compiles unless a step runs
    stream = run.trainer.stream
    assert stream.stream.bucketed
    shapes, widths = set(), set()
    while stream.epoch < 3:
        batch = stream.next_batch()
        shapes.add((*batch.src_ids.shape, *batch.tgt_in.shape))
        widths.add(batch.src_ids.size(1))
        data = stream.data
        assert batch.src_ids.size(1) == bucket_width(
            int(max(data.src_lens[batch.indices].max(), data.tgt_lens[batch.indices].max())) + 1
        )
        assert batch.src_ids.numel() <= 300
    plain = build_training(exp, copy_experiment(base, tmp_path / "plain", max_tokens=300)[1]).trainer.stream
    plain_shapes = set()
    while plain.epoch < 3:
        batch = plain.next_batch()
        plain_shapes.add((*batch.src_ids.shape, *batch.tgt_in.shape))
    assert len(shapes) == len(widths) <= 3 and len(plain_shapes) > 3 * len(shapes)
    stream.close()
    plain.close()


def test_max_tokens_auto_on_the_cpu_is_the_cpus_budget_and_saved(base, tmp_path, capsys):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_tokens="auto")
    run = build_training(exp, cfg)
    assert run.cfg.train.max_tokens == CPU_TOKENS == run.trainer.stream.stream.max_tokens
    assert cfg.train.max_tokens == exp.load_config().train.max_tokens == "auto"  # the saved config keeps auto
    assert "max_tokens auto: 4096 (cpu:" in capsys.readouterr().err
    run.trainer.step()
    save_training(run)
    assert load_checkpoint(exp.checkpoint_path("last"))["max_tokens"] == CPU_TOKENS


def test_a_resume_with_auto_keeps_the_budget_it_trained_with(base, tmp_path, capsys):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_tokens=200)
    first = build_training(exp, cfg)
    for _ in range(3):
        first.trainer.step()
    save_training(first)
    straight = [first.trainer.step()["loss"] for _ in range(2)]  # before the next build reseeds torch
    cfg.train.max_tokens = "auto"  # a new decision now would cut the rest of the epoch otherwise
    run = build_training(exp, cfg)
    assert run.cfg.train.max_tokens == 200 and "max_tokens auto: 200 (kept from" in capsys.readouterr().err
    assert resume_training(run)
    assert [run.trainer.step()["loss"] for _ in range(2)] == straight


def test_lr_scaling_scales_the_peak_and_the_warmup_of_the_schedule(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_tokens=300, lr_peak=1e-3, warmup_steps=100)
    plain = build_training(exp, cfg).trainer.schedule
    cfg.train.lr_scaling, cfg.train.lr_reference_tokens = "sqrt", 1200  # this batch is a quarter of it
    scaled = build_training(exp, cfg).trainer.schedule
    assert (plain.peak_lr, plain.warmup_steps) == (1e-3, 100)
    assert scaled.peak_lr == pytest.approx(0.5e-3) and scaled.warmup_steps == 400
    cfg.train.lr_peak = None  # the paper's formula: its peak from the reference warmup, then scaled
    paper = build_training(exp, cfg).trainer.schedule
    assert paper.peak_lr == pytest.approx(0.5 * cfg.model.d_model**-0.5 * 100**-0.5)


def test_the_longest_pairs_fill_a_probe_within_its_budget(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    data = build_training(exp, cfg).train_data
    indices = longest_pairs(data, 200)
    widths = np.maximum(data.src_lens, data.tgt_lens) + 1
    assert len(indices) * widths.max() <= 200 and widths[indices].min() >= np.sort(widths)[-len(indices)]


def test_the_max_tokens_flag_takes_auto(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mt", "-q", "train", "--exp", str(exp.root), "--max-tokens", "auto", "--max-steps", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert Experiment(exp.root).load_config().train.max_tokens == "auto"
    bad = subprocess.run(
        [sys.executable, "-m", "mt", "-q", "train", "--exp", str(exp.root), "--max-tokens", "many"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode != 0 and "train.max_tokens must be an integer or auto, not 'many'" in bad.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="hardware: no CUDA device")
def test_on_cuda_auto_fills_the_gpus_memory(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_tokens="auto", precision="bf16")
    run = build_training(exp, cfg, device="cuda")
    budget = run.cfg.train.max_tokens
    assert budget % ROUND == 0 and ROUND <= budget <= 65536
    run.trainer.step()
