"""The learning-rate schedule: the paper's warmup + inverse square root (Sec. 5.3), and a cooldown;
the dropout schedule of train.early_dropout. Pure functions: what a run carries from update to
update (the cooldown's start) is an argument and a result, saved in the checkpoint."""

from __future__ import annotations

import math
from dataclasses import dataclass


def peak_lr(lr_peak: float | None, lr_scale: float, warmup_steps: int, d_model: int) -> float:
    """The schedule's maximum, reached at step = warmup: lr_peak if set, else the paper's
    lr_scale * d_model^-0.5 * warmup^-0.5 (train.lr_peak, train.lr_scale)."""
    if lr_peak is not None:
        return lr_peak
    return lr_scale * d_model**-0.5 * warmup_steps**-0.5


def inverse_sqrt_lr(step: int, warmup: int, peak: float) -> float:
    """Linear warmup to `peak`, then proportional to step^-0.5 (Sec. 5.3); step counts from 1.

    peak * min(step / warmup, sqrt(warmup / step)) equals the paper's
    d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) when peak = d_model^-0.5 * warmup^-0.5.
    """
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def cooldown_factor(progress: float, fraction: float, shape: str = "linear") -> float | None:
    """In the last `fraction` of the budget the lr multiplier that falls from 1 to 0 at progress 1,
    linearly or as 1 - sqrt of the cooldown's elapsed share; None before it (and with fraction 0).
    progress: the share of the budget spent before the update."""
    if fraction <= 0.0 or progress < 1.0 - fraction:
        return None
    if shape == "linear":
        return max(0.0, 1.0 - progress) / fraction
    if shape == "1-sqrt":  # the share is taken from where the cooldown begins: sqrt magnifies rounding near 0
        return 1.0 - math.sqrt(min(1.0, (progress - (1.0 - fraction)) / fraction))
    raise ValueError(f"unknown cooldown shape {shape!r}")


@dataclass(frozen=True)
class Schedule:
    """The learning rate and the sub-layer dropout over a run, as pure functions of the update and
    of `progress`, the share of the budget (max_steps, and max_time where set) spent before it."""

    peak_lr: float  # see `peak_lr`
    warmup_steps: int
    max_steps: int
    max_time: float | None = None  # seconds over all runs; a budget beside max_steps when set (not 0)
    cooldown: float = 0.0  # the last share of the budget, in which the lr falls to 0; 0 = off
    cooldown_shape: str = "linear"
    shape: str = "inverse_sqrt"  # or "constant": flat at peak_lr after the warmup
    model_dropout: float = 0.1  # model.dropout: the rate the model was built with
    early_dropout: float | None = None  # train.early_dropout; None = off
    early_dropout_until: float = 0.5

    def progress(self, step: int, elapsed: float) -> float:
        """How far into the budget update `step` (from 1) is, after `elapsed` training seconds: with a
        time budget, the share of whichever of time and max_steps runs out first (a fast machine
        reached max_steps, which stops the run too, before the time's cooldown had begun). Updates
        past max_steps (tried again after skipped ones, which the step count makes good) are at its
        last: the cooldown had fallen to 0 there, and they changed nothing."""
        steps = (min(step, self.max_steps) - 1) / max(self.max_steps, 1)
        if self.max_time:  # None or 0: off
            return max(elapsed / self.max_time, steps)
        return steps

    def lr(self, step: int, progress: float, cooldown_from: float | None) -> tuple[float, float | None]:
        """The lr of update `step` (from 1): the schedule (Sec. 5.3), then the cooldown's fall to 0
        from the schedule's value where the cooldown began. `cooldown_from` is that value (None
        before the cooldown); returned with the lr, it is the next update's `cooldown_from`, and a
        checkpoint saves it: a resumed run falls from the same value."""
        lr = inverse_sqrt_lr(step, self.warmup_steps, self.peak_lr)
        if self.shape == "constant":
            lr = self.peak_lr * min(1.0, max(step, 1) / self.warmup_steps)
        factor = cooldown_factor(progress, self.cooldown, self.cooldown_shape)
        if factor is None:
            return lr, None
        start = lr if cooldown_from is None else cooldown_from
        return start * factor, start

    def dropout(self, progress: float) -> float:
        """The rate of the sub-layer and embedding dropout (train.early_dropout): the early rate
        before early_dropout_until of the budget, model.dropout from there on and when off."""
        if self.early_dropout is not None and progress < self.early_dropout_until:
            return self.early_dropout
        return self.model_dropout
