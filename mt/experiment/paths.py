"""The experiment directory: every file name in it, and reading what the steps wrote there (its
config, its tokenizers, a checkpoint by name). Saving a command's config is `mt.experiment.config`'s
job; the training lock is `mt.experiment.lock`'s.

Layout (documented in the README):

    EXP/config.yaml            resolved config, written by the first step, read by every later one
    EXP/overrides.jsonl        every flag that changed a recipe/config value: time, command, key, old, new
    EXP/tokenizer/spm.model    SentencePiece model and .vocab (spm.src.* + spm.tgt.* if not joint)
    EXP/data/{split}.{src,tgt}.ids.npy      token ids of a split, concatenated (memory-mapped)
    EXP/data/{split}.{src,tgt}.offsets.npy  sentence i is ids[offsets[i]:offsets[i+1]]
    EXP/data/{split}.lines.npy the corpus line of each kept pair
    EXP/data/{split}.directions.npy  the direction of each pair (with data.directions)
    EXP/data/stats.json        pairs kept/dropped per reason, tokens, mean lengths, tokenizer hash
    EXP/data/manifest.json     size and sha256 of every data file, the tokenizer hash: checked by train
    EXP/checkpoints/           step_XXXXXXX.pt, last.pt, best.pt, average.pt
    EXP/shortlist/shortlist.npz  the lexical shortlist (`mt shortlist`): each source token's likely target tokens
    EXP/train.jsonl            training log: step, loss, lr, tokens/s, validation metrics
    EXP/tensorboard/           TensorBoard event files of the same numbers (train.tensorboard: true)
    EXP/train.lock             held (flock) while a trainer runs; holds its pid
    EXP/translations/{split}.hyp   detokenized output of `mt evaluate` ({split}.SRC-TGT.hyp: one a direction)
    EXP/scores/{split}.json    BLEU/chrF with sacrebleu signatures
    EXP/attention/             `mt attention`'s heatmaps and weights (by default)
    EXP/curves.png             `mt plot`'s training curves (by default)
    EXP/report.html            `mt report`'s page (by default)
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from mt.atomic_files import DIR_MODE, pid_alive
from mt.config import schema as cfglib
from mt.config.recipes import read_yaml_mapping
from mt.config.schema import ExperimentConfig
from mt.errors import MtError
from mt.tokenizer import Tokenizer

_DATA_BUILD = re.compile(r"\.data-(\d+)-")  # Experiment.new_data_build's directories
DATA_BUILD_MARK = ".mt-data-build"  # in each of them (and so in data/, the build renamed)


class Experiment:
    """Knows every file name in an experiment directory; nothing else builds these paths."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def overrides_path(self) -> Path:
        return self.root / "overrides.jsonl"

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    @property
    def tokenizer_inputs_path(self) -> Path:
        """The training files the tokenizer was trained on (`mt.data.dataset.input_record`)."""
        return self.tokenizer_dir / "inputs.json"

    @property
    def casing_path(self) -> Path:
        """Each source language's words in the casing its training text writes them (mt.text.casing)."""
        return self.tokenizer_dir / "casing.json"

    def spm_prefix(self, side: str) -> Path:
        """side: "joint", "src" or "tgt"; SentencePiece adds .model/.vocab to this prefix."""
        return self.tokenizer_dir / ("spm" if side == "joint" else f"spm.{side}")

    def spm_model_path(self, side: str) -> Path:
        """The SentencePiece model file of `side` ("joint", "src" or "tgt")."""
        prefix = self.spm_prefix(side)
        return prefix.with_name(prefix.name + ".model")

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def new_data_build(self) -> Path:
        """A fresh hidden directory ".data-PID-XXXX" for binarize to build data/ in (renamed at the end) or
        to move the old one aside into, marked as binarize's (DATA_BUILD_MARK)."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(dir=self.root, prefix=f".data-{os.getpid()}-"))
        path.chmod(DIR_MODE)  # data/ as readable as the rest of the experiment (others train on a shared one)
        (path / DATA_BUILD_MARK).touch()
        return path

    def abandoned_data_builds(self) -> list[Path]:
        """Build directories of binarize runs that were killed: their process is gone. Only binarize's,
        by their mark: a user's `.data-2024-backup/` has the name, not the mark."""
        found = []
        for path in self.root.glob(".data-*"):
            match = _DATA_BUILD.match(path.name)
            if match and (path / DATA_BUILD_MARK).is_file() and not pid_alive(int(match.group(1))):
                found.append(path)
        return found

    def ids_path(self, split: str, side: str) -> Path:
        return self.data_dir / f"{split}.{side}.ids.npy"

    def offsets_path(self, split: str, side: str) -> Path:
        return self.data_dir / f"{split}.{side}.offsets.npy"

    def directions_path(self, split: str) -> Path:
        """The direction of each pair (an index into data.directions): multilingual experiments only."""
        return self.data_dir / f"{split}.directions.npy"

    def lines_path(self, split: str) -> Path:
        """The 0-based line (in the concatenated sources) of each pair binarize kept; copies repeat it."""
        return self.data_dir / f"{split}.lines.npy"

    @property
    def data_stats_path(self) -> Path:
        return self.data_dir / "stats.json"

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "manifest.json"

    @property
    def shortlist_path(self) -> Path:
        """The lexical shortlist (mt.data.shortlist), which decode.shortlist decodes with."""
        return self.root / "shortlist" / "shortlist.npz"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint_path(self, name: str) -> Path:
        """ "best", "last", "average", "step_100", or a file name under checkpoints/."""
        if name.startswith("step_") and name[5:].isdigit():
            name = f"step_{int(name[5:]):07d}"
        if not name.endswith(".pt"):
            name += ".pt"
        return self.checkpoints_dir / name

    def step_checkpoints(self) -> list[Path]:
        """Periodic checkpoints (named as training names them, `checkpoint_path`: step_0005000.pt, not a
        copy named step_5000.pt or step_5000_keep.pt, which pruning must not delete), oldest first by
        step: past 7 digits the names no longer sort."""
        periodic = [
            path
            for path in self.checkpoints_dir.glob("step_*.pt")
            if path.stem[5:].isdigit() and path.name == self.checkpoint_path(path.stem).name and path.is_file()
        ]
        return sorted(periodic, key=lambda path: int(path.stem[5:]))

    @property
    def tensorboard_dir(self) -> Path:
        return self.root / "tensorboard"

    @property
    def train_log_path(self) -> Path:
        return self.root / "train.jsonl"

    def hyp_path(self, split: str, direction: str | None = None) -> Path:
        """`mt evaluate`'s translations of a split; a multilingual experiment's per direction ("en-de")."""
        return self.root / "translations" / (f"{split}.{direction}.hyp" if direction else f"{split}.hyp")

    def score_path(self, split: str) -> Path:
        return self.root / "scores" / f"{split}.json"

    @property
    def attention_dir(self) -> Path:
        """Where `mt attention` writes by default."""
        return self.root / "attention"

    @staticmethod
    def attention_files(out_dir: Path, layer: int, encoder: bool, fmt: str) -> dict[str, Path]:
        """What `mt attention` writes into out_dir (attention_dir, or --output), by kind; `layer` 0-based."""
        png = {
            "layers": "cross-attention.png",
            "heads": f"cross-attention-layer{layer + 1}-heads.png",
            "alignment": "alignment.png",
            **({"encoder": "encoder-self-attention.png"} if encoder else {}),
        }
        names = {
            **(png if fmt in ("png", "both") else {}),
            **({"json": "attention.json"} if fmt in ("json", "both") else {}),
        }
        return {kind: out_dir / name for kind, name in names.items()}

    @property
    def curves_path(self) -> Path:
        """`mt plot`'s default output (in the first experiment given)."""
        return self.root / "curves.png"

    @property
    def report_path(self) -> Path:
        """`mt report`'s default output."""
        return self.root / "report.html"

    @property
    def lock_path(self) -> Path:
        return self.root / "train.lock"

    # -- what the steps wrote -------------------------------------------------------------------
    def has_config(self) -> bool:
        return self.config_path.exists()

    def load_config(self) -> ExperimentConfig:
        if not self.has_config():
            raise MtError(
                f"{self.root}: not an experiment yet (no config.yaml); start with "
                f"`mt run RECIPE` or `mt train-tokenizer --exp {self.root} ...`"
            )
        return cfglib.from_dict(read_yaml_mapping(self.config_path, "experiment config"), str(self.config_path))

    def has_tokenizer(self) -> bool:
        """A finished tokenizer: its .model file is written last (joint, or the per-side pair: both)."""
        return self.spm_model_path("joint").exists() or (
            self.spm_model_path("src").exists() and self.spm_model_path("tgt").exists()
        )

    def has_data(self) -> bool:
        """Binarized data: binarize renames its whole directory into place when it is done, its
        manifest inside (a data/ folder without one is not mt's: a user's corpora, say)."""
        return self.manifest_path.is_file()

    def has_checkpoints(self) -> bool:
        return self.checkpoints_dir.is_dir() and any(self.checkpoints_dir.glob("*.pt"))

    def find_checkpoint(self, name: str) -> Path:
        """A checkpoint name ("best", "last", "average", "ema", "step_N") or a .pt path -> an existing file."""
        candidate = Path(name)
        if candidate.suffix == ".pt" and candidate.is_file():
            return candidate
        path = self.checkpoint_path(name)
        if not path.is_file() and name == "best" and self.checkpoint_path("last").is_file():
            return self.checkpoint_path("last")  # no validation set: the last checkpoint is the best we have
        if not path.is_file():
            have = sorted(p.stem for p in self.checkpoints_dir.glob("*.pt")) if self.checkpoints_dir.exists() else []
            hint = f"available: {', '.join(have)}" if have else "train first with `mt train`"
            neither = " (neither best.pt nor last.pt exists)" if name == "best" else ""
            raise MtError(f"{path}: no checkpoint {name!r} in {self.root}{neither} ({hint})")
        return path

    def load_tokenizers(self, joint: bool) -> tuple[Tokenizer, Tokenizer]:
        """(src, tgt) tokenizers; the same object twice when the vocabulary is `joint`."""
        paths = [self.spm_model_path(side) for side in (("joint",) if joint else ("src", "tgt"))]
        for path in paths:
            if not path.exists():
                raise MtError(f"{path}: no tokenizer yet; run `mt train-tokenizer --exp {self.root}` first")
        tokenizers = [Tokenizer.load(path) for path in paths]
        tokenizers[0].casing_file = self.casing_path  # (read where text is recased: Tokenizer.casing)
        return (tokenizers[0], tokenizers[0]) if joint else (tokenizers[0], tokenizers[1])

    # -- small readers -------------------------------------------------------------------------
    def read_json(self, path: Path) -> Any:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or not JSON
            raise MtError(f"{path}: unreadable ({exc})") from None
