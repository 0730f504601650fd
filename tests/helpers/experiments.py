"""A tiny experiment built through the library (toy corpus files, tokenizer, binarized data, no
checkpoints), and fresh copies of it with fields changed."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

from helpers.toy import tiny_config, toy_corpus
from mt.atomic_files import write_text_atomic
from mt.config.schema import ExperimentConfig, save_yaml
from mt.data.binarize import binarize
from mt.data.train_tokenizer import train_tokenizer
from mt.experiment.paths import Experiment


def build_experiment(root: Path) -> Experiment:
    """Corpus files under root, then root/exp with its tokenizer and binarized data (no checkpoints)."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 40), ("test", 20)):
        src, tgt = toy_corpus(n, seed=len(split))
        if split == "valid":
            src[3] = ""  # binarize drops this pair: valid.lines.npy is then not 0..n-1
        (root / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    exp = Experiment(root / "exp")
    cfg = tiny_config(root)
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    return exp


def copy_experiment(exp: Experiment, root: Path, **train_fields) -> tuple[Experiment, ExperimentConfig]:
    """A fresh copy of exp's config, tokenizer and data (no checkpoints), with train fields changed
    (`model__dropout=0.0` changes a model field)."""
    new = Experiment(root)
    root.mkdir(parents=True)
    for name in ("tokenizer", "data"):
        shutil.copytree(exp.root / name, root / name)
    cfg = copy.deepcopy(exp.load_config())
    for key, value in train_fields.items():
        section, _, name = key.rpartition("__")
        setattr(getattr(cfg, section or "train"), name, value)
    write_text_atomic(new.config_path, save_yaml(cfg))
    return new, cfg
