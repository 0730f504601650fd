"""`mt train-tokenizer`: the experiment's SentencePiece model(s), trained on a sample of the train
split with mt's fixed special ids (`mt.tokenizer`), joint by default (Sec. 3.4).
"""

from __future__ import annotations

import io
import os
import random
import re
import tempfile
import time
from pathlib import Path

import sentencepiece as spm

from mt import log
from mt.atomic_files import sync_directory, write_json_atomic
from mt.config.schema import ExperimentConfig, TokenizerConfig
from mt.data import corpus
from mt.data.dataset import input_record
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import (
    BACK_TRANSLATION_TAG,
    BOS_ID,
    EOS_ID,
    NOISE_FILLER,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    casing_table,
    language_tag,
)


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


def train_spm(lines: list[str], prefix: Path, cfg: TokenizerConfig, symbols: list[str] | None = None) -> None:
    """Train one SentencePiece model on `lines`; writes prefix.model and prefix.vocab atomically.
    `symbols`: pieces kept whole wherever they appear (the language tags of a multilingual model)."""
    train_spms([(lines, Path(prefix), symbols)], cfg)


def train_spms(models: list[tuple[list[str], Path, list[str] | None]], cfg: TokenizerConfig) -> None:
    """Train each (lines, prefix, symbols) model, then write them all: a side that fails (a vocabulary
    too large for the target text) leaves no other side's model behind, which would make a half
    tokenizer that neither a second try nor `mt binarize` could use."""
    parent = models[0][1].parent
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".spm-") as tmp:
        for lines, prefix, symbols in models:
            _train_one(lines, Path(tmp) / prefix.name, cfg, symbols)
        # The .model files go last: their presence is what marks a finished tokenizer.
        for ext in (".vocab", ".model"):
            for _, prefix, _ in models:
                with open(Path(tmp) / f"{prefix.name}{ext}", "rb+") as written:
                    os.fsync(written.fileno())
                os.replace(Path(tmp) / f"{prefix.name}{ext}", f"{prefix}{ext}")
            sync_directory(parent)


MAX_SENTENCE_BYTES = 1 << 20  # a longer sampled line (a file without line ends?) is left out, and said


def _train_one(lines: list[str], tmp_prefix: Path, cfg: TokenizerConfig, symbols: list[str] | None) -> None:
    # SentencePiece leaves out, unsaid, every sentence over its max_sentence_length (4,192 bytes by
    # default): the longest sampled line sets it, so that long segments teach their characters too.
    longest = max((len(line.encode("utf-8", "surrogatepass")) for line in lines), default=0)
    too_long = (
        sum(len(line.encode("utf-8", "surrogatepass")) > MAX_SENTENCE_BYTES for line in lines)
        if (longest > MAX_SENTENCE_BYTES)
        else 0
    )
    if too_long:
        log.warn(
            f"{tmp_prefix.name}: {too_long:,} sampled lines over {MAX_SENTENCE_BYTES:,} bytes left out of the "
            "tokenizer's training (a file whose lines end in CR alone, or none, is read as one line)"
        )
    # Written to memory: a model_prefix (a temporary directory's random name) would be kept in the
    # model, and two trainings alike would write other bytes, where mt tells tokenizers apart by their
    # sha256 (averaging, --init-from, exports).
    written = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=written,
            model_type=cfg.model_type,
            vocab_size=cfg.vocab_size,
            character_coverage=cfg.character_coverage,
            byte_fallback=cfg.byte_fallback,
            # A cap: train_tokenizer passes a sample of at most this many already.
            input_sentence_size=cfg.input_sentence_size,
            shuffle_input_sentence=True,
            normalization_rule_name=cfg.normalization,
            max_sentence_length=min(max(longest, 4192), MAX_SENTENCE_BYTES),
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            user_defined_symbols=list(symbols or []),
            num_threads=2,
            minloglevel=2,  # sentencepiece logs to stderr at length; errors still raise
        )
    except (RuntimeError, ValueError) as exc:  # ValueError: an argument sentencepiece refuses
        raise MtError(_train_error(exc, cfg.vocab_size)) from None
    model = written.getvalue()
    Path(f"{tmp_prefix}.model").write_bytes(model)
    pieces = spm.SentencePieceProcessor(model_proto=model)  # the .vocab SentencePiece writes: piece, score
    vocab = "".join(f"{pieces.id_to_piece(i)}\t{pieces.get_score(i):g}\n" for i in range(pieces.get_piece_size()))
    Path(f"{tmp_prefix}.vocab").write_text(vocab, encoding="utf-8")


def _sides(cfg: ExperimentConfig) -> tuple[str, ...]:
    return ("joint",) if cfg.tokenizer.joint else ("src", "tgt")


def train_tokenizer(exp: Experiment, cfg: ExperimentConfig) -> dict:
    """`mt train-tokenizer`: train the experiment's SentencePiece model(s) on a random sample of the
    train split (tokenizer.input_sentence_size sentences per model), read as a stream. Under the
    experiment's lock: a second run at once is refused (both had written, each its own half: the
    config of one, the model of the other)."""
    from mt.experiment.lock import experiment_lock

    with experiment_lock(exp):
        return _train_tokenizer(exp, cfg)


def _train_tokenizer(exp: Experiment, cfg: ExperimentConfig) -> dict:
    # A finished tokenizer is refused; a lone src or tgt model (written by a run that failed or was
    # killed between the two) is not one, and is trained again.
    existing = [p for p in (exp.spm_model_path(s) for s in ("joint", "src", "tgt")) if p.exists()]
    casing_only = exp.has_tokenizer() and not exp.casing_path.exists()  # (trained before the tables)
    if exp.has_tokenizer() and not casing_only:
        raise MtError(
            f"{existing[0]}: the experiment already has a tokenizer; nothing overwritten "
            f"(start a new experiment with --exp to train another)"
        )
    made = [d for d, there in ((exp.data_dir, exp.has_data()), (exp.checkpoints_dir, exp.has_checkpoints())) if there]
    if made and not casing_only:  # made with the tokenizer that is gone: a new one reads none of it
        raise MtError(
            f"{exp.tokenizer_dir}: no tokenizer, but {made[0]} was made with one; put the tokenizer back, "
            f"or start a new experiment with --exp (a new tokenizer's ids are not those {made[0].name}/ holds)"
        )
    if not cfg.data.train:  # else the sample is empty and the error names no file
        raise ConfigError("data.train is empty: give a training corpus with --train SPEC (or start from --recipe)")
    started = time.perf_counter()
    # before reading: a file rewritten meanwhile is then "changed" (the tables alone record none)
    inputs = {} if casing_only else input_record(cfg, ["train"])
    if cfg.data.multilingual:
        return _train_multilingual(exp, cfg, started, inputs, casing_only)
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
    tables = {cfg.data.src_lang: casing_table(words_of(sample.src), cfg.data.src_lang)}
    if casing_only:
        return _casing_written(exp, tables, started)
    models = []
    for side in _sides(cfg):
        lines = {"joint": sample.src + sample.tgt, "src": sample.src, "tgt": sample.tgt}[side]
        if not any(line.strip() for line in lines):  # sentencepiece would fail on "!sentences_.empty()"
            what = "text" if side == "joint" else f"{side} text"
            skipped_text = f", {skipped:,} skipped by cleaning" if skipped else ""
            raise MtError(
                f"{corpus.describe(cfg.data.sources('train'))}: no training {what} to train the tokenizer on "
                f"({sample.pairs_read:,} pairs read{skipped_text}); give the train split sentence pairs"
            )
        log.info(f"training {cfg.tokenizer.model_type} tokenizer ({side}) on {len(lines):,} sentences")
        models.append((lines, exp.spm_prefix(side), back_translation_symbols(cfg) if side != "tgt" else None))
    train_spms(models, cfg.tokenizer)  # written together, once every side has trained
    # after: a training that fails leaves nothing of its own (the step's config change is undone)
    write_json_atomic(exp.casing_path, tables)
    write_json_atomic(exp.tokenizer_inputs_path, inputs)
    return {
        "vocab_size": {side: Tokenizer.load(exp.spm_model_path(side)).vocab_size for side in _sides(cfg)},
        "sentences": {"src": len(sample.src), "tgt": len(sample.tgt)},
        "pairs_read": sample.pairs_read,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _casing_written(exp: Experiment, tables: dict[str, dict[str, str]], started: float) -> dict:
    """The casing tables alone, for a tokenizer trained before them (mt.text.casing)."""
    write_json_atomic(exp.casing_path, tables)
    words = ", ".join(f"{lang} {len(table):,} words" for lang, table in tables.items())
    log.info(f"{exp.tokenizer_dir}: the tokenizer is there; its casing tables written to {exp.casing_path}: {words}")
    return {"casing": {lang: len(table) for lang, table in tables.items()}, "seconds": time.perf_counter() - started}


def _train_multilingual(
    exp: Experiment, cfg: ExperimentConfig, started: float, inputs: dict, casing_only: bool = False
) -> dict:
    """One joint model for every language of data.directions, trained on a sample that balances the
    languages (tokenizer.language_temperature), with each language's tag as a user symbol."""
    directions = cfg.data.pairs()
    per_direction = max(1, cfg.tokenizer.input_sentence_size // (2 * len(directions)))
    text: dict[str, dict[str, None]] = {lang: {} for lang in cfg.data.languages()}  # unique, in order
    read = 0
    cfg.data.check_sides("train")
    for src_lang, tgt_lang in directions:
        sources = cfg.data.sources("train", (src_lang, tgt_lang))
        sample = corpus.sample_pairs(sources, per_direction, cfg.data.cleaning("train"))
        read += sample.pairs_read
        if skipped := sum(sample.dropped.values()):  # said, as for one direction
            log.info(f"{src_lang}-{tgt_lang}: {skipped:,} sampled pairs skipped by cleaning")
        for example in sample.examples.get("invalid_utf8", []) + sample.examples.get("malformed", []):
            log.warn(f"train ({src_lang}-{tgt_lang}): skipped {example}")
        text[src_lang].update(dict.fromkeys(line for line in sample.src if line.strip()))
        text[tgt_lang].update(dict.fromkeys(line for line in sample.tgt if line.strip()))
    tables = {lang: casing_table(words_of(list(lines)), lang) for lang, lines in text.items()}
    if casing_only:
        return _casing_written(exp, tables, started)
    counts = balanced_counts({lang: len(lines) for lang, lines in text.items()}, cfg.tokenizer.language_temperature)
    if not sum(counts.values()):
        raise MtError(
            f"data.train: no training text in any of {', '.join(cfg.data.directions)} to train the tokenizer on"
        )
    if note := small_sample_note(
        {lang: len(lines) for lang, lines in text.items()}, counts, cfg.tokenizer.language_temperature
    ):
        log.warn(note)
    rng = random.Random(1)
    lines = [line for lang, wanted in counts.items() for line in rng.sample(list(text[lang]), wanted)]
    shares = ", ".join(f"{lang} {n:,}" for lang, n in counts.items())
    log.info(
        f"training {cfg.tokenizer.model_type} tokenizer (joint, {len(counts)} languages) on {len(lines):,} "
        f"sentences: {shares} (temperature {cfg.tokenizer.language_temperature:g})"
    )
    train_spm(
        lines,
        exp.spm_prefix("joint"),
        cfg.tokenizer,
        [language_tag(lang) for lang in text] + back_translation_symbols(cfg),
    )
    write_json_atomic(exp.casing_path, tables)
    write_json_atomic(exp.tokenizer_inputs_path, inputs)
    return {
        "vocab_size": {"joint": Tokenizer.load(exp.spm_model_path("joint")).vocab_size},
        "sentences": {"src": len(lines), "tgt": len(lines)},
        "pairs_read": read,
        "languages": counts,
        "seconds": round(time.perf_counter() - started, 2),
    }


def words_of(lines: list[str]) -> list[str]:
    """Source lines as text for `casing_table`: without back-translation's tag and noise's filler."""
    return [line.replace(BACK_TRANSLATION_TAG, " ").replace(NOISE_FILLER, " ") for line in lines]


def back_translation_symbols(cfg: ExperimentConfig) -> list[str]:
    """The source side's symbols of back-translated pairs (bt: specs): the tag and noise's filler."""
    marked = any(source.back_translated for pair in cfg.data.pairs() for source in cfg.data.sources("train", pair))
    return [BACK_TRANSLATION_TAG, NOISE_FILLER] if marked else []


def small_sample_note(sizes: dict[str, int], counts: dict[str, int], temperature: float) -> str | None:
    """A warning when the balanced sample takes under half of the text read: its smallest language
    bounds it (drawn without repeats), and a large vocabulary may then not fit."""
    read, taken = sum(sizes.values()), sum(counts.values())
    if not taken or 2 * taken >= read:
        return None
    small = min((lang for lang in sizes if sizes[lang]), key=lambda lang: sizes[lang])
    return (
        f"the tokenizer trains on {taken:,} of the {read:,} sentences read: {small}'s {sizes[small]:,} bound the "
        f"balanced sample at tokenizer.language_temperature {temperature:g} (a lower one takes more, 1 all of it)"
    )


def balanced_counts(sizes: dict[str, int], temperature: float) -> dict[str, int]:
    """How many of each group's items a balanced sample takes: shares proportional to n^(1/T), as large
    as the smallest group relative to its share allows (at T = 1: everything; equal sizes: all of
    each). Arivazhagan et al. (2019) draw languages so; here a sample is drawn once, without repeats."""
    weights = {key: (n ** (1 / temperature) if n else 0.0) for key, n in sizes.items()}
    total = sum(weights.values())
    if not total:
        return dict.fromkeys(sizes, 0)
    shares = {key: w / total for key, w in weights.items()}
    scale = min(sizes[key] / share for key, share in shares.items() if share)
    return {key: min(sizes[key], round(share * scale)) for key, share in shares.items()}
