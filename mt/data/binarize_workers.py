"""Encoding for binarize: a chunk of raw pairs -> the token-id arrays of the pairs that pass.

Each chunk is decoded, cleaned (mt.data.corpus), encoded and filtered by length in this process or in
worker processes (`Workers`), in corpus order; `mt.data.binarize` writes the results to disk.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import signal
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from mt.data import corpus
from mt.tokenizer import Tokenizer

ENCODE_CHUNK = 20_000  # pairs per unit of work: bounds a worker's memory (Python id lists) and a write
# Drop reasons, in the order they are checked; valid/test (never cleaned) only drop empty and too long.
CLEAN_REASONS = ("invalid_utf8", "malformed", "empty", "too_long", "ratio", "duplicate")
RAW_REASONS = ("empty", "too_long")


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
    src_prefix: tuple[int, ...] = ()  # ids before each source (a multilingual model's target tag), after the filters
    src_counted: int = 0  # of these, how many max_len counts: <BT> (model.max_positions leaves room for the tag only)
    hashes: bool = False  # each kept pair's hash, without deduplicating (valid and test, checked against train)
    hash_clean: str | None = None  # cleaned so (train's normalisation) before hashing: as train's pairs were


def pair_hash(src: str, tgt: str, prefix: tuple[int, ...] = ()) -> int:
    # A fixed hash (Python's hash() is salted per process, and workers are processes). Cleaned text
    # has no tabs, so the joined string is unambiguous. The source's prefix (a multilingual model's
    # target tag) is part of the pair: "Okay." -> "Okay." into German and into French are two pairs.
    text = f"{','.join(map(str, prefix))}\t{src}\t{tgt}" if prefix else f"{src}\t{tgt}"
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


# A SentencePiece piece holds at most 16 characters (max_sentencepiece_length), spaces aside, and
# normalisation may fold a character's combining marks into it: a side of more than max_len times this
# many non-space characters is surely more than max_len pieces.
CHARS_PER_PIECE_BOUND = 32


class Encoder:
    """Turns a corpus.RawChunk into the id arrays of the pairs that pass, with counts per drop reason."""

    def __init__(self, src_tok: Tokenizer, tgt_tok: Tokenizer):
        self.src_tok, self.tgt_tok = src_tok, tgt_tok

    def __call__(self, chunk: corpus.RawChunk, filters: Filters) -> dict:
        decoded = corpus.decode_chunk(chunk, filters.clean)
        # A side of more characters than max_len pieces can hold is too long without being encoded: its
        # ids as Python lists took many times its size in memory.
        bound = filters.max_len * CHARS_PER_PIECE_BOUND
        sides = {"src": (decoded.src, self.src_tok), "tgt": (decoded.tgt, self.tgt_tok)}
        over = {side: [len(t) - t.count(" ") > bound for t in texts] for side, (texts, _) in sides.items()}
        encoded = {
            side: tok.encode(["" if o else t for t, o in zip(texts, over[side])])
            for side, (texts, tok) in sides.items()
        }
        lengths = {side: _lengths(encoded[side]) for side in encoded}
        for side, flags in over.items():
            lengths[side][np.asarray(flags, dtype=bool)] = filters.max_len + 1
        is_empty, is_long, is_off = _length_checks(lengths["src"], lengths["tgt"], filters)
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
        result.update(self._pack(_prefixed(best, filters.src_prefix)))
        if filters.segmentations > 1:
            text = {"src": [decoded.src[i] for i in keep], "tgt": [decoded.tgt[i] for i in keep]}
            result["samples"] = [self._sampled(best, text, filters) for _ in range(1, filters.segmentations)]
        if filters.dedup or filters.hashes:
            form, fixed = filters.hash_clean, {"control": 0, "unicode": 0, "whitespace": 0}

            def cleaned(text: str) -> str:
                return text if form is None else corpus.clean_text(text, form, fixed)

            hashes = (pair_hash(cleaned(decoded.src[i]), cleaned(decoded.tgt[i]), filters.src_prefix) for i in keep)
            result["hashes"] = np.fromiter(hashes, dtype=np.uint64, count=len(keep))
        return result

    def _sampled(self, best: dict, text: dict, filters: Filters) -> dict:
        """The kept pairs in one sampled segmentation (ids and lengths per side). A pair whose sample
        would fail the length filters keeps its best segmentation, in which it passed them."""
        drawn = {
            "src": self.src_tok.sample(text["src"], filters.sampling_alpha),
            "tgt": self.tgt_tok.sample(text["tgt"], filters.sampling_alpha),
        }
        fails = np.logical_or.reduce(_length_checks(_lengths(drawn["src"]), _lengths(drawn["tgt"]), filters))
        return self._pack(
            _prefixed(
                {
                    side: [b if fail else d for d, b, fail in zip(drawn[side], best[side], fails)]
                    for side in ("src", "tgt")
                },
                filters.src_prefix,
            )
        )

    def _pack(self, seqs: dict[str, list[list[int]]]) -> dict:
        """{side}_ids (flat, the vocabulary's dtype) and {side}_lens of id sequences per side."""
        arrays = {}
        for side, tok in (("src", self.src_tok), ("tgt", self.tgt_tok)):
            lens = _lengths(seqs[side])
            flat = itertools.chain.from_iterable(seqs[side])
            arrays[f"{side}_ids"] = np.fromiter(flat, dtype=id_dtype(tok.vocab_size), count=int(lens.sum()))
            arrays[f"{side}_lens"] = lens
        return arrays


def _prefixed(seqs: dict[str, list[list[int]]], prefix: tuple[int, ...]) -> dict[str, list[list[int]]]:
    """The source sequences with `prefix` in front (the filters have seen them without it)."""
    return {**seqs, "src": [[*prefix, *ids] for ids in seqs["src"]]} if prefix else seqs


def _lengths(seqs: list[list[int]]) -> np.ndarray:
    return np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))


def _length_checks(src_len: np.ndarray, tgt_len: np.ndarray, filters: Filters) -> tuple[np.ndarray, ...]:
    """Masks of the pairs that are empty, too long, or (neither) off the length ratio, per filters."""
    is_empty = (src_len == 0) | (tgt_len == 0)
    is_long = ~is_empty & ((src_len + filters.src_counted > filters.max_len) | (tgt_len > filters.max_len))
    is_off = np.zeros_like(is_empty)
    if filters.max_len_ratio:  # as Moses' clean-corpus-n.perl, but on subword tokens
        is_off = ~(is_empty | is_long) & (
            np.maximum(src_len, tgt_len) > filters.max_len_ratio * np.minimum(src_len, tgt_len)
        )
    return is_empty, is_long, is_off


TERMINATE_SECONDS = 10.0  # how long stopping the pool may take before its processes are killed
KILLED_SECONDS = 10.0  # how long a killed process may take to be reaped (a loaded machine: more than a moment)
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
        self.pool: multiprocessing.pool.Pool | None = None  # started at the first chunk (_in_pool)

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
        """Stop the workers (all results are in, or an error makes the rest moot). Pool.terminate can
        wait for ever on its own task thread, blocked writing a task into a pipe no worker reads any
        more (an interrupted binarize hung so): given TERMINATE_SECONDS, then its processes are killed."""
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        processes = list(getattr(pool, "_pool", []))  # the worker processes, as the pool holds them
        stopping = threading.Thread(target=pool.terminate, daemon=True, name="mt-binarize-stop")
        stopping.start()
        stopping.join(TERMINATE_SECONDS)
        if stopping.is_alive():  # its threads are daemons: left blocked, they end with this process
            for process in processes:
                process.kill()
                process.join(KILLED_SECONDS)
        else:
            pool.join()
