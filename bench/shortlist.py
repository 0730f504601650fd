"""The lexical shortlist's trade: BLEU against speed for tables of several sizes, beside no shortlist.

    python -m bench.shortlist --exp EXP [--split valid] [--tops 5,10,20,40] [--frequents 0,100,200]
                              [--modes fp32,int8] [--repeats 3] [--threads 2]

Inputs: a trained experiment with binarized data, and the split named (valid to choose the table's
size, test to report it). The table is built once in memory from the training split with the largest
--tops and --frequents (mt.data.shortlist; the experiment's own EXP/shortlist is neither read nor
written) and narrowed to each (top, frequent) pair: a table's rows are best first, so the narrowed
table is the one `mt shortlist --top K --frequent N` builds. Each mode (fp32; int8 = --quantize int8)
is loaded once and decodes the split with the experiment's own decode.* settings (beam, length
penalty, batches, workers), without the shortlist and with each table, run 1 of every setting, then
run 2, ..., so that drift touches them alike; sent/s is from the median run, BLEU and chrF are
sacreBLEU's. "candidates" is the mean size of a batch's vocabulary (of the target vocabulary's V).
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True)
    parser.add_argument("--split", choices=("valid", "test"), default="valid")
    parser.add_argument("--tops", type=numbers, default=[5, 10, 20, 40])
    parser.add_argument("--frequents", type=numbers, default=[0, 100, 200])
    parser.add_argument("--modes", default="fp32", help="fp32 and/or int8, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()
    import torch

    from mt.data.batching import length_groups
    from mt.data.corpus import load_split
    from mt.data.shortlist import build_table
    from mt.decoding.options import DecodeOptions
    from mt.decoding.shortlist import Shortlist
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name
    from mt.metrics import score

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    cfg.decode.engine = "mt"  # the shortlist in mt's own search, whatever EXP's decode.engine
    src, refs = load_split(cfg.data.sources(args.split))
    modes = [m.strip() for m in args.modes.split(",")]
    translators = {m: Translator.load(exp, cfg, quantize="int8" if m == "int8" else None) for m in modes}
    any_translator = next(iter(translators.values()))
    vocab = any_translator.tgt_tok.vocab_size
    start = time.perf_counter()
    table = build_table(exp, max(args.tops), max(args.frequents), any_translator.src_tok.vocab_size, vocab)
    print(f"table built in {time.perf_counter() - start:.1f} s from {table.meta['sentence_pairs']} pairs", file=sys.stderr)
    sizes = [None] + [(k, n) for k in args.tops for n in args.frequents]
    shortlists = {size: Shortlist(table.narrowed(*size), vocab) for size in sizes if size is not None}
    _, encoded, _ = any_translator.encode_lines(src)
    groups = length_groups([len(ids) for ids in encoded], cfg.decode.max_tokens)
    candidates = {
        size: statistics.mean(
            len(shortlist.batch_vocabulary(any_translator.pad_sources([encoded[k] for k in group])))
            for group in groups
        )
        for size, shortlist in shortlists.items()
    }
    for translator in translators.values():
        translator.translate(src[:16])  # warm-up
    seconds: dict = {(m, s): [] for m in modes for s in sizes}
    outputs: dict = {}
    for run in range(args.repeats):
        for mode, translator in translators.items():
            for size in sizes:
                if size is not None:
                    translator.shortlist = shortlists[size]
                begin = time.perf_counter()
                found = translator.search(src, DecodeOptions(shortlist=size is not None))
                seconds[(mode, size)].append(time.perf_counter() - begin)
                outputs[(mode, size)] = [hyps[0][0] for hyps in found]
                print(f"run {run + 1}/{args.repeats} {mode} {size or 'no shortlist'}: {seconds[(mode, size)][-1]:.2f} s",
                      file=sys.stderr)

    from rich.console import Console
    from rich.table import Table

    d = cfg.decode
    title = (f"{exp.root} {args.split} ({len(src)} sentences), beam {d.beam}, {d.length_penalty} {d.alpha}, "
             f"{args.threads} threads, {cpu_name()}")
    rows = []
    view = Table(title=title)
    for column in ("mode", "top", "frequent", "candidates", "sent/s", "speed-up", "BLEU", "ΔBLEU", "chrF", "runs (s)"):
        view.add_column(column, justify="left" if column in ("mode", "runs (s)") else "right")
    for mode in modes:
        base = None
        for size in sizes:
            scores = score(outputs[(mode, size)], refs)
            speed = len(src) / statistics.median(seconds[(mode, size)])
            base = base or (speed, scores["bleu"])
            row = {"mode": mode, "top": size[0] if size else None, "frequent": size[1] if size else None,
                   "candidates": round(candidates[size], 1) if size else vocab, "sent_per_s": round(speed, 1),
                   "speed_up": round(speed / base[0], 3), "bleu": round(scores["bleu"], 2),
                   "bleu_change": round(scores["bleu"] - base[1], 2), "chrf": round(scores["chrf"], 2),
                   "seconds": [round(s, 3) for s in seconds[(mode, size)]]}
            rows.append(row)
            view.add_row(mode, str(row["top"] or "-"), str(row["frequent"] if size else "-"), f"{row['candidates']:.0f}",
                         f"{speed:.1f}", f"{row['speed_up']:.2f}x", f"{row['bleu']:.2f}", f"{row['bleu_change']:+.2f}",
                         f"{row['chrf']:.2f}", " ".join(f"{s:.2f}" for s in seconds[(mode, size)]))
    Console(width=140).print(view)
    print(json.dumps({
        "machine": cpu_name(), "allocator": allocator_name(), "exp": str(exp.root), "split": args.split,
        "sentences": len(src), "vocab": vocab, "beam": d.beam, "length_penalty": d.length_penalty, "alpha": d.alpha,
        "max_tokens": d.max_tokens, "threads": args.threads, "repeats": args.repeats,
        "table": {k: table.meta[k] for k in ("method", "iterations", "sentence_pairs", "seconds")},
        "rows": rows, "signature": score(outputs[(modes[0], None)], refs)["bleu_signature"],
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }))


if __name__ == "__main__":
    main()
