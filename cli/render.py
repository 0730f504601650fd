"""What `mt` shows: tables and score lines, and translations written to stdout or a file.

Results go to stdout; tables of status (the data table) go to stderr with the other status lines.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from mt import log

from .errors import reader_gone


def count(n: int) -> str:
    """Exact below 100,000, then rounded (128k, 4.5M): keeps the data table within 80 columns."""
    if n < 100_000:
        return f"{n:,}"
    if n < 999_500:  # the unit by the rounded figure: 999,600 is 1.0M, not "1000k"
        return f"{n / 1e3:.0f}k"
    return f"{n / 1e6:.1f}M" if n < 999_950_000 else f"{n / 1e9:.1f}B"


def print_data_table(stats: dict) -> None:
    """Per split (a column each): pairs read = kept + dropped, dropped per reason, rows written when
    weights or segmentations repeat pairs, tokens and mean lengths. Fits 80 columns at WMT sizes,
    whatever the number of reasons. Silent with --quiet, like every status line."""
    from rich import box
    from rich.table import Table

    from mt.data import stats as data_stats

    if log.quiet:
        return
    splits = {split: s for split, s in stats.get("splits", stats).items() if isinstance(s, dict) and "kept" in s}
    reasons = list(dict.fromkeys(r for s in splits.values() for r in data_stats.shown_drops(s)))
    table = Table(
        title="binarized data: pairs read = kept + dropped", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1)
    )
    table.add_column("", no_wrap=True)
    for split in splits:
        table.add_column(split, justify="right", no_wrap=True)

    def row(label: str, cell) -> None:
        table.add_row(label, *(cell(s) for s in splits.values()))

    row("pairs read", lambda s: f"{s['pairs_in']:,}")
    row("kept", lambda s: f"{data_stats.pairs_kept(s):,}")
    row("dropped", lambda s: f"{sum(s['dropped'].values()):,}")
    for reason in reasons:  # "-": a reason the split does not count (valid/test are not cleaned)
        row(
            f"  {data_stats.reason_name(reason)}",
            lambda s: f"{s['dropped'][reason]:,}" if reason in s["dropped"] else "-",
        )
    if any(data_stats.rows_text(s) != f"{data_stats.pairs_kept(s):,}" for s in splits.values()):
        row("rows written", data_stats.rows_text)  # weights (*2) and segmentations (×3)
    row("tokens src/tgt", lambda s: f"{count(s['src_tokens'])}/{count(s['tgt_tokens'])}")
    row("mean len src/tgt", lambda s: f"{s['mean_src_len']:.1f}/{s['mean_tgt_len']:.1f}")
    log.console.print(table)


def print_sections(summary: dict[str, dict]) -> None:
    """`mt info`: a two-column table per non-empty section."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    for title, rows in summary.items():
        if not rows:
            continue
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("key", style="bold")
        table.add_column("value", overflow="fold")  # signatures are one long word: wrap, never cut
        for key, value in rows.items():  # as written: a path's [de-en] is no markup to drop
            table.add_row(Text(str(key)), Text(str(value)))
        console.print(table)


def print_scores(scores: dict, json_out: bool) -> None:
    """`mt evaluate`: one JSON object, or BLEU and chrF and their signatures."""
    if json_out:
        print(json.dumps(scores))
        return
    tokenized = "bleu_tokenized" in scores  # never beside sacreBLEU's: another metric
    if "directions" in scores:  # a multilingual experiment: a row per direction, then their mean
        width = max(len(name) for name in scores["directions"])
        header = "tokenized BLEU" if tokenized else "BLEU    chrF"
        print(f"{'direction':<{max(width, 9)}}  {header}")
        for name, each in [*scores["directions"].items(), ("average", scores)]:
            row = f"{each['bleu_tokenized']:6.2f}" if tokenized else f"{each['bleu']:6.2f}  {each['chrf']:6.2f}"
            print(f"{name:<{max(width, 9)}}  {row}")
    elif tokenized:
        print(f"tokenized BLEU {scores['bleu_tokenized']:.2f} (Moses-tokenized text; not sacreBLEU)")
    else:
        print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}")
    for key in ("bleu_tokenized_signature",) if tokenized else ("bleu_signature", "chrf_signature"):
        print(scores.get(key, "(a signature per direction: --json)"))


def write_translations(
    translator,
    source: Iterable[str],
    output: Path | None,
    buffer: int,
    options,
    output_format: str,
    total: int | None = None,
    search=None,
) -> None:
    """Stream translations (`mt.decoding.output.stream` with `options` and `output_format`, through
    `mt.text.translate.search`: sentence by sentence, as `options` ask) to stdout, each group
    as soon as it is done, or into `output` (atomically: the file appears when all is written), with a
    progress bar over the `total` input lines on stderr when it is a terminal (not with stdout, which
    the translations themselves show). `search` translates a list of lines (default
    `mt.text.translate.search`; `mt.text.markup_translate.searcher`'s for markup)."""
    from mt.atomic_files import atomic_path
    from mt.decoding.output import stream
    from mt.text.translate import search as plain  # sentence by sentence, long sentences cut (mt.text)

    search = search or plain

    if output is None:

        def write(line: str) -> None:
            with reader_gone():
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

        stream(translator, source, write, buffer, options, output_format, search)
        return
    with atomic_path(output) as tmp, _text_file(tmp, output) as handle, log.make_progress() as progress:
        task = progress.add_task("translate", total=total)  # on a terminal only (log.progress_enabled)

        def counted(lines: Iterable[str | None]) -> Iterator[str | None]:
            for line in lines:
                if line is not None:  # None: the input paused (mt.data.text_files.input_lines)
                    progress.advance(task)
                yield line

        stream(
            translator, counted(source), lambda line: handle.write(line + "\n"), buffer, options, output_format, search
        )


@contextmanager
def _text_file(tmp: Path, output: Path) -> Iterator[TextIO]:
    """`tmp` open for `output`'s UTF-8 text: gzip when its name ends in .gz, as mt reads such a name back
    (mt.data.text_files; plain text there was refused as a broken gzip file), its header naming the
    file it unpacks to rather than the temporary."""
    if not output.name.lower().endswith(".gz"):
        with open(tmp, "w", encoding="utf-8") as handle:
            yield handle
        return
    import gzip
    import io

    with open(tmp, "wb") as raw, gzip.GzipFile(output.name, "wb", fileobj=raw, mtime=0) as packed:
        with io.TextIOWrapper(packed, encoding="utf-8") as handle:
            yield handle


def write_document(
    translator,
    source: Path,
    output: Path | None,
    force: bool,
    fmt,
    options,
    auto: bool,
    retranslate: bool = False,
    encoding: str | None = None,
) -> None:
    """Translate the document `source` (`mt.documents.translate`) into `output`, or to stdout (a text
    format), with a progress bar over its units on stderr when it is a terminal."""
    from mt.documents.formats import DocumentOptions
    from mt.documents.translate import translate_file
    from mt.documents.units import TranslatorUnits

    identifier = None
    if auto:
        from mt.text.language import LanguageIdentifier, identifiable

        identifier = LanguageIdentifier(identifiable(translator.directions))
    _, target = translator.directions.resolve(options.src_lang, options.tgt_lang)
    with log.make_progress() as progress:
        task = progress.add_task("translate", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        units = TranslatorUnits(translator, options, advance, identifier=identifier)
        translated = translate_file(source, output, fmt, units, DocumentOptions(target, retranslate, encoding), force)
    if translated is not None:
        with reader_gone():
            sys.stdout.buffer.write(translated)
            sys.stdout.flush()
