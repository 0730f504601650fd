"""Paragraphs translated whole against sentence by sentence (mt.text), and a long line's time.

    python -m bench.paragraphs --exp EXP --data data/multi30k [--src en --tgt de] [--threads 2] [--out FILE]

Inputs: a trained experiment (nothing is written into it) and Multi30k's raw text files. Rows:
- val and test_2016_flickr as they are (one sentence a line), sentence splitting off and on;
- test_2016_flickr as paragraphs of 3 consecutive sentences (sources and references joined with a
  space): translated as lines (splitting off), sentence by sentence (on), and the sentence-level
  translations joined (the ceiling);
- one 20,000-character line of Latin text (test sentences repeated) and one of CJK text (a run of
  common Chinese characters, which an EN->DE model's tokenizer cuts into byte pieces): seconds and
  output characters, as `Translator.search` takes it whole (before) and through mt.text (after).
With --no-repeat N ...: val and test2016 (splitting on) and the long lines (after) again with the
repetition guard (decode.no_repeat_ngram N) for each N. With --serve: the two long lines also through
a real `mt serve` (LibreTranslate's /translate, one request each): seconds to the answer, characters
out, and the worker's busy seconds for it (GET /health before and after).
BLEU and chrF are sacreBLEU's defaults (deterministic); times are one run on a shared machine, noisy.
Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.common import read_split, report

CJK = "我们今天去公园散步看见很多人在湖边钓鱼孩子们在草地上玩耍老人坐在长椅上聊天"


def grouped(lines: list[str], size: int = 3) -> list[str]:
    return [" ".join(lines[i : i + size]) for i in range(0, len(lines) - size + 1, size)]


def long_lines(translator, best, text: str, args) -> list[dict]:
    """The long Latin line (from `text`) and the CJK line: seconds and output, before and after."""
    from mt.decoding.options import DecodeOptions

    latin = text[: args.long_chars]
    cjk = (CJK * (args.long_chars // len(CJK) + 1))[: args.long_chars]
    long_rows = []
    runs = [] if args.skip_before else [("before", lambda x: translator.search([x])[0][0][0])]
    runs.append(("after", lambda x: best([x], DecodeOptions())[0]))
    for n in args.no_repeat:
        runs.append((f"after, no_repeat_ngram {n}", lambda x, n=n: best([x], DecodeOptions(no_repeat_ngram=n))[0]))
    for name, line in (("latin", latin), ("cjk", cjk)):
        for when, run in runs:
            start = time.perf_counter()
            out = run(line)
            long_rows.append({"line": name, "when": when, "chars_in": len(line),
                              "src_tokens": len(translator.src_tok.encode([line])[0]),
                              "seconds": round(time.perf_counter() - start, 2), "chars_out": len(out),
                              "words_out": len(out.split())})

    return long_rows


def served(args, lines: dict[str, str]) -> list[dict]:
    """Each long line through `mt serve`'s /translate (module docstring)."""
    import asyncio
    import tempfile
    from types import SimpleNamespace

    from bench.common import Connection, Server, post, stop_process

    options = SimpleNamespace(exp=str(args.exp), threads=args.threads, precision="fp32", serve_arg=[],
                              checkpoint=None, quantize=None, start_seconds=120)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(options, Path(tmp) / "serve.log")
        try:
            for name, line in lines.items():
                before = server.worker()
                body = json.dumps({"q": line, "source": args.src, "target": args.tgt}).encode()
                start = time.perf_counter()
                answer = asyncio.run(post(Connection(server.port), "/translate", body, 600))
                seconds = time.perf_counter() - start
                after = server.worker()
                text = json.loads(answer)["translatedText"] if answer else ""
                rows.append({"line": name, "when": "mt serve /translate", "chars_in": len(line), "src_tokens": 0,
                             "seconds": round(seconds, 2), "chars_out": len(text), "words_out": len(text.split()),
                             "worker_busy_s": round(after["busy_seconds"] - before["busy_seconds"], 2)})
        finally:
            stop_process(server.process)
    return rows


def print_tables(args, rows: list[dict], long_rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"paragraphs and sentences ({args.exp}, {args.src}->{args.tgt})")
    for column in ("set", "BLEU", "chrF"):
        table.add_column(column, justify="left" if column == "set" else "right")
    for r in rows:
        table.add_row(r["set"], f"{r['bleu']:.2f}", f"{r['chrf']:.2f}")
    console.print(table)
    table = Table(title=f"one long line of {args.long_chars:,} characters")
    for column in ("line", "when", "source tokens", "seconds", "chars out", "words out", "worker s"):
        table.add_column(column)
    for r in long_rows:
        table.add_row(r["line"], r["when"], f"{r['src_tokens']:,}", f"{r['seconds']:.2f}", f"{r['chars_out']:,}",
                      f"{r['words_out']:,}", f"{r['worker_busy_s']:.2f}" if "worker_busy_s" in r else "")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", type=Path, required=True, help="a trained experiment (only read)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long-chars", type=int, default=20_000, help="characters of the long lines")
    parser.add_argument("--no-repeat", type=int, nargs="*", default=[], help="repetition guards to measure too")
    parser.add_argument("--skip-before", action="store_true", help="leave out the long lines' before (slow)")
    parser.add_argument("--serve", action="store_true", help="the long lines through mt serve too")
    parser.add_argument("--long-only", action="store_true", help="only the long lines (no BLEU rows)")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()

    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.experiment.config import read_experiment
    from mt.hardware import cpu_name, set_threads
    from mt.metrics import score
    from mt.text.translate import search

    set_threads(args.threads)
    exp, cfg = read_experiment(args.exp)
    translator = Translator.load(exp, cfg)
    on, off = DecodeOptions(), DecodeOptions(sentences=False)

    def best(lines: list[str], options: DecodeOptions) -> list[str]:
        return [hyps[0][0] for hyps in search(translator, lines, options)]

    rows: list[dict] = []

    def add(name: str, hyps: list[str], refs: list[str]) -> None:
        s = score(hyps, refs)
        rows.append({"set": name, "bleu": round(s["bleu"], 2), "chrf": round(s["chrf"], 2)})

    for split in () if args.long_only else ("val", "test_2016_flickr"):
        src, ref = read_split(args.data, split, args.src), read_split(args.data, split, args.tgt)
        sentence_level = best(src, off)
        add(f"{split} split off", sentence_level, ref)
        add(f"{split} split on", best(src, on), ref)
    if not args.long_only:
        add("test2016 paragraphs of 3, as lines (split off)", best(grouped(src), off), grouped(ref))
        add("test2016 paragraphs of 3, split on", best(grouped(src), on), grouped(ref))
        add("test2016 paragraphs of 3, sentence-level joined", grouped(sentence_level), grouped(ref))
    src = read_split(args.data, "test_2016_flickr", args.src)
    for n in args.no_repeat:
        for split in ("val", "test_2016_flickr"):
            guarded = DecodeOptions(no_repeat_ngram=n)
            add(f"{split} split on, no_repeat_ngram {n}", best(read_split(args.data, split, args.src), guarded),
                read_split(args.data, split, args.tgt))

    long_rows = long_lines(translator, best, " ".join(src), args)
    if args.serve:
        latin = " ".join(src)[: args.long_chars]
        cjk = (CJK * (args.long_chars // len(CJK) + 1))[: args.long_chars]
        long_rows += served(args, {"latin": latin, "cjk": cjk})
    print_tables(args, rows, long_rows)
    result = {"exp": str(args.exp), "cpu": cpu_name(), "threads": args.threads, "scores": rows, "long": long_rows}
    report(result, args.out)


if __name__ == "__main__":
    main()
