"""SentencePiece subword models: train, load, encode/decode with fixed special ids.

The paper uses byte-pair encoding with a shared source-target vocabulary of about 37000 tokens for
EN-DE (Sec. 5.1); we train SentencePiece (unigram by default, or BPE) on raw text, joint by default
so that the embeddings can be shared (Sec. 3.4).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

import sentencepiece as spm

from mt import corpus, log
from mt.config import ExperimentConfig, TokenizerConfig
from mt.errors import ConfigError, MtError
from mt.experiment import Experiment

# Fixed in every model we train, so that batching, the model and search can use them as constants.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
_DROPPED_ON_DECODE = frozenset((PAD_ID, BOS_ID, EOS_ID))


def model_path(prefix: Path) -> Path:
    """SentencePiece's model file for a prefix ("spm" -> "spm.model"; "spm.src" -> "spm.src.model")."""
    return Path(f"{prefix}.model")


def _train_error(exc: Exception, vocab_size: int) -> str:
    """Turn sentencepiece's multi-part RuntimeError into one line that says what to change."""
    text = str(exc)
    too_high = re.search(r"Vocabulary size too high \((\d+)\).*?<= (\d+)", text)
    if too_high:
        return (
            f"--vocab-size {vocab_size} is too large for this corpus: sentencepiece accepts at most "
            f"{too_high.group(2)}; lower --vocab-size (tokenizer.vocab_size) or add data"
        )
    too_low = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", text)
    if too_low:
        return (
            f"--vocab-size {vocab_size} is too small for this corpus: its characters (and the 256 "
            f"byte pieces with byte_fallback) need at least {too_low.group(2)}; raise --vocab-size"
        )
    message = text.splitlines()[-1] if text else type(exc).__name__
    return f"sentencepiece training failed: {message}"


def train_spm(lines: list[str], prefix: Path, cfg: TokenizerConfig) -> None:
    """Train one SentencePiece model on `lines`; writes prefix.model and prefix.vocab atomically."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=prefix.parent, prefix=".spm-") as tmp:
        tmp_prefix = Path(tmp) / prefix.name
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_prefix=str(tmp_prefix),
                model_type=cfg.model_type,
                vocab_size=cfg.vocab_size,
                character_coverage=cfg.character_coverage,
                byte_fallback=cfg.byte_fallback,
                # A cap: train_tokenizer passes a sample of at most this many already.
                input_sentence_size=cfg.input_sentence_size,
                shuffle_input_sentence=True,
                normalization_rule_name="nmt_nfkc",
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                num_threads=2,
                minloglevel=2,  # sentencepiece logs to stderr at length; errors still raise
            )
        except RuntimeError as exc:
            raise MtError(_train_error(exc, cfg.vocab_size)) from None
        # The .model goes last: its presence is what marks a finished tokenizer.
        for ext in (".vocab", ".model"):
            os.replace(f"{tmp_prefix}{ext}", f"{prefix}{ext}")


class Tokenizer:
    """A loaded SentencePiece model with the fixed special ids above."""

    def __init__(self, path: Path, proto: bytes, threads: int = 2):
        self.path = Path(path)
        self.proto = proto  # the model file's bytes: binarize's worker processes load it from these
        self.sha256 = hashlib.sha256(proto).hexdigest()
        self.threads = threads  # for encode()
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(proto)
        except (RuntimeError, OSError):
            raise MtError(f"{self.path}: not a SentencePiece model (corrupt or truncated)") from None
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise MtError(
                f"{self.path}: special ids pad/unk/bos/eos are {ids}, expected "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; train it with `mt train-tokenizer`"
            )
        self.vocab_size: int = self._sp.vocab_size()

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        path = Path(path)
        try:
            proto = path.read_bytes()
        except FileNotFoundError:
            raise MtError(f"{path}: tokenizer model not found") from None
        except OSError as exc:
            raise MtError(f"{path}: cannot read tokenizer model ({exc.strerror})") from None
        return cls(path, proto)

    def encode(self, lines: list[str]) -> list[list[int]]:
        """Subword ids per line, without BOS/EOS (batching adds them)."""
        return self._sp.encode(list(lines), out_type=int, num_threads=self.threads)

    def sample(self, lines: list[str], alpha: float) -> list[list[int]]:
        """A segmentation per line drawn at random from all of them (subword regularization; BPE-dropout
        for a BPE model). Not reproducible: sentencepiece's generator is per thread and cannot be seeded
        per call (google/sentencepiece#540), so the binarized data, not a seed, are what is kept."""
        return self._sp.encode(list(lines), out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1,
                               num_threads=self.threads)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text per id sequence; PAD/BOS/EOS are dropped, UNK shows as sentencepiece's ' ⁇ '. Leading
        and trailing whitespace is stripped: a model that emits a run of "▁" pieces (a short one
        printed "A" and 27 spaces) must not leave it in the translation."""
        cleaned = [[int(i) for i in seq if int(i) not in _DROPPED_ON_DECODE] for seq in ids]
        return [text.strip() for text in self._sp.decode(cleaned)] if cleaned else []  # decode([]) would give one ''

    def pieces(self, ids: list[int]) -> list[str]:
        return [self._sp.id_to_piece(int(i)) for i in ids]

    def __repr__(self) -> str:
        return f"Tokenizer({str(self.path)!r}, vocab_size={self.vocab_size})"


def _sides(cfg: ExperimentConfig) -> tuple[str, ...]:
    return ("joint",) if cfg.tokenizer.joint else ("src", "tgt")


def train_tokenizer(exp: Experiment, cfg: ExperimentConfig) -> dict:
    """`mt train-tokenizer`: train the experiment's SentencePiece model(s) on a random sample of the
    train split (tokenizer.input_sentence_size sentences per model), read as a stream."""
    existing = [exp.spm_model_path(s) for s in ("joint", "src", "tgt")]
    existing = [p for p in existing if p.exists()]
    if existing:
        raise MtError(
            f"{existing[0]}: the experiment already has a tokenizer; nothing overwritten "
            f"(start a new experiment with --exp to train another)"
        )
    if not cfg.data.train:  # else the sample is empty and the error names no file
        raise ConfigError("data.train is empty: give a training corpus with --train SPEC (or start from --recipe)")
    started = time.perf_counter()
    # A joint model sees both sides of each sampled pair: half as many pairs give as many sentences.
    pairs = cfg.tokenizer.input_sentence_size // (2 if cfg.tokenizer.joint else 1)
    sample = corpus.sample_pairs(cfg.data.sources("train"), pairs, cfg.data.cleaning("train"))
    skipped = sum(sample.dropped.values())
    log.info(
        f"sampled {len(sample.src):,} of {sample.pairs_read:,} training pairs"
        + (f" ({skipped:,} sampled pairs skipped by cleaning)" if skipped else "")
    )
    for example in sample.examples.get("invalid_utf8", []) + sample.examples.get("malformed", []):
        log.warn(f"train: skipped {example}")
    vocab_sizes = {}
    for side in _sides(cfg):
        lines = {"joint": sample.src + sample.tgt, "src": sample.src, "tgt": sample.tgt}[side]
        if not any(line.strip() for line in lines):  # sentencepiece would fail on "!sentences_.empty()"
            what = "text" if side == "joint" else f"{side} text"
            skipped_text = f", {skipped:,} skipped by cleaning" if skipped else ""
            raise MtError(f"{corpus.describe(cfg.data.sources('train'))}: no training {what} to train the tokenizer on "
                          f"({sample.pairs_read:,} pairs read{skipped_text}); give the train split sentence pairs")
        log.info(f"training {cfg.tokenizer.model_type} tokenizer ({side}) on {len(lines):,} sentences")
        train_spm(lines, exp.spm_prefix(side), cfg.tokenizer)
        vocab_sizes[side] = Tokenizer.load(exp.spm_model_path(side)).vocab_size
    return {
        "vocab_size": vocab_sizes,
        "sentences": {"src": len(sample.src), "tgt": len(sample.tgt)},
        "pairs_read": sample.pairs_read,
        "seconds": round(time.perf_counter() - started, 2),
    }


def load_tokenizers(exp: Experiment, cfg: ExperimentConfig) -> tuple[Tokenizer, Tokenizer]:
    """(src, tgt) tokenizers of an experiment; the same object twice when the vocabulary is joint."""
    paths = [exp.spm_model_path(s) for s in _sides(cfg)]
    for path in paths:
        if not path.exists():
            raise MtError(f"{path}: no tokenizer yet; run `mt train-tokenizer --exp {exp.root}` first")
    tokenizers = [Tokenizer.load(p) for p in paths]
    return (tokenizers[0], tokenizers[0]) if cfg.tokenizer.joint else (tokenizers[0], tokenizers[1])
