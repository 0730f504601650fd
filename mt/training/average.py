"""Checkpoint averaging (Sec. 6.1: "the last 5 checkpoints, written at 10-minute intervals"): `mt average`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.errors import ConfigError, MtError
from mt.experiment import Experiment


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    """The element-wise mean of the models' parameters (Sec. 6.1); metadata from the last one."""
    if not paths:
        raise MtError("no checkpoints to average")
    states = [load_checkpoint(p) for p in paths]
    averaged = {}
    for key, value in states[-1]["model"].items():
        if value.is_floating_point():
            averaged[key] = sum(s["model"][key].double() for s in states).div(len(states)).to(value.dtype)
        else:
            averaged[key] = value
    keep = ("model_config", "vocab", "tokenizer_sha256", "step")
    return {**{k: states[-1][k] for k in keep if k in states[-1]}, "model": averaged,
            "averaged_from": [str(p.name) for p in paths]}


def average_last(exp: Experiment, n: int, name: str = "average") -> tuple[Path, list[Path]]:
    """`mt average`: the mean of the last n periodic checkpoints, saved as checkpoints/{name}.pt."""
    if n < 1:
        raise ConfigError(f"--last {n}: average at least one checkpoint")
    if not name or "/" in name or "\\" in name or ".." in name:  # checkpoints/../../x.pt is not under checkpoints/
        raise ConfigError(f"--output {name!r}: a name under checkpoints/, without '/', '\\' or '..'")
    if name.removesuffix(".pt") in ("last", "best", "ema") or name.startswith("step_"):
        raise ConfigError(f"--output {name}: that name belongs to training's checkpoints; choose another")
    exp.load_config()  # a one-line error when this is not an experiment
    steps = exp.step_checkpoints()
    if len(steps) < n:
        have = ", ".join(p.stem for p in steps) or "none"
        raise MtError(f"{exp.checkpoints_dir}: {len(steps)} periodic checkpoints ({have}), fewer than --last {n}; "
                      f"average fewer, or train with a smaller train.save_every or larger train.keep_last")
    paths = steps[-n:]
    target = exp.checkpoint_path(name)
    save_checkpoint(target, average_checkpoints(paths))
    return target, paths
