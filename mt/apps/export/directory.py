"""`mt export`'s directory and what the formats share.

Three formats, one module each: CTranslate2 (`mt.apps.export.ctranslate2`), Hugging Face transformers
(`mt.apps.export.huggingface`, which Optimum turns into ONNX) and Argos Translate packages
(`mt.apps.export.argos`: the CTranslate2 model zipped with what Argos and LibreTranslate need). All map every weight by name and refuse,
in one line, a model they cannot express exactly (`mt.model.mapping`). Here: what both share --
loading and checking the checkpoint, and writing the directory so that a failed export leaves the
previous one whole. The directory's MANIFEST lists the files the export wrote: `--force` replaces
those and keeps every other file (a Hub clone's .git/, notes), and refuses one it would overwrite.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mt import log
from mt.atomic_files import sync_directory, sync_tree, write_text_atomic
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment

if TYPE_CHECKING:
    from mt.apps.export.exported import Exported

FORMATS = ("ctranslate2", "huggingface", "argos")
# A directory holding one of these is an earlier export, which --force may replace.
EXPORT_MARKERS = ("model.bin", "model.safetensors", "*.argosmodel")
MANIFEST = ".mt-export.json"  # {"format": ..., "files": [...]}: what the export wrote, and nothing else
BUILD_MARK = ".mt-export-build"  # in an export's temporary directory while it is written: ours to remove


def export(
    exp: Experiment,
    cfg: ExperimentConfig,
    output: Path,
    fmt: str = "ctranslate2",
    checkpoint: str | None = None,
    quantize: str | None = None,
    force: bool = False,
    license: str | None = None,
) -> dict[str, Any]:
    """`mt export`: write the experiment's checkpoint (default decode.checkpoint) to the directory
    `output` in format `fmt`; a summary of what was written. The format and the output are checked
    before the formats' modules bring torch (and transformers) in: a refusal is immediate."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    output = Path(output)
    quantize = None if quantize == "float32" else quantize  # the default, as --help names it
    _clear_killed(output)  # first: an earlier export a killed one had moved aside is back in place
    earlier = _check_output(output, force)
    from mt.apps.export import argos, ctranslate2, huggingface

    target = {"ctranslate2": ctranslate2, "huggingface": huggingface, "argos": argos}[fmt]
    target.check_options(quantize, license)
    source = load_exported(exp, cfg, checkpoint, target.check_model)
    form = cfg.data.cleaning("train")
    if cfg.tokenizer.normalization == "identity" and form not in (None, "none"):
        log.warn(
            f"export: the tokenizer normalizes nothing (tokenizer.normalization identity) and mt translate "
            f"brings input to {form.upper()} first, as the training text was; the {fmt} model does not: "
            f"give it {form.upper()} text (Python: unicodedata.normalize({form.upper()!r}, text)) or a "
            f"decomposed character reads as other pieces"
        )
    files = _replace_dir(output, target.writer(source, quantize, license), fmt, earlier)
    return {
        "output": str(output),
        "checkpoint": str(source.path),
        "format": fmt,
        "quantize": quantize or "float32",
        "files": files,
        "bytes": sum((output / name).stat().st_size for name in files),
    }


def load_exported(
    exp: Experiment, cfg: ExperimentConfig, checkpoint: str | None, check_model: Callable[[dict[str, Any], str], None]
) -> Exported:
    """The checkpoint, checked against the experiment and then by the format (`check_model`: its
    model config, before a model is built from it)."""
    from mt.apps.export.exported import Exported
    from mt.experiment.checkpoint_file import (
        check_model_config,
        check_tokenizer,
        load_checkpoint,
        model_from_checkpoint,
    )

    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    path = exp.find_checkpoint(checkpoint or cfg.decode.checkpoint)
    state = load_checkpoint(path)
    check_tokenizer(path, state, {"src": src_tok.sha256, "tgt": tgt_tok.sha256}, exp.tokenizer_dir)
    if path.resolve().parent == exp.checkpoints_dir.resolve():
        check_model_config(path, state, cfg.model, exp.config_path)
    check_model(state.get("model_config") or {}, str(path))
    return Exported(exp, cfg, path, state, model_from_checkpoint(state).eval(), src_tok, tgt_tok)


def _check_output(output: Path, force: bool) -> list[str]:
    """--force replaces an earlier export (a directory with a model file and MANIFEST) or an empty
    directory, nothing else; the files the earlier export wrote, which MANIFEST lists."""
    if not (output.exists() or output.is_symlink()):
        return []
    if not force:
        raise MtError(f"{output}: exists; choose another --output or add --force")
    marked = any(path.is_file() for name in EXPORT_MARKERS for path in output.glob(name))
    if not output.is_dir() or output.is_symlink() or (any(output.iterdir()) and not marked):
        raise MtError(
            f"{output}: exists and is not an exported model (no {' or '.join(EXPORT_MARKERS)}); "
            f"--force replaces only an earlier export: choose another --output"
        )
    if (output / MANIFEST).exists():
        return _read_manifest(output)
    if any(output.iterdir()):  # a model converted by hand, or saved by transformers, has the same file names
        raise MtError(
            f"{output}: no {MANIFEST} saying which of its files an export wrote; --force replaces only "
            f"what `mt export` wrote: move the files out or choose another --output"
        )
    return []


def _read_manifest(output: Path) -> list[str]:
    """The files MANIFEST says the earlier export wrote: relative paths inside `output`."""
    path = output / MANIFEST
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MtError(
            f"{path}: not an export's list of files ({exc}); --force cannot tell the export's files "
            f"from others: choose another --output"
        ) from None
    if not isinstance(files, list) or not all(isinstance(f, str) and _inside(f) for f in files):
        raise MtError(
            f"{path}: its files are not paths inside {output}; --force cannot tell the export's files "
            f"from others: choose another --output"
        )
    return files


def _inside(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts and name != MANIFEST


def _replace_dir(output: Path, write: Callable[[Path], None], fmt: str, earlier: list[str]) -> list[str]:
    """Write into a temporary directory beside `output`, then rename it into place: a failed or
    interrupted export leaves no half model and keeps the previous one. `earlier`: the files of the
    export `output` holds; anything else there is kept (`_merge`: there the files move one by one, and
    an export killed among them leaves old and new side by side, all listed, for --force to replace).
    Returns the files written."""
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.{os.getpid()}-"))
    try:
        (tmp / BUILD_MARK).touch()
        write(tmp)
        (tmp / BUILD_MARK).unlink()  # (the manifest marks it from here on)
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        (tmp / MANIFEST).write_text(json.dumps({"format": fmt, "files": files}, indent=1) + "\n", encoding="utf-8")
        _readable(tmp)
        sync_tree(tmp)  # on disk before it is renamed in and the earlier export goes: a crash leaves one whole
        old = tmp.with_name(tmp.name + "-replaced")
        if output.exists() and not _others(output, earlier):
            try:
                os.rename(output, old)
            except OSError:  # a mount point (a container's volume) cannot move: its files are replaced instead
                pass
        if output.exists():
            _merge(tmp, output, files, earlier)
        else:
            os.rename(tmp, output)
            sync_directory(output.parent)
            shutil.rmtree(old, ignore_errors=True)  # the earlier export, moved aside above
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return files


def _clear_killed(output: Path) -> None:
    """What an export into `output` killed midway left beside it (its process gone): a temporary
    directory is removed, and an earlier export moved aside for the new one, with nothing in
    `output`'s place, is put back first."""
    if not output.parent.is_dir():
        return
    # only the names `_replace_dir` makes (mkdtemp's eight characters after the pid), holding its mark or
    # an export's manifest: a user's `.de-en.2024-05-01/` beside `de-en` is not one (it was removed)
    ours = re.compile(rf"\.{re.escape(output.name)}\.(\d+)-[a-z0-9_]{{8}}(-replaced)?")
    for left in sorted(output.parent.glob(f".{glob.escape(output.name)}.*-*")):
        found = ours.fullmatch(left.name)
        if found is None or not left.is_dir() or _running(int(found.group(1))):
            continue
        if not (left / BUILD_MARK).exists() and not (left / MANIFEST).exists():
            continue
        if left.name.endswith("-replaced") and not output.exists() and (left / MANIFEST).exists():
            os.rename(left, output)
            log.warn(f"{output}: put back (an export killed while it replaced it had moved it to {left.name})")
        else:
            shutil.rmtree(left, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _others(output: Path, earlier: list[str]) -> list[str]:
    """What `output` holds besides the earlier export's files (and the folders they are in)."""
    ours = {MANIFEST, *earlier, *(parent.as_posix() for name in earlier for parent in Path(name).parents)}
    return [p.relative_to(output).as_posix() for p in output.rglob("*") if p.relative_to(output).as_posix() not in ours]


def _merge(tmp: Path, output: Path, files: list[str], earlier: list[str]) -> None:
    """The new export's files renamed one by one into `output`, which holds files the earlier export
    did not write: those stay. One of them in the way of a new file is refused before anything moves.
    MANIFEST lists both exports' files until the old ones are gone, so a run killed midway leaves
    none that a later --force would not replace."""
    kept = {f for f in files if (output / f).exists() or (output / f).is_symlink()} - set(earlier)
    if kept:
        raise MtError(
            f"{output}: {', '.join(sorted(kept))} would be replaced, and the earlier export did not "
            f"write it ({MANIFEST}); move it out or choose another --output"
        )
    union = sorted({*earlier, *files})
    write_manifest = json.dumps({"format": "mixed", "files": union}, indent=1) + "\n"
    write_text_atomic(output / MANIFEST, write_manifest)
    for name in files:
        (output / name).parent.mkdir(parents=True, exist_ok=True)
        _move(tmp / name, output / name)
    for name in set(earlier) - set(files):  # a folder there now is not the file the export wrote: kept
        if (output / name).is_file() or (output / name).is_symlink():
            (output / name).unlink()
    for folder in {(output / name).parent for name in files}:
        sync_directory(folder)
    _move(tmp / MANIFEST, output / MANIFEST)
    sync_directory(output)


def _move(source: Path, target: Path) -> None:
    """Rename `source` over `target`; across file systems (`--output` a mounted volume, the new export
    written beside it on another), copied beside `target` first, then renamed over it."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy = target.with_name(f".{target.name}.{os.getpid()}-copy")
        try:
            shutil.copyfile(source, copy)
            with open(copy, "rb+") as handle:
                os.fsync(handle.fileno())
            os.chmod(copy, source.stat().st_mode & 0o777)
            os.replace(copy, target)
        finally:
            copy.unlink(missing_ok=True)


def _readable(root: Path) -> None:
    """The modes a plain `cp -r` would give: mkdtemp makes its directory private (0700) and some
    writers their files 0600, but an exported model is meant to be shared (a server's user, a Hub upload)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [root, *root.rglob("*")]:
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)
