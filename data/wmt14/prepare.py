"""Write WMT14 EN-DE (the paper's corpus, Sec. 5.1) as plain text: data/wmt14/{train,valid,test}.{de,en}.

    python data/wmt14/prepare.py                # the Hugging Face hub: datasets.load_dataset("wmt14", "de-en")
    python data/wmt14/prepare.py --from PATH    # a local copy, no network

PATH is either
  - a directory written by DatasetDict.save_to_disk, with splits train, validation, test; or
  - a directory holding one data file per split, named train / validation / test with the extension
    .jsonl, .json, .parquet or .csv (e.g. train.parquet, validation.parquet, test.parquet).
Records are {"translation": {"de": ..., "en": ...}} (the hub's layout) or flat {"de": ..., "en": ...}.

Splits map as on the hub: train (4.5M pairs), validation = newstest2013, test = newstest2014.
Line i of X.de translates line i of X.en, so a line break inside a sentence becomes a space.
Outputs are staged beside their final names and moved into place only once all six are written. An
existing file with the same content is left alone (up to date, as data/multi30k/prepare.py does);
one that differs is replaced only with --force. The output folder is created only once the input
has loaded.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

HUB_NAME, HUB_CONFIG = "wmt14", "de-en"
LANGS = ("de", "en")
SPLITS = {"train": "train", "validation": "valid", "test": "test"}  # dataset split -> output name
DATA_FILE_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
BATCH_ROWS = 10_000


class PrepareError(Exception):
    """A failure the input caused; main() prints it as one line and exits 1."""


def say(message: str) -> None:
    print(message, file=sys.stderr)


def new_progress() -> Progress:
    """A per-split record bar on stderr, silent when stderr is not a terminal (logs, tests)."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty(),
    )


# ---------------------------------------------------------------------------------------------
# Loading


def split_files(directory: Path) -> dict[str, str] | None:
    """{split: data file} when the directory holds one data file per split, else None."""
    found = {}
    for split in SPLITS:
        candidates = [directory / f"{split}{ext}" for ext in DATA_FILE_FORMATS]
        matches = [path for path in candidates if path.is_file()]
        if len(matches) > 1:
            raise PrepareError(f"{directory}: several data files for {split} ({', '.join(m.name for m in matches)})")
        if matches:
            found[split] = str(matches[0])
    return found or None


def load(source: str | os.PathLike | None, cache_dir: str | None = None) -> Any:
    """The DatasetDict from the hub, a save_to_disk directory or per-split data files."""
    import datasets  # slow to import: only once there is work to do

    if source is None:
        try:
            return datasets.load_dataset(HUB_NAME, HUB_CONFIG, cache_dir=cache_dir)
        except Exception as exc:  # network, hub or cache trouble: one line, and the way round it
            raise PrepareError(
                f"cannot load {HUB_NAME} {HUB_CONFIG} from the hub ({type(exc).__name__}: {exc}); "
                "pass --from PATH for a local copy"
            ) from None
    path = Path(source)
    if not path.is_dir():
        raise PrepareError(f"{path}: not a directory (--from wants a save_to_disk folder or per-split data files)")
    files = split_files(path)
    try:
        if files is None:
            return datasets.load_from_disk(str(path))
        formats = {DATA_FILE_FORMATS[Path(f).suffix] for f in files.values()}
        if len(formats) > 1:
            raise PrepareError(f"{path}: split files in mixed formats ({', '.join(sorted(formats))}); use one")
        return datasets.load_dataset(formats.pop(), data_files=files, cache_dir=cache_dir)
    except PrepareError:
        raise
    except Exception as exc:  # not a dataset folder, unreadable or malformed file
        raise PrepareError(f"{path}: cannot read it as a dataset ({type(exc).__name__}: {exc})") from None


def check_splits(dataset: Any, where: str) -> None:
    present = list(dataset.keys()) if hasattr(dataset, "keys") else []  # a lone Dataset has no splits
    missing = [split for split in SPLITS if split not in present]
    if missing:
        raise PrepareError(
            f"{where}: no {', '.join(missing)} split (has: {', '.join(present) or 'none'}); "
            f"expected {', '.join(SPLITS)}"
        )


def pairs(split: Any, where: str) -> Iterator[list[tuple[str, str]]]:
    """Batches of (de, en) from either record layout."""
    columns = split.column_names
    nested = "translation" in columns
    if not nested and not all(lang in columns for lang in LANGS):
        raise PrepareError(
            f"{where}: records need a 'translation' field or {' and '.join(LANGS)} fields; has {', '.join(columns)}"
        )
    first = 0  # the batch's first record, from 0
    for batch in split.iter(batch_size=BATCH_ROWS):
        if nested:
            try:
                found = [(record["de"], record["en"]) for record in batch["translation"]]
            except (KeyError, TypeError):
                raise PrepareError(f"{where}: a 'translation' record lacks 'de' or 'en'") from None
        else:
            found = list(zip(batch["de"], batch["en"]))
        # a side that is missing in a record (datasets fills it in as None): an empty line was written
        # for it, and a pair lost its sentence without a word
        for i, pair in enumerate(found):
            for lang, text in zip(LANGS, pair):
                if not isinstance(text, str):
                    raise PrepareError(f"{where}: record {first + i + 1} has no {lang} text ({text!r})")
        first += len(found)
        yield found


# ---------------------------------------------------------------------------------------------
# Writing


def one_line(text: Any) -> tuple[str, bool]:
    """The text with line breaks turned into spaces (keeps the files aligned), and whether any were.

    '\\r' counts too: Python's text mode (and so most readers) splits lines there as well.
    """
    text = "" if text is None else str(text)
    if "\n" not in text and "\r" not in text:
        return text, False
    return " ".join(text.replace("\r", "\n").split("\n")), True


def write_split(split: Any, name: str, out: Path, staged: list[tuple[Path, Path]], progress: Progress,
                where: str) -> tuple[int, int]:
    """Stage out/name.de and out/name.en; returns (lines, sentences that had line breaks)."""
    handles = {}
    for lang in LANGS:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.{lang}.", suffix=".tmp", dir=out)
        staged.append((Path(tmp), out / f"{name}.{lang}"))
        handles[lang] = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    lines = mended = 0
    task = progress.add_task(f"{name}", total=len(split))
    try:
        for batch in pairs(split, where):
            for de, en in batch:
                (de, de_broken), (en, en_broken) = one_line(de), one_line(en)
                handles["de"].write(de + "\n")
                handles["en"].write(en + "\n")
                mended += de_broken or en_broken
            lines += len(batch)
            progress.advance(task, len(batch))
    finally:
        for handle in handles.values():
            handle.close()
    return lines, mended


def make_dirs(out: Path) -> list[Path]:
    """Create out and its missing parents; returns those created, deepest first, to remove again
    when the run writes nothing."""
    created, path = [], out
    while not path.exists() and path != path.parent:
        created.append(path)
        path = path.parent
    out.mkdir(parents=True, exist_ok=True)
    return created


def commit(staged: list[tuple[Path, Path]], force: bool, where: str) -> int:
    """Move the staged files into place; one identical to the existing file leaves it alone (up to
    date), one that differs replaces it only with force. Checks them all before moving any.
    Returns how many were up to date."""
    same = [final.exists() and filecmp.cmp(tmp, final, shallow=False) for tmp, final in staged]
    for (tmp, final), identical in zip(staged, same):
        if final.exists() and not identical and not force:
            raise PrepareError(f"{final}: exists and differs from what {where} gives; pass --force to replace it")
    for (tmp, final), identical in zip(staged, same):
        if identical:
            tmp.unlink()
        else:
            os.replace(tmp, final)
    staged.clear()
    return sum(same)


def prepare(out_dir: str | os.PathLike, source: str | os.PathLike | None = None, force: bool = False,
            cache_dir: str | None = None) -> dict[str, int]:
    """Write out_dir/{train,valid,test}.{de,en}; returns lines per output name."""
    out = Path(out_dir)
    where = str(source) if source is not None else f"{HUB_NAME} {HUB_CONFIG}"
    dataset = load(source, cache_dir)  # first: input that is not there leaves no output folder behind
    check_splits(dataset, where)
    created = make_dirs(out)
    staged: list[tuple[Path, Path]] = []
    counts, up_to_date = {}, None
    try:
        with new_progress() as progress:
            for split, name in SPLITS.items():
                counts[name], mended = write_split(dataset[split], name, out, staged, progress, f"{where} {split}")
                if mended:
                    say(f"warning: {where} {split}: line breaks inside {mended} pairs, written as spaces")
        up_to_date = commit(staged, force, where)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        if up_to_date is None:  # failed, before anything was moved into place
            for folder in created:
                try:
                    folder.rmdir()
                except OSError:
                    break
    lines = ", ".join(f"{name} {n}" for name, n in counts.items())
    if up_to_date:
        written = len(SPLITS) * len(LANGS) - up_to_date
        say(f"wmt14: {lines} lines in {out}: {written} files written, {up_to_date} up to date")
    else:
        say(f"wmt14: wrote {lines} lines to {out}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write WMT14 EN-DE as plain text files, one sentence per line.")
    parser.add_argument("--from", dest="source", metavar="PATH",
                        help="a save_to_disk directory, or a directory of train/validation/test data files")
    parser.add_argument("--out", metavar="DIR", default=str(Path(__file__).resolve().parent),
                        help="where to write {train,valid,test}.{de,en} (default: this script's folder)")
    parser.add_argument("--force", action="store_true", help="replace existing output files that differ")
    args = parser.parse_args(argv)
    try:
        prepare(args.out, args.source, force=args.force)
    except PrepareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # full disk, no permission: the OS's words, one line
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
