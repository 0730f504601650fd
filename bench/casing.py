"""Text in capitals, in title case and in lower case, read as written against read in the model's casing (mt.text.casing).

    python -m bench.casing --exp EXP [--data data/multi30k] [--src en --tgt de] [--splits val,test_2016_flickr]
                           [--threads 2] [--out FILE]

Inputs: a trained experiment (nothing is written into it) and Multi30k's raw text files. For each split,
its sources in four casings, each translated with recasing off (`--no-recase`: read as written), on with
each word in the casing the source vocabulary writes best (an experiment without a casing table), and
on with the training text's casing table (the experiment's, or one built here from DATA/train.SRC as
`mt train-tokenizer` builds it), sentence by sentence as `mt translate` does:
- as written (sentence case): recasing must change nothing; the row counts the lines it recased;
- in capitals (`str.upper`), scored against the references in capitals;
- in title case (every word's first letter a capital, the rest as written), scored against the
  references as they are (a title's translation is cased as the model writes it);
- all in lower case (`str.lower`), scored against the references as they are.
BLEU and chrF are sacreBLEU's defaults (case-sensitive; deterministic). Prints a table, and as its last
line one JSON object.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.common import read_split, report, stamp


def title_case(line: str) -> str:
    """Every word's first letter a capital, the rest as written ("A Man In A Woman's Coat.")."""
    return re.sub(r"(?<![\w'’])(\w)", lambda m: m.group(1).upper(), line)


VERSIONS = {
    "as written": (lambda line: line, lambda line: line),
    "capitals": (str.upper, str.upper),
    "title case": (title_case, lambda line: line),
    "lower case": (str.lower, lambda line: line),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", type=Path, required=True, help="a trained experiment (only read)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--splits", default="val,test_2016_flickr")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from mt.data.train_tokenizer import words_of
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.experiment.config import read_experiment
    from mt.hardware import set_threads
    from mt.metrics import score
    from mt.text.translate import read_cased, translate
    from mt.tokenizer import casing_table

    set_threads(args.threads)
    exp, cfg = read_experiment(args.exp)
    translator = Translator.load(exp, cfg)
    tok = translator.src_tok
    # The casing table: the experiment's (its tokenizer trained with one), else built here from the
    # training text's source side as `mt train-tokenizer` builds it (not written into the experiment)
    tables = tok.casing or {args.src: casing_table(words_of(read_split(args.data, "train", args.src)), args.src)}
    tok.casing = tables  # (for the lines recased: as `mt translate` reads them)
    ways = {  # name -> (options, the tokenizer's casing tables)
        "off": (DecodeOptions(recase=False), {}),
        "vocabulary": (DecodeOptions(), {}),
        "table": (DecodeOptions(), tables),
    }
    rows = []
    for split in args.splits.split(","):
        src, ref = read_split(args.data, split, args.src), read_split(args.data, split, args.tgt)
        for version, (source_of, reference_of) in VERSIONS.items():
            lines, refs = [source_of(line) for line in src], [reference_of(line) for line in ref]
            recased = sum(a != b for a, b in zip(read_cased(translator, lines, DecodeOptions()), lines))
            row = {"split": split, "version": version, "lines": len(lines), "lines_recased": recased}
            for name, (options, casing) in ways.items():
                tok.casing = casing
                s = score(translate(translator, lines, options), refs)
                row[f"bleu_{name}"], row[f"chrf_{name}"] = round(s["bleu"], 2), round(s["chrf"], 2)
            rows.append(row)

    table = Table(
        title=f"{args.exp}: {args.src}->{args.tgt}, read as written (off), in the casing the vocabulary "
        "writes best, and by the training text's casing table"
    )
    for column in ("split", "version", "lines recased", *(f"BLEU {w}" for w in ways), *(f"chrF {w}" for w in ways)):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["split"],
            r["version"],
            f"{r['lines_recased']} of {r['lines']}",
            *(f"{r[f'bleu_{w}']:.2f}" for w in ways),
            *(f"{r[f'chrf_{w}']:.2f}" for w in ways),
        )
    Console(width=140, stderr=False).print(table)
    report({"exp": str(args.exp), **stamp(), "threads": args.threads, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
