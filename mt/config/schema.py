"""Typed configuration: the dataclasses are the schema and the defaults; values are checked and
converted against the field types (a choice field is a `Literal[...]`), then `validate` checks ranges.
A recipe (YAML, `mt.config.recipes`) or flags fill an `ExperimentConfig`; the first step on a new experiment
writes every field into the experiment directory, and later steps read it back. Model, tokenizer and data
fields are frozen once used (`mt.config.resolve`); others may be overridden per call, and are recorded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, get_type_hints

import yaml

from mt.config.sources import (
    LEGACY_FIELDS,
    SPLITS,
    Source,
    check_directions,
    check_sides,
    legacy_message,
    parse_direction,
    parse_source,
)
from mt.config.values import coerce, parse_duration
from mt.errors import ConfigError, MtError

# Choices other modules name too; the last two are flags of `mt translate`/`evaluate`, not fields.
LengthPenalty = Literal["gnmt", "length", "none"]
StopRule = Literal["exact", "early"]
Parallel = Literal["threads", "processes"]
Engine = Literal["mt", "ctranslate2", "auto"]
InferencePrecision = Literal["fp32", "bf16", "fp16"]
Quantize = Optional[Literal["int8"]]
# Bounds of the checks in `validate`: past each a value fails later, and worse (a beam of 100,000 is
# killed for memory, a length limit of inf silently gives empty translations).
MAX_ALPHA = 10.0  # the largest length-penalty exponent: 1,024 tokens ** 10 still fits in float32 (usual: 0.6-2)
MAX_BEAM = 256  # a batch holds sentences x beam rows of vocabulary-wide scores
MAX_WORKERS = 256  # searches side by side (decode.workers), binarize's processes: past any machine's cores
MAX_LEN_A = 1000.0  # output length a * source + b, cut to the model's positions in any case
MAX_LEN_B = 100_000
MAX_VOCAB = 1_000_000
MAX_SEGMENTATIONS = 100


@dataclass
class DataConfig:
    """Where the parallel corpus comes from and which direction to translate."""

    src_lang: str = "de"
    tgt_lang: str = "en"
    # One model for several directions (Johnson et al., 2017): "SRC-TGT" each, e.g. [en-de, en-fr, de-en,
    # fr-en]; the source gets a target-language token (<2de>) in front. Empty: the one direction
    # src_lang -> tgt_lang, without tokens (a bilingual model).
    directions: list[str] = field(default_factory=list)
    # Each split is a list of sources read in order (mt.config.sources): files:PREFIX, files:SRC|TGT,
    # tsv:FILE[:L1-L2], jsonl:FILE, hf:NAME[:CONFIG][@SPLIT] or ding[:FILE][@PART]; a train
    # source may end in *WEIGHT (an upsampling factor; 0.5 keeps a random half). With directions, each
    # source is read for every direction, or for those it names after a ~ (files:PREFIX~en-de,de-en).
    train: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    hf_streaming: bool = False  # read hub datasets record by record instead of downloading them first
    max_len: int = 250  # tokens per side (a bt: source's <BT> tag counts); longer pairs are dropped by binarize
    # Cleaning, of the train split only: valid/test keep their raw lines, which `mt evaluate` scores.
    clean: bool = True  # skip (and count) invalid UTF-8, broken records, empty sides, duplicates
    normalize: Literal["none", "nfc", "nfkc"] = (
        "nfc"  # Unicode normalisation when cleaning (always: whitespace, control chars)
    )
    max_len_ratio: float = 9.0  # drop pairs with one side over 9x the other's tokens (Moses clean-corpus-n); 0 = off
    dedup: bool = True  # drop exact duplicate pairs (after normalisation), keeping the first

    @property
    def multilingual(self) -> bool:  # several directions in one model, each source tagged with its target
        return bool(self.directions)

    def pairs(self) -> list[tuple[str, str]]:
        """The (source, target) language of each direction; one, without data.directions."""
        if not self.directions:
            return [(self.src_lang, self.tgt_lang)]
        return [parse_direction(direction, "data.directions") for direction in self.directions]

    def languages(self) -> list[str]:
        """Every language of the directions, in the order they first appear."""
        return list(dict.fromkeys(lang for pair in self.pairs() for lang in pair))

    def sources(self, split: str, direction: tuple[str, str] | None = None) -> list[Source]:
        """The parsed sources of a split ("train", "valid" or "test") in a direction (default: the
        first), for the corpus readers: with data.directions, those that name no direction or this one."""
        if split not in SPLITS:
            raise MtError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)}")
        langs = direction or self.pairs()[0]
        parsed = [
            parse_source(spec, split, langs, self.hf_streaming, self.multilingual) for spec in getattr(self, split)
        ]
        return [source for source in parsed if not source.directions or langs in source.directions]

    def check_sides(self, split: str) -> None:
        """Every source of a split names its languages where it is read for several directions
        (`mt.config.sources.check_sides`): asked where a split is learnt or scored, not on load."""
        pairs = self.pairs()
        for pair in pairs:
            for source in self.sources(split, pair):
                check_sides(source, split, len(pairs))

    def cleaning(self, split: str) -> str | None:
        """decode_chunk's `clean` for a split: the normalisation when cleaning it, None for strict."""
        return self.normalize if self.clean and split == "train" else None


@dataclass
class TokenizerConfig:
    model_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both sides: needed for the paper's shared embeddings
    character_coverage: float = 1.0
    byte_fallback: bool = True  # unseen characters become bytes, never <unk>
    # SentencePiece's normalisation, kept in its model (exports carry it) and applied to every text it
    # encodes: nmt_nfkc (its default) folds compatibility forms, so full-width punctuation (，！？) and
    # half-width katakana can be neither read nor written as such; identity keeps the text as it is
    # (the training text is cleaned by data.normalize); nfkc, and the *_cf case-folding ones, also.
    normalization: Literal["nmt_nfkc", "nfkc", "identity", "nmt_nfkc_cf", "nfkc_cf"] = "nmt_nfkc"
    input_sentence_size: int = 2_000_000  # sentences per model, reservoir-sampled while reading the corpus
    # With data.directions, the sample balances the languages: a language with n sentences gets a share
    # of it proportional to n^(1/T) (Arivazhagan et al., 2019, "Massively Multilingual NMT in the Wild",
    # T = 5); 1 = as the data come. Languages of equal size get equal shares at any T.
    language_temperature: float = 5.0
    # Subword regularization (Kudo, 2018): `mt binarize` writes each training pair this many times, once
    # in the tokenizer's best segmentation and N-1 times in segmentations sampled from it, so that each
    # epoch over the N copies shows the model a word split several ways. 1 = off (valid/test: always off).
    train_segmentations: int = 1
    # Unigram: the sampling distribution is P(segmentation)^alpha over all of them (smaller alpha = more
    # varied and longer; 0.3 with 8 copies makes Multi30k's training data 10-11% longer in tokens).
    # BPE: the probability of dropping each merge (larger = more varied; BPE-dropout, Provilkov et al.
    # 2020, use 0.1). The samples are drawn once, by binarize: every epoch sees the same N copies.
    sampling_alpha: float = 0.3


@dataclass
class ModelConfig:
    """The paper's hyper-parameters (Table 3); defaults are Transformer base."""

    enc_layers: int = 6
    dec_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    dropout: float = 0.1  # P_drop: sub-layer outputs and embeddings+positions (Sec. 5.4)
    attention_dropout: float = 0.0  # not in the paper; fairseq/tensor2tensor option
    activation_dropout: float = 0.0  # not in the paper: dropout after the FFN's ReLU
    pre_norm: bool = False  # the paper is post-norm (Sec. 3.1)
    tie_embeddings: bool = True  # Sec. 3.4; three-way when the vocabulary is joint
    max_positions: int = 1024


@dataclass
class TrainConfig:
    # Per batch and process, padded source or target tokens, whichever is larger. auto: on a GPU the
    # most its free memory holds, measured at the start on the longest pairs (up to 65,536); 4096 on
    # the CPU (mt.training.token_budget).
    max_tokens: int | Literal["auto"] = 4096
    update_freq: int = 1  # batches per update (per process): the effective batch is update_freq * processes
    # How lr and warmup follow a batch other than the one they were set for (lr_reference_tokens):
    # "sqrt" multiplies the peak lr by sqrt(k), "linear" by k, k = (max_tokens * update_freq *
    # processes) / lr_reference_tokens; either divides warmup_steps by k (the same warmup in tokens).
    # "none" leaves them as set. sqrt is Adam's rule (Malladi et al., 2022); linear is SGD's (Goyal et al., 2017).
    lr_scaling: Literal["none", "sqrt", "linear"] = "none"
    lr_reference_tokens: int | None = None  # the tokens per update lr and warmup were set for (a recipe's batch)
    max_steps: int = 100_000
    max_time: float | None = None  # seconds of training over all runs (flags accept "12m", "2h"); 0 or null = off
    # In the last fraction of the budget (max_time, else max_steps) the lr falls to 0 from where it is; 0 = off.
    cooldown: float = 0.0
    # Its fall over its share t in [0, 1]: "linear" 1 - t; "1-sqrt" 1 - sqrt(t), lower sooner (Hägele et al. 2024).
    cooldown_shape: Literal["linear", "1-sqrt"] = "linear"
    # lr = lr_peak * min(step / warmup, sqrt(warmup / step)), step from 1. With lr_peak unset this is
    # the paper's lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Sec. 5.3).
    lr_peak: float | None = None
    lr_scale: float = 1.0
    warmup_steps: int = 4000
    # "constant": the same warmup, then flat at the peak until the cooldown (for fine-tuning).
    lr_schedule: Literal["inverse_sqrt", "constant"] = "inverse_sqrt"
    label_smoothing: float = 0.1  # epsilon_ls (Sec. 5.4)
    # Late dropout (Liu et al., ICML 2023, "Dropout Reduces Underfitting"): model.dropout's sub-layer and
    # embedding dropout at this lower rate until early_dropout_until of the budget (max_time if set, else
    # max_steps), model.dropout after: a short budget learns faster early and generalises at the end.
    # Attention and activation dropout keep their rates. None = off.
    early_dropout: float | None = None
    early_dropout_until: float = 0.5
    # With data.directions, each epoch's pairs are drawn so that a direction with n pairs has a share
    # proportional to n^(1/T) (tokenizer.language_temperature's rule, for batches); 1 = as the data come.
    direction_temperature: float = 5.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    # Decoupled (AdamW): each update shrinks weight matrices and embeddings by lr * weight_decay; biases
    # and LayerNorm gains are not decayed. Not in the paper (plain Adam); 0 = off.
    weight_decay: float = 0.0
    clip_norm: float = 0.0  # 0 = no clipping (the paper does not clip)
    seed: int = 1
    log_every: int = 50
    valid_every: int = 1000
    valid_bleu: bool = False  # also greedy BLEU on a fixed sample of the validation set
    valid_bleu_sentences: int = 200  # the sample's size: greedy decoding costs time at every validation
    best_metric: Literal["nll", "bleu"] = "nll"  # what makes best.pt (bleu needs valid_bleu)
    patience: int = 0  # stop after this many validations without improvement; 0 = never
    save_every: int = 1000
    keep_last: int = 5  # periodic step_N.pt checkpoints kept; 0 = all
    # fp32 | bf16 | fp16 (CPU or CUDA, with a dynamic loss scale) | auto: fp32, bf16 and fp16 timed on
    # the CPU when training starts, a half precision taken only when over 1.3x fp32 (mt.hardware.fastest_precision;
    # bf16 is much faster on some CPUs and slower on others); on CUDA bf16 where the GPU has it, else fp16
    precision: Literal["fp32", "bf16", "fp16", "auto"] = "auto"
    max_bad_steps: int = 5  # updates in a row with a non-finite loss or gradient norm before stopping
    # torch.compile the encoder and decoder (once, dynamic shapes; the loss runs as written): for GPUs,
    # slower on the CPU. The first steps pay the compilation; checkpoints are the same as without it.
    # Batches are then padded to a few shapes (mt.data.batching.bucket_width), which changes their cuts.
    compile: bool = False
    # torch.compile's mode: "default", or "reduce-overhead", which replays each shape's step as a
    # CUDA graph (one launch instead of hundreds; CUDA only, more memory).
    compile_mode: Literal["default", "reduce-overhead"] = "default"
    # An exponential moving average of the weights, updated after every update (fairseq --store-ema,
    # Marian --exponential-smoothing; see mt.training.ema); saved as checkpoints/ema.pt, decoded with
    # `--checkpoint ema`. 0 = off; 0.999 or 0.9999 are usual.
    ema_decay: float = 0.0
    # Also write TensorBoard event files into EXP/tensorboard (needs the tensorboard package:
    # pip install tensorboard); train.jsonl stays the record.
    tensorboard: bool = False


@dataclass
class DecodeConfig:
    beam: int = 4  # Sec. 6.1
    alpha: float = 0.6  # Sec. 6.1
    # "gnmt": ((5+|Y|)/6)^alpha as in the paper (Wu et al. 2016); "length": |Y|^alpha as fairseq,
    # Marian and CTranslate2; "none": raw log-probability.
    length_penalty: LengthPenalty = "gnmt"
    # When beam search stops (mt/search/steps.py): "early" once `beam` hypotheses have finished (fairseq,
    # CTranslate2), or when none alive can still win; "exact" only the latter (docs/translating.md).
    stop: StopRule = "early"
    max_len_a: float = 1.0  # max output length = a * source length + b; the paper: input + 50
    max_len_b: int = 50
    max_tokens: int = 2000  # source tokens per decoding batch
    # The repetition guard: N > 0 bans any token that would repeat an N-gram of the translation so far
    # (fairseq's and CTranslate2's no_repeat_ngram_size), in beam, greedy and sampling; 0: off.
    no_repeat_ngram: int = 0
    workers: int = 0  # batches searched side by side on a CPU (mt/search/parallel.py); 0 = one per thread, up to 4
    # How the workers search side by side: "threads" in this process (mt/search/parallel.py), or
    # "processes" of their own, each loading the model once (mt/decoding/processes.py): faster on
    # files, a start of about 2 s; where workers is 1, or for sampling and constraints, threads.
    parallel: Parallel = "threads"
    # The lexical shortlist (mt/decoding/shortlist.py): each batch's decoder steps score only the target
    # tokens that its source tokens suggest (EXP/shortlist/, built by `mt shortlist` or the recipe step
    # shortlist), the frequent ones and the special ones, not the whole vocabulary: faster, approximate.
    shortlist: bool = False
    # The table `mt shortlist` builds (mt/data/shortlist.py): each source token's `top` most probable target
    # tokens (IBM Model 1 on the training split), and the `frequent` most frequent target tokens for every batch.
    shortlist_top: int = 10
    shortlist_frequent: int = 100
    # What decodes (mt/decoding/engine.py): "mt", mt's own search; "ctranslate2", the same weights in
    # CTranslate2 (built once into EXP/engines/; a call it cannot decode as mt would is refused);
    # "auto", CTranslate2 where it can, mt's search for the rest (gnmt penalty, constraints, ensembles...).
    engine: Engine = "mt"
    checkpoint: str = "best"  # "best", "last", "average", "ema" (train.ema_decay) or a file name under checkpoints/
    average_last: int = 5  # recipe step "average": checkpoints/average.pt = mean of the last N step_N.pt


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def set_field(cfg: ExperimentConfig, key: str, value: Any, where: str = "override") -> Any:
    """Set `section.field` on cfg from a plain value, checking the key and type. Returns the value."""
    section_name, _, name = key.partition(".")
    section = getattr(cfg, section_name, None) if name else None
    if section is None or not dataclasses.is_dataclass(section):
        raise ConfigError(f"{where}: unknown config key {key!r} (expected section.field)")
    hints = get_type_hints(type(section))
    if name not in hints:
        known = ", ".join(f.name for f in dataclasses.fields(section))
        raise ConfigError(f"{where}: unknown key {key!r}; {section_name} has: {known}")
    hint = str(hints[name])
    if (
        isinstance(value, str)
        and value.strip().lower() in ("", "null", "none")
        and "None" in hint
        and not hint.startswith("str")
    ):
        value = None  # a flag's way to unset an optional number: --set train.max_time=null
    if key == "train.max_time" and value is not None:
        try:
            value = parse_duration(value)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {key}: {str(exc).partition(': ')[2]}") from None
        value = value or None  # 0 = off, as for the other budgets (cooldown, patience, clip_norm)
    value = coerce(value, hints[name], f"{where}: {key}")
    setattr(section, name, value)
    return value


def from_dict(raw: dict[str, Any], where: str, base: ExperimentConfig | None = None) -> ExperimentConfig:
    """Build a config from nested sections over `base` (changed in place; default: the defaults);
    unknown sections or keys are an error naming `where`."""
    cfg = base if base is not None else ExperimentConfig()
    for section_name, values in raw.items():
        if not isinstance(section_name, str):  # YAML reads 1:, null:, yes: and on: as other than names
            raise ConfigError(f"{where}: section names are words, not {section_name!r} (quote it if it is one)")
        if not hasattr(cfg, section_name):
            known = ", ".join(f.name for f in dataclasses.fields(cfg))
            raise ConfigError(f"{where}: unknown section {section_name!r}; known: {known}")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: section {section_name!r} must be a mapping")
        if section_name == "data" and (old := {k: v for k, v in values.items() if k in LEGACY_FIELDS}):
            raise ConfigError(legacy_message(old, where))
        for name, value in values.items():
            set_field(cfg, f"{section_name}.{name}", value, where)
    validate(cfg, where)
    return cfg


def validate(cfg: ExperimentConfig, where: str) -> None:
    """ConfigError "WHERE: what is wrong" for the first check that fails, then the data sources and
    directions (mt.config.sources)."""
    for ok, message in [*_model(cfg), *decode_checks(cfg.decode), *_train(cfg), *_data(cfg)]:
        if not ok:
            raise ConfigError(f"{where}: {message}")
    try:
        read = {(split, d): cfg.data.sources(split, d) for split in SPLITS for d in cfg.data.pairs()}
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    check_directions(cfg.data.directions, {split: getattr(cfg.data, split) for split in SPLITS}, where)
    for (split, direction), sources in read.items():
        if not sources and getattr(cfg.data, split):
            raise ConfigError(
                f"{where}: data.{split}: no source for {'-'.join(direction)}; every direction of "
                f"data.directions needs one in each split that is given (a ~ suffix names them)"
            )


def _model(cfg: ExperimentConfig) -> list[tuple[bool, str]]:
    m = cfg.model
    return [
        (
            min(m.enc_layers, m.dec_layers, m.d_model, m.d_ff, m.n_heads) >= 1,
            "model.enc_layers, dec_layers, d_model, d_ff and n_heads must be at least 1",
        ),
        (m.n_heads >= 1 and m.d_model % m.n_heads == 0, "model.d_model must be divisible by model.n_heads"),
        # A kept pair has up to max_len tokens a side (a bt: source's <BT> among them: binarize counts it);
        # the source gains EOS (and a language tag), the decoder BOS.
        (
            cfg.data.max_len + 1 + cfg.data.multilingual <= m.max_positions,
            f"data.max_len ({cfg.data.max_len}) + 1 (for BOS/EOS{' and the language tag' if cfg.data.multilingual else ''}) "
            f"must be at most model.max_positions ({m.max_positions})",
        ),
        (
            all(0 <= p <= 1 for p in (m.dropout, m.attention_dropout, m.activation_dropout)),
            "model.dropout, model.attention_dropout and model.activation_dropout must be in [0, 1]",
        ),
    ]


def decode_checks(d: DecodeConfig) -> list[tuple[bool, str]]:
    """The decode section's rules: the config's, and those of every call's options (mt.decoding.options)."""
    return [
        (1 <= d.beam <= MAX_BEAM, f"decode.beam (--beam) must be from 1 to {MAX_BEAM}"),
        (
            0 <= d.alpha <= MAX_ALPHA,
            f"decode.alpha (--alpha) must be from 0 to {MAX_ALPHA:g}, not {d.alpha}: the "
            f"stopping bound is invalid for negative alpha; past {MAX_ALPHA:g} the penalty overflows",
        ),
        (0 <= d.max_len_a <= MAX_LEN_A, f"decode.max_len_a (--max-len-a) must be from 0 to {MAX_LEN_A:g}"),
        (0 <= d.max_len_b <= MAX_LEN_B, f"decode.max_len_b (--max-len-b) must be from 0 to {MAX_LEN_B}"),
        (
            d.max_len_a > 0 or d.max_len_b >= 2,  # a limit of 1 leaves room for </s> alone
            f"decode.max_len_b (--max-len-b) {d.max_len_b} with max_len_a 0: the length counts </s>, so every "
            "translation would be empty; give at least 2",
        ),
        (d.max_tokens >= 1, "decode.max_tokens (--max-tokens) must be at least 1"),
        (d.no_repeat_ngram >= 0, "decode.no_repeat_ngram (--no-repeat-ngram) must be 0 (off) or more"),
        (
            0 <= d.workers <= MAX_WORKERS,  # each a thread or a process with its own copy of the model
            f"decode.workers (--workers) must be from 0 (one per thread) to {MAX_WORKERS}",
        ),
        (
            1 <= d.shortlist_top <= MAX_VOCAB and 0 <= d.shortlist_frequent <= MAX_VOCAB,
            f"decode.shortlist_top must be from 1 and decode.shortlist_frequent from 0, both to {MAX_VOCAB:,}",
        ),
        (d.average_last >= 1, "decode.average_last must be at least 1"),
    ]


def _train(cfg: ExperimentConfig) -> list[tuple[bool, str]]:
    t = cfg.train
    return [
        (t.max_tokens == "auto" or int(t.max_tokens) > 0, "train.max_tokens must be positive, or auto"),
        (t.max_steps >= 0, "train.max_steps must be 0 or more"),
        (t.max_time is None or t.max_time >= 0, "train.max_time must be 0 (off) or more"),
        (t.update_freq >= 1, "train.update_freq must be at least 1"),
        # numpy's seeds are below 2^32, and each process seeds with seed + its rank
        (0 <= t.seed < 2**32 - 2**16, f"train.seed must be from 0 to {2**32 - 2**16 - 1}"),
        (
            t.lr_scaling == "none" or (t.lr_reference_tokens or 0) >= 1,
            f"train.lr_scaling {t.lr_scaling} needs train.lr_reference_tokens: the tokens per update lr and "
            f"warmup_steps were set for",
        ),
        (
            t.lr_reference_tokens is None or t.lr_reference_tokens >= 1,
            "train.lr_reference_tokens must be at least 1, or null",
        ),
        (
            t.lr_peak is None or t.lr_peak > 0,
            f"train.lr_peak must be more than 0, or null (the paper's schedule), not {t.lr_peak}",
        ),
        (t.lr_scale > 0, "train.lr_scale must be more than 0"),
        (0 <= t.adam_beta1 < 1 and 0 <= t.adam_beta2 < 1, "train.adam_beta1 and adam_beta2 must be in [0, 1)"),
        (t.adam_eps > 0, "train.adam_eps must be more than 0"),
        (0.0 <= t.cooldown < 1.0, "train.cooldown must be in [0, 1)"),
        (0.0 <= t.ema_decay < 1.0, f"train.ema_decay must be in [0, 1) (0 = off), not {t.ema_decay}"),
        (t.best_metric != "bleu" or t.valid_bleu, "train.best_metric bleu needs train.valid_bleu: true"),
        (t.valid_bleu_sentences >= 1, "train.valid_bleu_sentences must be at least 1"),
        (t.patience >= 0, "train.patience must be 0 (off) or more"),
        (t.keep_last >= 0, "train.keep_last must be 0 (keep all) or more"),
        (t.max_bad_steps >= 1, "train.max_bad_steps must be at least 1"),
        (t.clip_norm >= 0.0, "train.clip_norm must be 0 (off) or more"),
        (t.weight_decay >= 0.0, "train.weight_decay must be 0 (off) or more"),
        (
            min(t.log_every, t.valid_every, t.save_every) >= 1,
            "train.log_every, valid_every and save_every must be at least 1",
        ),
        (t.warmup_steps >= 1, "train.warmup_steps must be at least 1"),
        (0.0 <= t.label_smoothing < 1.0, "train.label_smoothing must be in [0, 1)"),
        (
            t.early_dropout is None or 0.0 <= t.early_dropout <= 1.0,
            "train.early_dropout must be in [0, 1], or null (off)",
        ),
        (0.0 < t.early_dropout_until <= 1.0, "train.early_dropout_until must be in (0, 1]"),
        (t.direction_temperature >= 1, "train.direction_temperature must be 1 (as the data come) or more"),
    ]


def _data(cfg: ExperimentConfig) -> list[tuple[bool, str]]:
    k, data = cfg.tokenizer, cfg.data
    return [
        (16 <= k.vocab_size <= MAX_VOCAB, f"tokenizer.vocab_size must be from 16 to {MAX_VOCAB:,}"),
        (k.input_sentence_size >= 2, "tokenizer.input_sentence_size must be at least 2"),
        (  # SentencePiece's own bound, checked only once the corpus is sampled
            0.98 <= k.character_coverage <= 1.0,
            "tokenizer.character_coverage must be from 0.98 to 1.0 (the share of characters kept as pieces)",
        ),
        (
            1 <= k.train_segmentations <= MAX_SEGMENTATIONS,
            f"tokenizer.train_segmentations must be from 1 to {MAX_SEGMENTATIONS} (copies of the training split)",
        ),
        (0.0 < k.sampling_alpha <= 1.0, "tokenizer.sampling_alpha must be in (0, 1]"),
        (k.language_temperature >= 1, "tokenizer.language_temperature must be 1 (as the data come) or more"),
        (data.max_len >= 1, "data.max_len must be at least 1"),
        (data.max_len_ratio == 0 or data.max_len_ratio >= 1, "data.max_len_ratio must be 0 (off) or at least 1"),
        (k.joint or not data.directions, "data.directions needs tokenizer.joint: true (one vocabulary)"),
        (  # one language both sides read one file for both: a model that learns to copy
            bool(data.directions) or (bool(data.src_lang) and bool(data.tgt_lang) and data.src_lang != data.tgt_lang),
            f"data.src_lang ({data.src_lang!r}) and data.tgt_lang ({data.tgt_lang!r}) must be two different languages",
        ),
    ]


def save_yaml(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
