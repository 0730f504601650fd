"""What a format's writer gets from `mt export` (mt.apps.export.directory loads it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt.config.schema import ExperimentConfig
from mt.experiment.paths import Experiment
from mt.model.transformer import Transformer
from mt.tokenizer import Tokenizer


@dataclass
class Exported:
    """What a format's writer gets: the checked checkpoint, its model (eval mode) and tokenizers."""

    exp: Experiment
    cfg: ExperimentConfig
    path: Path  # the checkpoint file
    state: dict[str, Any]
    model: Transformer
    src_tok: Tokenizer
    tgt_tok: Tokenizer  # the same object as src_tok when the vocabulary is joint

    @property
    def joint(self) -> bool:
        return self.src_tok is self.tgt_tok
