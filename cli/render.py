"""What `mt` shows: tables and score lines, and translations written to stdout or a file.

Results go to stdout; tables of status (the data table) go to stderr with the other status lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable

from mt import log


def count(n: int) -> str:
    """Exact below 100,000, then rounded (128k, 4.5M): keeps the data table within 80 columns."""
    if n < 100_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1e3:.0f}k"
    return f"{n / 1e6:.1f}M" if n < 1_000_000_000 else f"{n / 1e9:.1f}B"


def print_data_table(stats: dict) -> None:
    """Pairs kept and dropped per split, tokens and mean lengths: fits 80 columns (WMT sizes too)."""
    from rich import box
    from rich.table import Table

    from mt.experiment import kept_text

    table = Table(title="binarized data: pairs kept, dropped (empty, too long), tokens, mean length",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("split", "pairs", "kept", "empty", "too long", "tokens src/tgt", "len src/tgt"):
        table.add_column(column, justify="left" if column == "split" else "right", no_wrap=True)
    for split, s in stats.get("splits", stats).items():
        if not isinstance(s, dict) or "kept" not in s:
            continue
        table.add_row(split, f"{s['pairs_in']:,}", kept_text(s), f"{s['dropped']['empty']:,}",
                      f"{s['dropped']['too_long']:,}", f"{count(s['src_tokens'])}/{count(s['tgt_tokens'])}",
                      f"{s['mean_src_len']:.1f}/{s['mean_tgt_len']:.1f}")
    log.console.print(table)


def print_sections(summary: dict[str, dict]) -> None:
    """`mt info`: a two-column table per non-empty section."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, rows in summary.items():
        if not rows:
            continue
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("key", style="bold")
        table.add_column("value", overflow="fold")  # signatures are one long word: wrap, never cut
        for key, value in rows.items():
            table.add_row(str(key), str(value))
        console.print(table)


def print_scores(scores: dict, json_out: bool) -> None:
    """`mt evaluate`: one JSON object, or BLEU and chrF and their signatures."""
    if json_out:
        print(json.dumps(scores))
        return
    if "bleu_tokenized" in scores:  # never beside sacreBLEU's: another metric
        print(f"tokenized BLEU {scores['bleu_tokenized']:.2f} (Moses-tokenized text; not sacreBLEU)")
        print(scores["bleu_tokenized_signature"])
        return
    print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}")
    print(scores["bleu_signature"])
    print(scores["chrf_signature"])


def write_translations(translator, source: Iterable[str], output: Path | None, buffer: int, **options) -> None:
    """Stream translations to stdout, each group as soon as it is done, or into `output` (atomically:
    the file appears when all is written)."""
    from mt.atomic_files import atomic_path

    if output is None:
        def write(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        translator.stream(source, write, buffer, **options)
        return
    with atomic_path(output) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        translator.stream(source, lambda line: handle.write(line + "\n"), buffer, **options)
