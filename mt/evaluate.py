"""Scores with sacrebleu: corpus BLEU (the paper's metric, Sec. 6.1) and chrF, each with its signature.

The paper reports tokenized BLEU; we score detokenized text with sacrebleu's defaults (13a
tokenizer, one reference), so numbers are comparable across papers and carry a signature that
says how they were computed (Post, 2018). For the small-data literature (Multi30k papers, fairseq's
BLEU4 on pre-tokenized text), `score_tokenized` is BLEU on Moses-tokenized text: its keys are
`bleu_tokenized*`, its signature says `tok:none|pretok:moses-LANG`, and it is never filed with sacreBLEU's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sacrebleu.metrics import BLEU, CHRF

from mt import log
from mt.config import DecodeConfig, ExperimentConfig
from mt.corpus import load_split, read_lines
from mt.errors import MtError
from mt.experiment import Experiment
from mt.atomic_files import write_json_atomic, write_text_atomic

if TYPE_CHECKING:
    from mt.translate import InferenceOptions  # imported when needed: scoring files needs no torch

__all__ = ["read_lines", "score", "score_tokenized", "decode_record", "evaluate_split"]  # read_lines: UTF-8 lines; errors name the file and line


def score(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF of hypotheses against one reference each, with sacrebleu signatures."""
    if len(hyps) != len(refs):
        raise MtError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not hyps:
        raise MtError("nothing to score: no hypotheses and no references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hyps, [refs])
    chrf_score = chrf.corpus_score(hyps, [refs])
    return {
        "bleu": bleu_score.score,
        "chrf": chrf_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_detail": str(bleu_score),
        "sentences": len(hyps),
    }


def score_tokenized(hyps: list[str], refs: list[str], lang: str, lowercase: bool = False) -> dict:
    """Corpus BLEU of Moses-tokenized hypotheses and references (sacremoses, `lang`'s rules, no
    escaping), sacrebleu with tokenize="none": the tokenized BLEU papers report. Not sacreBLEU."""
    if len(hyps) != len(refs):
        raise MtError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not hyps:
        raise MtError("nothing to score: no hypotheses and no references")
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)

    def moses(lines: list[str]) -> list[str]:
        return [tokenizer.tokenize(line, escape=False, return_str=True) for line in lines]

    bleu = BLEU(tokenize="none", lowercase=lowercase, force=True)  # force: the text is tokenized on purpose
    result = bleu.corpus_score(moses(hyps), [moses(refs)])
    return {
        "bleu_tokenized": result.score,
        "bleu_tokenized_signature": f"{bleu.get_signature()}|pretok:moses-{lang}",
        "bleu_tokenized_detail": str(result),
        "sentences": len(hyps),
    }


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
