"""mt.training.trainer, mt.training.setup, mt.training.checkpoints and mt.training.loop's loop: update_freq, weight decay, bf16,
fp16, skipped non-finite updates, the cooldown across a resume, late dropout, validation BLEU,
patience, keep_last, --init-from, and `mt average` through the CLI.

helpers.build_experiment (also used by test_resume.py, test_distributed.py and others) makes a tiny experiment in
a temporary directory through the library: generated German-English word-for-word pairs, a 100-piece
SentencePiece model, binarized splits, and a 1+1-layer model with d_model 32.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import assert_params_close, build_experiment, copy_experiment, params

from mt.config.schema import ExperimentConfig
from mt.data.batching import collate, make_batches
from mt.data.corpus import load_split
from mt.errors import MtError
from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint, saved_step
from mt.experiment.paths import Experiment
from mt.model.layers import FeedForward
from mt.search.single_path import greedy_search
from mt.tokenizer import EOS_ID
from mt.training.checkpoints import resume_training, save_training, start_from_weights, training_checkpoint
from mt.training.loop import train, validate_run
from mt.training.schedule import inverse_sqrt_lr
from mt.training.setup import build_training


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("trainer"))


pytestmark = pytest.mark.usefixtures("single_thread")


# -- update_freq ---------------------------------------------------------------------------------------


def test_update_freq_k_equals_one_batch_of_k_times_the_rows(base, tmp_path):
    # Adam's first update is lr * g / (|g| + eps): with eps -> 0 it is lr * sign(g), and rounding
    # noise in a near-zero gradient could flip it. A large eps makes the update Lipschitz in g, so
    # that 1e-6 on the parameters tests the gradients.
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0, update_freq=3, adam_eps=1e-3)
    accumulated = build_training(exp, cfg).trainer
    order = make_batches(accumulated.stream.data.src_lens, accumulated.stream.data.tgt_lens, cfg.train.max_tokens,
                         cfg.train.seed, 0)
    stats = accumulated.step()  # update_freq 3: the first three batches of the seeded order
    assert accumulated.stream.batch_in_epoch == 3 and accumulated.state.step == 1

    whole = build_training(exp, cfg).trainer
    big = collate(whole.stream.data, np.concatenate(order[:3]))
    assert big.size == sum(len(b) for b in order[:3])
    whole_stats = whole.step([big])
    assert stats["tgt_tokens"] == whole_stats["tgt_tokens"] == big.n_tgt_tokens
    assert stats["loss"] == pytest.approx(whole_stats["loss"], rel=1e-6)
    assert_params_close(params(accumulated.model), params(whole.model), atol=1e-6)
    assert not all(torch.equal(a, b) for a, b in zip(params(whole.model).values(),
                                                       params(build_training(exp, cfg).trainer.model).values()))


# -- Sec. 5.3: Adam's hyperparameters ----------------------------------------------------------------------


def test_the_optimizer_of_a_default_config_is_the_papers_adam(base, tmp_path):
    """beta1 0.9, beta2 0.98, eps 1e-9, and no weight decay (plain Adam), from TrainConfig's defaults."""
    defaults = ExperimentConfig().train
    assert (defaults.adam_beta1, defaults.adam_beta2, defaults.adam_eps, defaults.weight_decay) == (0.9, 0.98, 1e-9, 0.0)
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    assert (cfg.train.adam_beta1, cfg.train.adam_beta2, cfg.train.adam_eps) == (0.9, 0.98, 1e-9)
    optimizer = build_training(exp, cfg).trainer.optimizer
    assert isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)) and optimizer.param_groups
    for group in optimizer.param_groups:
        assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9 and group["weight_decay"] == 0.0


# -- weight decay --------------------------------------------------------------------------------------


def test_weight_decay_is_decoupled_and_spares_biases_and_layernorm(base, tmp_path):
    # AdamW shrinks p by lr * wd before Adam's step, which does not depend on p: on the same batch the
    # decayed and undecayed updates differ by exactly lr * wd * p for matrices and embeddings, and
    # not at all for biases and LayerNorm (coupled L2 would also change the gradient and so Adam's step).
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0)
    plain = build_training(exp, cfg).trainer
    exp_wd, cfg_wd = copy_experiment(base, tmp_path / "wd", model__dropout=0.0, weight_decay=0.5)
    decayed = build_training(exp_wd, cfg_wd).trainer
    start = params(plain.model)
    assert_params_close(start, params(decayed.model), atol=0)
    batch = plain.stream.next_batch()
    stats = plain.step([batch])
    decayed.step([batch])
    lr = stats["lr"]
    assert lr > 0
    matrices = 0
    got, want = params(decayed.model), params(plain.model)
    for name, p0 in start.items():
        if p0.dim() >= 2:
            matrices += 1
            torch.testing.assert_close(want[name] - got[name], lr * 0.5 * p0, atol=1e-7, rtol=1e-4, msg=name)
        else:
            assert torch.equal(got[name], want[name]), name
    assert matrices > 0 and any(p.dim() < 2 for p in start.values())


@pytest.mark.parametrize("before, after", [(0.0, 0.05), (0.05, 0.0), (0.05, 0.1)])
def test_resume_takes_weight_decay_and_betas_from_the_config_and_keeps_each_moment(base, tmp_path, before, after):
    exp, cfg = copy_experiment(base, tmp_path / "exp", weight_decay=before)
    run = build_training(exp, cfg)
    trainer = run.trainer
    trainer.step()
    trainer.step()
    save_training(run)
    names = {id(p): name for name, p in trainer.model.named_parameters()}
    moments = {names[id(p)]: s["exp_avg_sq"].clone() for p, s in trainer.optimizer.state.items()}

    cfg.train.weight_decay, cfg.train.adam_beta2 = after, 0.95
    run = build_training(exp, cfg)
    resumed = run.trainer
    assert resume_training(run) and resumed.state.step == 2
    names = {id(p): name for name, p in resumed.model.named_parameters()}
    got = {names[id(p)]: s["exp_avg_sq"] for p, s in resumed.optimizer.state.items()}
    assert got.keys() == moments.keys() and all(torch.equal(got[k], moments[k]) for k in got)
    assert {g["betas"] for g in resumed.optimizer.param_groups} == {(cfg.train.adam_beta1, 0.95)}
    decay = {names[id(p)]: g["weight_decay"] for g in resumed.optimizer.param_groups for p in g["params"]}
    assert decay == {name: after if p.dim() >= 2 else 0.0 for name, p in resumed.model.named_parameters()}
    resumed.step()  # and it trains on
    assert resumed.state.step == 3


def test_negative_weight_decay_is_refused():
    from mt.config.schema import from_dict
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match="train.weight_decay must be 0"):
        from_dict({"train": {"weight_decay": -0.1}}, "recipe.yaml")


# -- precision -----------------------------------------------------------------------------------------


def test_bf16_step_on_cpu(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", precision="bf16")
    trainer = build_training(exp, cfg).trainer
    before = params(trainer.model)
    stats = [trainer.step() for _ in range(2)]
    assert all(math.isfinite(s["loss"]) and math.isfinite(s["grad_norm"]) and not s["skipped"] for s in stats)
    assert trainer.state.step == 2
    after = params(trainer.model)
    assert all(p.dtype == torch.float32 for p in after.values())  # autocast: fp32 weights, bf16 matmuls
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_precision_auto_trains_in_what_it_timed_faster_and_stays_auto_on_disk(base, tmp_path):
    # Which one wins depends on this CPU; either way the step must run in exactly that precision,
    # and the saved config keeps `auto` so that a resume on another machine decides again.
    exp, cfg = copy_experiment(base, tmp_path / "exp", precision="auto", model__dropout=0.0)
    run = build_training(exp, cfg)
    auto = run.trainer
    chosen = auto.precision
    assert chosen in ("fp32", "bf16", "fp16") and run.cfg.train.precision == chosen
    assert cfg.train.precision == exp.load_config().train.precision == "auto"
    batch = auto.stream.next_batch()
    loss = auto.step([batch])["loss"]
    for precision in ("fp32", "bf16", "fp16"):
        fixed = build_training(exp, dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))).trainer
        assert (fixed.step([batch])["loss"] == loss) == (precision == chosen), precision


def test_fp16_on_the_cpu_is_closer_to_fp32_than_bf16_and_trains_under_a_loss_scale(base, tmp_path):
    # fp16 keeps 10 mantissa bits to bf16's 7: the same step's loss must land nearer fp32's, which
    # also shows that it ran in fp16 and not in either of the others.
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0)
    batch = build_training(exp, cfg).trainer.stream.next_batch()
    losses = {}
    for precision in ("fp32", "bf16", "fp16"):
        trainer = build_training(exp, dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))).trainer
        assert (trainer.scaler is not None) == (precision == "fp16")
        losses[precision] = trainer.step([batch])["loss"]
    assert 0 < abs(losses["fp16"] - losses["fp32"]) < abs(losses["bf16"] - losses["fp32"])
    # A summed loss overflows fp16 under the scaler's first scale (2^16): that update is skipped as
    # the scale's doing (not a bad update), the scale halves, and training goes on to real updates.
    fp16_run = build_training(exp, dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="fp16")))
    fp16 = fp16_run.trainer
    before = params(fp16.model)
    scales, steps = [fp16.scaler.get_scale()], []
    while fp16.state.step == 0 and len(steps) < 20:
        steps.append(fp16.step([batch]))
        scales.append(fp16.scaler.get_scale())
    assert steps[0]["skipped"] and fp16.bad_in_row == 0 and fp16.state.step == 1
    assert scales[1] == scales[0] / 2 and not steps[-1]["skipped"]
    assert any(not torch.equal(before[k], v) for k, v in params(fp16.model).items())
    save_training(fp16_run)  # a resume continues under the learned scale, not from 2^16 again
    run = build_training(exp, dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="fp16")))
    resumed = run.trainer
    assert resumed.scaler.get_scale() == scales[0]
    assert resume_training(run) and resumed.scaler.get_scale() == scales[-1] < scales[0]


def test_the_schedule_does_not_depend_on_when_skipped_updates_are_read(base, tmp_path):
    """fp16's first updates overflow and are skipped; the loop reads them back at its log, validation
    and save points. The lr was the schedule's at `state.step`, which counts an unread skip, so a run
    that read at other points (one stopped and resumed) trained with other lrs: not the same run."""
    exp, cfg = copy_experiment(base, tmp_path / "exp", precision="fp16", warmup_steps=4, model__dropout=0.0,
                               model__attention_dropout=0.0, model__activation_dropout=0.0)  # no shared RNG draws
    batches = [build_training(exp, cfg).trainer.stream.next_batch() for _ in range(8)]
    runs = {"each": build_training(exp, cfg).trainer, "end": build_training(exp, cfg).trainer}
    lrs: dict[str, list[float]] = {name: [] for name in runs}
    for batch in batches:
        for name, trainer in runs.items():
            lrs[name].append(trainer.update([batch])["lr"])
            if name == "each":
                trainer.read()
    runs["end"].read()
    assert runs["each"].state.skipped == runs["end"].state.skipped > 0  # the overflows, read at either time
    assert runs["each"].state.step == runs["end"].state.step
    assert lrs["each"] == lrs["end"]
    for (name, a), b in zip(params(runs["each"].model).items(), params(runs["end"].model).values()):
        assert torch.equal(a, b), name


# -- non-finite updates --------------------------------------------------------------------------------


def test_a_non_finite_loss_skips_the_update(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    trainer = build_training(exp, cfg).trainer
    with torch.no_grad():
        trainer.model.output.weight[7, 3] = float("nan")  # tied: every logit of token 7 is nan
    before = params(trainer.model)
    stats = trainer.step()
    assert stats["skipped"] and math.isnan(stats["loss"])
    assert trainer.state.step == 0 and trainer.state.skipped == 1 and trainer.bad_in_row == 1
    assert all(p.grad is None for p in trainer.model.parameters())  # gradients dropped
    # The fused Adam was called with found_inf set, on the device: it made no step (count 0, moments 0).
    for moments in trainer.optimizer.state.values():
        assert moments["step"] == 0 and not moments["exp_avg"].any() and not moments["exp_avg_sq"].any()
    for name, value in params(trainer.model).items():
        assert torch.equal(value.nan_to_num(), before[name].nan_to_num()), name

    with torch.no_grad():
        trainer.model.output.weight[7, 3] = 0.0
    stats = trainer.step()
    assert not stats["skipped"] and math.isfinite(stats["loss"])
    assert trainer.state.step == 1 and trainer.state.skipped == 1 and trainer.bad_in_row == 0


def poisoned(state: dict, token: int) -> dict:
    """A checkpoint state whose source embedding of `token` is nan (untied embeddings)."""
    state = dict(state, model=dict(state["model"]))
    weight = state["model"]["src_embed.tokens.weight"].clone()
    weight[token] = float("nan")
    state["model"]["src_embed.tokens.weight"] = weight
    return state


def test_skipped_updates_are_logged_and_training_goes_on(base, tmp_path):
    """A nan in the source embedding of one piece spoils exactly the batches that contain it."""
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__tie_embeddings=False, log_every=2, max_steps=12,
                               max_bad_steps=100, max_tokens=100)
    run = build_training(exp, cfg)
    data = run.train_data
    sequence = [batch for epoch in range(3) for batch in
                make_batches(data.src_lens, data.tgt_lens, cfg.train.max_tokens, cfg.train.seed, epoch)]

    def skips(token: int) -> int:
        """Updates skipped on the way to 12 good ones: each skipped update still takes a batch."""
        taken = good = 0
        while good < 12:
            if taken == len(sequence):
                return len(sequence)  # in (nearly) every batch
            good += not any(token in data.src(i) for i in sequence[taken])
            taken += 1
        return taken - 12

    counts = np.bincount(np.concatenate([data.src(i) for i in range(len(data))]), minlength=100)
    token = next(t for t in np.argsort(counts) if counts[t] and 1 <= skips(int(t)) <= 6)
    save_checkpoint(tmp_path / "nan.pt", poisoned(training_checkpoint(run), int(token)))

    summary = train(exp, cfg, init_from=str(tmp_path / "nan.pt"))
    assert summary["steps"] == 12 and summary["skipped"] == skips(int(token))
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    logged = [r for r in records if "loss" in r]
    assert [r["step"] for r in logged] == [2, 4, 6, 8, 10, 12]
    assert sum(r["skipped"] for r in logged) == summary["skipped"]
    assert all(math.isfinite(r["loss"]) for r in logged)


def test_too_many_bad_updates_in_a_row_stop_naming_the_last_checkpoint(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__tie_embeddings=False, max_steps=4, save_every=2,
                               max_bad_steps=3)
    train(exp, cfg)
    last = exp.checkpoint_path("last")
    save_checkpoint(last, poisoned(load_checkpoint(last), EOS_ID))  # every source ends in EOS
    cfg.train.max_steps = 10
    with pytest.raises(MtError) as info:
        train(exp, cfg)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("step 5: 3 updates in a row had a non-finite loss or gradient norm")
    assert f"{last} (step 4)" in message
    assert load_checkpoint(last)["step"] == 4  # nothing saved after the bad updates
    assert not exp.lock_path.exists()


def test_a_resume_counts_on_the_bad_updates_in_a_row_it_was_stopped_in(base, tmp_path):
    """train.max_bad_steps judges a run of bad updates across a stop and resume as an unbroken run
    would (the count was the process's own: a resume started again from 0)."""
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__tie_embeddings=False, max_steps=4, save_every=2,
                               max_bad_steps=3, log_every=1)
    train(exp, cfg)
    last = exp.checkpoint_path("last")
    saved = load_checkpoint(last)
    assert saved["bad_in_row"] == 0
    save_checkpoint(last, {**poisoned(saved, EOS_ID), "bad_in_row": 2})  # stopped after two bad updates
    run = build_training(exp, cfg)
    assert resume_training(run) and run.trainer.bad_in_row == 2
    assert training_checkpoint(run)["bad_in_row"] == 2
    cfg.train.max_steps = 10
    with pytest.raises(MtError) as info:
        train(exp, cfg)
    assert str(info.value).startswith("step 5: 3 updates in a row had a non-finite loss or gradient norm")


# -- learning rate: cooldown ---------------------------------------------------------------------------


def test_cooldown_by_steps_is_linear_to_zero_and_resumes(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=8, cooldown=0.25, warmup_steps=2, lr_peak=1e-3,
                               log_every=1, save_every=7)
    summary = train(exp, cfg)
    assert summary["steps"] == 8
    lrs = [r["lr"] for r in map(json.loads, exp.train_log_path.read_text().splitlines()) if "lr" in r]
    schedule = [inverse_sqrt_lr(step, 2, 1e-3) for step in range(1, 9)]
    # Updates 1..6 follow the schedule; the last quarter (updates 7, 8, which start at 6/8 and 7/8
    # of the budget) falls from the schedule's value at update 7 towards 0 at the end.
    assert lrs[:6] == pytest.approx(schedule[:6], rel=1e-12)
    assert lrs[6:] == pytest.approx([schedule[6] * 1.0, schedule[6] * 0.5], rel=1e-12)

    # Killed after update 7 (step_7.pt becomes last.pt) and resumed: update 8 gets the same lr.
    shutil.copy(exp.checkpoint_path("step_7"), exp.checkpoint_path("last"))
    run = build_training(exp, cfg)
    assert resume_training(run) and run.trainer.state.step == 7
    assert lr_at(run.trainer, 8) == lrs[7]
    assert lr_at(build_training(exp, cfg).trainer, 8) != lrs[7]  # without the saved start of the cooldown


def lr_at(trainer, step: int) -> float:
    """The lr the trainer's schedule gives update `step` from its state now (time, the cooldown's start)."""
    progress = trainer.schedule.progress(step, trainer.state.elapsed)
    return trainer.schedule.lr(step, progress, trainer.state.cooldown_from)[0]


# -- late dropout (train.early_dropout) -------------------------------------------------------------------


def test_early_dropout_then_model_dropout_from_a_share_of_the_steps(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "late", model__dropout=0.3, model__activation_dropout=0.2,
                               early_dropout=0.0, early_dropout_until=0.5, max_steps=4)
    late = build_training(exp, cfg).trainer
    assert len(late.dropouts) == 7  # 2 embeddings, 2 encoder + 3 decoder sub-layers
    # Updates 1 and 2 start at 0/4 and 1/4 of the budget: no sub-layer dropout, so exactly the updates of
    # a model whose model.dropout is 0 (same seed, same batches, the same activation dropout masks; one
    # trainer after the other, as each seeds torch's generator).
    late_losses = [late.step()["loss"] for _ in range(2)]
    exp0, cfg0 = copy_experiment(base, tmp_path / "none", model__dropout=0.0, model__activation_dropout=0.2,
                                 max_steps=4)
    plain = build_training(exp0, cfg0).trainer
    assert late_losses == [plain.step()["loss"] for _ in range(2)]
    assert_params_close(params(late.model), params(plain.model), atol=0)
    # Update 3 starts half-way: model.dropout's 0.3 from there on.
    late.step()
    assert {m.p for m in late.dropouts} == {0.3}
    assert {m.dropout.p for m in late.model.modules() if isinstance(m, FeedForward)} == {0.2}  # untouched


def test_early_dropout_by_time_and_off_by_default(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.3, early_dropout=0.1,
                               early_dropout_until=0.4, max_time=100.0)
    trainer = build_training(exp, cfg).trainer
    rates = []
    for elapsed in (0.0, 39.9, 40.0, 99.0):
        trainer.state.elapsed = elapsed
        rates.append(trainer.schedule_dropout(trainer.state.step + 1))
    assert rates == [0.1, 0.1, 0.3, 0.3]
    assert {m.p for m in trainer.dropouts} == {0.3}

    exp, cfg = copy_experiment(base, tmp_path / "off", model__dropout=0.3, max_time=100.0)
    trainer = build_training(exp, cfg).trainer
    trainer.state.elapsed = 0.0
    assert trainer.schedule_dropout(1) == 0.3


def test_early_dropout_is_checked():
    from mt.config.schema import from_dict
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match="train.early_dropout must be in"):
        from_dict({"train": {"early_dropout": 1.5}}, "recipe.yaml")
    with pytest.raises(ConfigError, match="train.early_dropout_until must be in"):
        from_dict({"train": {"early_dropout": 0.1, "early_dropout_until": 0.0}}, "recipe.yaml")


# -- validation: BLEU, best metric, patience -------------------------------------------------------------


def test_a_run_whose_last_update_saves_without_validating_validates_its_final_model(base, tmp_path):
    """max_steps 6, save_every 3, valid_every 4: step 6 saved as a periodic checkpoint, and the run ended
    there without a last validation (best.pt and the summary were step 4's)."""
    from mt.experiment.checkpoint_file import saved_step

    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=6, save_every=3, valid_every=4)
    summary = train(exp, cfg)
    steps = [json.loads(line)["step"] for line in exp.train_log_path.read_text(encoding="utf-8").splitlines()
             if "valid_loss" in json.loads(line)]
    assert steps == [4, 6] and saved_step(exp.checkpoint_path("last")) == 6
    assert summary["valid_ppl"] == pytest.approx(json.loads(exp.train_log_path.read_text().splitlines()[-1])["valid_ppl"])


def test_a_log_record_cut_by_a_kill_does_not_swallow_the_next_runs_first(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=4, log_every=2, valid_every=1000, save_every=1000)
    exp.train_log_path.write_text('{"step": 2, "epoch": 0, "lo', encoding="utf-8")  # killed mid-write
    train(exp, cfg)
    lines = exp.train_log_path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"step": 2, "epoch": 0, "lo' and [json.loads(line)["step"] for line in lines[1:3]] == [2, 4]


def test_validation_bleu_refuses_references_changed_since_binarize_before_training(tmp_path):
    """Was an IndexError after the first steps (a shorter file), or BLEU against the wrong lines."""
    exp = build_experiment(tmp_path / "own")
    cfg = exp.load_config()
    cfg.train.valid_bleu, cfg.train.max_steps, cfg.train.valid_every = True, 6, 3
    refs = tmp_path / "own" / "valid.en"
    lines = refs.read_text(encoding="utf-8").splitlines()
    refs.write_text("\n".join(lines[:4] + ["ein ganz anderer Satz"] + lines[5:]) + "\n", encoding="utf-8")
    with pytest.raises(MtError, match=r"own/valid: changed since `mt binarize` \(reference line 5 differs"):
        train(exp, cfg)
    for side in ("de", "en"):
        corpus = tmp_path / "own" / f"valid.{side}"
        corpus.write_text("\n".join(corpus.read_text(encoding="utf-8").splitlines()[:10]) + "\n", encoding="utf-8")
    with pytest.raises(MtError, match=r"changed since `mt binarize` \(10 reference lines, binarize kept line 40\)"):
        train(exp, cfg)
    assert not exp.has_checkpoints()


def test_validation_bleu_on_a_sample_with_raw_references(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", valid_bleu=True, valid_bleu_sentences=12, best_metric="bleu",
                               max_steps=6, valid_every=3, log_every=3)
    summary = train(exp, cfg)
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    validated = [r for r in records if "valid_nll" in r]
    assert [r["step"] for r in validated] == [3, 6]
    assert all(0.0 <= r["valid_bleu"] <= 100.0 for r in validated)
    assert summary["valid_bleu"] == validated[-1]["valid_bleu"]
    best_step = max(validated, key=lambda r: r["valid_bleu"])["step"]  # the first of equals
    assert load_checkpoint(exp.checkpoint_path("best"))["step"] == best_step

    # The sample: references are the raw lines of the pairs binarize kept (one was dropped).
    run = build_training(exp, cfg)
    trainer = run.trainer
    resume_training(run)
    metrics = validate_run(run)
    sample = run.bleu
    lines = np.load(exp.data_dir / "valid.lines.npy")
    assert 3 not in lines.tolist() and len(sample.indices) == 12
    _, refs = load_split(cfg.data.sources("valid"))
    assert sample.refs == [refs[lines[i]] for i in sample.indices]
    bleu, hyps = sample.score(trainer.model, trainer.device, trainer.group)
    assert bleu == pytest.approx(metrics["valid_bleu"], abs=0.01)
    src = collate(run.valid_data, sample.indices[:1]).src_ids
    first = greedy_search(trainer.model, src, cfg.decode.max_len_a, cfg.decode.max_len_b)[0]
    assert hyps[0] == run.tgt_tok.decode([first.tokens])[0]


def test_max_time_0_is_no_time_limit(base, tmp_path):
    # Set on the dataclass, as a config built in code may hold it (the config's parser makes 0 None).
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=2, max_time=0.0, cooldown=0.5)
    summary = train(exp, cfg)
    assert summary["stopped_by"] == "max_steps" and summary["steps"] == 2


def test_patience_stops_after_validations_without_improvement(base, tmp_path):
    # lr 0: the model never changes, so no validation after the first improves on it.
    exp, cfg = copy_experiment(base, tmp_path / "exp", lr_peak=0.0, max_steps=50, valid_every=2, patience=2)
    summary = train(exp, cfg)
    assert summary["stopped_by"] == "patience" and summary["steps"] == 6  # best at 2; none better at 4, 6
    state = load_checkpoint(exp.checkpoint_path("last"))
    assert state["bad_validations"] == 2 and load_checkpoint(exp.checkpoint_path("best"))["step"] == 2
    assert train(exp, cfg)["steps"] == 6  # a rerun does not start again


def test_best_metric_bleu_needs_valid_bleu():
    from mt.config.schema import from_dict
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match="needs train.valid_bleu"):
        from_dict({"train": {"best_metric": "bleu"}}, "recipe.yaml")


# -- checkpoints kept ----------------------------------------------------------------------------------


@pytest.mark.parametrize("keep_last, kept", [(2, [6, 8]), (0, [2, 4, 6, 8])])
def test_keep_last(base, tmp_path, keep_last, kept):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=8, save_every=2, keep_last=keep_last)
    exp.checkpoints_dir.mkdir(exist_ok=True)
    # A user's copies, not checkpoints training named (it pads steps to 7 digits), and a hidden
    # file of theirs that looks like a temporary but is not one mt writes.
    mine = [exp.checkpoints_dir / name for name in ("step_2_keep.pt", "step_2.pt", ".notes.old.tmp")]
    for path in mine:
        path.write_bytes(b"mine")
    train(exp, cfg)
    assert [int(p.stem[5:]) for p in exp.step_checkpoints()] == kept
    assert all(path.read_bytes() == b"mine" for path in mine)


def test_a_resume_from_an_earlier_last_pt_sets_the_later_checkpoints_aside(base, tmp_path, capsys):
    """Was: last.pt put back from step_2.pt (as the refusal without one advises), the resumed run's
    new step_4.pt was pruned as soon as it was written, the abandoned run's step_6/8 kept, and an
    average took them: two runs mixed. Then, left where they were, a resume saving at other steps
    interleaved them with its own (step_6 of the abandoned run between this one's step_4 and step_8)."""
    from mt.training.average import average_last

    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=8, save_every=2, keep_last=0)
    train(exp, cfg)
    shutil.copy(exp.checkpoint_path("step_2"), exp.checkpoint_path("last"))
    abandoned = {n: exp.checkpoint_path(f"step_{n}").read_bytes() for n in (4, 6, 8)}
    capsys.readouterr()
    cfg.train.max_steps, cfg.train.keep_last, cfg.train.save_every = 9, 2, 3  # resumed from step 2
    train(exp, cfg)
    err = " ".join(capsys.readouterr().err.split())
    (aside,) = exp.checkpoints_dir.glob("after-step-2-*")
    assert f"step_0000004.pt, step_0000006.pt, step_0000008.pt saved past step 2, which last.pt holds (another line of training): moved to {aside}" in err, err
    assert "best.pt saved past step 2, which last.pt holds: this run writes over each" in err  # the first run's final
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == {
        exp.checkpoint_path(f"step_{n}").name: abandoned[n] for n in (4, 6, 8)}
    assert [int(p.stem[5:]) for p in exp.step_checkpoints()] == [6, 9]  # this run's, pruned to keep_last 2
    _, used = average_last(exp, 2, "avg", force=True)
    assert [p.stem for p in used] == [exp.checkpoint_path(f"step_{n}").stem for n in (6, 9)]


def test_a_resume_that_puts_a_begun_cooldown_back_before_it_says_so(base, tmp_path, capsys):
    """Was: going on past a budget (as the docs say, a larger --max-steps) took the lr from near 0 back
    to the schedule's at once, without a word."""
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=4, cooldown=0.5, save_every=100)
    train(exp, cfg)
    capsys.readouterr()
    cfg.train.max_steps = 20
    train(exp, cfg)
    assert "the cooldown had begun" in capsys.readouterr().err
    exp2, cfg2 = copy_experiment(base, tmp_path / "exp2", max_steps=4, cooldown=0.5, save_every=100)
    train(exp2, cfg2)
    capsys.readouterr()
    cfg2.train.max_steps = 5  # its end still in the cooldown: nothing to say
    train(exp2, cfg2)
    assert "the cooldown had begun" not in capsys.readouterr().err


def test_a_run_without_last_pt_beside_an_earlier_runs_best_pt_is_refused(base, tmp_path):
    """A damaged last.pt removed, as its error said: the next run started from step 0 and wrote over
    best.pt (its first validation) and ema.pt; it is refused now, as with periodic checkpoints."""
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=4, save_every=100)
    train(exp, cfg)
    exp.checkpoint_path("last").unlink()
    best = exp.checkpoint_path("best").read_bytes()
    with pytest.raises(MtError) as info:
        train(exp, cfg)
    assert "best.pt of an earlier run but no last.pt" in str(info.value) and "\n" not in str(info.value)
    assert exp.checkpoint_path("best").read_bytes() == best
    # The way back it names (a run killed in its first save, before last.pt, is refused the same way)
    advice = f"to resume from step 4: cp {exp.checkpoint_path('best')} {exp.checkpoint_path('last')}"
    assert advice in str(info.value), info.value
    shutil.copy(exp.checkpoint_path("best"), exp.checkpoint_path("last"))
    cfg.train.max_steps = 5
    train(exp, cfg)
    assert saved_step(exp.checkpoint_path("last")) == 5


def test_periodic_checkpoints_are_in_step_order_past_seven_digits(tmp_path):
    exp = Experiment(tmp_path / "exp")
    exp.checkpoints_dir.mkdir(parents=True)
    for name in ("step_10000000.pt", "step_9995000.pt", "step_0000005.pt", "step_5000_keep.pt", "step_.pt", "step_5.pt"):
        (exp.checkpoints_dir / name).write_bytes(b"")
    assert [p.name for p in exp.step_checkpoints()] == ["step_0000005.pt", "step_9995000.pt", "step_10000000.pt"]


# -- pre-train, then fine-tune -------------------------------------------------------------------------


def test_init_from_starts_from_exactly_those_weights(base, tmp_path):
    pre, cfg = copy_experiment(base, tmp_path / "pre", max_steps=3)
    train(pre, cfg)
    weights = load_checkpoint(pre.checkpoint_path("best"))["model"]

    fine, fcfg = copy_experiment(base, tmp_path / "fine", max_steps=0, model__dropout=0.3)  # dropout may differ
    summary = train(fine, fcfg, init_from=str(pre.root))
    assert summary["steps"] == 0
    state = load_checkpoint(fine.checkpoint_path("last"))
    assert state["model"].keys() == weights.keys()
    assert all(torch.equal(state["model"][k], weights[k]) for k in weights)
    assert state["optimizer"]["state"] == {}  # a fresh optimizer
    assert state["init_from"] == str(pre.checkpoint_path("best"))

    run = build_training(fine, fcfg)
    start_from_weights(run, str(pre.checkpoint_path("last")))  # a checkpoint file works too
    assert run.trainer.state.step == 0 and lr_at(run.trainer, 1) == inverse_sqrt_lr(1, fcfg.train.warmup_steps,
                                                                                  fcfg.train.lr_peak)


def test_init_from_refuses_another_tokenizer_or_model(base, tmp_path):
    pre, cfg = copy_experiment(base, tmp_path / "pre", max_steps=0)
    train(pre, cfg)
    state = load_checkpoint(pre.checkpoint_path("last"))
    other_tok = dict(state, tokenizer_sha256={"src": "0" * 64, "tgt": "0" * 64})
    save_checkpoint(tmp_path / "tok.pt", other_tok)
    other_model = dict(state, model_config={**state["model_config"], "d_ff": 128})
    save_checkpoint(tmp_path / "model.pt", other_model)

    fine, fcfg = copy_experiment(base, tmp_path / "fine", max_steps=2)
    for name, needle in (("tok.pt", "another tokenizer"), ("model.pt", "model.d_ff 128 (ours 64)"),
                         ("missing", "no such experiment")):
        with pytest.raises(MtError) as info:
            train(fine, fcfg, init_from=str(tmp_path / name))
        assert needle in str(info.value) and "\n" not in str(info.value)
    assert not fine.has_checkpoints()


# -- mt average ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_average_cli_and_translate_with_it(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def mt(*args, stdin=""):
        return subprocess.run([sys.executable, "-m", "mt", *args], input=stdin.encode(), capture_output=True,
                              env=env, timeout=120)

    done = mt("train", "--exp", str(exp.root), "--max-steps", "8", "--set", "train.save_every=2",
              "--keep-last", "3", "--update-freq", "2", "--clip-norm", "1.0", "--threads", "1")
    assert done.returncode == 0, done.stderr.decode()
    saved = exp.load_config().train
    assert (saved.keep_last, saved.update_freq, saved.clip_norm) == (3, 2, 1.0)
    steps = exp.step_checkpoints()
    assert [p.name for p in steps] == ["step_0000004.pt", "step_0000006.pt", "step_0000008.pt"]

    done = mt("average", "--exp", str(exp.root), "--last", "3")
    assert done.returncode == 0 and done.stdout.decode() == f"{exp.checkpoint_path('average')}\n", done.stderr.decode()
    averaged = load_checkpoint(exp.checkpoint_path("average"))
    states = [load_checkpoint(p)["model"] for p in steps]
    for key, value in averaged["model"].items():
        torch.testing.assert_close(value, sum(s[key] for s in states) / 3, atol=1e-7, rtol=1e-6)
    assert averaged["averaged_from"] == [p.name for p in steps]

    done = mt("translate", "--exp", str(exp.root), "--checkpoint", "average", "--threads", "1",
              stdin="Der hund läuft.\nEine frau sitzt im park.\n")
    assert done.returncode == 0, done.stderr.decode()
    assert len(done.stdout.decode().splitlines()) == 2

    done = mt("average", "--exp", str(exp.root), "--last", "4")
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines()[-1].startswith("error: ")
    assert "fewer than --last 4" in done.stderr.decode()
