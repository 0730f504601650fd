"""mt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) and the pipeline around it.

The Python API of docs/python-api.md, by name (`from mt import Translator`), each imported when first
used, so that `import mt` stays cheap for the modules and commands that need none of them."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

API = {  # name -> the module that defines it
    "open_experiment": "mt.experiment.config",
    "read_experiment": "mt.experiment.config",
    "Experiment": "mt.experiment.paths",
    "train_tokenizer": "mt.data.train_tokenizer",
    "binarize": "mt.data.binarize",
    "train": "mt.training.loop",
    "average_last": "mt.training.average",
    "Translator": "mt.decoding.translator",
    "DecodeOptions": "mt.decoding.options",
    "Sampling": "mt.decoding.options",
    "stream": "mt.decoding.output",
    "evaluate_split": "mt.apps.evaluate",
    "score": "mt.metrics",
    "run_recipe": "mt.apps.run",
    "MtError": "mt.errors",
    "ConfigError": "mt.errors",
}
__all__ = ["__version__", *API]


def __getattr__(name: str) -> Any:
    if name not in API:
        raise AttributeError(f"module 'mt' has no attribute {name!r}")
    return getattr(importlib.import_module(API[name]), name)
