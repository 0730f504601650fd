"""A toy German-English corpus and a tiny experiment trained on it, shared by the tests.

The pairs are word-for-word (a word list in each language, same order), so even a model of a few
thousand parameters learns something in seconds.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

from mt.atomic_files import write_text_atomic
from mt.config.schema import ExperimentConfig, save_yaml
from mt.data.binarize import binarize
from mt.data.train_tokenizer import train_tokenizer
from mt.experiment.paths import Experiment

WORDS_DE = "der die das ein eine mann frau hund katze läuft spielt sitzt auf im park haus rot blau groß klein".split()
WORDS_EN = "the the the a a man woman dog cat runs plays sits on in park house red blue big small".split()


def toy_corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n sentence pairs of 3-9 words, German and English."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_DE)) for _ in range(rng.randint(3, 9))]
        src.append(" ".join(WORDS_DE[i] for i in idx).capitalize() + ".")
        tgt.append(" ".join(WORDS_EN[i] for i in idx).capitalize() + ".")
    return src, tgt


WORDS_FR = "le la le un une homme femme chien chat court joue assis sur dans parc maison rouge bleu grand petit".split()
WORDS = {"de": WORDS_DE, "en": WORDS_EN, "fr": WORDS_FR}


def toy_multiway(n: int, seed: int, langs: tuple[str, ...] = ("en", "de", "fr")) -> dict[str, list[str]]:
    """n sentences in each of `langs`, word for word the same (a multi-way parallel toy corpus, as
    Multi30k is): lang -> lines."""
    rng = random.Random(seed)
    lines: dict[str, list[str]] = {lang: [] for lang in langs}
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_DE)) for _ in range(rng.randint(3, 9))]
        for lang in langs:
            lines[lang].append(" ".join(WORDS[lang][i] for i in idx).capitalize() + ".")
    return lines


def tiny_experiment(root: Path, sizes: dict[str, int], model: dict, train: dict, decode: dict,
                    tokenizer: dict | None = None) -> tuple[Experiment, ExperimentConfig]:
    """root/{split}.de|en toy files, and root/exp with its config, tokenizer (vocabulary 100 unless
    `tokenizer` changes it) and binarized data."""
    cfg = ExperimentConfig()
    for split, n in sizes.items():
        src, tgt = toy_corpus(n, seed=len(split))
        (root / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        setattr(cfg.data, split, [f"files:{root / split}"])
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 100, False
    cfg.tokenizer.__dict__.update(tokenizer or {})
    cfg.model.__dict__.update(d_model=32, d_ff=64, n_heads=2, **model)
    cfg.train.precision = "fp32"  # the same numbers on every CPU (the default, auto, differs by CPU)
    cfg.train.__dict__.update(train)
    cfg.decode.__dict__.update(decode)
    exp = Experiment(root / "exp")
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    return exp, cfg


def tiny_config(corpus_dir: Path, splits: tuple[str, ...] = ("train", "valid", "test")) -> ExperimentConfig:
    """A 1+1-layer d_model 32 config over corpus_dir/{split}.de|en, 10 updates of 300 tokens."""
    cfg = ExperimentConfig()
    for split in splits:
        setattr(cfg.data, split, [f"files:{corpus_dir / split}"])
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 100, False
    cfg.model.__dict__.update(enc_layers=1, dec_layers=1, d_model=32, d_ff=64, n_heads=2, dropout=0.1)
    cfg.train.__dict__.update(max_steps=10, max_tokens=300, lr_peak=3e-3, warmup_steps=10, log_every=5,
                              valid_every=1000, save_every=1000, precision="fp32")  # as tiny_experiment's
    cfg.decode.max_len_b = 10
    return cfg


class one_thread:
    """Train on one thread (the other core may be busy), then restore torch's setting."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)
