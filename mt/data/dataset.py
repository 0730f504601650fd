"""The binarized arrays of a split: read back memory-mapped (`ParallelData`), checked against the
manifest (`check_data`), or built in memory from aligned lines (`encode_pairs`).

Each split and side is one flat id array (uint16 when the vocabulary fits, else int32) plus int64
offsets: sentence i is ids[offsets[i]:offsets[i + 1]]. Ids carry no BOS/EOS; batching adds them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from mt.data import binarize_workers as encoding
from mt.data import corpus, text_files
from mt.data.binarize_workers import RAW_REASONS, Encoder, Filters, id_dtype
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import Tokenizer


def file_sha256(path: Path, opener=open) -> str:
    """The manifest's checksum of a file (binarize writes it, check_data compares it); `opener`
    gzip.open: of a compressed file's content."""
    digest = hashlib.sha256()
    with opener(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_data(exp: Experiment, tokenizer_sha256: dict[str, str]) -> None:
    """Refuse binarized data made with another tokenizer, or changed since `mt binarize` wrote it."""
    rebuild = f"remove {exp.data_dir} and run `mt binarize --exp {exp.root}` again"
    manifest = exp.read_json(exp.manifest_path)
    made_with = (manifest or exp.read_json(exp.data_stats_path) or {}).get("tokenizer_sha256")
    if made_with is not None and made_with != tokenizer_sha256:
        raise MtError(
            f"{exp.data_dir} was binarized with another tokenizer than the one in {exp.tokenizer_dir} "
            f"(retrained since?); {rebuild}"
        )
    for name, entry in (manifest or {}).get("files", {}).items():
        path = exp.data_dir / name
        if not path.exists():
            raise MtError(f"{path}: missing, but listed in {exp.manifest_path}; {rebuild}")
        if path.stat().st_size != entry["bytes"] or file_sha256(path) != entry["sha256"]:
            raise MtError(
                f"{path}: changed since `mt binarize` (size or sha256 differ from {exp.manifest_path.name}); {rebuild}"
            )


def input_files(cfg, split: str) -> list[str]:
    """The files a split is read from (every direction's sources); of `hf:` sources, the local ones (a
    data file, every file of a save_to_disk directory), not a hub dataset's."""
    paths: dict[str, None] = {}
    for pair in cfg.data.pairs():
        for source in cfg.data.sources(split, pair):
            if source.kind == "files":  # as its reader opens them: FILE, or FILE.gz where only that exists
                paths.update(dict.fromkeys(text_files.existing(path) for path in source.paths))
            elif source.kind in ("tsv", "jsonl", "ding"):
                paths.update(dict.fromkeys(source.paths))
            elif source.kind == "hf" and os.path.isfile(source.paths[0]):
                paths.update(dict.fromkeys(source.paths))
            elif source.kind == "hf" and os.path.isdir(source.paths[0]):
                found = sorted(p for p in Path(source.paths[0]).rglob("*") if p.is_file())
                paths.update(dict.fromkeys(str(p) for p in found))
    return list(paths)


def input_record(cfg, splits: list[str], content: bool = False) -> dict[str, dict]:
    """Each input file of `splits`, as binarize reads it: size, modification time and sha256, so that
    `changed_inputs` can tell a file rewritten with the same lines from one whose lines changed."""
    record = {}
    for split in splits:
        for path in input_files(cfg, split):
            key = os.path.abspath(path)
            if key not in record and os.path.isfile(path):  # the first split that reads it (train first)
                stat = os.stat(path)
                record[key] = {
                    "split": split,
                    "bytes": stat.st_size,
                    "mtime_ns": stat.st_mtime_ns,
                    "sha256": file_sha256(Path(path)),
                }
                if content and _gzipped(
                    path
                ):  # its lines' hash: gzip's header has a time, compressing again changes it
                    record[key]["content_sha256"] = _gz_sha256(path)
    return record


def _gzipped(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def changed_inputs(exp: Experiment, record: dict | None = None) -> list[tuple[str, str, str]]:
    """(split, file, how) for each file data/ was binarized from (or that `record`, an `input_record`,
    holds) that has changed since: gone, or other bytes (its sha256, read only where its size or time
    moved). Data binarized before inputs were recorded has nothing to compare with: none."""
    changed = []
    if record is None:
        record = (exp.read_json(exp.manifest_path) or {}).get("inputs") or {}
    for path, was in record.items():
        try:
            stat = os.stat(path)
        except OSError:
            if os.path.isfile(path + ".gz"):  # compressed since: the reader opens it now; its lines count
                if _gz_sha256(path + ".gz") != was["sha256"]:
                    changed.append((was["split"], path + ".gz", "other lines"))
                continue
            changed.append((was["split"], path, "gone"))
            continue
        if (stat.st_size, stat.st_mtime_ns) == (was["bytes"], was["mtime_ns"]):
            continue
        if stat.st_size != was["bytes"] or file_sha256(Path(path)) != was["sha256"]:
            if was.get("content_sha256") and _gz_sha256(path) == was["content_sha256"]:
                continue  # compressed again: the same lines
            changed.append((was["split"], path, "other lines"))
    return changed


def _gz_sha256(path: str) -> str:
    """The sha256 of a gzip file's content: the file it was compressed from, as `file_sha256` has it."""
    import gzip

    try:
        return file_sha256(Path(path), gzip.open)
    except (OSError, EOFError):  # not gzip after all, or cut short: not the file that was read
        return ""


def encode_pairs(
    src_lines: list[str], tgt_lines: list[str], src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int
) -> tuple[dict[str, np.ndarray], dict]:
    """Encode aligned lines held in memory (as they are, no cleaning) and drop unusable pairs.

    Returns arrays {src_ids, src_offsets, tgt_ids, tgt_offsets, lines} and counts
    {pairs_in, kept, dropped: {empty, too_long}}. A pair is "empty" if either side has no tokens and
    "too_long" if either side has more than max_len tokens.
    """
    if len(src_lines) != len(tgt_lines):
        raise MtError(f"{len(src_lines)} source lines but {len(tgt_lines)} target lines")
    encoder, filters = Encoder(src_tok, tgt_tok), Filters(None, max_len, 0.0, False)
    parts = []
    for start in range(0, len(src_lines), encoding.ENCODE_CHUNK):
        end = start + encoding.ENCODE_CHUNK
        chunk = corpus.RawChunk("text", src_lines[start:end], tgt_lines[start:end], ("source", "target"), start)
        parts.append((start, encoder(chunk, filters)))
    arrays = {"lines": np.concatenate([np.zeros(0, np.int64)] + [start + r["index"] for start, r in parts])}
    for side, tok in (("src", src_tok), ("tgt", tgt_tok)):
        lens = np.concatenate([np.zeros(0, np.int64)] + [r[f"{side}_lens"] for _, r in parts])
        arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        ids = [np.zeros(0, id_dtype(tok.vocab_size))] + [r[f"{side}_ids"] for _, r in parts]
        arrays[f"{side}_ids"] = np.concatenate(ids)
    dropped = {reason: sum(r["dropped"][reason] for _, r in parts) for reason in RAW_REASONS}
    return arrays, {"pairs_in": len(src_lines), "kept": len(arrays["lines"]), "dropped": dropped}


class ParallelData:
    """A binarized split, memory-mapped: src(i)/tgt(i) give sentence i's ids (no BOS/EOS)."""

    def __init__(self, exp: Experiment, split: str):
        self.split = split
        paths = [
            exp.ids_path(split, "src"),
            exp.offsets_path(split, "src"),
            exp.ids_path(split, "tgt"),
            exp.offsets_path(split, "tgt"),
        ]
        for path in paths:
            if not path.exists():
                raise MtError(f"{path}: no binarized {split} data; run `mt binarize --exp {exp.root}` first")
        try:
            self._src_ids, self._src_offsets, self._tgt_ids, self._tgt_offsets = (
                np.load(path, mmap_mode="r") for path in paths
            )
        except (OSError, ValueError) as exc:
            raise MtError(
                f"{exp.data_dir}: unreadable binarized {split} data ({exc}); remove it and run `mt binarize`"
            ) from None
        if len(self._src_offsets) != len(self._tgt_offsets) or len(self._src_offsets) == 0:
            raise MtError(
                f"{exp.data_dir}: {split} source and target offsets disagree; remove it and run `mt binarize`"
            )
        self.src_lens: np.ndarray = np.diff(self._src_offsets).astype(np.int64)
        self.tgt_lens: np.ndarray = np.diff(self._tgt_offsets).astype(np.int64)
        # The direction of each pair, an index into data.directions (all 0 in a bilingual experiment).
        path = exp.directions_path(split)
        self.directions: np.ndarray = np.load(path) if path.exists() else np.zeros(len(self.src_lens), np.int16)

    def __len__(self) -> int:
        return len(self.src_lens)

    def src(self, i: int) -> np.ndarray:
        return self._src_ids[self._src_offsets[i] : self._src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self._tgt_ids[self._tgt_offsets[i] : self._tgt_offsets[i + 1]]
