"""`mt evaluate`: translate a split of an experiment and score it (`mt.metrics`), saving the
translations and the scores, with how they were decoded, in the experiment.
"""

from __future__ import annotations

import time

from mt import log
from mt.atomic_files import write_json_atomic, write_text_atomic
from mt.config.schema import DecodeConfig, ExperimentConfig
from mt.data.corpus import load_split
from mt.experiment import Experiment
from mt.metrics import score, score_tokenized
from mt.translate import Translator


def decode_record(decode: DecodeConfig, precision: str = "fp32", quantize: str | None = None) -> dict:
    """How a split was decoded, as its scores record it: `mt run` rescores when this changes."""
    return {"beam": decode.beam, "alpha": decode.alpha, "length_penalty": decode.length_penalty,
            "stop": decode.stop, "precision": precision, "quantize": quantize}


def evaluate_split(exp: Experiment, cfg: ExperimentConfig, split: str, translator: Translator | None = None,
                   tokenized: bool = False, lowercase: bool = False) -> dict:
    """Translate every source line of a split (raw text, nothing dropped) and score it against its
    references; the translations and scores are saved in the experiment. `tokenized`: the scores
    are `score_tokenized`'s (in the target language's Moses rules), saved as scores/SPLIT.tokenized.json.
    `translator`: the model(s) to translate with; the experiment's decode.checkpoint when None."""
    src_lines, refs = load_split(cfg.data.sources(split))
    translator = translator or Translator.load(exp, cfg)
    start = time.perf_counter()
    hyps = translator.translate(src_lines)
    seconds = time.perf_counter() - start
    scores = score_tokenized(hyps, refs, cfg.data.tgt_lang, lowercase) if tokenized else score(hyps, refs)
    result = {
        "split": split,
        **scores,
        "checkpoint": "+".join(path.name for path in translator.checkpoint_paths),
        "decode": decode_record(cfg.decode, translator.precision, translator.quantize),
        "translate_seconds": round(seconds, 2),
    }
    write_text_atomic(exp.hyp_path(split), "".join(h + "\n" for h in hyps))
    write_json_atomic(exp.score_path(split + ".tokenized" if tokenized else split), result)
    log.info(f"{split}: {len(hyps)} sentences translated in {seconds:.1f}s; written to {exp.hyp_path(split)}")
    return result
