"""Parallel text -> token-id arrays on disk, and the memory-mapped dataset that reads them back.

Each split and side is one flat id array (uint16 when the vocabulary fits, else int32) plus int64
offsets: sentence i is ids[offsets[i]:offsets[i + 1]]. Ids carry no BOS/EOS; batching adds them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from mt import corpus, log
from mt.config import ExperimentConfig
from mt.errors import MtError
from mt.experiment import SPLITS, Experiment, write_json_atomic
from mt.tokenizer import Tokenizer, load_tokenizers

ENCODE_CHUNK = 100_000  # lines per encode call: bounds the memory of Python id lists


def lines_path(exp: Experiment, split: str) -> Path:
    """0-based line numbers (in the split's text) of the pairs binarize kept, int64."""
    return exp.data_dir / f"{split}.lines.npy"


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.int32)


def encode_pairs(
    src_lines: list[str], tgt_lines: list[str], src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int
) -> tuple[dict[str, np.ndarray], dict]:
    """Encode aligned lines and drop unusable pairs.

    Returns arrays {src_ids, src_offsets, tgt_ids, tgt_offsets, lines} and counts
    {pairs_in, kept, dropped: {empty, too_long}}. A pair is "empty" if either side has no tokens and
    "too_long" if either side has more than max_len tokens.
    """
    if len(src_lines) != len(tgt_lines):
        raise MtError(f"{len(src_lines)} source lines but {len(tgt_lines)} target lines")
    kept = {"src": [], "tgt": []}  # per chunk: flat id arrays
    lens = {"src": [], "tgt": []}  # per chunk: lengths of kept pairs
    line_numbers, empty, too_long = [], 0, 0
    for start in range(0, len(src_lines), ENCODE_CHUNK):
        src = src_tok.encode(src_lines[start : start + ENCODE_CHUNK])
        tgt = tgt_tok.encode(tgt_lines[start : start + ENCODE_CHUNK])
        src_len = np.fromiter(map(len, src), dtype=np.int64, count=len(src))
        tgt_len = np.fromiter(map(len, tgt), dtype=np.int64, count=len(tgt))
        is_empty = (src_len == 0) | (tgt_len == 0)
        is_long = ~is_empty & ((src_len > max_len) | (tgt_len > max_len))
        empty += int(is_empty.sum())
        too_long += int(is_long.sum())
        keep = np.flatnonzero(~is_empty & ~is_long)
        line_numbers.append(keep + start)
        for side, seqs, seq_len, tok in (("src", src, src_len, src_tok), ("tgt", tgt, tgt_len, tgt_tok)):
            total = int(seq_len[keep].sum())
            flat = itertools.chain.from_iterable(seqs[i] for i in keep)
            kept[side].append(np.fromiter(flat, dtype=id_dtype(tok.vocab_size), count=total))
            lens[side].append(seq_len[keep])
    arrays = {"lines": np.concatenate(line_numbers) if line_numbers else np.zeros(0, np.int64)}
    for side, tok in (("src", src_tok), ("tgt", tgt_tok)):
        side_lens = np.concatenate(lens[side]) if lens[side] else np.zeros(0, np.int64)
        arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(side_lens)]).astype(np.int64)
        arrays[f"{side}_ids"] = (
            np.concatenate(kept[side]) if kept[side] else np.zeros(0, id_dtype(tok.vocab_size))
        )
    counts = {
        "pairs_in": len(src_lines),
        "kept": len(arrays["lines"]),
        "dropped": {"empty": empty, "too_long": too_long},
    }
    return arrays, counts


def _split_stats(arrays: dict[str, np.ndarray], counts: dict) -> dict:
    kept = counts["kept"]
    src_tokens, tgt_tokens = len(arrays["src_ids"]), len(arrays["tgt_ids"])
    return {
        **counts,
        "src_tokens": src_tokens,
        "tgt_tokens": tgt_tokens,
        "mean_src_len": round(src_tokens / kept, 2) if kept else 0.0,
        "mean_tgt_len": round(tgt_tokens / kept, 2) if kept else 0.0,
    }


def _write_split(exp: Experiment, tmp_dir: Path, split: str, arrays: dict[str, np.ndarray]) -> None:
    """Save a split's arrays under tmp_dir with the names they will have under exp.data_dir."""
    targets = {
        "src_ids": exp.ids_path(split, "src"),
        "src_offsets": exp.offsets_path(split, "src"),
        "tgt_ids": exp.ids_path(split, "tgt"),
        "tgt_offsets": exp.offsets_path(split, "tgt"),
        "lines": lines_path(exp, split),
    }
    for key, path in targets.items():
        np.save(tmp_dir / path.relative_to(exp.data_dir), arrays[key])


def binarize(exp: Experiment, cfg: ExperimentConfig) -> dict:
    """`mt binarize`: encode every configured split into exp.data_dir; returns the stats written."""
    if exp.data_dir.exists():
        raise MtError(
            f"{exp.data_dir}: the experiment is already binarized; nothing overwritten "
            f"(start a new experiment with --exp, or remove that directory)"
        )
    src_tok, tgt_tok = load_tokenizers(exp, cfg)
    splits = [split for split in SPLITS if corpus.has_split(cfg.data, split)]
    if not splits:
        raise MtError("no data splits are configured (set data.train_src/train_tgt or the like)")
    stats: dict = {
        "max_len": cfg.data.max_len,
        "tokenizer_sha256": {"src": src_tok.sha256, "tgt": tgt_tok.sha256},
        "splits": {},
    }
    exp.root.mkdir(parents=True, exist_ok=True)
    # Everything is built in a hidden directory and renamed at the end: an interrupted run leaves
    # no data dir behind, and a data dir that exists is complete.
    tmp_dir = Path(tempfile.mkdtemp(dir=exp.root, prefix=".data-"))
    try:
        for split in splits:
            started = time.perf_counter()
            src_lines, tgt_lines = corpus.load_split(cfg.data, split)
            arrays, counts = encode_pairs(src_lines, tgt_lines, src_tok, tgt_tok, cfg.data.max_len)
            _write_split(exp, tmp_dir, split, arrays)
            stats["splits"][split] = _split_stats(arrays, counts)
            log.info(
                f"{split}: kept {counts['kept']:,} of {counts['pairs_in']:,} pairs "
                f"(empty {counts['dropped']['empty']:,}, too long {counts['dropped']['too_long']:,}) "
                f"in {time.perf_counter() - started:.1f}s"
            )
        write_json_atomic(tmp_dir / exp.data_stats_path.relative_to(exp.data_dir), stats)
        os.replace(tmp_dir, exp.data_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return stats


class ParallelData:
    """A binarized split, memory-mapped: src(i)/tgt(i) give sentence i's ids (no BOS/EOS)."""

    def __init__(self, exp: Experiment, split: str):
        self.split = split
        paths = [exp.ids_path(split, "src"), exp.offsets_path(split, "src"),
                 exp.ids_path(split, "tgt"), exp.offsets_path(split, "tgt")]
        for path in paths:
            if not path.exists():
                raise MtError(
                    f"{path}: no binarized {split} data; run `mt binarize --exp {exp.root}` first"
                )
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

    def __len__(self) -> int:
        return len(self.src_lens)

    def src(self, i: int) -> np.ndarray:
        return self._src_ids[self._src_offsets[i] : self._src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self._tgt_ids[self._tgt_offsets[i] : self._tgt_offsets[i + 1]]
