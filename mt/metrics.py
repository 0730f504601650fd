"""Scores with sacrebleu: corpus BLEU (the paper's metric, Sec. 6.1) and chrF, each with its signature.

The paper reports tokenized BLEU; we score detokenized text with sacrebleu's defaults (13a
tokenizer, zh for Chinese, MeCab's for Japanese and Korean as `sacrebleu -l` picks them; one
reference), so numbers are comparable across papers and carry a signature that
says how they were computed (Post, 2018). For the small-data literature (Multi30k papers, fairseq's
BLEU4 on pre-tokenized text), `score_tokenized` is BLEU on Moses-tokenized text: its keys are
`bleu_tokenized*`, its signature says `tok:none` and ends in `|pretok:moses-LANG`, and it is never filed
with sacreBLEU's.
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF

from mt import log
from mt.errors import MtError


def sacrebleu_bleu(lang: str | None, effective_order: bool = False) -> BLEU:
    """sacreBLEU's BLEU for a target language, as `sacrebleu -l xx-LANG` scores it: tok:zh for Chinese,
    Japanese's and Korean's MeCab tokenizers where sacrebleu's extras are installed (else tok:char,
    said: 13a reads a sentence without spaces as one word), 13a for every other language.
    `effective_order`: for sentence BLEU."""
    code = (lang or "").split("-")[0].split("_")[0].lower()
    try:
        return BLEU(trg_lang=code, effective_order=effective_order)
    except RuntimeError:  # ja-mecab, ko-mecab: their libraries are sacrebleu's extras
        log.warn(
            f"BLEU into {code}: sacrebleu's tokenizer for it needs pip install 'sacrebleu[{code}]'; "
            "scored by characters (tok:char) instead"
        )
        return BLEU(tokenize="char", effective_order=effective_order)


def score(hyps: list[str], refs: list[str], lang: str | None = None) -> dict:
    """Corpus BLEU and chrF of hypotheses against one reference each, with sacrebleu signatures; BLEU
    tokenized as sacreBLEU tokenizes target language `lang` (`sacrebleu_bleu`)."""
    if len(hyps) != len(refs):
        raise MtError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not hyps:
        raise MtError("nothing to score: no hypotheses and no references")
    bleu, chrf = sacrebleu_bleu(lang), CHRF()
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
