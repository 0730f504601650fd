"""`mt export --format ctranslate2`: a trained checkpoint as a CTranslate2 model directory.

The model maps onto CTranslate2's spec as mt.model.ctranslate2_spec says (the `ctranslate2` package:
the `export` extra, `pip install -e '.[export]'`); this module writes the directory around it.
The experiment's lexical shortlist, when it has one (`mt shortlist`), becomes vmap.txt, CTranslate2's
vocabulary map: a line of the frequent target pieces after an empty key, then each source piece and
its candidates, which `translate_batch(use_vmap=True)` reads as mt's `--shortlist` does.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Callable

from mt.apps.export.exported import Exported
from mt.config.schema import ExperimentConfig
from mt.data.shortlist import VMAP_FILE, vocabulary_map
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.model.ctranslate2_spec import build_spec
from mt.model.mapping import check_exportable
from mt.tokenizer import Tokenizer, language_tag

QUANTIZE = ("int8", "int8_float32", "float16")  # None: float32 weights


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise MtError(
            "--format ctranslate2 needs the ctranslate2 package: pip install 'ctranslate2>=4' "
            "(in mt's checkout: pip install -e '.[export]')"
        ) from None
    return ctranslate2


def _pieces(tokenizer: Tokenizer) -> list[str]:
    return tokenizer.pieces(list(range(tokenizer.vocab_size)))


def check_options(quantize: str | None, license: str | None) -> None:
    if quantize is not None and quantize not in QUANTIZE:
        raise ConfigError(f"--quantize {quantize!r}: expected {', '.join(QUANTIZE)} (or none for float32)")
    if license is not None:
        raise ConfigError("--license is for --format huggingface (the model card); a CTranslate2 model has none")
    _ctranslate2()


def check_model(model_config: dict[str, Any], where: str) -> None:
    check_exportable(model_config, where, "CTranslate2")


def writer(source: Exported, quantize: str | None, license: str | None = None) -> Callable[[Path], None]:
    """What `mt export --format ctranslate2` writes: model.bin and its vocabularies, the SentencePiece
    model(s), and README.txt."""
    spec = build_spec(source.model, _pieces(source.src_tok), _pieces(source.tgt_tok))
    spec.optimize(quantization=quantize)
    spm_files = (
        {"spm.model": source.src_tok}
        if source.joint
        else {"spm.src.model": source.src_tok, "spm.tgt.model": source.tgt_tok}
    )

    vmap = vocabulary_map(source.exp, source.src_tok, source.tgt_tok)

    def write(directory: Path) -> None:
        spec.save(str(directory))
        for name, tokenizer in spm_files.items():
            (directory / name).write_bytes(tokenizer.proto)
        if vmap is not None:
            (directory / VMAP_FILE).write_text(vmap, encoding="utf-8")
        (directory / "README.txt").write_text(
            readme(
                source.exp,
                source.cfg,
                source.path,
                source.state,
                quantize,
                list(spm_files),
                source.model.max_positions,
                vmap is not None,
            ),
            encoding="utf-8",
        )

    return write


def readme(
    exp: Experiment,
    cfg: ExperimentConfig,
    path: Path,
    state: dict,
    quantize: str | None,
    spm_files: list[str],
    max_positions: int,
    vmap: bool = False,
) -> str:
    """README.txt: where the model came from, how to run it, and the settings that match `mt translate`."""
    d = cfg.decode
    src_spm, tgt_spm = spm_files[0], spm_files[-1]
    penalty_note = {
        "length": f"mt's decode.length_penalty is length: length_penalty={d.alpha} is the same penalty.",
        "none": "mt's decode.length_penalty is none: length_penalty=0 is the same.",
        "gnmt": (
            f"mt's decode.length_penalty is gnmt ((5+|Y|)/6)^alpha, which CTranslate2 does not have: "
            f"length_penalty={d.alpha} is |Y|^alpha, as `mt translate --length-penalty length`."
        ),
    }[d.length_penalty]
    alpha = 0 if d.length_penalty == "none" or d.beam == 1 else d.alpha  # greedy: mt's score is the raw sum
    # mt's repetition guard (decode.no_repeat_ngram) is CTranslate2's no_repeat_ngram_size, the same ban
    repeat = f",\n        no_repeat_ngram_size={d.no_repeat_ngram}" if d.no_repeat_ngram else ""
    languages, encode, tags = _languages(cfg, src_spm, tgt_spm)
    vmap_note = (
        f"\n{VMAP_FILE} is mt's lexical shortlist (`mt translate --shortlist`): with use_vmap=True in\n"
        "translate_batch, each batch's decoder scores only its source tokens' likely translations and the\n"
        "frequent words: faster, approximate (docs/translating.md in mt).\n"
    )
    stop_note = (
        "patience=1 (the default) is mt's decode.stop early: stop once beam_size hypotheses have finished."
        if d.stop == "early"
        else "mt's decode.stop is exact, which CTranslate2 does not "
        "have: patience=1 (the default) is `mt translate --stop early`."
    )
    return f"""CTranslate2 model exported by `mt export` on {datetime.date.today().isoformat()}
experiment: {exp.root}
checkpoint: {path} (step {state.get("step", "?")})
weights:    {quantize or "float32"}
{languages}

Run it from this directory (pip install ctranslate2 sentencepiece):

    import ctranslate2, sentencepiece as spm
    src_sp = spm.SentencePieceProcessor(model_file="{src_spm}")
    tgt_sp = spm.SentencePieceProcessor(model_file="{tgt_spm}")
    translator = ctranslate2.Translator(".", device="cpu")
    lines = ["..."]
    {encode}
    limit = min({max_positions - 1}, max(int({d.max_len_a:g} * len(p) + {d.max_len_b}) for p in pieces))
    results = translator.translate_batch(
        pieces, beam_size={d.beam}, length_penalty={alpha}, return_end_token=True,
        min_decoding_length=0, max_decoding_length=limit, max_input_length={max_positions}{repeat})
    print([tgt_sp.decode(r.hypotheses[0]).strip() for r in results])
{vmap_note if vmap else ""}
The model appends </s> to each source itself (config.json: add_source_eos); give it the pieces only.
{tags}
To translate as `mt translate` does ({"greedy" if d.beam == 1 else f"beam {d.beam}"}, docs/exporting.md in mt):
- {penalty_note}
- return_end_token=True: returns the </s> (it decodes to nothing), which tells a translation that
  ended from one cut at max_decoding_length. mt counts </s> in |Y|; so does CTranslate2 4.8.5, with
  or without this flag (its scores are the same either way).
- min_decoding_length=0: CTranslate2's default 1 forbids an empty translation; mt allows one.
- max_decoding_length: mt allows int({d.max_len_a:g} * source pieces + {d.max_len_b}) tokens per sentence
  (</s> included, at most {max_positions - 1}), then forces </s>; CTranslate2 takes one number per call
  (`limit` above: the batch's longest) and ends hypotheses there without </s>. Translations that
  end before the limit are the same; to match mt's limit too, translate equally long sources together.
- {stop_note}
- max_input_length={max_positions}: mt cuts sources to {max_positions - 1} pieces + </s>; the position table ends there.
- translate_batch translates what it is given as one segment. `mt translate` cuts each line into
  sentences (a long one at clauses), leaves blank lines blank, copies a text without letters (12:45)
  or in a script the model cannot read, and reads a sentence in capitals in the casing the model
  learned: do the same before translate_batch, one sentence a segment.
"""


def _languages(cfg: ExperimentConfig, src_spm: str, tgt_spm: str) -> tuple[str, str, str]:
    """The README's lines on the languages, its encoding line, and a multilingual model's note."""
    languages, encode, tags = (
        f"source:     {cfg.data.src_lang}, SentencePiece model {src_spm}\ntarget:     "
        f"{cfg.data.tgt_lang}, SentencePiece model {tgt_spm}",
        "pieces = [[src_sp.id_to_piece(i) for i in ids] for ids in src_sp.encode(lines)]  # <unk> as vmap.txt names it",
        "",
    )
    if cfg.data.multilingual:  # one model, several directions: the first source piece names the target
        first = cfg.data.pairs()[0][1]
        languages = (
            f"directions: {', '.join(cfg.data.directions)} (trained), SentencePiece model {src_spm}\n"
            f"target language tokens (the first source piece asks for the target): "
            + ", ".join(f"{language_tag(lang)} {lang}" for lang in dict.fromkeys(t for _, t in cfg.data.pairs()))
        )
        encode = (
            f'pieces = [["{language_tag(first)}"] + [src_sp.id_to_piece(i) for i in ids] for ids in src_sp.encode(lines)]'
            f"  # into {first}"
        )
        tags = (
            "\nA multilingual model: put the target language's token first in every source, as above; "
            "a direction\nnot among those trained is zero-shot (it translates, less well).\n"
        )
    return languages, encode, tags
