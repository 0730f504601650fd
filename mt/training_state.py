"""A training run's saved state: its counters (`TrainingState`), and the checkpoint that holds them
with the weights, the optimizer, the data position and every process's RNG states, from which a
run resumes bitwise as if never interrupted.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mt import log
from mt.checkpoint import (check_model_config, check_tokenizer, check_world_size, init_weights, load_checkpoint,
                           rng_state, save_checkpoint, save_training_checkpoint, set_rng_state)
from mt.ema import WeightAverage
from mt.optimizer import regroup_optimizer_state

if TYPE_CHECKING:
    from mt.train_setup import Training


@dataclasses.dataclass
class TrainingState:
    """The counters of a run that a checkpoint saves (under these names), beside the tensors."""

    step: int = 0  # updates made
    best_metric: str = "nll"  # train.best_metric: what best_valid is of
    best_valid: float = math.inf
    bad_validations: int = 0  # validations in a row without a new best (for patience)
    cooldown_from: float | None = None  # the schedule's lr where the cooldown began (mt.schedule)
    skipped: int = 0  # updates skipped for a non-finite loss or gradient norm, all runs
    elapsed: float = 0.0  # training seconds over all runs of this experiment
    init_from: str | None = None  # the checkpoint a new run took its starting weights from

    @classmethod
    def fresh(cls, best_metric: str) -> TrainingState:
        """A new run's: no best yet (lower NLL is better, higher BLEU)."""
        return cls(best_metric=best_metric, best_valid=math.inf if best_metric == "nll" else -math.inf)

    def to_checkpoint(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any], best_metric: str) -> TrainingState:
        """The counters of checkpoint `saved`, with the defaults of those older checkpoints lack. A
        best_metric other than the saved one starts its best and patience afresh."""
        state = cls.fresh(best_metric)
        if saved.get("best_metric", "nll") == best_metric:
            state.best_valid = float(saved["best_valid"])
            state.bad_validations = int(saved.get("bad_validations", 0))
        state.step, state.elapsed = int(saved["step"]), float(saved["elapsed"])
        state.cooldown_from = saved.get("cooldown_from")
        state.skipped = int(saved.get("skipped", 0))
        state.init_from = saved.get("init_from")
        return state

    def record_validation(self, metrics: dict[str, float]) -> bool:
        """Track the best value of best_metric and the validations since; True on a new best."""
        if self.best_metric == "bleu":
            value = metrics["valid_bleu"]
            better = value > self.best_valid
        else:
            value = metrics["valid_nll"]
            better = value < self.best_valid
        if better:
            self.best_valid, self.bad_validations = value, 0
        else:
            self.bad_validations += 1
        return better

    def out_of_patience(self, patience: int) -> bool:
        """train.patience validations in a row without a new best (0: never)."""
        return 0 < patience <= self.bad_validations


def training_checkpoint(run: Training) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly; every process must call it (it gathers
    their RNG states)."""
    trainer = run.trainer
    return {
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
        "ema": trainer.ema.state_dict() if trainer.ema is not None else None,
        **run.metadata,  # model_config, vocab, tokenizer_sha256: what rebuilds the model
        "epoch": trainer.stream.epoch,
        "batch_in_epoch": trainer.stream.batch_in_epoch,
        "world_size": trainer.group.world_size,
        **trainer.state.to_checkpoint(),
        "rng": trainer.group.all_gather(rng_state(trainer.device)),  # one per process, in rank order
    }


def save_training(run: Training, is_best: bool = False) -> None:
    """The run's checkpoints now (see checkpoint.save_training_checkpoint). Every process calls this
    (it gathers their RNG states); rank 0 writes."""
    state = training_checkpoint(run)
    if run.trainer.group.is_main:
        tcfg = run.cfg.train
        save_training_checkpoint(run.exp, state, run.trainer.state.step, is_best, tcfg.save_every, tcfg.keep_last)
        if run.trainer.ema is not None:  # the average as a model of its own: `--checkpoint ema`
            save_checkpoint(run.exp.checkpoint_path("ema"), {
                "model": run.trainer.ema.model_state(run.trainer.model), **run.metadata,
                "step": run.trainer.state.step, "ema_decay": run.trainer.ema.decay})


def resume_training(run: Training) -> bool:
    """Continue from checkpoints/last.pt if there is one (saved with as many processes as now)."""
    path = run.exp.checkpoint_path("last")
    if not path.exists():
        return False
    saved = load_checkpoint(path)
    _check_resumable(run, path, saved)
    trainer, tcfg = run.trainer, run.cfg.train
    trainer.model.load_state_dict(saved["model"])
    trainer.optimizer.load_state_dict(regroup_optimizer_state(
        saved["optimizer"], trainer.model, tcfg.weight_decay, (tcfg.adam_beta1, tcfg.adam_beta2), tcfg.adam_eps))
    if trainer.scaler is not None and saved.get("scaler"):
        trainer.scaler.load_state_dict(saved["scaler"])
    if trainer.ema is not None:
        if saved.get("ema"):
            trainer.ema.load_state_dict(saved["ema"])
        else:  # train.ema_decay set on resume: the average starts from the resumed weights
            log.info(f"train.ema_decay {tcfg.ema_decay}: {path} holds no average; it starts from these weights")
            trainer.ema = WeightAverage(trainer.model, tcfg.ema_decay)
    trainer.state = TrainingState.from_checkpoint(saved, tcfg.best_metric)
    trainer.stream.seek(int(saved["epoch"]), int(saved["batch_in_epoch"]))
    rng = saved["rng"][trainer.group.rank] if "rng" in saved else {"torch": saved["torch_rng"]}
    set_rng_state(rng, trainer.device)
    trainer.start_clock()
    return True


def _check_resumable(run: Training, path: Path, saved: dict[str, Any]) -> None:
    check_model_config(path, saved, run.cfg.model, run.exp.config_path)  # config.yaml edited by hand
    check_tokenizer(path, saved, run.metadata["tokenizer_sha256"], run.exp.tokenizer_dir)
    check_world_size(path, int(saved.get("world_size", 1)), run.trainer.group.world_size)


def start_from_weights(run: Training, source: str) -> Path:
    """Start from the weights of another experiment or checkpoint (fresh optimizer and schedule)."""
    path, weights = init_weights(source, run.metadata["tokenizer_sha256"], run.cfg.model)
    run.trainer.model.load_state_dict(weights)
    if run.trainer.ema is not None:  # the average starts from the loaded weights, not the random ones
        run.trainer.ema = WeightAverage(run.trainer.model, run.cfg.train.ema_decay)
    run.trainer.state.init_from = str(path)
    return path
