"""`mt export --format argos`: a trained checkpoint as Argos Translate packages, which LibreTranslate serves.

An Argos package (`.argosmodel`) is a zip of one folder, which `argostranslate.package.install_from_path`
unpacks into Argos's packages directory:

    translate-de_en/
      metadata.json          type translate, from_code/to_code and their names, versions (below)
      model/                 the CTranslate2 model of `mt export --format ctranslate2` (mt.apps.export.ctranslate2)
      sentencepiece.model    the source tokenizer: Argos encodes with it and decodes the output with it
      minisbd/de.onnx        the sentence splitter (mt.apps.export.argos_sbd): nothing downloaded at run time
      README.md              where the model came from, and how Argos's search differs from mt's

One package per trained direction: a multilingual model (data.directions) gives one per direction,
each the whole model with its own model/config.json: `add_source_bos` with the direction's tag as the
BOS token puts `<2xx>` first in every source, as mt does, so Argos needs no source prefix of its own
(it has only a target one). Argos chains the packages it has (de->en->fr) for the directions not trained.

What differs from the CTranslate2 export: the position table is extended to Argos's limits (sources
cut at 1024 tokens, translations at 256), with the rows mt computes for those positions, so that a
long input or output does not stop CTranslate2; mt itself cuts earlier (docs/exporting.md).
Argos's search is its own and a package cannot set it: beam 4 (ARGOS_BEAM_SIZE), length penalty 0.2,
unknown words replaced by the source word, at least one token, at most 256 (README.md below).
"""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

from mt.apps.export import argos_sbd, ctranslate2
from mt.apps.export.exported import Exported
from mt.errors import ConfigError, MtError
from mt.model.mapping import check_exportable
from mt.tokenizer import language_tag

PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.11.0"  # reads a bundled minisbd/ splitter (argostranslate 1.11, argos-translate-lt 1.12)
ARGOS_POSITIONS = 1024 + 2  # CTranslate2's default max_input_length, a tag and </s>; 256 decoded fit too
SUFFIX = ".argosmodel"
# Names Argos and LibreTranslate show for a language code; another code is shown as itself.
NAMES = {
    code: name
    for code, name in (
        item.split(":")
        for item in (
            "ar:Arabic az:Azerbaijani bg:Bulgarian bn:Bengali ca:Catalan cs:Czech da:Danish de:German el:Greek "
            "en:English eo:Esperanto es:Spanish et:Estonian eu:Basque fa:Persian fi:Finnish fr:French ga:Irish "
            "gl:Galician he:Hebrew hi:Hindi hu:Hungarian id:Indonesian it:Italian ja:Japanese ko:Korean "
            "lt:Lithuanian lv:Latvian ms:Malay nb:Norwegian nl:Dutch pl:Polish pt:Portuguese ro:Romanian "
            "ru:Russian sk:Slovak sl:Slovenian sq:Albanian sv:Swedish th:Thai tl:Tagalog tr:Turkish "
            "uk:Ukrainian ur:Urdu vi:Vietnamese zh:Chinese"
        ).split()
    )
}


def check_options(quantize: str | None, license: str | None) -> None:
    if license is not None:
        raise ConfigError("--license is for --format huggingface (the model card); an Argos package has none")
    ctranslate2.check_options(quantize, None)
    argos_sbd.check_onnx()


def check_model(model_config: dict[str, Any], where: str) -> None:
    check_exportable(model_config, where, "Argos Translate (CTranslate2)")


def package_name(src: str, tgt: str) -> str:
    """The package's folder and file name, as argospm names a translate package."""
    return f"translate-{src}_{tgt}"


def directions(source: Exported) -> list[tuple[str, str, str | None]]:
    """(source language, target language, the tag put first in each source or None) per package."""
    data = source.cfg.data
    if not data.multilingual:
        return [(data.src_lang, data.tgt_lang, None)]
    found = []
    for src, tgt in data.pairs():
        tag = language_tag(tgt)
        if source.src_tok.tag_id(tgt) is None:
            raise MtError(f"the source tokenizer has no piece {tag}: cannot write the {src}-{tgt} package")
        found.append((src, tgt, tag))
    return found


def writer(source: Exported, quantize: str | None, license: str | None = None) -> Callable[[Path], None]:
    """What `mt export --format argos` writes: one translate-SRC_TGT.argosmodel per trained direction."""
    src_vocab, tgt_vocab = (tok.pieces(list(range(tok.vocab_size))) for tok in (source.src_tok, source.tgt_tok))
    spec = ctranslate2.build_spec(source.model, src_vocab, tgt_vocab, positions=ARGOS_POSITIONS)
    spec.optimize(quantization=quantize)
    packages = directions(source)
    splitters = {src: argos_sbd.model_bytes(src) for src in dict.fromkeys(src for src, _, _ in packages)}

    def write(directory: Path) -> None:
        model_dir = Path(tempfile.mkdtemp(dir=directory, prefix=".model-"))
        try:
            spec.save(str(model_dir))
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            for src, tgt, tag in packages:
                _package(directory, model_dir, config, source, quantize, src, tgt, tag, splitters[src])
        finally:
            shutil.rmtree(model_dir, ignore_errors=True)

    return write


def _package(
    directory: Path,
    model_dir: Path,
    config: dict[str, Any],
    source: Exported,
    quantize: str | None,
    src: str,
    tgt: str,
    tag: str | None,
    splitter: bytes,
) -> None:
    """directory/translate-SRC_TGT.argosmodel: the zip of one folder of that name."""
    name = package_name(src, tgt)
    if tag is not None:  # the direction's tag first in every source, as mt puts it (mt.decoding.directions)
        config = {**config, "add_source_bos": True, "bos_token": tag}
    metadata = {
        "package_version": PACKAGE_VERSION,
        "argos_version": ARGOS_VERSION,
        "from_code": src,
        "from_name": NAMES.get(src, src),
        "to_code": tgt,
        "to_name": NAMES.get(tgt, tgt),
        "type": "translate",
        "links": [],
    }
    files: dict[str, bytes] = {
        "metadata.json": (json.dumps(metadata, indent=4, ensure_ascii=False) + "\n").encode(),
        "model/config.json": (json.dumps(config, indent=4, ensure_ascii=False) + "\n").encode(),
        "sentencepiece.model": source.src_tok.proto,
        f"minisbd/{src}.onnx": splitter,
        # ASCII (other characters as references): Argos reads it in the system's encoding, cp1252 on Windows
        "README.md": readme(source, quantize, src, tgt, tag).encode("ascii", "xmlcharrefreplace"),
    }
    with zipfile.ZipFile(directory / f"{name}{SUFFIX}", "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(model_dir.iterdir()):
            if path.name != "config.json":
                archive.write(path, f"{name}/model/{path.name}")
        for inner, data in files.items():
            archive.writestr(f"{name}/{inner}", data)


def readme(source: Exported, quantize: str | None, src: str, tgt: str, tag: str | None) -> str:
    """README.md of a package: provenance, how to install and serve it, and Argos's search beside mt's."""
    d = source.cfg.decode
    name = package_name(src, tgt)
    tag_line = (
        f"\nEvery source begins with the tag {tag} (model/config.json: add_source_bos), as in mt.\n" if tag else ""
    )
    not_joint = (
        ""
        if source.joint
        else "\nmt trained separate source and target tokenizers; Argos reads one SentencePiece model, so the "
        "output pieces are turned into text by the source model, which spells every piece the same way.\n"
    )
    repeat = (
        f"\n- mt's repetition guard (decode.no_repeat_ngram {d.no_repeat_ngram}: no n-gram twice) has no Argos"
        " setting: Argos's translations may repeat where mt's do not."
        if d.no_repeat_ngram
        else ""
    )
    return f"""# {NAMES.get(src, src)} to {NAMES.get(tgt, tgt)} ({src}-{tgt}), trained with mt

Exported by `mt export --format argos` on {datetime.date.today().isoformat()} from
{source.path} (step {source.state.get("step", "?")}) of the experiment {source.exp.root};
weights {quantize or "float32"}. A Transformer (CTranslate2 model in model/) with its SentencePiece
model (sentencepiece.model).
{tag_line}{not_joint}
Install and translate (pip install argostranslate, or argos-translate-lt as LibreTranslate does):

    import argostranslate.package, argostranslate.translate
    argostranslate.package.install_from_path("{name}{SUFFIX}")
    print(argostranslate.translate.translate("...", "{src}", "{tgt}"))

Serve with LibreTranslate: `libretranslate --load-only {src},{tgt}` once the package is installed
(offline: see mt's docs/exporting.md).

## Sentences

Argos translates each line sentence by sentence. minisbd/{src}.onnx is the splitter (MiniSBD's format,
so nothing is downloaded): a sentence ends after . ! ? ... followed by a space and no lowercase letter,
and after the CJK full stop, exclamation and question marks (U+3002, U+FF01, U+FF1F). MiniSBD's own model for the language may replace the file (same name).

## Search: Argos's settings beside mt's

mt translates with beam {d.beam}, a {d.length_penalty} length penalty (alpha {d.alpha}), at most
{d.max_len_a:g} x source tokens + {d.max_len_b} tokens. Argos's search is set by Argos, not by the package:

- beam: ARGOS_BEAM_SIZE (default 4; LibreTranslate asks for as many hypotheses as alternatives + 1).
  `ARGOS_BEAM_SIZE={d.beam}` gives mt's beam width; `ARGOS_BEAM_SIZE=1` is greedy, where Argos's
  output is mt's token for token (mt's tests check it).
- length penalty: 0.2, fixed (CTranslate2's score / length^0.2); mt's: {d.length_penalty}, alpha {d.alpha}.
- length: at least 1 token and at most 256 (CTranslate2's defaults); mt allows an empty translation and
  stops at its own limit above.
- an unknown word (<unk>) is replaced by the source word it attends to most; mt prints it as U+2047 (a double
  question mark).
- Argos turns every "_" of the output into a space; LibreTranslate then matches the source's final
  punctuation and capitalisation.{repeat}
"""
