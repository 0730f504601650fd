"""`mt translate`: lines from stdin or a file to their translations on stdout or a file, as they come."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.atomic_files import check_output, same_file
from mt.decoding.options import SEGMENT_TOKENS, DecodeOptions
from mt.errors import ConfigError

from . import render
from .options import (
    Checkpoints,
    Device,
    Exp,
    Force,
    Precision,
    Quantize,
    Sample,
    Seed,
    Temperature,
    Threads,
    TopK,
    TopP,
    decode_flags,
    examples,
    given_once,
    sampling_of,
    single,
)

EXAMPLES = examples(
    'echo "Ein Satz." | mt translate --exp exp/de-en',
    "mt translate --exp exp/de-en --input news.de --output news.en --beam 5 --checkpoint average",
)


@decode_flags()
def translate(
    exp: Exp,
    decode: DecodeOptions,
    inputs: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--input", "-i", metavar="PATH", callback=given_once, help="Read this file instead of stdin (- is stdin)."
        ),
    ] = None,
    outputs: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            callback=given_once,
            help="Write this file instead of stdout (- is stdout); gzip when its name ends in .gz.",
        ),
    ] = None,
    force: Force = False,
    buffer: Annotated[
        int,
        typer.Option(
            help="Lines translated together at most (from a pipe or terminal, what has arrived is translated whenever the input pauses; with --sample, only in calls of this many lines, so that the samples do not depend on the pauses)."
        ),
    ] = 256,
    checkpoint: Checkpoints = None,
    nbest: Annotated[
        int, typer.Option(help="Write the K best: LINE<TAB>SCORE<TAB>TRANSLATION per line, K lines per input.")
    ] = 0,
    nbest_format: Annotated[
        str,
        typer.Option(
            metavar="tsv|moses",
            help="--nbest's lines: tsv (LINE<TAB>SCORE<TAB>TRANSLATION, LINE from 1) or moses (ID ||| TRANSLATION ||| mt= SCORE ||| SCORE, ID from 0).",
        ),
    ] = "tsv",
    scores: Annotated[bool, typer.Option(help="Write SCORE<TAB>TRANSLATION.")] = False,
    sample: Sample = False,
    temperature: Temperature = 1.0,
    top_k: TopK = 0,
    top_p: TopP = 1.0,
    seed: Seed = 1,
    alignments: Annotated[
        bool,
        typer.Option(
            help="Append <TAB>ALIGNMENT to each output line: Pharaoh i-j pairs over whitespace-separated words (source word i, output word j, from 0), each output word aligned where its subwords attend most (head-averaged cross-attention)."
        ),
    ] = False,
    alignment_layer: Annotated[
        Optional[int], typer.Option(help="Decoder layer (1 = first) for --alignments; default the last.")
    ] = None,
    constraints: Annotated[
        bool,
        typer.Option(
            help="Each input line is SOURCE<TAB>PHRASE<TAB>...: every translation contains each target phrase (lexically constrained beam search)."
        ),
    ] = False,
    src_lang: Annotated[
        Optional[str],
        typer.Option(
            help="The input's language (a multilingual experiment: with --tgt-lang, the direction); auto: each line's is identified among the model's sources (lingua), and a line in a language the model cannot read is not translated (an empty output line and a warning)."
        ),
    ] = None,
    tgt_lang: Annotated[
        Optional[str], typer.Option(help="The language to translate into (a multilingual experiment's <2xx> token).")
    ] = None,
    pivot: Annotated[
        Optional[str],
        typer.Option(
            help="Translate into this language first, then from it into --tgt-lang (for a direction the model was not trained on)."
        ),
    ] = None,
    split_sentences: Annotated[
        bool,
        typer.Option(
            help="Translate each line sentence by sentence and join the translations with the line's own spaces (plain and --scores output; with --nbest, --alignments or --constraints each line is one segment). Off: each line is one segment."
        ),
    ] = True,
    segment_tokens: Annotated[
        int,
        typer.Option(
            help="A sentence (or, with --no-split-sentences, a line) of more source tokens is cut at , ; : then at spaces and translated in pieces: bounds the time and the output of a long line."
        ),
    ] = SEGMENT_TOKENS,
    recase: Annotated[
        bool,
        typer.Option(
            help="A sentence in capitals, in title case or all in lower case is read in the casing the model learned (each word as its vocabulary writes it best), and one in capitals is translated into capitals; models trained on sentence-case text otherwise break down on it. Off: every sentence is read as it is written."
        ),
    ] = True,
    text_format: Annotated[
        Optional[str],
        typer.Option(
            "--format",
            metavar="FORMAT",
            help='Lines (stdin or a file of another extension): text (plain), html or xml: each line a markup fragment; the text outside the tags is translated sentence by sentence and the inline tags (b, i, a, span, br, comments) are placed around the aligned target words; script, style, code, pre, translate="no" and class="notranslate" are kept as they are. Documents (--input FILE, the format by its extension unless named here): txt, html, docx, xliff, po, srt, vtt, md (docs/translating.md, Documents).',
        ),
    ] = None,
    retranslate: Annotated[
        bool,
        typer.Option(
            help="XLIFF and PO documents: translate again the units that already have a translation (else kept)."
        ),
    ] = False,
    encoding: Annotated[
        Optional[str],
        typer.Option(
            metavar="NAME",
            help="The input's text encoding (cp1250, latin-1, shift_jis...), where it is not UTF-8: read in it, no guess. A text document is written back in it; translated lines are UTF-8.",
        ),
    ] = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate lines from stdin (or --input) to stdout (or --output), one output line per input line.

    Input is raw text: mt tokenizes and detokenizes, and translates a line of several sentences
    sentence by sentence (--no-split-sentences: whole)."""
    from mt.data.text_files import check_input, count_lines, input_lines, is_regular
    from mt.experiment.config import read_experiment
    from mt.hardware import set_threads

    input, output = single(inputs), single(outputs)
    if output is not None and str(output) == "-":  # as --input -: the standard stream, not a file named "-"
        output = None
    if output is not None and input is not None and same_file(output, input):  # --force would replace the text
        raise ConfigError(f"--output {output}: is the input; write the translation to another file")
    check_output_flags(output, force, nbest, nbest_format, alignments, alignment_layer, scores)
    document = document_format(input, text_format)
    whole = [
        name
        for name, on in (("--nbest", nbest > 1), ("--alignments", alignments), ("--constraints", constraints))
        if on
    ]
    if segment_tokens != SEGMENT_TOKENS and whole:
        raise ConfigError(
            f"--segment-tokens cuts long sentences; with {whole[0]} each line is one segment, searched whole"
        )
    if retranslate and (document is None or document.name not in ("xliff", "po")):
        raise ConfigError("--retranslate is for XLIFF and PO documents (their units already translated)")
    line_outputs = [
        name
        for name, on in (
            ("--nbest", nbest),
            ("--scores", scores),
            ("--alignments", alignments),
            ("--constraints", constraints),
        )
        if on
    ]
    if document is not None and line_outputs:
        if document.name != "txt" or text_format is not None:
            raise ConfigError(
                f"a {document.name} document is written back as a {document.name} document: not with {line_outputs[0]}"
            )
        document = None  # a .txt file with line outputs asked for: its lines, as any other file's
    if document is None:
        text_format = text_format or "text"
        check_format(text_format, nbest, alignments, constraints)
    encoding = check_encoding(encoding, document)
    auto = (src_lang or "").lower() == "auto"
    src_lang = None if auto else src_lang  # a multilingual model's tag is its target's: the source steers nothing
    options = replace(
        decode,
        nbest=max(nbest, 1),
        sampling=sampling_of(sample, temperature, top_k, top_p, seed),
        constraints=constraints,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        pivot=pivot,
        sentences=split_sentences and not nbest,  # an n-best list is of the whole line, even of one (--nbest 1)
        segment_tokens=segment_tokens,
        recase=recase,
    )
    experiment, cfg = read_experiment(exp)
    # the languages as the model spells them: "DE", "de-DE" are its "de" (as `mt serve` reads a request's)
    from mt.decoding.directions import spelled

    known = set(cfg.data.languages())
    src_lang, tgt_lang, pivot = (spelled(code, known) for code in (src_lang, tgt_lang, pivot))
    options = replace(options, src_lang=src_lang, tgt_lang=tgt_lang, pivot=pivot)
    check_input(input)
    if document is not None and document.binary and output is None:  # before the model loads, as the others
        raise ConfigError(f"{input}: a {document.name} document is not text; name the file to write with --output")
    # torch comes with these: a mistyped flag, experiment or input is answered before its import, in a
    # fraction of the time
    from mt.decoding.alignment import check_layer
    from mt.decoding.translator import Translator
    from mt.text.markup_translate import searcher

    def loaded() -> Translator:
        """The model, and the direction (and pivot) asked checked against it: one line, before reading."""
        set_threads(threads)
        translator = Translator.load(experiment, cfg, checkpoint, device, precision, quantize)
        resolved = translator.directions.resolve(src_lang, tgt_lang)
        if pivot is not None:
            replace(options, src_lang=resolved[0], tgt_lang=resolved[1])  # made to be checked: a third language
            translator.directions.check_pivot(src_lang, tgt_lang, pivot)
        # CTranslate2 asked for (the flag or decode.engine) where it cannot decode plain text as mt
        # would: refused here, not at the first line it searches, after the lines before were written
        # (a line with an address is aligned as markup is, by `auto`'s rule, never refused)
        from mt.decoding.engine import refused

        plain = text_format == "text" if document is None else document.name == "txt"
        if plain and (why := refused(translator, options.resolved(translator.decode_cfg))) is not None:
            raise ConfigError(why)
        return translator

    if document is not None:
        assert input is not None
        translator = loaded()
        render.write_document(translator, input, output, force, document, options, auto, retranslate, encoding)
        return
    source = input_lines(input, encoding or "utf-8")
    translator = loaded()
    search = searcher(text_format)
    if auto:
        from mt.search.constrained import split_constrained_line
        from mt.text.language import LanguageIdentifier, auto_search, identifiable
        from mt.text.markup import language_text

        identifier = LanguageIdentifier(identifiable(translator.directions))
        target = translator.directions.resolve(src_lang, tgt_lang)[1]

        def source_of(line: str) -> str:  # SOURCE<TAB>PHRASE...: the phrases are in the target language
            return split_constrained_line(line)[0] if constraints else line

        search = auto_search(
            search,
            identifier,
            target,
            # warns of a zero-shot direction (under a pivot, each language's lines are checked as they pivot)
            (lambda language: translator.directions.tag(language, target)) if pivot is None else (lambda _: None),
            lambda line: language_text(source_of(line), text_format),  # markup: its words, not its tags
            source_of,
            sentences=text_format == "text" and split_sentences and not constraints,
        )
    if alignments:
        options = replace(options, alignment_layer=check_layer(translator.model, alignment_layer, "--alignment-layer"))
    # the progress bar's total, where there is one: not from a pipe, which is read once
    total = count_lines(str(input)) if is_regular(input) and output is not None else None
    from mt.text.markup import MarkupError

    try:
        render.write_translations(
            translator,
            source,
            output,
            buffer,
            options,
            ("moses" if nbest_format == "moses" else "nbest") if nbest else "scores" if scores else "plain",
            total,
            search,
        )
    except MarkupError as exc:  # a line that does not parse: named FILE:LINE, as the readers name theirs
        if exc.line is None:
            raise
        name = "<stdin>" if input is None or str(input) == "-" else input
        raise MarkupError(f"{name}:{exc.line}: {exc.reason}") from None


def document_format(input: Path | None, fmt: str | None):
    """The document format `--input` is translated as (--format's, else its extension's), or None for
    lines: --format text, html or xml translates lines, except that html names the document format for
    a file with an html extension."""
    from mt.documents.formats import FORMATS, by_extension
    from mt.text.markup import FORMATS as LINE_FORMATS

    path = input if input is not None and str(input) != "-" else None
    if fmt is None:
        return by_extension(path) if path is not None else None
    if fmt in LINE_FORMATS:
        found = by_extension(path) if path is not None else None
        return found if found is not None and found.name == fmt else None
    if fmt not in FORMATS:
        raise ConfigError(
            f"--format {fmt}: expected {', '.join(LINE_FORMATS)} (lines) or {', '.join(FORMATS)} (documents)"
        )
    if path is None:
        raise ConfigError(f"--format {fmt}: a document is read from a file; name it with --input")
    return FORMATS[fmt]


def check_format(fmt: str, nbest: int, alignments: bool, constraints: bool) -> None:
    """--format's value, and the flags markup does not go with, refused before the model is loaded."""
    from mt.text.markup import FORMATS

    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: expected text, html or xml")
    taken = [
        name for name, on in (("--nbest", nbest), ("--alignments", alignments), ("--constraints", constraints)) if on
    ]
    if fmt != "text" and taken:
        raise ConfigError(f"--format {fmt} writes one translated fragment a line: not with {taken[0]}")


def check_encoding(name: str | None, document) -> str | None:
    """--encoding's codec (Python's name for it), refused before the model is loaded where it cannot
    apply: a name Python does not know, a codec that is not for text, a binary document (its format
    says its own), or lines in a codec whose line breaks are not the byte b"\\n" (UTF-16's)."""
    import codecs

    if name is None:
        return None
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise ConfigError(f"--encoding {name}: not an encoding Python knows (cp1250, latin-1, shift_jis...)") from None
    try:
        text = info._is_text_encoding and "\n".encode(info.name)  # base64, rot13: codecs, but not of text
    except UnicodeError:  # undefined, punycode
        text = False
    if not text:
        raise ConfigError(f"--encoding {name}: not a text encoding")
    if document is not None and document.binary:
        raise ConfigError(f"--encoding {name}: a {document.name} document says its own encoding")
    if document is None and info.name == "utf-8-sig":  # the lines' reader leaves UTF-8's mark out
        return "utf-8"
    if document is None and "\n".encode(info.name) != b"\n":
        raise ConfigError(
            f"--encoding {info.name}: lines are cut at the byte of a line break, which {info.name} writes "
            f"otherwise; convert the input to UTF-8 (iconv -f {info.name} -t utf-8), or give it as a .txt document"
        )
    return info.name


def check_output_flags(
    output: Path | None,
    force: bool,
    nbest: int,
    nbest_format: str,
    alignments: bool,
    alignment_layer: int | None,
    scores: bool = False,
) -> None:
    """The output flags that cannot go together, refused before the model is loaded."""
    if alignment_layer is not None and not alignments:
        raise ConfigError("--alignment-layer goes with --alignments")
    if scores and nbest:
        raise ConfigError("--scores goes without --nbest: n-best lines carry each translation's score already")
    if nbest < 0:
        raise ConfigError(f"--nbest {nbest}: must be 0 (one translation a line) or more")
    if nbest_format not in ("tsv", "moses"):
        raise ConfigError(f"--nbest-format {nbest_format}: expected tsv or moses")
    if nbest_format != "tsv" and not nbest:
        raise ConfigError("--nbest-format goes with --nbest K")
    if output is not None:
        check_output(output, force)
    elif force:  # it would say "replaced" of nothing: stdout is no file
        raise ConfigError("--force goes with --output FILE (it replaces that file)")
