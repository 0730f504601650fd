"""Checkpoints: tensors and plain data only, written atomically, loaded with weights_only=True.

A checkpoint carries its model config, vocabulary sizes and tokenizer hashes, so a checkpoint alone
rebuilds its model (`model_from_checkpoint`), and a checksum over all of it, so damage on disk is
found when it loads. Before a checkpoint is used in an experiment, `check_model_config` and
`check_tokenizer` make sure it is that experiment's model and tokenizer. What a training run's
checkpoints hold beyond the weights is `mt.training.checkpoints`'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch

from mt.atomic_files import write_bytes_atomic
from mt.config.schema import ModelConfig
from mt.errors import MtError
from mt.model.transformer import Transformer, build_model

FORMAT = "mt-checkpoint-1"


def save_checkpoint(path: Path | Sequence[Path], state: dict[str, Any]) -> None:
    """Serialise once to memory, then to each path: a temporary file, fsync, rename; never half a file.
    The state's checksum (see `checksum`) goes with it, for `load_checkpoint` to verify."""
    full = {"format": FORMAT, **{key: value for key, value in state.items() if key != "checksum"}}
    full["checksum"] = checksum(full)
    buffer = io.BytesIO()
    torch.save(full, buffer)
    for target in [path] if isinstance(path, (str, Path)) else path:
        write_bytes_atomic(Path(target), buffer.getbuffer())  # a view: getvalue() copied the whole checkpoint


def checksum(state: Any) -> str:
    """ "sha256:HEX" over a checkpoint's contents in order: every key, plain value and tensor (its dtype,
    shape and bytes), so that a changed weight, step or setting on disk is found when it is loaded."""
    digest = hashlib.sha256()

    def add(obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            flat = obj.detach().cpu().contiguous().reshape(-1)
            digest.update(f"T{obj.dtype}{tuple(obj.shape)}:".encode())
            digest.update(flat.view(torch.uint8).numpy().data)
        elif isinstance(obj, dict):
            digest.update(f"{{{len(obj)}:".encode())
            for key, value in obj.items():
                add(key)
                add(value)
        elif isinstance(obj, (list, tuple)):
            digest.update(f"{type(obj).__name__}{len(obj)}:".encode())
            for value in obj:
                add(value)
        else:
            digest.update(f"{type(obj).__name__}:{obj!r};".encode())

    add(state)
    return f"sha256:{digest.hexdigest()}"


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load an mt checkpoint; anything else (truncated, damaged, foreign, pickled code) is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise MtError(f"{path}: no such checkpoint")
    unreadable = f"{path}: truncated or not a checkpoint; remove it or choose another checkpoint"
    try:  # a file it may not read is no damage: is_zipfile would say False, and the advice be to remove it
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise MtError(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; anything else is damage
        raise MtError(unreadable)
    try:
        with warnings.catch_warnings():  # a damaged pickle header makes torch warn about its protocol
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a damaged archive fails in many ways: EOFError, KeyError, RuntimeError...
        # Damage first: bytes changed on disk fail the CRC-32 the zip archive holds for each entry.
        # Only an intact archive that holds something else (a class, code) is refused as such.
        damaged = _damaged_entry(path)
        if damaged:
            raise MtError(
                f"{path}: damaged: {damaged} fails its CRC check ({_reason(exc)}); "
                f"remove it or choose another checkpoint"
            ) from None
        if isinstance(exc, pickle.UnpicklingError):
            raise MtError(
                f"{path}: refused: holds more than tensors and plain data ({_reason(exc, 'Unsupported')})"
            ) from None
        raise MtError(f"{unreadable} ({_reason(exc)})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise MtError(f"{path}: not an mt checkpoint (format {FORMAT!r} expected)")
    saved = state.pop("checksum", None)
    if saved is not None and saved != checksum(state):
        raise MtError(
            f"{path}: damaged: checksum mismatch (its contents changed after it was saved); "
            f"remove it or choose another checkpoint"
        )
    damaged = _damaged_entry(path) if saved is None else None  # a checkpoint from before checksums
    if damaged:
        raise MtError(f"{path}: damaged: {damaged} fails its CRC check; remove it or choose another checkpoint")
    return state


def peek_checkpoint(path: Path) -> dict[str, Any] | None:
    """Checkpoint `path` read with its tensors memory-mapped, not loaded nor checked: for its counters
    before anything else is loaded. None when it cannot be read so (the full load, in training,
    says what is wrong with it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # damaged or foreign: load_checkpoint's one-line error comes with the resume
        return None
    return state if isinstance(state, dict) and state.get("format") == FORMAT else None


def saved_step(path: Path) -> int | None:
    """The step training checkpoint `path` holds, read without loading its tensors; None if there is
    none (or it cannot be peeked at: the full load says what is wrong with it)."""
    if not Path(path).is_file():
        return None
    state = peek_checkpoint(path)
    return None if state is None or "step" not in state else int(state["step"])


def _damaged_entry(path: Path) -> str | None:
    """The first entry of a zip archive whose bytes fail their CRC-32, or None if all pass."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except Exception:  # a damaged directory or header: BadZipFile, EOFError, zlib.error, ...
        return "the zip archive"


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


# -- starting from another experiment ---------------------------------------------------------------
# Rates of dropout do not shape the weights: a fine-tuning run may change them.
INIT_FREE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")


def model_differences(
    saved: dict[str, Any] | None, model_cfg: ModelConfig, free: Sequence[str] = INIT_FREE_FIELDS
) -> list[tuple[str, Any, Any]]:
    """(field, the checkpoint's value, model_cfg's) for each model field but `free` that differs. A field
    the checkpoint's model_config lacks (it predates the field) has the default, as model_from_checkpoint
    gives it."""
    theirs = {**dataclasses.asdict(ModelConfig()), **(saved or {})}
    return [
        (key, theirs.get(key), value)
        for key, value in dataclasses.asdict(model_cfg).items()
        if key not in free and theirs.get(key) != value
    ]


def check_model_config(path: Path, state: dict[str, Any], model_cfg: ModelConfig, config_path: Path) -> None:
    """Refuse checkpoint `path` of this experiment when the model section of its config (config_path)
    was changed since it was trained (by hand: flags may not change it): resuming would fail on the
    weights' shapes, and translating would silently use the checkpoint's model. Rates of dropout
    (INIT_FREE_FIELDS) may differ: they shape no weight, and training may change them."""
    differing = model_differences(state.get("model_config"), model_cfg)
    if differing:
        fields = ", ".join(f"model.{key} {ours!r} (checkpoint {theirs!r})" for key, theirs, ours in differing)
        raise MtError(
            f"{config_path}: {fields}: the model differs from the one {path} was trained with; "
            f"put the checkpoint's values back, or train a new experiment (another --exp)"
        )


def tokenizer_difference(state: dict[str, Any], tokenizer_sha256: dict[str, str]) -> str | None:
    """The side ("src" or "tgt") whose tokenizer differs from the one checkpoint `state` was trained
    with, or None when both are the same (the hashes it carries equal `tokenizer_sha256`)."""
    theirs = state.get("tokenizer_sha256") or {}
    if theirs == tokenizer_sha256:
        return None
    return "tgt" if theirs.get("src") == tokenizer_sha256.get("src") else "src"


def check_tokenizer(path: Path, state: dict[str, Any], tokenizer_sha256: dict[str, str], tokenizer_dir: Path) -> None:
    """Refuse checkpoint `path` (its `state`) unless it was trained with the tokenizer in tokenizer_dir."""
    if tokenizer_difference(state, tokenizer_sha256) is not None:
        raise MtError(f"{path}: trained with a different tokenizer than {tokenizer_dir}")
