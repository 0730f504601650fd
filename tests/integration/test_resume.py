"""Exact resume, signals and the training lock, through `mt train` run as a real process.

A run killed with SIGKILL and resumed ends with bitwise the same parameters, optimizer state and
random number generators as an uninterrupted run (CPU, dropout on); SIGINT and SIGTERM save at the
next step boundary and exit 0; a second trainer is refused while one runs, and a lock left by a dead
process is taken over. The tiny experiment comes from helpers.build_experiment.
"""

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
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import assert_same, build_experiment, copy_experiment

from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint
from mt.experiment.paths import Experiment
from mt.training.checkpoints import rng_state, set_rng_state

N = 40  # steps of the uninterrupted run; the other is killed after its checkpoint at N / 2
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("resume"))


def start_train(exp: Experiment, log: Path, *flags: str) -> subprocess.Popen:
    """`mt train` in the background; stderr to a file (a pipe nobody reads could fill and block it)."""
    with open(log, "wb") as handle:
        return subprocess.Popen([sys.executable, "-m", "mt", "train", "--exp", str(exp.root), "--threads", "1",
                                 *flags], stdout=subprocess.DEVNULL, stderr=handle, env=ENV)


def run_train(exp: Experiment, *flags: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mt", "train", "--exp", str(exp.root), "--threads", "1", *flags],
                          capture_output=True, env=ENV, timeout=120)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def wait_until(condition, process: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"mt train exited ({process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} after {timeout}s"
        time.sleep(0.005)


def logged_steps(exp: Experiment) -> list[int]:
    if not exp.train_log_path.exists():
        return []
    return [int(m) for m in re.findall(r'"step": (\d+), "epoch"', exp.train_log_path.read_text())]


@pytest.mark.slow
def test_killed_and_resumed_equals_uninterrupted_bitwise(base, tmp_path):
    # Bitwise on the CPU, not merely close: nothing in a step depends on more than the saved state.
    # The model, Adam's moments and step, the data position (the batch order is a function of seed
    # and epoch) and the RNGs (dropout draws from torch's) are restored exactly; matmuls on one
    # thread reduce in a fixed order; validation and checkpointing consume no random numbers.
    # Weight decay on: AdamW's two parameter groups (decayed, not) round-trip as well.
    # The moving average of the weights (train.ema_decay) too.
    straight, _ = copy_experiment(base, tmp_path / "straight", max_steps=N, save_every=N // 2, weight_decay=0.01,
                                  ema_decay=0.99)
    killed, _ = copy_experiment(base, tmp_path / "killed", max_steps=N, save_every=N // 2, weight_decay=0.01,
                                ema_decay=0.99)
    assert straight.load_config().model.dropout > 0

    done = run_train(straight)
    assert done.returncode == 0, done.stderr

    # Never ends by itself (max_steps 10^6): killed once the first save is complete. last.pt is written
    # last of a save (after step_N.pt), so once it exists it holds step N/2 (the next save is at step N).
    process = start_train(killed, tmp_path / "killed.err", "--max-steps", "1000000")
    wait_until(lambda: killed.checkpoint_path("last").exists() and killed.checkpoint_path(f"step_{N // 2}").exists(),
               process, f"last.pt and step_{N // 2}.pt")
    process.kill()
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert killed.lock_path.read_text().strip() == str(process.pid)  # left behind by the dead process
    assert load_checkpoint(killed.checkpoint_path("last"))["step"] == N // 2

    done = run_train(killed, "--max-steps", str(N))  # the stale lock is taken over
    assert done.returncode == 0, done.stderr
    assert f"resuming at step {N // 2}" in done.stderr
    assert not killed.lock_path.exists()

    ours, theirs = (load_checkpoint(e.checkpoint_path("last")) for e in (killed, straight))
    assert ours["step"] == theirs["step"] == N
    for key in ("model", "optimizer", "rng", "epoch", "batch_in_epoch", "best_valid", "ema"):
        assert_same(ours[key], theirs[key], key)
    assert_same(*(load_checkpoint(e.checkpoint_path("ema"))["model"] for e in (killed, straight)), "ema.pt")


def test_a_run_stopped_before_its_last_step_was_validated_validates_it_when_resumed(base, tmp_path):
    """A checkpoint of the budget's last step saved before its validation (save_every, or a signal during
    it): the resume took the step as validated, stopped at once, and `mt run` said "done"; best.pt
    stayed an earlier step's."""
    from mt.apps.run import _training_done

    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=10, save_every=5, valid_every=4, log_every=1)
    assert run_train(exp).returncode == 0
    state = load_checkpoint(exp.checkpoint_path("last"))
    assert state["step"] == state["validated_at"] == 10 and _training_done(exp, cfg) is not None
    save_checkpoint(exp.checkpoint_path("last"), {**state, "validated_at": 8})  # as a kill left it
    assert _training_done(exp, cfg) is None
    before = exp.train_log_path.read_text().count('"valid_nll"')
    done = run_train(exp)
    assert done.returncode == 0, done.stderr
    assert exp.train_log_path.read_text().count('"valid_nll"') == before + 1
    assert load_checkpoint(exp.checkpoint_path("last"))["validated_at"] == 10 and _training_done(exp, cfg)


@pytest.mark.slow
def test_a_signal_between_validations_leaves_best_and_patience_as_an_uninterrupted_run(base, tmp_path):
    """The save at a signal is not validated: a validation off the valid_every grid moved best_valid,
    the patience count and best.pt, and the resumed run then stopped by patience where the
    uninterrupted one did not."""
    fields = dict(max_steps=N, save_every=10**6, valid_every=25, log_every=1)
    straight, _ = copy_experiment(base, tmp_path / "straight", **fields)
    stopped, _ = copy_experiment(base, tmp_path / "stopped", **fields)
    assert run_train(straight).returncode == 0
    process = start_train(stopped, tmp_path / "stopped.err", "--max-steps", "1000000")
    wait_until(lambda: any(step > 11 for step in logged_steps(stopped)), process, "step 12")
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 130
    step = load_checkpoint(stopped.checkpoint_path("last"))["step"]
    assert step < N and step % 25, f"stopped at step {step}: not between validations, nothing tested"
    done = run_train(stopped, "--max-steps", str(N))
    assert done.returncode == 0, done.stderr
    ours, theirs = (load_checkpoint(e.checkpoint_path("last")) for e in (stopped, straight))
    assert ours["step"] == theirs["step"] == N
    for key in ("best_valid", "bad_validations", "model"):
        assert_same(ours[key], theirs[key], key)
    validated = [[r["step"] for r in map(json.loads, e.train_log_path.read_text().splitlines()) if "valid_nll" in r]
                 for e in (stopped, straight)]
    assert validated[0] == validated[1] == [25, N]  # none at the signal's step
    assert_same(*(load_checkpoint(e.checkpoint_path("best"))["step"] for e in (stopped, straight)), "best.pt's step")


@pytest.mark.slow
def test_signals_save_at_a_step_boundary_and_the_lock_refuses_a_second_trainer(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=10**6, log_every=10, save_every=10**6)
    first = start_train(exp, tmp_path / "first.err")
    wait_until(lambda: logged_steps(exp), first, "a log record")

    second = run_train(exp)
    assert second.returncode == 1 and "Traceback" not in second.stderr
    last_line = second.stderr.strip().splitlines()[-1]
    assert last_line.startswith("error: ") and f"already being trained or binarized by process {first.pid}" in last_line
    assert first.poll() is None

    for sig, process, err in ((signal.SIGTERM, first, "first.err"), (signal.SIGINT, None, "third.err")):
        if process is None:  # resume, then interrupt as Ctrl-C would
            before = max(logged_steps(exp))
            process = start_train(exp, tmp_path / err)
            wait_until(lambda: max(logged_steps(exp)) > before, process, "a new log record")
        process.send_signal(sig)
        assert process.wait(timeout=60) == 130  # saved, then the shell's code for an interrupt
        stderr = (tmp_path / err).read_text()
        assert "Traceback" not in stderr
        mentions = [line for line in stderr.splitlines() if sig.name in line]
        assert len(mentions) == 1, stderr
        step = int(re.search(r"saved .*last\.pt at step (\d+)", mentions[0]).group(1))
        assert load_checkpoint(exp.checkpoint_path("last"))["step"] == step > 0
        assert not exp.lock_path.exists()


def test_rng_states_round_trip_through_a_checkpoint(tmp_path):
    random.seed(3)
    np.random.seed(4)
    torch.manual_seed(5)
    random.random(), np.random.normal(), torch.rand(1)  # numpy now holds a cached gaussian
    path = tmp_path / "rng.pt"
    save_checkpoint(path, {"rng": rng_state(torch.device("cpu"))})
    expected = (random.random(), random.gauss(0, 1), np.random.normal(), np.random.rand(), torch.rand(3))
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    set_rng_state(load_checkpoint(path)["rng"], torch.device("cpu"))  # loaded with weights_only=True
    again = (random.random(), random.gauss(0, 1), np.random.normal(), np.random.rand(), torch.rand(3))
    assert again[:4] == expected[:4] and torch.equal(again[4], expected[4])


def test_a_training_setting_changed_on_a_finished_run_is_refused_unless_it_trains_on(trained_experiment, tmp_path):
    """Was: `mt train --lr 0.05` on a finished run said "resuming ... peak lr 5.00e-02", ran no update, and
    the config (and so a model card) recorded a peak lr the model never trained with."""
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    config, step = exp.config_path.read_text(), load_checkpoint(exp.checkpoint_path("last"))["step"]
    refused = run_train(exp, "--lr", "0.05")
    assert refused.returncode == 2 and "training is finished (step" in refused.stderr, refused.stderr
    assert "train.lr_peak would be recorded but never used" in refused.stderr
    assert exp.config_path.read_text() == config
    went_on = run_train(exp, "--lr", "0.001", "--max-steps", str(step + 2))
    assert went_on.returncode == 0, went_on.stderr
    assert exp.load_config().train.lr_peak == 0.001


@pytest.mark.slow
def test_a_new_seed_on_resume_is_refused_in_one_line(trained_experiment, tmp_path):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    config, seed = exp.config_path.read_text(), exp.load_config().train.seed
    refused = run_train(exp, "--seed", str(seed + 4), "--max-steps", "50")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        f"error: --seed: train.seed is fixed at {seed} (not {seed + 4}): the checkpoints hold the random state "
        f"and data order it seeded, which a resume continues; start a new experiment (another --exp) to change it"]
    assert exp.config_path.read_text() == config  # nor --max-steps recorded


def test_a_budget_below_the_trained_step_is_refused_in_one_line(trained_experiment, tmp_path):
    """Was: config.yaml and overrides.jsonl recorded max_steps 10 for a model of 40 updates, and the run
    said it stopped at step 40 (max_steps)."""
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    config = exp.config_path.read_text()
    refused = run_train(exp, "--max-steps", "10")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        f"error: --max-steps: train.max_steps 10: {exp.checkpoint_path('last')} is at step 40 already; give 40 or "
        "more (a model of fewer updates: a step_N.pt checkpoint kept by train.keep_last)"], refused.stderr
    assert exp.config_path.read_text() == config and not (exp.root / "overrides.jsonl").exists()
    done = run_train(exp, "--max-steps", "40")  # the budget it has: done
    assert done.returncode == 0 and "stopped at step 40 (max_steps)" in done.stderr, done.stderr


def test_each_log_record_says_how_many_updates_it_averages(trained_experiment, tmp_path):
    """log_every 6, a validation at 15 and a resume at 40: the records after them average fewer updates
    than log_every, which each says (was: nothing told the step-18 or step-42 record from a full one)."""
    def updates(exp: Experiment) -> dict[int, int]:
        lines = (exp.root / "train.jsonl").read_text().splitlines()
        return {r["step"]: r["updates"] for r in map(json.loads, lines) if "updates" in r}

    assert {step: updates(trained_experiment)[step] for step in (6, 12, 15, 18, 24)} == {6: 6, 12: 6, 15: 3, 18: 3,
                                                                                        24: 6}
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    done = run_train(exp, "--max-steps", "48")
    assert done.returncode == 0, done.stderr
    assert {step: n for step, n in updates(exp).items() if step > 40} == {42: 2, 45: 3, 48: 3}


def test_the_device_is_saved_and_a_resume_on_another_says_so(trained_experiment, tmp_path):
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    last = exp.checkpoint_path("last")
    saved = load_checkpoint(last)
    assert saved["device"] == "cpu"
    save_checkpoint(last, {**saved, "device": "cuda"})  # as a run on a GPU leaves it
    done = run_train(exp, "--max-steps", str(saved["step"] + 1))
    assert done.returncode == 0, done.stderr
    assert f"{last} was trained on cuda; this run continues on cpu (--device cuda to stay there)" in done.stderr
    assert load_checkpoint(last)["device"] == "cpu"
    # Another batch budget in the middle of an epoch: the rest of the epoch is cut anew, which is said.
    state = load_checkpoint(last)
    done = run_train(exp, "--max-steps", str(state["step"] + 1), "--max-tokens", str(2 * state["max_tokens"]))
    assert done.returncode == 0, done.stderr
    said = f"train.max_tokens {state['max_tokens']} -> {2 * state['max_tokens']} in the middle of epoch"
    assert state["batch_in_epoch"] > 0 and said in done.stderr, (state["batch_in_epoch"], done.stderr)


def test_a_restart_without_last_pt_refuses_the_earlier_runs_step_checkpoints(trained_experiment, tmp_path):
    """Was: a new run from step 0 overwrote step_20.pt, pruned by name (its own newest checkpoint among
    the older run's later ones) and `mt average` then mixed the two runs."""
    from helpers import one_thread

    from mt.errors import MtError
    from mt.training.loop import train

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    exp.checkpoint_path("last").unlink()
    before = {p.name: p.read_bytes() for p in exp.step_checkpoints()}
    assert len(before) == 2
    cfg = exp.load_config()
    cfg.train.keep_last = 1
    with one_thread(), pytest.raises(MtError, match="of an earlier run but no last.pt") as info:
        train(exp, cfg)
    assert "\n" not in str(info.value) and all(name in str(info.value) for name in before)
    newest = max(before)  # step_N.pt sort by step (zero-padded): the newest holds the training state
    assert f"cp {exp.checkpoints_dir / newest} {exp.checkpoint_path('last')}" in str(info.value), info.value
    assert {p.name: p.read_bytes() for p in exp.step_checkpoints()} == before
    assert not exp.checkpoint_path("last").exists()


def test_precision_auto_is_kept_from_last_pt_on_the_same_kind_of_device(trained_experiment, tmp_path):
    """Was: timed again at every resume, so that a busy machine or a timing near the line switched a
    resumed run's precision (as max_tokens auto, the choice is the run's)."""
    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    last = exp.checkpoint_path("last")
    saved = load_checkpoint(last)
    assert saved["precision"] in ("fp32", "bf16", "fp16") and saved["device"] == "cpu"
    done = run_train(exp, "--max-steps", str(saved["step"] + 1), "--precision", "auto")
    assert done.returncode == 0, done.stderr
    assert f"precision auto: {saved['precision']} (kept from {last}, trained on cpu)" in " ".join(done.stderr.split())
    assert load_checkpoint(last)["precision"] == saved["precision"]
