"""mt.training.checkpoints: the counters round-trip through a checkpoint's keys (older checkpoints too), the
best validation and patience, and a run's checkpoint keeps every key existing checkpoints have.
The tiny experiment comes from helpers.build_experiment.
"""

from __future__ import annotations

import math

import pytest
from helpers import build_experiment, copy_experiment

from mt.experiment.checkpoint_file import load_checkpoint
from mt.experiment.paths import Experiment
from mt.training.checkpoints import resume_training, save_training
from mt.training.setup import build_training
from mt.training.state import TrainingState

pytestmark = pytest.mark.usefixtures("single_thread")

# The keys of a training checkpoint as written before TrainingState (existing checkpoints resume), and
# max_tokens since train.max_tokens auto (older checkpoints lack it: a resume takes the config's), and
# bad_in_row since a resume counts on the run of bad updates it stopped in (older ones: 0), and precision
# since train.precision auto keeps its choice (older ones: decided again), batching and best_setup since a
# resume says when the batches are cut otherwise or a BLEU best was of another sample (older ones: not said),
# and patience_best since a validation off the valid_every grid counts for no patience (older ones: best_valid).
CHECKPOINT_KEYS = {"model", "optimizer", "scaler", "model_config", "vocab", "tokenizer_sha256", "step", "epoch",
                   "batch_in_epoch", "world_size", "best_metric", "best_valid", "bad_validations", "cooldown_from",
                   "skipped", "elapsed", "init_from", "device", "rng", "ema", "max_tokens", "bad_in_row", "precision",
                   "batching", "best_setup", "patience_best", "validated_at"}


def test_the_counters_round_trip_through_a_checkpoint():
    state = TrainingState(step=7, best_metric="bleu", best_valid=12.5, bad_validations=2, cooldown_from=3e-4,
                          skipped=1, elapsed=9.5, init_from="other/checkpoints/best.pt", device="cuda",
                          max_tokens=24576, bad_in_row=2, precision="bf16", patience_best=11.0, validated_at=6)
    saved = state.to_checkpoint()
    assert set(saved) < CHECKPOINT_KEYS
    assert TrainingState.from_checkpoint(saved, "bleu") == state


def test_an_older_checkpoint_and_a_changed_best_metric():
    older = {"step": 3, "best_valid": 2.0, "elapsed": 1.0}  # before patience, cooldown, skipped, init_from
    assert TrainingState.from_checkpoint(older, "nll") == TrainingState(step=3, best_valid=2.0, elapsed=1.0)
    changed = TrainingState.from_checkpoint({**older, "best_metric": "nll", "bad_validations": 4}, "bleu")
    assert (changed.step, changed.best_valid, changed.bad_validations) == (3, -math.inf, 0)  # a new best starts


def test_a_bleu_best_of_another_sample_size_starts_afresh():
    """A BLEU best of 50 sentences compared with scores of 1,000: best.pt stuck, patience ran out early."""
    saved = TrainingState(step=5, best_metric="bleu", best_valid=30.0, bad_validations=2,
                          best_setup="greedy BLEU on 50 sentences").to_checkpoint()
    same = TrainingState.from_checkpoint(saved, "bleu", "greedy BLEU on 50 sentences")
    assert (same.best_valid, same.bad_validations) == (30.0, 2)
    other = TrainingState.from_checkpoint(saved, "bleu", "greedy BLEU on 1000 sentences")
    assert (other.best_valid, other.bad_validations, other.step) == (-math.inf, 0, 5)
    from mt.training.state import bleu_setup  # a multilingual mean of directions is another scale than pooled

    assert bleu_setup("bleu", 50, multilingual=True) != bleu_setup("bleu", 50) and bleu_setup("nll", 50) is None
    older = {k: v for k, v in saved.items() if k != "best_setup"}  # saved before the setup was recorded
    assert TrainingState.from_checkpoint(older, "bleu", "greedy BLEU on 1000 sentences").best_valid == 30.0


def test_a_validation_off_the_schedule_may_be_a_best_but_counts_for_no_patience():
    """A run's last validation off valid_every (a max_steps stop at 45 of valid_every 10) counted as a
    bad one: stopped there and resumed, the run ran out of patience where an unbroken one did not."""
    state = TrainingState.fresh("nll")
    assert state.record_validation({"valid_nll": 2.0})
    assert not state.record_validation({"valid_nll": 2.5}, on_schedule=False) and state.bad_validations == 0
    assert state.record_validation({"valid_nll": 1.5}, on_schedule=False) and state.best_valid == 1.5
    # Neither does its new best count: the grid's next validations are measured against the grid's own
    # best (2.0), as in a run never stopped, whose validation at 45 never happened (was: patience reset
    # by it, and 1.8 then counted as bad against 1.5)
    off_grid = TrainingState.fresh("nll")
    for value in (2.0, 2.2, 2.3):
        off_grid.record_validation({"valid_nll": value})
    assert off_grid.bad_validations == 2
    assert off_grid.record_validation({"valid_nll": 1.5}, on_schedule=False) and off_grid.bad_validations == 2
    resumed = TrainingState.from_checkpoint(off_grid.to_checkpoint(), "nll")
    assert not resumed.record_validation({"valid_nll": 1.8}) and resumed.bad_validations == 0  # beats 2.0
    assert not resumed.record_validation({"valid_nll": 1.9}) and resumed.bad_validations == 1


def test_the_best_validation_and_patience():
    state = TrainingState.fresh("nll")
    assert state.record_validation({"valid_nll": 2.0}) and not state.record_validation({"valid_nll": 2.0})
    assert state.bad_validations == 1 and state.out_of_patience(1) and not state.out_of_patience(2)
    assert not state.out_of_patience(0)  # 0: never
    assert state.record_validation({"valid_nll": 1.5}) and state.bad_validations == 0
    bleu = TrainingState.fresh("bleu")
    assert bleu.record_validation({"valid_bleu": 0.0, "valid_nll": 9.0}) and bleu.best_valid == 0.0


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("training_state"))


def test_a_run_saves_the_keys_on_disk_and_resumes_its_state_and_position(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    run = build_training(exp, cfg)
    for _ in range(3):
        run.trainer.step()
    save_training(run)
    assert set(load_checkpoint(exp.checkpoint_path("last"))) == CHECKPOINT_KEYS | {"format"}
    resumed = build_training(exp, cfg)
    assert resume_training(resumed)
    assert resumed.trainer.state == run.trainer.state
    assert (resumed.trainer.stream.epoch, resumed.trainer.stream.batch_in_epoch) == (0, 3)
    assert resumed.trainer.stream.next_batch().indices.tolist() == run.trainer.stream.next_batch().indices.tolist()


def test_a_resume_says_when_the_batches_are_cut_otherwise_mid_epoch(base, tmp_path, capsys):
    """train.compile (padded shapes) changed mid-epoch cut the epoch's batches anew without a word: pairs
    trained twice or never in that epoch."""
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    run = build_training(exp, cfg)
    for _ in range(3):
        run.trainer.step()
    save_training(run)
    capsys.readouterr()
    assert resume_training(build_training(exp, cfg)) and "cut otherwise" not in capsys.readouterr().err
    cfg.train.compile = True
    resumed = build_training(exp, cfg)
    assert resume_training(resumed)
    said = " ".join(capsys.readouterr().err.split())
    assert "batches cut otherwise (bucketed False -> bucketed True" in said and "middle of epoch 0" in said
    assert resumed.trainer.state.batching == "bucketed True"
