"""The lexical shortlist: for each source token, the target tokens it most likely translates into,
learnt once from the experiment's binarized training split and saved in EXP/shortlist/.

A decoder step scores every word of the target vocabulary, most of which cannot occur in the
translation of a given source: Marian's `--shortlist`, Sockeye's `--restrict-lexicon` and
CTranslate2's vocabulary map score only the candidates that the source's words suggest.
`mt.decoding.shortlist` does that for a batch from this table.

The table: IBM Model 1 (Brown et al., 1993) over the experiment's own subword pieces, trained by
EM for `ITERATIONS` iterations from uniform probabilities, with an empty source token (NULL) that
may generate any target token: p(target piece | source piece), each target piece's alignment
probability shared over the source pieces of its sentence pair. A source piece's candidates are
its `top` most probable target pieces; the `frequent` most frequent target pieces of the training
split are candidates for every sentence. Pieces, not words: they are what the decoder emits and
what CTranslate2's vocabulary map names; one piece's row is short, so K stays small.
At most `MAX_PAIRS` sentence pairs are read (evenly spaced over the split), in chunks, so that
memory stays bounded on a large corpus.

The file (`EXP/shortlist/shortlist.npz`, read without pickle): `candidates` (source vocabulary x
top, int32, best first, -1 where a piece has fewer), `frequent` (int32, most frequent first) and
`meta`, a JSON string: how it was built and from what (the tokenizers' and the training arrays'
sha256, from data/manifest.json), so that `mt run` rebuilds it when either changed.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from mt import log
from mt.atomic_files import write_bytes_atomic
from mt.config.schema import ExperimentConfig
from mt.data.dataset import ParallelData
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import EOS_ID, UNK_ID

FORMAT = 1
METHOD = "ibm1"
ITERATIONS = 5  # EM iterations of IBM Model 1: the candidates change little after the fourth
MAX_PAIRS = 1_000_000  # sentence pairs read at most: the lexical table of frequent pieces settles long before
# (source, target) token pairs held at once (8,000-10,000 sentence pairs of 13 tokens a side; a few of
# documents of hundreds: counted in sentences, those took gigabytes), each in a few 8-byte arrays
CHUNK_TOKEN_PAIRS = 1_500_000
SPECIALS = EOS_ID + 1  # ids 0..3 (pad, unk, bos, eos): always candidates, never in a row of the table
VMAP_FILE = "vmap.txt"  # CTranslate2's vocabulary map, read with translate_batch(use_vmap=True)
TRAIN_FILES = ("train.src.ids.npy", "train.src.offsets.npy", "train.tgt.ids.npy", "train.tgt.offsets.npy")


@dataclass
class LexicalTable:
    """A built or loaded shortlist table (module docstring)."""

    candidates: np.ndarray  # (source vocabulary, top) int32, best first, -1 padding
    frequent: np.ndarray  # (frequent,) int32, most frequent first
    meta: dict[str, Any]

    @property
    def top(self) -> int:
        return self.candidates.shape[1]

    def narrowed(self, top: int, frequent: int) -> LexicalTable:
        """The table of a smaller `top` and `frequent` (its rows are best first): one build serves a sweep."""
        if top > self.top or frequent > len(self.frequent):
            raise MtError(f"a table of top {self.top}, frequent {len(self.frequent)} holds no more than that")
        return LexicalTable(
            self.candidates[:, :top], self.frequent[:frequent], {**self.meta, "top": top, "frequent": frequent}
        )

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, candidates=self.candidates, frequent=self.frequent, meta=np.array(json.dumps(self.meta)))
        return buffer.getvalue()


def built_from(exp: Experiment) -> dict[str, Any]:
    """What a table is built from, as data/manifest.json records it: the tokenizers' sha256 and each
    training array's sha256. A table whose record differs is stale."""
    manifest = exp.read_json(exp.manifest_path)
    if manifest is None:
        raise MtError(f"{exp.manifest_path}: no binarized data; run `mt binarize --exp {exp.root}` first")
    files = manifest.get("files", {})
    missing = [name for name in TRAIN_FILES if name not in files]
    if missing:
        raise MtError(f"{exp.manifest_path}: no training split ({', '.join(missing)}): the shortlist learns from it")
    return {
        "tokenizer_sha256": manifest.get("tokenizer_sha256"),
        "train_sha256": {name: files[name]["sha256"] for name in TRAIN_FILES},
    }


def build_table(exp: Experiment, top: int, frequent: int, src_vocab: int, tgt_vocab: int) -> LexicalTable:
    """The table of the experiment's training split (module docstring)."""
    if top < 1 or frequent < 0:
        raise MtError(f"shortlist: top {top} must be at least 1 and frequent {frequent} 0 or more")
    record = built_from(exp)
    data = ParallelData(exp, "train")
    start = time.perf_counter()
    picked = np.unique(np.linspace(0, len(data) - 1, min(len(data), MAX_PAIRS)).astype(np.int64))
    chunks = _chunks(data, picked)
    null = src_vocab  # the empty source token's row
    keys = np.unique(np.concatenate([np.unique(_pairs(data, c, null, tgt_vocab)[0]) for c in chunks]))
    prob = np.ones(len(keys))  # uniform: the first E-step shares each target token equally
    for _ in range(ITERATIONS):
        counts = np.zeros(len(keys))
        for chunk in chunks:
            pair_keys, group = _pairs(data, chunk, null, tgt_vocab)
            where = np.searchsorted(keys, pair_keys)
            weight = prob[where]
            weight /= np.bincount(group, weights=weight)[group]  # each target token's alignment posterior
            counts += np.bincount(where, weights=weight, minlength=len(keys))
        source = keys // tgt_vocab
        prob = counts / np.bincount(source, weights=counts, minlength=src_vocab + 1)[source]
    candidates = _best_per_source(keys, prob, src_vocab, tgt_vocab, top)
    target_counts = np.zeros(tgt_vocab, np.int64)
    for chunk in chunks:
        target_counts += np.bincount(_target_ids(data, chunk), minlength=tgt_vocab)
    target_counts[:SPECIALS] = 0
    order = np.argsort(-target_counts, kind="stable")
    common = order[: min(frequent, int((target_counts > 0).sum()))].astype(np.int32)
    meta = {
        "format": FORMAT,
        "method": METHOD,
        "iterations": ITERATIONS,
        "top": top,
        "frequent": frequent,
        "sentence_pairs": len(picked),
        "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "seconds": round(time.perf_counter() - start, 1),
        **record,
    }
    return LexicalTable(candidates, common, meta)


def _chunks(data: ParallelData, picked: np.ndarray) -> list[np.ndarray]:
    """`picked` in order, cut into runs of about CHUNK_TOKEN_PAIRS token pairs (a longer sentence pair
    alone): what `_pairs` holds at once."""
    cost = np.cumsum((data.src_lens[picked] + 1) * data.tgt_lens[picked])  # (+1: the NULL source token)
    window = np.maximum(cost - 1, 0) // CHUNK_TOKEN_PAIRS
    cuts = np.flatnonzero(np.diff(window)) + 1
    return [chunk for chunk in np.split(picked, cuts) if len(chunk)]


def _target_ids(data: ParallelData, rows: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(data.tgt(int(i)), dtype=np.int64) for i in rows])


def _pairs(data: ParallelData, rows: np.ndarray, null: int, tgt_vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (source token or NULL, target token) pair of the sentence pairs `rows`, as keys
    source * tgt_vocab + target, and for each pair the index of its target token within the chunk
    (the group whose alignment posteriors sum to 1)."""
    sources = [np.append(np.asarray(data.src(int(i)), dtype=np.int64), null) for i in rows]
    targets = [np.asarray(data.tgt(int(i)), dtype=np.int64) for i in rows]
    src_len = np.array([len(s) for s in sources])
    tgt_len = np.array([len(t) for t in targets])
    flat_src, flat_tgt = np.concatenate(sources), np.concatenate(targets)
    src_start = np.cumsum(src_len) - src_len
    sentence = np.repeat(np.arange(len(rows)), tgt_len)  # of each target token
    reps = src_len[sentence]  # each target token pairs with every source token of its sentence
    group = np.repeat(np.arange(len(flat_tgt)), reps)
    within = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    source = flat_src[np.repeat(src_start[sentence], reps) + within]
    return source * tgt_vocab + flat_tgt[group], group


def _best_per_source(keys: np.ndarray, prob: np.ndarray, src_vocab: int, tgt_vocab: int, top: int) -> np.ndarray:
    """(src_vocab, top) int32: each source token's most probable target tokens, best first (ties by
    id), special ids left out, -1 where it has fewer."""
    source, target = keys // tgt_vocab, keys % tgt_vocab
    keep = (source < src_vocab) & (target >= SPECIALS)
    source, target, prob = source[keep], target[keep], prob[keep]
    order = np.lexsort((target, -prob, source))
    source, target = source[order], target[order]
    first = np.searchsorted(source, source)  # the first entry of each source token's run
    rank = np.arange(len(source)) - first
    table = np.full((src_vocab, top), -1, dtype=np.int32)
    wanted = rank < top
    table[source[wanted], rank[wanted]] = target[wanted]
    return table


# -- the file -----------------------------------------------------------------------------------
def save_table(exp: Experiment, table: LexicalTable) -> None:
    write_bytes_atomic(exp.shortlist_path, table.to_bytes())


def load_table(exp: Experiment) -> LexicalTable:
    """The experiment's table (numpy's own format, no pickle); a damaged file is a one-line error."""
    path = exp.shortlist_path
    if not path.exists():
        raise MtError(f"{path}: no shortlist yet; build it with `mt shortlist --exp {exp.root}`")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            candidates, frequent = arrays["candidates"].astype(np.int32), arrays["frequent"].astype(np.int32)
            meta = json.loads(str(arrays["meta"]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:  # cut short, a flipped byte
        raise MtError(f"{path}: unreadable shortlist ({exc}); build it again with `mt shortlist --force`") from None
    if meta.get("format") != FORMAT or candidates.ndim != 2:
        raise MtError(f"{path}: not a shortlist of format {FORMAT}; build it again with `mt shortlist --force`")
    return LexicalTable(candidates, frequent, meta)


def stale_reason(exp: Experiment, cfg: ExperimentConfig) -> str | None:
    """Why the saved table is not the one the experiment's data, tokenizer and decode.shortlist_top /
    shortlist_frequent make now (None: it is): `mt run` builds it again then."""
    if not exp.shortlist_path.exists():
        return "not built"
    try:
        meta = load_table(exp).meta
        now = built_from(exp)
    except MtError as exc:
        return str(exc)
    if meta.get("tokenizer_sha256") != now["tokenizer_sha256"]:
        return "built with another tokenizer"
    if meta.get("train_sha256") != now["train_sha256"]:
        return "built from other training data"
    wanted = {"top": cfg.decode.shortlist_top, "frequent": cfg.decode.shortlist_frequent}
    if {key: meta.get(key) for key in wanted} != wanted:
        return f"built with top {meta.get('top')}, frequent {meta.get('frequent')}"
    return None


def build_shortlist(exp: Experiment, cfg: ExperimentConfig, src_vocab: int, tgt_vocab: int) -> LexicalTable:
    """Build the table with the experiment's decode.shortlist_top / shortlist_frequent and save it."""
    log.info(
        f"shortlist: IBM Model 1 ({ITERATIONS} iterations) over {exp.data_dir}/train; top "
        f"{cfg.decode.shortlist_top}, frequent {cfg.decode.shortlist_frequent}"
    )
    table = build_table(exp, cfg.decode.shortlist_top, cfg.decode.shortlist_frequent, src_vocab, tgt_vocab)
    save_table(exp, table)
    log.info(
        f"shortlist: {table.meta['sentence_pairs']:,} sentence pairs in {table.meta['seconds']}s; written to {exp.shortlist_path}"
    )
    return table


def vocabulary_map(exp: Experiment, src_tok, tgt_tok) -> str | None:
    """The experiment's table as CTranslate2's vocabulary map (VMAP_FILE's text: `vmap_lines`), for `mt
    export` and the CTranslate2 engine; None without a table, or (with a warning: the map is optional,
    the model is not) for one built with other tokenizers than `src_tok` and `tgt_tok`, one that does
    not read, or a vocabulary piece the map cannot hold."""
    if not exp.shortlist_path.exists():
        return None
    try:
        table = load_table(exp)
        if table.meta.get("tokenizer_sha256") != {"src": src_tok.sha256, "tgt": tgt_tok.sha256}:
            raise MtError(f"{exp.shortlist_path}: built with another tokenizer (`mt shortlist --force`)")
        pieces = (tok.pieces(list(range(tok.vocab_size))) for tok in (src_tok, tgt_tok))
        return "".join(vmap_lines(table, *pieces))
    except MtError as exc:
        where = "" if str(exc).startswith(str(exp.shortlist_path)) else f"{exp.shortlist_path}: "
        log.warn(f"{where}{exc}; no {VMAP_FILE}")
        return None


def vmap_lines(table: LexicalTable, src_pieces: list[str], tgt_pieces: list[str]) -> Iterator[str]:
    """CTranslate2's vocabulary map (its vocabulary_map.cc reads it): a line of the frequent pieces after
    an empty source (candidates of every batch), then SOURCE<TAB>TARGET TARGET ... for each source
    piece with candidates (`<unk>` too, which mt's search reads for an unknown source piece as it
    reads any other; pad, bos and eos never have candidates); CTranslate2 adds unk, bos and eos to
    every batch's targets itself."""

    def written(piece: str) -> str:
        # CTranslate2 cuts lines at \n and fields at tab and space (other spaces, U+3000 or U+00A0 kept
        # as pieces of CJK text, are characters to it); SentencePiece writes spaces as U+2581
        if not piece or any(c in piece for c in SEPARATORS):
            raise MtError(f"the vocabulary holds a piece CTranslate2's vocabulary map cannot hold ({piece!r})")
        return piece

    yield "\t" + " ".join(written(tgt_pieces[i]) for i in table.frequent) + "\n"
    for source, row in enumerate(table.candidates):
        row = row[row >= 0]
        if (source >= SPECIALS or source == UNK_ID) and len(row):
            yield written(src_pieces[source]) + "\t" + " ".join(written(tgt_pieces[i]) for i in row) + "\n"


SEPARATORS = " \t\n\r"  # what CTranslate2's vocabulary_map.cc splits a line (or the file) at
