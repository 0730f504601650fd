"""The lines `mt translate` writes: a stream of input lines translated as they come, in one of four
output formats (what one input line gives):

- "plain": one line, the translation;
- "scores": one line, `SCORE<TAB>TRANSLATION`;
- "nbest": `DecodeOptions.nbest` lines `LINE<TAB>SCORE<TAB>TRANSLATION`, best first, LINE counting
  input lines from 1 (an empty input line gives one line with an empty translation and score 0);
- "moses": the same n best as Moses writes them, which Marian's and fairseq users' scripts read:
  `ID ||| TRANSLATION ||| mt= SCORE ||| SCORE`, ID counting input lines from 0.

SCORE is what the search ranks by: the log-probability divided by the length penalty (beam), or
the log-probability (greedy, sampling). With alignments (`alignment_layer`), every output line gets
one more field, `<TAB>ALIGNMENT`: Pharaoh `i-j` pairs over whitespace-separated words
(`mt.decoding.alignment`); an empty input line gives an empty translation and an empty alignment.
"""

from __future__ import annotations

from typing import Callable, Iterable, Literal

from mt.config.values import coerce
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError

OutputFormat = Literal["plain", "scores", "nbest", "moses"]  # what one input line gives: module docstring


def stream(
    translator: Translator,
    lines: Iterable[str | None],
    write: Callable[[str], None],
    buffer: int = 256,
    options: DecodeOptions | None = None,
    output: OutputFormat = "plain",
    search: Callable[..., list[list[tuple]]] | None = None,
) -> int:
    """Translate lines as they come, `buffer` at a time, and what is pending whenever `lines` gives
    None (the input has paused: `mt.data.text_files.input_lines`), so that a pipe that stays open is
    answered line by line and memory stays flat on any input; write the output in input order, in
    the `output` format; returns the number of lines. `search(translator, lines, options, first_line)`
    translates (default `Translator.search`; `mt.text.translate.search`: sentence by sentence)."""
    if buffer < 1:
        raise ConfigError(f"--buffer {buffer}: must be at least 1")
    coerce(output, OutputFormat, "output")
    search = search or Translator.search
    count = 0
    pending: list[str] = []
    at_pauses = options is None or options.sampling is None  # samples depend on the batches: keep them fixed
    for line in lines:
        if line is not None:
            pending.append(line.rstrip("\r\n"))
        if pending and ((line is None and at_pauses) or len(pending) >= buffer):
            for row in format_lines(search(translator, pending, options, count), count, output):
                write(row)
            count += len(pending)
            pending = []
    if pending:
        for row in format_lines(search(translator, pending, options, count), count, output):
            write(row)
        count += len(pending)
    return count


ONE_LINE = dict.fromkeys(map(ord, "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), " ")


def format_lines(found: list[list[tuple]], first_line: int, output: OutputFormat) -> list[str]:
    """The output lines of `Translator.search`'s hypotheses for input lines from `first_line` (from 0).
    In a line of tab-separated fields a translation's tabs are spaces (a source's tab between
    sentences is copied into its translation), so that every line has its number of fields; and a
    line break between sentences (a lone CR, a form feed, U+2028, which Python's readers split at) is
    a space in every format, so that an input line gives its lines, as the tokenizer's decode does."""
    rows = []
    for offset, hyps in enumerate(found):
        hyps = [(text.translate(ONE_LINE), *rest) for text, *rest in hyps]
        if output != "moses" and (output != "plain" or len(hyps[0]) > 2):
            hyps = [(text.replace("\t", " "), *rest) for text, *rest in hyps]
        if output == "nbest":
            rows += [
                "\t".join([f"{first_line + offset + 1}", f"{score:.4f}", text, *alignment])
                for text, score, *alignment in hyps
            ]
        elif output == "moses":
            rows += [
                " ||| ".join([f"{first_line + offset}", text, f"mt= {score:.4f}", f"{score:.4f}", *alignment])
                for text, score, *alignment in hyps
            ]
        elif output == "scores":
            text, score, *alignment = hyps[0]
            rows.append("\t".join([f"{score:.4f}", text, *alignment]))
        else:
            rows.append("\t".join([hyps[0][0], *hyps[0][2:]]))
    return rows
