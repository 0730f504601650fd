"""`mt export`: a trained checkpoint as a model directory another runtime loads, translating as mt does.

Two formats, one module each: CTranslate2 (`mt.apps.export.ctranslate2`) and Hugging Face transformers
(`mt.apps.export.huggingface`, which Optimum turns into ONNX). Both map every weight by name and refuse,
in one line, a model they cannot express exactly (`mt.apps.export.mapping`). Here: what both share --
loading and checking the checkpoint, and writing the directory so that a failed export leaves the
previous one whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from mt.apps.export.mapping import Exported
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.experiment.checkpoint_file import check_model_config, check_tokenizer, load_checkpoint, model_from_checkpoint
from mt.experiment.paths import Experiment

FORMATS = ("ctranslate2", "huggingface")
# A directory holding one of these is an earlier export, which --force may replace.
EXPORT_MARKERS = ("model.bin", "model.safetensors")


def export(exp: Experiment, cfg: ExperimentConfig, output: Path, fmt: str = "ctranslate2",
           checkpoint: str | None = None, quantize: str | None = None, force: bool = False,
           license: str | None = None) -> dict[str, Any]:
    """`mt export`: write the experiment's checkpoint (default decode.checkpoint) to the directory
    `output` in format `fmt`; a summary of what was written."""
    from mt.apps.export import ctranslate2, huggingface

    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {' or '.join(FORMATS)}")
    target = ctranslate2 if fmt == "ctranslate2" else huggingface
    target.check_options(quantize, license)
    output = Path(output)
    _check_output(output, force)
    source = _load(exp, cfg, checkpoint, target.check_model)
    _replace_dir(output, target.writer(source, quantize, license))
    files = sorted(p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file())
    return {"output": str(output), "checkpoint": str(source.path), "format": fmt,
            "quantize": quantize or "float32", "files": files,
            "bytes": sum((output / name).stat().st_size for name in files)}


def _load(exp: Experiment, cfg: ExperimentConfig, checkpoint: str | None,
          check_model: Callable[[dict[str, Any], str], None]) -> Exported:
    """The checkpoint, checked against the experiment and then by the format (`check_model`: its
    model config, before a model is built from it)."""
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    path = exp.find_checkpoint(checkpoint or cfg.decode.checkpoint)
    state = load_checkpoint(path)
    check_tokenizer(path, state, {"src": src_tok.sha256, "tgt": tgt_tok.sha256}, exp.tokenizer_dir)
    if path.resolve().parent == exp.checkpoints_dir.resolve():
        check_model_config(path, state, cfg.model, exp.config_path)
    check_model(state.get("model_config") or {}, str(path))
    return Exported(exp, cfg, path, state, model_from_checkpoint(state).eval(), src_tok, tgt_tok)


def _check_output(output: Path, force: bool) -> None:
    """--force replaces an earlier export (a directory with a model file) or an empty directory, nothing else."""
    if not (output.exists() or output.is_symlink()):
        return
    if not force:
        raise MtError(f"{output}: exists; choose another --output or add --force")
    earlier = any((output / name).is_file() for name in EXPORT_MARKERS)
    if not output.is_dir() or output.is_symlink() or (any(output.iterdir()) and not earlier):
        raise MtError(f"{output}: exists and is not an exported model (no {' or '.join(EXPORT_MARKERS)}); "
                      f"--force replaces only an earlier export: choose another --output")


def _replace_dir(output: Path, write: Callable[[Path], None]) -> None:
    """Write into a temporary directory beside `output`, then rename it into place: a failed or
    interrupted export leaves no half model and keeps the previous one."""
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.{os.getpid()}-"))
    try:
        write(tmp)
        _readable(tmp)
        if output.exists():
            old = tmp.with_name(tmp.name + "-replaced")
            os.rename(output, old)
            os.rename(tmp, output)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, output)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _readable(root: Path) -> None:
    """The modes a plain `cp -r` would give: mkdtemp makes its directory private (0700) and some
    writers their files 0600, but an exported model is meant to be shared (a server's user, a Hub upload)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [root, *root.rglob("*")]:
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)
