"""The learning-rate schedule: the paper's warmup + inverse square root (Sec. 5.3), and a cooldown."""

from __future__ import annotations

import math

from mt.config import TrainConfig


def peak_lr(cfg: TrainConfig, d_model: int) -> float:
    """The schedule's maximum, reached at step = warmup: lr_peak, or the paper's d^-0.5 * warmup^-0.5."""
    if cfg.lr_peak is not None:
        return cfg.lr_peak
    return cfg.lr_scale * d_model**-0.5 * cfg.warmup_steps**-0.5


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
