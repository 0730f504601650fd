"""Training options that practitioners bring from fairseq, Marian and OpenNMT: an EMA of the weights
(train.ema_decay, also from --init-from's weights), TensorBoard events (train.tensorboard), and the
warning for a run shorter than its warmup. BLEU on Moses-tokenized text is in test_tokenized_bleu.py.

The exact resume of the EMA is in test_resume (the bitwise kill-and-resume test carries one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from helpers import build_experiment, copy_experiment
from helpers import mt_process as mt

from mt.config.schema import ModelConfig
from mt.experiment.checkpoint_file import load_checkpoint
from mt.model.transformer import build_model
from mt.training.ema import WeightAverage
from mt.training.loop import train
from mt.training.setup import build_training

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_experiment(tmp_path_factory.mktemp("habits"))


# -- EMA -------------------------------------------------------------------------------------------
def test_the_average_follows_the_formula_with_its_ramp_and_covers_tied_embeddings():
    torch.manual_seed(0)
    model = build_model(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2), 30, 30, True)
    ema = WeightAverage(model, decay=0.9)
    assert ema.decay_at(1) == pytest.approx(2 / 11) and ema.decay_at(1000) == 0.9
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    expected = dict(start)
    for step in (1, 2, 3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(model, step)
        d = min(0.9, (1 + step) / (10 + step))
        expected = {name: d * expected[name] + (1 - d) * p.detach() for name, p in model.named_parameters()}
    averaged = ema.state_dict()
    for name, value in expected.items():
        assert torch.allclose(averaged[name], value, atol=1e-6), name
    # One tensor under three state_dict keys: every key holds the average, whichever is loaded last.
    state = ema.model_state(model)
    shared = expected["src_embed.tokens.weight"]
    for key in ("src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"):
        assert torch.allclose(state[key], shared, atol=1e-6), key
    fresh = build_model(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2), 30, 30, True)
    fresh.load_state_dict(state)
    assert torch.allclose(fresh.output.weight, shared, atol=1e-6)


@pytest.mark.slow
def test_training_with_ema_saves_ema_pt_that_evaluate_decodes(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=12, ema_decay=0.9)
    train(exp, cfg)
    saved = load_checkpoint(exp.checkpoint_path("ema"))
    last = load_checkpoint(exp.checkpoint_path("last"))
    assert saved["step"] == 12 and saved["ema_decay"] == 0.9 and saved["model_config"] == last["model_config"]
    assert set(last["ema"]) <= set(saved["model"])
    assert any(not torch.equal(saved["model"][k], last["model"][k]) for k in last["ema"])  # not the last weights
    assert all(torch.equal(saved["model"][k], last["ema"][k]) for k in last["ema"])
    done = mt("evaluate", "--exp", str(exp.root), "--checkpoint", "ema", "--json", "--beam", "1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checkpoint"] == "ema.pt"
    refused = mt("average", "--exp", str(exp.root), "--last", "1", "--output", "ema")
    assert refused.returncode != 0 and "belongs to training" in refused.stderr


@pytest.mark.slow
def test_without_ema_nothing_changes_and_a_bad_decay_is_refused(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3)
    assert build_training(exp, cfg).trainer.ema is None
    train(exp, cfg)
    assert not exp.checkpoint_path("ema").exists() and load_checkpoint(exp.checkpoint_path("last"))["ema"] is None
    refused = mt("train", "--exp", str(exp.root), "--set", "train.ema_decay=1.0")
    assert refused.returncode != 0 and "train.ema_decay must be in [0, 1)" in refused.stderr.strip().splitlines()[-1]


# -- TensorBoard -----------------------------------------------------------------------------------
def test_tensorboard_events_hold_the_logged_numbers(base, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=10, log_every=5, valid_every=5, save_every=5,
                               tensorboard=True)
    train(exp, cfg)
    events = EventAccumulator(str(exp.tensorboard_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/nll", "train/lr", "train/grad_norm", "train/tgt_tokens_per_s",
            "valid/loss", "valid/ppl"} <= tags
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    logged = {r["step"]: r["loss"] for r in records if "loss" in r}
    assert {e.step: round(e.value, 4) for e in events.Scalars("train/loss")} == pytest.approx(logged, abs=1e-4)
    assert [e.step for e in events.Scalars("valid/ppl")] == [5, 10]
    # resumed from step 5 (last.pt put back): the earlier run's events past it are purged, not shown
    # beside the new run's for the same steps
    shutil.copy(exp.checkpoint_path("step_5"), exp.checkpoint_path("last"))
    train(exp, cfg)
    events = EventAccumulator(str(exp.tensorboard_dir))
    events.Reload()
    assert [e.step for e in events.Scalars("valid/ppl")] == [5, 10]
    assert [e.step for e in events.Scalars("train/loss")] == [5, 10]


@pytest.mark.slow
def test_tensorboard_without_the_package_is_one_line_naming_what_to_install(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=2, tensorboard=True)
    # The package made unimportable in that process only, as on a machine without it.
    code = ("import sys; sys.modules['tensorboard'] = None; sys.modules['torch.utils.tensorboard'] = None; "
            "from mt.cli.main import entry_point; sys.argv = ['mt', 'train', '--exp', sys.argv[1]]; entry_point()")
    done = subprocess.run([sys.executable, "-c", code, str(exp.root)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr  # a config error
    assert "pip install tensorboard" in done.stderr.strip().splitlines()[-1]


def test_init_from_starts_the_average_from_the_loaded_weights(base, tmp_path):
    from mt.training.checkpoints import start_from_weights

    source, source_cfg = copy_experiment(base, tmp_path / "source", max_steps=3)
    train(source, source_cfg)
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3, ema_decay=0.99)
    run = build_training(exp, cfg)
    start_from_weights(run, str(source.root))
    weights = [p.detach() for p in run.trainer.model.parameters()]
    assert all(torch.equal(a, w) for a, w in zip(run.trainer.ema.average, weights))


# -- warmup ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_shorter_than_its_warmup_is_warned_about(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=3, warmup_steps=4000)
    done = mt("train", "--exp", str(exp.root))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: train.warmup_steps 4000 >= train.max_steps 3: the learning rate never reaches "
                        "its peak; lower --warmup-steps"], done.stderr
    exp, cfg = copy_experiment(base, tmp_path / "short", max_steps=3, warmup_steps=2)
    done = mt("train", "--exp", str(exp.root))
    assert done.returncode == 0 and "warning:" not in done.stderr, done.stderr


def test_tokens_per_second_leave_out_validation_and_checkpoint_writing(base, tmp_path, monkeypatch):
    """The record after a validation counted the validation's seconds as training's (a fraction of the
    true speed, which `mt info` shows when it is the latest record)."""
    import time

    from mt.training import loop

    validate = loop.validate_run

    def slow(run):  # a validation of a second: greedy BLEU on a CPU takes longer
        time.sleep(1.0)
        return validate(run)

    monkeypatch.setattr(loop, "validate_run", slow)
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=12, log_every=2, valid_every=6, save_every=6)
    train(exp, cfg)
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    rates = {r["step"]: r["tgt_tokens_per_s"] for r in records if "tgt_tokens_per_s" in r}
    assert {2, 6, 8} <= set(rates)
    assert rates[8] > rates[2] / 4, rates  # counted with the 1 s validation it was under a tenth
    # a save between two records: the window's seconds still all of its updates' (not only those after it)
    monkeypatch.setattr(loop, "validate_run", validate)
    def rates_of(name: str, save_every: int) -> dict[int, float]:
        exp, cfg = copy_experiment(base, tmp_path / name, max_steps=12, log_every=4, valid_every=100,
                                   save_every=save_every)
        train(exp, cfg)
        records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
        return {r["step"]: r["tgt_tokens_per_s"] for r in records if "tgt_tokens_per_s" in r}

    unsaved, saved = rates_of("unsaved", 100), rates_of("saved", 1)
    # restarted at each save, a record counted 4 updates' tokens in the last one's time: 4x
    assert saved[12] < 2 * unsaved[12] and saved[8] < 2 * unsaved[8], (saved, unsaved)


def test_validation_settings_without_a_validation_split_are_said(base, tmp_path, capsys):
    """train.patience, valid_bleu and best_metric did nothing, unsaid, in an experiment without data.valid."""
    from helpers import tiny_experiment

    exp, cfg = tiny_experiment(tmp_path, {"train": 200, "test": 10}, model={"enc_layers": 1, "dec_layers": 1},
                               train={"max_steps": 2, "max_tokens": 300, "patience": 2}, decode={})
    train(exp, cfg)
    err = " ".join(capsys.readouterr().err.split())
    assert "train.patience 2: this experiment has no validation split (data.valid), so no effect" in err, err
