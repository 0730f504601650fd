"""The arrays `mt binarize` writes, in appended pieces so that memory stays flat: one 1-D .npy file
per field whose header (it holds the length) is written last, a split's set of them, and the pairs
seen so far for exact deduplication."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from mt.data.dataset import file_sha256
from mt.experiment.paths import Experiment


class NpyWriter:
    """A 1-D .npy file written in appended pieces; the header, which holds the length, is written last."""

    _PLACEHOLDER = 2**63 - 1  # the header of the largest length: as long as any real one (128 bytes)

    def __init__(self, path: Path, dtype: np.dtype):
        self.path, self.dtype, self.length = Path(path), np.dtype(dtype), 0
        self.handle = open(self.path, "wb")
        self.header_size = self.handle.write(self._header(self._PLACEHOLDER))

    def _header(self, length: int) -> bytes:
        buffer = io.BytesIO()
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (length,)}
        np.lib.format.write_array_header_1_0(buffer, header)
        return buffer.getvalue()

    def append(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self.handle.write(values.data)
        self.length += len(values)

    def close(self) -> dict:
        """Finish the file; returns its size and sha256 for the manifest."""
        header = self._header(self.length)
        assert len(header) == self.header_size, "npy header sizes differ"  # both pad to 128 bytes
        self.handle.seek(0)
        self.handle.write(header)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        return {"bytes": self.path.stat().st_size, "sha256": file_sha256(self.path)}

    def abandon(self) -> None:
        self.handle.close()


class SplitWriter:
    """The five arrays of a split (ids and offsets per side, line numbers), appended to as pairs come."""

    def __init__(
        self,
        exp: Experiment,
        tmp_dir: Path,
        split: str,
        src_dtype: np.dtype,
        tgt_dtype: np.dtype,
        directions: bool = False,
    ):
        paths = {
            "src_ids": (exp.ids_path(split, "src"), src_dtype),
            "src_offsets": (exp.offsets_path(split, "src"), np.int64),
            "tgt_ids": (exp.ids_path(split, "tgt"), tgt_dtype),
            "tgt_offsets": (exp.offsets_path(split, "tgt"), np.int64),
            "lines": (exp.lines_path(split), np.int64),
        }
        if directions:  # the direction of each pair, an index into data.directions
            paths["directions"] = (exp.directions_path(split), np.int16)
        self.direction_rows: dict[int, int] = {}
        # The names they will have under exp.data_dir, which is flat.
        self.files = {key: NpyWriter(tmp_dir / path.name, dtype) for key, (path, dtype) in paths.items()}
        self.tokens = {"src": 0, "tgt": 0}
        for side in ("src", "tgt"):
            self.files[f"{side}_offsets"].append(np.zeros(1, np.int64))

    def append(self, arrays: dict, lines: np.ndarray, direction: int = 0) -> None:
        if "directions" in self.files:
            self.files["directions"].append(np.full(len(lines), direction, np.int16))
        self.direction_rows[direction] = self.direction_rows.get(direction, 0) + len(lines)
        for side in ("src", "tgt"):
            self.files[f"{side}_ids"].append(arrays[f"{side}_ids"])
            ends = self.tokens[side] + np.cumsum(arrays[f"{side}_lens"])
            self.files[f"{side}_offsets"].append(ends)
            if len(ends):
                self.tokens[side] = int(ends[-1])
        self.files["lines"].append(lines)

    @property
    def pairs(self) -> int:
        return self.files["lines"].length

    def close(self) -> dict[str, dict]:
        return {writer.path.name: writer.close() for writer in self.files.values()}

    def abandon(self) -> None:
        for writer in self.files.values():
            writer.abandon()


class SeenPairs:
    """64-bit hashes of the pairs kept so far, for exact deduplication in 8 bytes a pair: sorted runs
    merged like a binary counter (a merge of two sorted runs is one linear timsort pass)."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """True for each hash seen so far (nothing is remembered)."""
        found = np.zeros(len(hashes), dtype=bool)
        for run in self.runs:
            at = np.searchsorted(run, hashes).clip(max=len(run) - 1)
            found |= run[at] == hashes
        return found

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """True for each hash not seen before (in earlier chunks, or earlier in this one); remembers them."""
        unique, first = np.unique(hashes, return_index=True)
        new = ~self.contains(unique)
        mask = np.zeros(len(hashes), dtype=bool)
        mask[first[new]] = True
        run = unique[new]
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate([self.runs.pop(), run]), kind="stable")
        if len(run):
            self.runs.append(run)
        return mask
