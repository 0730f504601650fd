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

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF

from mt import log
from mt.errors import ConfigError, MtError

# ISO 639-3 and FLORES codes (zho_Hans, jpn_Jpan) of the languages sacrebleu tokenizes its own way:
# read as their base code alone, "zho" is no language to it, and Chinese was scored with 13a (BLEU ~0)
SACREBLEU_CODES = {
    "zho": "zh",
    "cmn": "zh",
    "yue": "zh",
    "wuu": "zh",
    "jpn": "ja",
    "kor": "ko",
    "zt": "zh",
}  # zt: Argos's
# scripts written without spaces between words: Moses' tokenizer leaves each sentence one word
UNSPACED = ("zh", "ja", "ko", "th", "lo", "km", "my")


def sacrebleu_code(lang: str | None) -> str:
    """A target language as sacrebleu's `trg_lang` knows it: "zh-Hant" and "zho_Hans" are "zh"."""
    code = (lang or "").replace("_", "-").split("-")[0].lower()
    return SACREBLEU_CODES.get(code, code)


def unspaced_share(lines: Sequence[str]) -> float:
    """The share of the (first 1,000) lines' letters in Chinese, Japanese or Korean script."""
    import unicodedata

    letters = [c for line in lines[:1000] for c in line if c.isalpha()]
    if not letters:
        return 0.0
    names = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")
    return sum(unicodedata.name(c, "").startswith(names) for c in letters) / len(letters)


def sacrebleu_bleu(lang: str | None, effective_order: bool = False) -> BLEU:
    """sacreBLEU's BLEU for a target language, as `sacrebleu -l xx-LANG` scores it: tok:zh for Chinese,
    Japanese's and Korean's MeCab tokenizers where sacrebleu's extras are installed (else tok:char,
    said: 13a reads a sentence without spaces as one word), 13a for every other language.
    `effective_order`: for sentence BLEU."""
    code = sacrebleu_code(lang)
    try:
        return BLEU(trg_lang=code, effective_order=effective_order)
    except RuntimeError:  # ja-mecab, ko-mecab: their libraries are sacrebleu's extras
        log.warn(
            f"BLEU into {code}: sacrebleu's tokenizer for it needs pip install 'sacrebleu[{code}]'; "
            "scored by characters (tok:char) instead"
        )
        return BLEU(tokenize="char", effective_order=effective_order)


def score(hyps: list[str], refs: list[str], lang: str | None = None, more_refs: Sequence[list[str]] = ()) -> dict:
    """Corpus BLEU and chrF of hypotheses against one reference each (and `more_refs`, other
    references of the same lines: sacrebleu's nrefs), with sacrebleu signatures; BLEU tokenized as
    sacreBLEU tokenizes target language `lang` (`sacrebleu_bleu`)."""
    streams = [refs, *more_refs]
    if any(len(hyps) != len(stream) for stream in streams):
        raise MtError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not hyps:
        raise MtError("nothing to score: no hypotheses and no references")
    if lang is None and unspaced_share(refs) > 0.5:  # 13a reads a sentence without spaces as one word
        log.warn(
            "the references are Chinese, Japanese or Korean: give their language (--lang zh, ja or ko) "
            "for sacreBLEU's tokenizer of it; 13a's BLEU of such text is near 0"
        )
    bleu, chrf = sacrebleu_bleu(lang), CHRF()
    bleu_score = bleu.corpus_score(hyps, streams)
    chrf_score = chrf.corpus_score(hyps, streams)
    return {
        "bleu": bleu_score.score,
        "chrf": chrf_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_detail": str(bleu_score),
        "sentences": len(hyps),
    }


def score_tokenized(
    hyps: list[str], refs: list[str], lang: str, lowercase: bool = False, more_refs: Sequence[list[str]] = ()
) -> dict:
    """Corpus BLEU of Moses-tokenized hypotheses and references (sacremoses, `lang`'s rules, no
    escaping), sacrebleu with tokenize="none": the tokenized BLEU papers report. Not sacreBLEU."""
    streams = [refs, *more_refs]
    if any(len(hyps) != len(stream) for stream in streams):
        raise MtError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not hyps:
        raise MtError("nothing to score: no hypotheses and no references")
    if sacrebleu_code(lang) in UNSPACED:
        raise ConfigError(
            f"--tokenized into {lang}: Moses' tokenizer does not cut a text written without spaces (each "
            "sentence would be one word, BLEU about 0); sacreBLEU's score, without --tokenized, tokenizes it"
        )
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)

    def moses(lines: list[str]) -> list[str]:
        return [tokenizer.tokenize(line, escape=False, return_str=True) for line in lines]

    bleu = BLEU(tokenize="none", lowercase=lowercase, force=True)  # force: the text is tokenized on purpose
    result = bleu.corpus_score(moses(hyps), [moses(stream) for stream in streams])
    return {
        "bleu_tokenized": result.score,
        "bleu_tokenized_signature": f"{bleu.get_signature()}|pretok:moses-{lang}",
        "bleu_tokenized_detail": str(result),
        "sentences": len(hyps),
    }
