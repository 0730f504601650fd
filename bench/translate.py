"""Decoding speed: an experiment's test split at beam 5, fp32 against the fast modes.

    python bench/translate.py --exp experiments/bench-multi30k [--modes fp32,int8,bf16] [--repeats 3]

Inputs: a trained experiment (e.g. the one `bench/multi30k.py` leaves), its test split (raw text,
for Multi30k test2016: 1000 sentences), the checkpoint named by --checkpoint (default: last).
Each mode runs in its own process (so peak RSS is its own) and translates the whole split
--repeats times; sentences/s is from the median time. BLEU is sacrebleu's default on the output.
Without --modes, bf16 is left out (a row of the table says so) on a CPU that runs it 10x or more
slower than fp32 (no bf16 hardware: ~100x on an AVX2-only EPYC, many minutes a run).
Prints a table beside the reference figures, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Multi30k test2016, beam 5, 2 threads, this machine class (from the decoding issue).
REFERENCE = {
    "fairseq 0.12.2": 62.9,
    "CTranslate2 4.8.5 fp32": 108.4,
    "CTranslate2 4.8.5 int8": 140.6,
    "OpenNMT-py 3.5.1": 85.8,
    "Sockeye 3.1.34": 18.2,
}
MODES = {"fp32": ("fp32", None), "int8": ("fp32", "int8"), "bf16": ("bf16", None)}
DEFAULT_MODES = ("fp32", "int8", "bf16")


def _decode(exp_dir: str, mode: str, checkpoint: str, beam: int, repeats: int, threads: int, queue) -> None:
    import torch

    from mt.corpus import load_split
    from mt.evaluate import score
    from mt.experiment import Experiment
    from mt.translate import InferenceOptions, Translator

    torch.set_num_threads(threads)
    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    cfg.decode.beam = beam
    src, refs = load_split(cfg.data.sources("test"))
    precision, quantize = MODES[mode]
    translator = Translator.load(exp, cfg, InferenceOptions(checkpoint, "cpu", precision, quantize))
    translator.translate(src[:16])  # warm-up: first-call allocations and kernel selection
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        hyps = translator.translate(src)
        seconds.append(time.perf_counter() - start)
    out_tokens = sum(len(ids) for ids in translator.tgt_tok.encode(hyps))
    scores = score(hyps, refs)
    queue.put({
        "seconds": seconds, "sentences": len(src), "out_tokens": out_tokens, "bleu": scores["bleu"],
        "chrf": scores["chrf"], "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "signature": scores["bleu_signature"],
    })


def run_mode(args, mode: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_decode, args=(args.exp, mode, args.checkpoint, args.beam, args.repeats, args.threads, queue))
    process.start()
    result = queue.get()
    process.join()
    median = statistics.median(result["seconds"])
    return {**result, "median_seconds": median, "sent_per_s": result["sentences"] / median,
            "tokens_per_s": result["out_tokens"] / median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--checkpoint", default="last")
    parser.add_argument("--modes", default=None,
                        help="Default fp32,int8,bf16, less bf16 where this CPU runs it 10x or more slower than fp32 "
                             "(mt.runtime.too_slow); named here, a mode always runs.")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from mt.runtime import allocator_name, too_slow, use_tcmalloc

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc)
    skipped = {}  # mode -> why: only from the default list (a CPU without bf16 takes many minutes per run)
    if args.modes is None:
        skipped = {m: reason for m in DEFAULT_MODES if (reason := too_slow(MODES[m][0]))}
        args.modes = ",".join(m for m in DEFAULT_MODES if m not in skipped)
    modes = [m.strip() for m in args.modes.split(",")]
    if "fp32" not in modes:
        modes.insert(0, "fp32")
    print(f"inputs: {args.exp} (test split, checkpoint {args.checkpoint}); beam {args.beam}, "
          f"{args.threads} threads, {args.repeats} runs per mode", file=sys.stderr)

    results = {mode: run_mode(args, mode) for mode in modes}

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Decoding {args.exp} test split, beam {args.beam}, {args.threads} threads")
    for column in ("system", "sent/s", "tokens/s", "BLEU", "chrF", "peak RSS MB", "runs (s)"):
        table.add_column(column, justify="left" if column in ("system", "runs (s)") else "right")
    for mode, r in results.items():
        table.add_row(f"mt {mode}", f"{r['sent_per_s']:.1f}", f"{r['tokens_per_s']:.0f}", f"{r['bleu']:.2f}",
                      f"{r['chrf']:.2f}", f"{r['peak_rss_mb']:.0f}", " ".join(f"{s:.2f}" for s in r["seconds"]))
    for mode, reason in skipped.items():
        table.add_row(f"mt {mode}", "-", "-", "-", "-", "-", f"skipped: {reason}; pass --modes to force")
    for name, sent_per_s in REFERENCE.items():
        table.add_row(name, f"{sent_per_s:.1f}", "-", "-", "-", "-", "reference")
    Console(width=120).print(table)
    fast_mode = max((m for m in modes if m != "fp32"), key=lambda m: results[m]["sent_per_s"], default="fp32")
    summary = {
        "allocator": allocator_name(),
        "sent_per_s_fp32": round(results["fp32"]["sent_per_s"], 1),
        "sent_per_s_fast": round(results[fast_mode]["sent_per_s"], 1),
        "fast_mode": fast_mode,
        "bleu_fp32": round(results["fp32"]["bleu"], 2),
        "bleu_fast": round(results[fast_mode]["bleu"], 2),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in results.values()), 1),
        **{f"sent_per_s_{m}": round(r["sent_per_s"], 1) for m, r in results.items()},
        **{f"bleu_{m}": round(r["bleu"], 2) for m, r in results.items()},
        "beam": args.beam,
        "threads": args.threads,
        "signature": results["fp32"]["signature"],
        **({"skipped": skipped} if skipped else {}),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
