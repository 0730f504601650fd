"""Checkpoints: tensors and plain data only, written atomically, loaded with weights_only=True.

A checkpoint carries its model config, vocabulary sizes and tokenizer hashes, so a checkpoint alone
rebuilds its model (`model_from_checkpoint`). Training checkpoints also hold the optimizer, the
position in the data and every random number generator's state, so that a resumed run continues
exactly as an uninterrupted one would (`rng_state`). Also here: averaging (Sec. 6.1) and the
weights another experiment starts from (`init_weights`).
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import random
import re
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from mt.config import ModelConfig
from mt.errors import ConfigError, MtError
from mt.experiment import Experiment, write_bytes_atomic
from mt.model import Transformer, build_model

FORMAT = "mt-checkpoint-1"


def save_checkpoint(path: Path | Sequence[Path], state: dict[str, Any]) -> None:
    """Serialise once to memory, then to each path: a temporary file, fsync, rename; never half a file."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    for target in [path] if isinstance(path, (str, Path)) else path:
        write_bytes_atomic(Path(target), buffer.getvalue())


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load an mt checkpoint; anything else (truncated, foreign, pickled code) is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise MtError(f"{path}: no such checkpoint")
    unreadable = f"{path}: truncated or not a checkpoint; remove it or choose another checkpoint"
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; anything else is damage
        raise MtError(unreadable)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise MtError(f"{path}: refused: holds more than tensors and plain data ({_reason(exc, 'Unsupported')})") from None
    except Exception as exc:  # a damaged archive fails in many ways: EOFError, KeyError, RuntimeError...
        raise MtError(f"{unreadable} ({_reason(exc)})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise MtError(f"{path}: not an mt checkpoint (format {FORMAT!r} expected)")
    return state


def _reason(exc: Exception, prefer: str = "") -> str:
    """One short line from torch.load's message, which may be empty, multi-line or hold ANSI codes."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line]
    line = next((line for line in lines if prefer and prefer in line), lines[0] if lines else "")
    return f"{type(exc).__name__}: {line}"[:120] if line else type(exc).__name__


def model_from_checkpoint(state: dict[str, Any]) -> Transformer:
    cfg = ModelConfig(**state["model_config"])
    vocab = state["vocab"]
    model = build_model(cfg, vocab["src_size"], vocab["tgt_size"], vocab["shared"])
    model.load_state_dict(state["model"])
    return model


def resolve_checkpoint(exp: Experiment, name: str) -> Path:
    """A checkpoint name ("best", "last", "average", "step_N") or a path -> an existing file."""
    candidate = Path(name)
    if candidate.suffix == ".pt" and candidate.is_file():
        return candidate
    path = exp.checkpoint_path(name)
    if not path.is_file() and name == "best":
        path = exp.checkpoint_path("last")  # no validation set: the last checkpoint is the best we have
    if not path.is_file():
        have = sorted(p.stem for p in exp.checkpoints_dir.glob("*.pt")) if exp.checkpoints_dir.exists() else []
        hint = f"available: {', '.join(have)}" if have else "train first with `mt train`"
        raise MtError(f"{path}: no checkpoint {name!r} in {exp.root} ({hint})")
    return path


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
    exp.load_config()  # a one-line error when this is not an experiment
    steps = exp.step_checkpoints()
    if len(steps) < n:
        have = ", ".join(p.stem for p in steps) or "none"
        raise MtError(f"{exp.checkpoints_dir}: {len(steps)} periodic checkpoints ({have}), fewer than --last {n}; "
                      f"average fewer, or train with a smaller train.save_every or larger train.keep_last")
    if name in ("last", "best") or name.startswith("step_"):
        raise ConfigError(f"--output {name}: that name belongs to training's checkpoints; choose another")
    paths = steps[-n:]
    target = exp.checkpoint_path(name)
    save_checkpoint(target, average_checkpoints(paths))
    return target, paths


# -- random number generators -----------------------------------------------------------------------
def rng_state(device: torch.device) -> dict[str, Any]:
    """Python's, numpy's global and torch's generators, as tensors and plain data (weights_only loads them)."""
    version, mt_state, gauss = random.getstate()
    name, key, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": {"version": version, "state": torch.tensor(mt_state, dtype=torch.int64), "gauss": gauss},
        "numpy": {"name": name, "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore what `rng_state` saved (a checkpoint from before it holds the torch state only)."""
    if "python" in state:
        py = state["python"]
        random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
    if "numpy" in state:
        np_state = state["numpy"]
        np.random.set_state((np_state["name"], np_state["key"].numpy().astype(np.uint32), np_state["pos"],
                             np_state["has_gauss"], np_state["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


# -- starting from another experiment ---------------------------------------------------------------
# Rates of dropout do not shape the weights: a fine-tuning run may change them.
INIT_FREE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")


def init_weights(source: str, tokenizer_sha256: dict[str, str], model_cfg: ModelConfig) -> tuple[Path, dict]:
    """The model weights a new training run starts from: another experiment's best checkpoint (or its
    last, without validation) or a checkpoint file. Its tokenizer and model config must be ours."""
    path = _init_path(source)
    state = load_checkpoint(path)
    theirs = state.get("tokenizer_sha256") or {}
    if theirs != tokenizer_sha256:
        side = "tgt" if theirs.get("src") == tokenizer_sha256.get("src") else "src"
        raise MtError(
            f"--init-from {source}: {path} was trained with another tokenizer ({side} sha256 "
            f"{str(theirs.get(side))[:12]}, ours {tokenizer_sha256[side][:12]}); copy its experiment's "
            f"tokenizer/ into the new experiment before `mt binarize`"
        )
    ours = dataclasses.asdict(model_cfg)
    saved = state.get("model_config") or {}
    differing = [f"model.{key} {saved.get(key)!r} (ours {value!r})" for key, value in ours.items()
                 if key not in INIT_FREE_FIELDS and saved.get(key) != value]
    if differing:
        raise MtError(f"--init-from {source}: {path} has another model: {', '.join(differing)}; "
                      f"give the new experiment the same model settings")
    return path, state["model"]


def _init_path(source: str) -> Path:
    candidate = Path(source)
    if candidate.is_dir():
        other = Experiment(candidate)
        other.load_config()  # a one-line error when it is not an experiment
        return resolve_checkpoint(other, "best")
    if candidate.is_file():
        return candidate
    raise MtError(f"--init-from {source}: no such experiment directory or checkpoint file")
