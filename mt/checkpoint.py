"""Checkpoints: tensors and plain data only, written atomically, loaded with weights_only=True.

A checkpoint carries its model config, vocabulary sizes and tokenizer hashes, so a checkpoint alone
rebuilds its model (`load_model`).
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from mt.config import ModelConfig
from mt.errors import MtError
from mt.experiment import Experiment, write_bytes_atomic
from mt.model import Transformer, build_model

FORMAT = "mt-checkpoint-1"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Serialise to memory, then write to a temporary file, fsync and rename: never half a file."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    write_bytes_atomic(Path(path), buffer.getvalue())


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
