"""Parallel text -> token-id arrays on disk, and the memory-mapped dataset that reads them back.

Each split and side is one flat id array (uint16 when the vocabulary fits, else int32) plus int64
offsets: sentence i is ids[offsets[i]:offsets[i + 1]]. Ids carry no BOS/EOS; batching adds them.

Binarizing streams: the sources are read in chunks (mt.corpus), decoded, cleaned, encoded and
filtered in worker processes, and the results are appended in corpus order to .npy files whose
header (which holds the length) is written last, so memory stays flat whatever the corpus size.
Everything is written to a hidden directory that is renamed into place at the end, beside a
manifest (pairs, tokens, size and sha256 of every file, the tokenizer's sha256) that `mt train`
checks before it trusts the data.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from mt import corpus, log
from mt.config import ExperimentConfig
from mt.errors import MtError
from mt.experiment import SPLITS, Experiment, _pid_alive, write_json_atomic
from mt.tokenizer import Tokenizer, load_tokenizers

ENCODE_CHUNK = 20_000  # pairs per unit of work: bounds a worker's memory (Python id lists) and a write
WORKERS = 2
# Drop reasons, in the order they are checked; valid/test (never cleaned) only drop empty and too long.
CLEAN_REASONS = ("invalid_utf8", "malformed", "empty", "too_long", "ratio", "duplicate")
RAW_REASONS = ("empty", "too_long")


def lines_path(exp: Experiment, split: str) -> Path:
    """0-based numbers of the pairs binarize kept, int64: the line in the split's text (with several
    train sources, the position in their concatenation; an upsampled pair, or a sampled segmentation
    of one, repeats its number)."""
    return exp.data_dir / f"{split}.lines.npy"


def manifest_path(exp: Experiment) -> Path:
    return exp.data_dir / "manifest.json"


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.int32)


# ---------------------------------------------------------------------------------------------
# One chunk: decode, clean, encode, filter (in a worker process, or in this one)


@dataclass(frozen=True)
class Filters:
    """What a split's pairs go through: cleaning (train by default) and the length limits."""

    clean: str | None  # corpus.decode_chunk's `clean`: the Unicode normalisation, or None for strict
    max_len: int
    max_len_ratio: float  # 0 = off
    dedup: bool
    segmentations: int = 1  # each kept pair's best segmentation, and segmentations - 1 sampled ones
    sampling_alpha: float = 0.3  # tokenizer.sampling_alpha


def _pair_hash(src: str, tgt: str) -> int:
    # A fixed hash (Python's hash() is salted per process, and workers are processes). Cleaned text
    # has no tabs, so the joined string is unambiguous.
    return int.from_bytes(hashlib.blake2b(f"{src}\t{tgt}".encode("utf-8"), digest_size=8).digest(), "little")


class Encoder:
    """Turns a corpus.RawChunk into the id arrays of the pairs that pass, with counts per drop reason."""

    def __init__(self, src_tok: Tokenizer, tgt_tok: Tokenizer):
        self.src_tok, self.tgt_tok = src_tok, tgt_tok

    def __call__(self, chunk: corpus.RawChunk, filters: Filters) -> dict:
        decoded = corpus.decode_chunk(chunk, filters.clean)
        encoded = {"src": self.src_tok.encode(decoded.src), "tgt": self.tgt_tok.encode(decoded.tgt)}
        is_empty, is_long, is_off = _length_checks(_lengths(encoded["src"]), _lengths(encoded["tgt"]), filters)
        dropped = dict(decoded.dropped) if filters.clean is not None else {}
        dropped["empty"] = dropped.get("empty", 0) + int(is_empty.sum())
        dropped["too_long"] = int(is_long.sum())
        if filters.max_len_ratio:
            dropped["ratio"] = int(is_off.sum())
        keep = np.flatnonzero(~(is_empty | is_long | is_off))
        result = {
            "pairs_in": len(chunk),
            "index": np.asarray(decoded.kept, dtype=np.int64)[keep],  # positions in the chunk
            "dropped": dropped,
            "fixed": decoded.fixed,
            "examples": decoded.examples,
        }
        best = {side: [seqs[i] for i in keep] for side, seqs in encoded.items()}
        result.update(self._pack(best))
        if filters.segmentations > 1:
            text = {"src": [decoded.src[i] for i in keep], "tgt": [decoded.tgt[i] for i in keep]}
            result["samples"] = [self._sampled(best, text, filters) for _ in range(1, filters.segmentations)]
        if filters.dedup:
            hashes = (_pair_hash(decoded.src[i], decoded.tgt[i]) for i in keep)
            result["hashes"] = np.fromiter(hashes, dtype=np.uint64, count=len(keep))
        return result

    def _sampled(self, best: dict, text: dict, filters: Filters) -> dict:
        """The kept pairs in one sampled segmentation (ids and lengths per side). A pair whose sample
        would fail the length filters keeps its best segmentation, in which it passed them."""
        drawn = {"src": self.src_tok.sample(text["src"], filters.sampling_alpha),
                 "tgt": self.tgt_tok.sample(text["tgt"], filters.sampling_alpha)}
        fails = np.logical_or.reduce(_length_checks(_lengths(drawn["src"]), _lengths(drawn["tgt"]), filters))
        return self._pack({side: [b if fail else d for d, b, fail in zip(drawn[side], best[side], fails)]
                           for side in ("src", "tgt")})

    def _pack(self, seqs: dict[str, list[list[int]]]) -> dict:
        """{side}_ids (flat, the vocabulary's dtype) and {side}_lens of id sequences per side."""
        arrays = {}
        for side, tok in (("src", self.src_tok), ("tgt", self.tgt_tok)):
            lens = _lengths(seqs[side])
            flat = itertools.chain.from_iterable(seqs[side])
            arrays[f"{side}_ids"] = np.fromiter(flat, dtype=id_dtype(tok.vocab_size), count=int(lens.sum()))
            arrays[f"{side}_lens"] = lens
        return arrays


def _lengths(seqs: list[list[int]]) -> np.ndarray:
    return np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))


def _length_checks(src_len: np.ndarray, tgt_len: np.ndarray, filters: Filters) -> tuple[np.ndarray, ...]:
    """Masks of the pairs that are empty, too long, or (neither) off the length ratio, per filters."""
    is_empty = (src_len == 0) | (tgt_len == 0)
    is_long = ~is_empty & ((src_len > filters.max_len) | (tgt_len > filters.max_len))
    is_off = np.zeros_like(is_empty)
    if filters.max_len_ratio:  # as Moses' clean-corpus-n.perl, but on subword tokens
        is_off = ~(is_empty | is_long) & (np.maximum(src_len, tgt_len) > filters.max_len_ratio * np.minimum(src_len, tgt_len))
    return is_empty, is_long, is_off


_worker_encoder: Encoder | None = None


def _init_worker(src_proto: bytes, tgt_proto: bytes | None) -> None:
    # Ctrl-C reaches the whole process group; the main process stops the workers and cleans up.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _worker_encoder
    src_tok = Tokenizer(Path("src"), src_proto, threads=1)
    tgt_tok = src_tok if tgt_proto is None else Tokenizer(Path("tgt"), tgt_proto, threads=1)
    _worker_encoder = Encoder(src_tok, tgt_tok)


def _work(chunk: corpus.RawChunk, filters: Filters) -> dict:
    return _worker_encoder(chunk, filters)


class Workers:
    """Encodes chunks in order: in this process until a split passes ENCODE_CHUNK pairs, then in
    `workers` processes (started once), with at most 2 chunks per worker in flight (flat memory)."""

    def __init__(self, src_tok: Tokenizer, tgt_tok: Tokenizer, workers: int):
        self.local = Encoder(src_tok, tgt_tok)
        self.protos = (src_tok.proto, None if tgt_tok is src_tok else tgt_tok.proto)
        self.workers = workers
        self.pool = None

    def map(self, tasks: Iterator[tuple[object, corpus.RawChunk, Filters]]) -> Iterator[tuple[object, dict]]:
        """(meta, result) for each (meta, chunk, filters) task, in task order."""
        tasks = iter(tasks)
        pairs = 0
        for meta, chunk, filters in tasks:
            pairs += len(chunk)
            if self.workers <= 1 or pairs <= ENCODE_CHUNK:  # a small split: not worth starting processes
                yield meta, self.local(chunk, filters)
                continue
            yield from self._in_pool(itertools.chain([(meta, chunk, filters)], tasks))
            return

    def _in_pool(self, tasks) -> Iterator[tuple[object, dict]]:
        if self.pool is None:
            # spawn: fresh interpreters, safe whatever threads this process runs (torch, rich).
            context = multiprocessing.get_context("spawn")
            self.pool = context.Pool(self.workers, initializer=_init_worker, initargs=self.protos)
        pending: deque = deque()
        for meta, chunk, filters in tasks:
            pending.append((meta, self.pool.apply_async(_work, (chunk, filters))))
            if len(pending) >= 2 * self.workers:
                done_meta, result = pending.popleft()
                yield done_meta, result.get()
        while pending:
            done_meta, result = pending.popleft()
            yield done_meta, result.get()

    def close(self) -> None:
        """Stop the workers (all results are in, or an error makes the rest moot)."""
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


# ---------------------------------------------------------------------------------------------
# Writing


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
        return {"bytes": self.path.stat().st_size, "sha256": _sha256(self.path)}

    def abandon(self) -> None:
        self.handle.close()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class SplitWriter:
    """The five arrays of a split (ids and offsets per side, line numbers), appended to as pairs come."""

    def __init__(self, exp: Experiment, tmp_dir: Path, split: str, src_dtype: np.dtype, tgt_dtype: np.dtype):
        paths = {
            "src_ids": (exp.ids_path(split, "src"), src_dtype),
            "src_offsets": (exp.offsets_path(split, "src"), np.int64),
            "tgt_ids": (exp.ids_path(split, "tgt"), tgt_dtype),
            "tgt_offsets": (exp.offsets_path(split, "tgt"), np.int64),
            "lines": (lines_path(exp, split), np.int64),
        }
        # The names they will have under exp.data_dir, which is flat.
        self.files = {key: NpyWriter(tmp_dir / path.name, dtype) for key, (path, dtype) in paths.items()}
        self.tokens = {"src": 0, "tgt": 0}
        for side in ("src", "tgt"):
            self.files[f"{side}_offsets"].append(np.zeros(1, np.int64))

    def append(self, arrays: dict, lines: np.ndarray) -> None:
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

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """True for each hash not seen before (in earlier chunks, or earlier in this one); remembers them."""
        unique, first = np.unique(hashes, return_index=True)
        new = np.ones(len(unique), dtype=bool)
        for run in self.runs:
            at = np.searchsorted(run, unique).clip(max=len(run) - 1)
            new &= run[at] != unique
        mask = np.zeros(len(hashes), dtype=bool)
        mask[first[new]] = True
        run = unique[new]
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate([self.runs.pop(), run]), kind="stable")
        if len(run):
            self.runs.append(run)
        return mask


def _select(arrays: dict, mask: np.ndarray) -> dict:
    """The pairs of an encoded chunk (and of its sampled segmentations) where mask is True."""
    out = dict(arrays)
    for side in ("src", "tgt"):
        out[f"{side}_ids"] = arrays[f"{side}_ids"][np.repeat(mask, arrays[f"{side}_lens"])]
        out[f"{side}_lens"] = arrays[f"{side}_lens"][mask]
    if "index" in arrays:
        out["index"] = arrays["index"][mask]
    if "samples" in arrays:
        out["samples"] = [_select(sample, mask) for sample in arrays["samples"]]
    return out


def _copies(weight: float, n: int, rng: np.random.Generator) -> list[np.ndarray | None]:
    """Upsampling: int(weight) full copies (None: all pairs), and for the fraction a random subset."""
    copies: list[np.ndarray | None] = [None] * int(weight)
    fraction = weight - int(weight)
    if fraction > 1e-9:
        copies.append(rng.random(n) < fraction)
    return copies


# ---------------------------------------------------------------------------------------------
# The step


def binarize_split(exp: Experiment, cfg: ExperimentConfig, split: str, tmp_dir: Path, workers: Workers,
                   src_tok: Tokenizer, tgt_tok: Tokenizer) -> tuple[dict, dict]:
    """Stream one split from its sources into tmp_dir; returns (its stats, its files for the manifest)."""
    data = cfg.data
    clean = corpus.cleaning(data, split)
    filters = Filters(clean, data.max_len, data.max_len_ratio if clean is not None else 0.0,
                      clean is not None and data.dedup,
                      cfg.tokenizer.train_segmentations if split == "train" else 1, cfg.tokenizer.sampling_alpha)
    sources = corpus.sources(data, split)
    tally = {
        "dropped": dict.fromkeys(CLEAN_REASONS if clean is not None else RAW_REASONS, 0),
        "fixed": {"control": 0, "unicode": 0, "whitespace": 0},
        "examples": {},
        "sources": [{"source": s.name, "weight": s.weight, "pairs_in": 0, "kept": 0} for s in sources],
    }
    seen = SeenPairs() if filters.dedup else None
    tasks = (
        ((index, chunk.start), chunk, filters)
        for index, source in enumerate(sources)
        for chunk in corpus.chunks(source, data, split, ENCODE_CHUNK)
    )
    writer = SplitWriter(exp, tmp_dir, split, id_dtype(src_tok.vocab_size), id_dtype(tgt_tok.vocab_size))
    try:
        with log.make_progress() as progress:
            bar = progress.add_task(f"binarize {split}", total=None)  # pairs read; the total is unknown
            for (index, start), result in workers.map(tasks):
                progress.update(bar, advance=result["pairs_in"])
                _add_chunk(result, index, start, sources[index].weight, tally, seen, writer)
    except BaseException:
        writer.abandon()
        raise
    stats = {
        "pairs_in": sum(s["pairs_in"] for s in tally["sources"]),
        "kept": writer.pairs,
        "dropped": tally["dropped"],
        "src_tokens": writer.tokens["src"],
        "tgt_tokens": writer.tokens["tgt"],
        "mean_src_len": round(writer.tokens["src"] / writer.pairs, 2) if writer.pairs else 0.0,
        "mean_tgt_len": round(writer.tokens["tgt"] / writer.pairs, 2) if writer.pairs else 0.0,
    }
    if filters.segmentations > 1:  # "kept" counts every copy, as with upsampling
        stats["segmentations"] = {"copies": filters.segmentations, "sampling_alpha": filters.sampling_alpha}
    if clean is not None:
        stats["cleaning"] = {"normalize": clean, "fixed_lines": tally["fixed"], "examples": tally["examples"]}
    if split == "train" and data.train_sources:
        stats["sources"] = tally["sources"]
    return stats, writer.close()


def _add_chunk(result: dict, index: int, start: int, weight: float, tally: dict, seen: SeenPairs | None,
               writer: SplitWriter) -> None:
    """Count an encoded chunk of source `index`, drop its duplicates, write it `weight` times."""
    # Chunks arrive in order: every earlier source is complete, so its size is known.
    offset = sum(s["pairs_in"] for s in tally["sources"][:index])
    tally["sources"][index]["pairs_in"] = start + result["pairs_in"]
    for reason, count in result["dropped"].items():
        tally["dropped"][reason] += count
    for kind, count in result["fixed"].items():
        tally["fixed"][kind] += count
    for reason, shown in result["examples"].items():
        kept = tally["examples"].setdefault(reason, [])
        kept.extend(shown[: corpus.MAX_EXAMPLES - len(kept)])
    arrays = result
    if seen is not None:
        new = seen.first_seen(result["hashes"])
        tally["dropped"]["duplicate"] += int((~new).sum())
        arrays = _select(result, new)
    tally["sources"][index]["kept"] += len(arrays["index"])
    rng = np.random.default_rng([index, start])  # the same subset whatever the number of workers
    for mask in _copies(weight, len(arrays["index"]), rng):
        part = arrays if mask is None else _select(arrays, mask)
        writer.append(part, offset + start + part["index"])
        for sample in part.get("samples", ()):  # its line numbers are the best segmentation's
            writer.append(sample, offset + start + part["index"])


def _log_split(split: str, stats: dict, seconds: float) -> None:
    dropped = stats["dropped"]
    others = ", ".join(f"{reason.replace('_', ' ')} {count:,}" for reason, count in dropped.items()
                       if reason not in RAW_REASONS and count)
    copies = stats.get("segmentations", {}).get("copies", 1)
    log.info(
        f"{split}: kept {stats['kept'] // copies:,} of {stats['pairs_in']:,} pairs "
        f"(empty {dropped['empty']:,}, too long {dropped['too_long']:,}{', ' + others if others else ''}) "
        f"in {seconds:.1f}s"
    )
    if copies > 1:
        log.info(f"{split}: each pair written in {copies} segmentations, its best and {copies - 1} sampled "
                 f"(alpha {stats['segmentations']['sampling_alpha']}; {stats['mean_src_len']} / "
                 f"{stats['mean_tgt_len']} tokens per sentence over all copies)")
    examples = stats.get("cleaning", {}).get("examples", {})
    for reason in ("invalid_utf8", "malformed"):
        for example in examples.get(reason, []):
            log.warn(f"{split}: skipped {example}")
        more = dropped.get(reason, 0) - len(examples.get(reason, []))
        if more > 0:
            log.warn(f"{split}: skipped {more:,} more pairs for {reason.replace('_', ' ')} (counts in data/stats.json)")


def _refuse_empty(cfg: ExperimentConfig, split: str, stats: dict) -> None:
    """A configured split without one usable pair: validation would report a perplexity of 1.00 (and
    best.pt), evaluation a score of nothing, training would have nothing to learn from."""
    dropped = ", ".join(f"{reason.replace('_', ' ')} {count:,}" for reason, count in stats["dropped"].items() if count)
    read = f"{stats['pairs_in']:,} pairs read" + (f", all dropped: {dropped}" if dropped else "")
    fix = "give it sentence pairs" if split == "train" else f"give it sentence pairs, or configure no {split} split"
    raise MtError(f"{corpus.split_files(cfg.data, split)}: the {split} split has no usable pairs ({read}); {fix}")


_TMP_DIR = re.compile(r"\.data-(\d+)-")


def _remove_abandoned(exp: Experiment) -> None:
    """Remove the hidden directories of binarize runs that were killed (their process is gone)."""
    for path in exp.root.glob(".data-*"):
        match = _TMP_DIR.match(path.name)
        if match and path.is_dir() and not _pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def binarize(exp: Experiment, cfg: ExperimentConfig, workers: int = WORKERS) -> dict:
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
    tokenizer_sha256 = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
    stats: dict = {"max_len": cfg.data.max_len, "tokenizer_sha256": tokenizer_sha256, "splits": {}}
    manifest: dict = {"format": 1, "tokenizer_sha256": tokenizer_sha256, "splits": {}, "files": {}}
    exp.root.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(exp)
    # Everything is built in a hidden directory and renamed at the end: an interrupted run leaves
    # no data dir behind, and a data dir that exists is complete.
    tmp_dir = Path(tempfile.mkdtemp(dir=exp.root, prefix=f".data-{os.getpid()}-"))
    pool = Workers(src_tok, tgt_tok, workers)
    try:
        try:
            for split in splits:
                started = time.perf_counter()
                split_stats, files = binarize_split(exp, cfg, split, tmp_dir, pool, src_tok, tgt_tok)
                if not split_stats["kept"]:
                    _refuse_empty(cfg, split, split_stats)
                stats["splits"][split] = split_stats
                manifest["splits"][split] = {key: split_stats[key] for key in ("kept", "src_tokens", "tgt_tokens")}
                manifest["files"].update(files)
                _log_split(split, split_stats, time.perf_counter() - started)
        finally:
            pool.close()
        write_json_atomic(tmp_dir / exp.data_stats_path.name, stats)
        write_json_atomic(tmp_dir / manifest_path(exp).name, manifest)
        os.replace(tmp_dir, exp.data_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return stats


def check_data(exp: Experiment, tokenizer_sha256: dict[str, str]) -> None:
    """Refuse binarized data made with another tokenizer, or changed since `mt binarize` wrote it."""
    rebuild = f"remove {exp.data_dir} and run `mt binarize --exp {exp.root}` again"
    manifest = exp.read_json(manifest_path(exp))
    made_with = (manifest or exp.read_json(exp.data_stats_path) or {}).get("tokenizer_sha256")
    if made_with is not None and made_with != tokenizer_sha256:
        raise MtError(
            f"{exp.data_dir} was binarized with another tokenizer than the one in {exp.tokenizer_dir} "
            f"(retrained since?); {rebuild}"
        )
    for name, entry in (manifest or {}).get("files", {}).items():
        path = exp.data_dir / name
        if not path.exists():
            raise MtError(f"{path}: missing, but listed in {manifest_path(exp)}; {rebuild}")
        if path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
            raise MtError(f"{path}: changed since `mt binarize` (size or sha256 differ from {manifest_path(exp).name}); {rebuild}")


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
    for start in range(0, len(src_lines), ENCODE_CHUNK):
        end = start + ENCODE_CHUNK
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
