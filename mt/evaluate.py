"""`mt evaluate`: translate a split of an experiment and score it (`mt.metrics`), saving the
translations and the scores, with how they were decoded, in the experiment.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mt import log
from mt.atomic_files import write_json_atomic, write_text_atomic
from mt.config.schema import DecodeConfig, ExperimentConfig
from mt.data.corpus import load_split, read_lines
from mt.experiment import Experiment
from mt.metrics import score, score_tokenized

if TYPE_CHECKING:
    from mt.translate import InferenceOptions  # imported when needed: scoring files needs no torch

__all__ = ["read_lines", "score", "score_tokenized", "decode_record", "evaluate_split"]  # read_lines: UTF-8 lines; errors name the file and line


def decode_record(decode: DecodeConfig, options: InferenceOptions) -> dict:
    """How a split was decoded, as its scores record it: `mt run` rescores when this changes."""
    return {"beam": decode.beam, "alpha": decode.alpha, "length_penalty": decode.length_penalty,
            "stop": decode.stop, "precision": options.precision, "quantize": options.quantize}


def evaluate_split(exp: Experiment, cfg: ExperimentConfig, split: str, options: InferenceOptions | None = None,
                   tokenized: bool = False, lowercase: bool = False) -> dict:
    """Translate every source line of a split (raw text, nothing dropped) and score it against its
    references; the translations and scores are saved in the experiment. `tokenized`: the scores
    are `score_tokenized`'s (in the target language's Moses rules), saved as scores/SPLIT.tokenized.json."""
    from mt.translate import InferenceOptions, Translator

    options = options or InferenceOptions()
    src_lines, refs = load_split(cfg.data.sources(split))
    translator = Translator.load(exp, cfg, options)
    start = time.perf_counter()
    hyps = translator.translate(src_lines)
    seconds = time.perf_counter() - start
    scores = score_tokenized(hyps, refs, cfg.data.tgt_lang, lowercase) if tokenized else score(hyps, refs)
    result = {
        "split": split,
        **scores,
        "checkpoint": "+".join(path.name for path in translator.checkpoint_paths),
        "decode": decode_record(cfg.decode, options),
        "translate_seconds": round(seconds, 2),
    }
    write_text_atomic(exp.hyp_path(split), "".join(h + "\n" for h in hyps))
    write_json_atomic(exp.score_path(split + ".tokenized" if tokenized else split), result)
    log.info(f"{split}: {len(hyps)} sentences translated in {seconds:.1f}s; written to {exp.hyp_path(split)}")
    return result
