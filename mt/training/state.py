"""A training run's counters (`TrainingState`): the step, the best validation score and patience, the
training time over all runs; saved under these names in each checkpoint (`mt.training.checkpoints`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any


@dataclasses.dataclass
class TrainingState:
    """The counters of a run that a checkpoint saves (under these names), beside the tensors."""

    step: int = 0  # updates made
    best_metric: str = "nll"  # train.best_metric: what best_valid is of
    best_valid: float = math.inf
    bad_validations: int = 0  # validations in a row without a new best (for patience)
    # the best of the validations on the valid_every grid, which patience counts against (None: best_valid)
    patience_best: float | None = None
    cooldown_from: float | None = None  # the schedule's lr where the cooldown began (mt.training.schedule)
    skipped: int = 0  # updates skipped for a non-finite loss or gradient norm, all runs
    bad_in_row: int = 0  # of them, those in a row up to the step saved: a resume's train.max_bad_steps counts on
    elapsed: float = 0.0  # training seconds over all runs of this experiment
    init_from: str | None = None  # the checkpoint a new run took its starting weights from
    device: str | None = None  # the device type the last run trained on ("cpu", "cuda"): a resume names a change
    max_tokens: int | None = None  # the batch budget trained with (train.max_tokens auto's choice is kept on resume)
    precision: str | None = None  # the precision trained in (train.precision auto's choice is kept on resume)
    batching: str | None = None  # how an epoch's batches were cut besides max_tokens (`batching_of`)
    best_setup: str | None = None  # what best_valid was measured on, for BLEU: the sample's size (`bleu_setup`)
    # the step last validated (None: saved before it was recorded): a checkpoint saved at a signal or
    # by save_every is of a step not validated, and the run's end validates it
    validated_at: int | None = None

    @classmethod
    def fresh(cls, best_metric: str, best_setup: str | None = None) -> TrainingState:
        """A new run's: no best yet (lower NLL is better, higher BLEU)."""
        best = math.inf if best_metric == "nll" else -math.inf
        # -1: none yet (None is a checkpoint saved before the step was recorded)
        return cls(best_metric=best_metric, best_valid=best, best_setup=best_setup, validated_at=-1)

    def to_checkpoint(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any], best_metric: str, best_setup: str | None = None) -> TrainingState:
        """The counters of checkpoint `saved`, with the defaults of those older checkpoints lack. A
        best_metric other than the saved one, or one measured otherwise (BLEU on a sample of another
        size), starts its best and patience afresh."""
        state = cls.fresh(best_metric, best_setup)
        same_setup = saved.get("best_setup") in (None, best_setup)  # None: saved before it was recorded
        if saved.get("best_metric", "nll") == best_metric and same_setup:
            state.best_valid = float(saved["best_valid"])
            state.bad_validations = int(saved.get("bad_validations", 0))
            if saved.get("patience_best") is not None:
                state.patience_best = float(saved["patience_best"])
        state.step, state.elapsed = int(saved["step"]), float(saved["elapsed"])
        state.cooldown_from = saved.get("cooldown_from")
        state.skipped = int(saved.get("skipped", 0))
        state.bad_in_row = int(saved.get("bad_in_row", 0))
        state.init_from = saved.get("init_from")
        state.device = saved.get("device")
        state.max_tokens = saved.get("max_tokens")
        state.precision = saved.get("precision")
        state.batching = saved.get("batching")
        state.validated_at = saved.get("validated_at")
        return state

    def record_validation(self, metrics: dict[str, float], on_schedule: bool = True) -> bool:
        """Track the best value of best_metric and the validations since; True on a new best. One off
        the valid_every schedule (at a run's end) may be a new best but counts for no patience, neither
        way: later ones must beat the grid's best, not it, or a run stopped there and resumed would run
        out of patience, or go on, where an unbroken one does not."""
        value = metrics["valid_bleu" if self.best_metric == "bleu" else "valid_nll"]

        def beats(best: float) -> bool:
            return value > best if self.best_metric == "bleu" else value < best

        grid_best = self.best_valid if self.patience_best is None else self.patience_best
        better = beats(self.best_valid)
        if not on_schedule:
            self.patience_best = grid_best  # kept apart before best_valid moves past it
        elif beats(grid_best):
            self.patience_best, self.bad_validations = value, 0
        else:
            self.bad_validations += 1
        if better:
            self.best_valid = value
        return better

    def out_of_patience(self, patience: int) -> bool:
        """train.patience validations in a row without a new best (0: never)."""
        return 0 < patience <= self.bad_validations


def bleu_setup(best_metric: str, valid_bleu_sentences: int, multilingual: bool = False) -> str | None:
    """What a BLEU best is comparable on: the validation sample's size, and for several directions the
    mean of theirs (each with its target's tokenizer); None for NLL (the whole split)."""
    if best_metric != "bleu":
        return None
    return f"greedy BLEU on {valid_bleu_sentences} sentences" + (", the mean of its directions" if multilingual else "")


def batching_of(bucketed: bool, direction_temperature: float | None) -> str:
    """How an epoch's batches are cut besides their budget: padded to a few shapes (train.compile) and,
    with several directions (else None), their sampling temperature. Changed in the middle of an
    epoch, its batches are cut anew."""
    temperature = "" if direction_temperature is None else f", direction temperature {direction_temperature:g}"
    return f"bucketed {bucketed}{temperature}"
