"""Checkpoint averaging (Sec. 6.1: "the last 5 checkpoints, written at 10-minute intervals"): `mt average`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mt import log
from mt.atomic_files import check_output
from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import load_checkpoint, save_checkpoint, saved_step
from mt.experiment.paths import Experiment


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    """The element-wise mean of the models' parameters (Sec. 6.1); metadata from the last one. The
    files are read one at a time into running sums: each holds a whole training state (Adam's moments,
    the EMA), and twenty of a big model at once took tens of GB."""
    if not paths:
        raise MtError("no checkpoints to average")
    last = _model_state(paths[-1])
    keep = ("model_config", "vocab", "tokenizer_sha256", "step", "model")
    reference = {k: last[k] for k in keep if k in last}
    del last  # its optimizer state and the rest: not kept
    sums = {key: value.double() for key, value in reference["model"].items() if value.is_floating_point()}
    for path in paths[:-1]:
        state = _model_state(path)
        difference = _difference(state["model"], reference["model"]) or _other_model(state, reference)
        if difference:
            raise MtError(
                f"{path}: not the same model as {paths[-1].name} ({difference}); remove it or average fewer checkpoints"
            )
        for key, total in sums.items():
            total += state["model"][key].double()
        del state
    averaged = {
        key: sums[key].div_(len(paths)).to(value.dtype) if key in sums else value
        for key, value in reference["model"].items()
    }
    return {**reference, "model": averaged, "averaged_from": [str(p.name) for p in paths]}


def _model_state(path: Path) -> dict[str, Any]:
    """Checkpoint `path`, refused when it holds no model parameters."""
    state = load_checkpoint(path)
    if not isinstance(state.get("model"), dict) or not state["model"]:
        raise MtError(f"{path}: holds no model parameters; remove it or average fewer checkpoints")
    return state


def _other_model(state: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """What tells two checkpoints of the same shapes apart as models of other runs: the tokenizers
    (the same vocabulary size, other pieces) or a model field no shape shows (norm placement, say);
    dropout rates may differ (a fine-tuning run's)."""
    if state.get("tokenizer_sha256") != reference.get("tokenizer_sha256"):
        return "trained with another tokenizer"
    ours, theirs = state.get("model_config") or {}, reference.get("model_config") or {}
    fields = sorted(key for key in {*ours, *theirs} if "dropout" not in key and ours.get(key) != theirs.get(key))
    return f"model.{fields[0]} {ours.get(fields[0])!r}, not {theirs.get(fields[0])!r}" if fields else None


def _difference(params: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """How one state dict's parameter names and shapes differ from `reference`'s, or None."""
    missing = [key for key in reference if key not in params]
    extra = [key for key in params if key not in reference]
    if missing or extra:
        return ", ".join(([f"lacks {missing[0]}"] if missing else []) + ([f"has {extra[0]}"] if extra else []))
    for key, value in reference.items():
        shape, theirs = tuple(getattr(value, "shape", ())), tuple(getattr(params[key], "shape", ()))
        if shape != theirs:
            return f"{key} is {'x'.join(map(str, theirs)) or 'a scalar'}, not {'x'.join(map(str, shape)) or 'a scalar'}"
    return None


def average_last(exp: Experiment, n: int, name: str = "average", force: bool = False) -> tuple[Path, list[Path]]:
    """`mt average`: the mean of the last n periodic checkpoints, saved as checkpoints/{name}.pt; an
    existing file is replaced only with `force`."""
    if n < 1:
        raise ConfigError(f"--last {n}: average at least one checkpoint")
    if not name or "/" in name or "\\" in name or ".." in name:  # checkpoints/../../x.pt is not under checkpoints/
        raise ConfigError(f"--output {name!r}: a name under checkpoints/, without '/', '\\' or '..'")
    if name.removesuffix(".pt") in ("last", "best", "ema") or name.startswith("step_"):
        raise ConfigError(f"--output {name}: that name belongs to training's checkpoints; choose another")
    exp.load_config()  # a one-line error when this is not an experiment
    steps = run_checkpoints(exp)
    later = [path.name for path in exp.step_checkpoints() if path not in steps]
    past = (
        f"{', '.join(later)} {'lies' if len(later) == 1 else 'lie'} past step {saved_step(exp.checkpoint_path('last'))} "
        "that last.pt holds (another run's, or a save cut short): not averaged"
        if later
        else ""
    )
    if len(steps) < n:
        have = ", ".join(p.stem for p in steps) or "none"
        raise MtError(
            f"{exp.checkpoints_dir}: {len(steps)} periodic checkpoints ({have}), fewer than --last {n}"
            f"{f' ({past})' if past else ''}; average fewer, or train with a smaller train.save_every or larger train.keep_last"
        )
    if past:
        log.warn(past)
    target = exp.checkpoint_path(name)
    check_output(target, force)
    paths = steps[-n:]
    save_checkpoint(target, average_checkpoints(paths))
    return target, paths


def run_checkpoints(exp: Experiment, step: int | None = None) -> list[Path]:
    """The periodic checkpoints up to `step` (default: the step last.pt holds, where there is one),
    oldest first: a run resumed from an earlier last.pt may leave others' past it, which an average
    must not take."""
    if step is None:
        step = saved_step(exp.checkpoint_path("last"))
    periodic = exp.step_checkpoints()
    return periodic if step is None else [path for path in periodic if int(path.stem[5:]) <= step]
