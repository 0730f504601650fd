"""The back-translation simulation on Multi30k EN->DE: 10,000 real pairs and 19,000 German sentences.

    python data/multi30k/prepare.py && python data/multi30k_bt/prepare.py

Reads data/multi30k/train.en and train.de (29,000 pairs) and writes data/multi30k_bt/ (or --out):
parallel10k.en, parallel10k.de (the first 10,000 pairs) and mono19k.de (the German of the other
19,000; their English is never used). Valid and test stay data/multi30k's. Each file is written to a
temporary name and moved into place, so a failed run leaves nothing half-written; a file holding
other lines is replaced only with --force.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAIRS = 10_000


def write(path: Path, lines: list[str]) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text_of(lines))
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)  # a write that failed (a full disk) leaves no temporary


def text_of(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", default=str(HERE.parent / "multi30k"),
                        help="the directory data/multi30k/prepare.py wrote (default: data/multi30k)")
    parser.add_argument("--out", default=str(HERE), help="where to write (default: this folder)")
    parser.add_argument("--force", action="store_true", help="replace files that hold other lines")
    args = parser.parse_args()
    source, out = Path(args.source), Path(args.out)
    sides = {}
    for lang in ("en", "de"):
        path = source / f"train.{lang}"
        if not path.is_file():
            sys.exit(f"{path}: missing; run python data/multi30k/prepare.py first")
        try:  # lines as mt reads them: "\n" ends one, a last line without it is one too
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            sys.exit(f"{path}: cannot read it as UTF-8 text: {exc}")
        sides[lang] = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    if len(sides["en"]) != len(sides["de"]) or len(sides["en"]) <= PAIRS:
        sys.exit(
            f"{source}: train.en and train.de must hold the same number of lines, more than {PAIRS:,} "
            f"(they hold {len(sides['en']):,} and {len(sides['de']):,})"
        )
    files = {"parallel10k.en": sides["en"][:PAIRS], "parallel10k.de": sides["de"][:PAIRS],
             "mono19k.de": sides["de"][PAIRS:]}
    out.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():  # checked before any is written: all or none
        path = out / name
        try:  # as bytes: a file of other line endings (CRLF) holds other lines, not the same
            other = path.exists() and path.read_bytes() != text_of(lines)
        except OSError as exc:
            sys.exit(f"{path}: cannot read it: {exc.strerror or exc}")
        if other and not args.force:
            sys.exit(f"{path}: exists and holds other lines; --force replaces it")
    for name, lines in files.items():
        try:
            write(out / name, lines)
        except OSError as exc:
            sys.exit(f"{out / name}: cannot write it: {exc.strerror or exc}")
    print(f"multi30k_bt: {PAIRS:,} pairs in {out}/parallel10k.{{en,de}}, "
          f"{len(sides['de']) - PAIRS:,} German sentences in {out}/mono19k.de", file=sys.stderr)


if __name__ == "__main__":
    main()
