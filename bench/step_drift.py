"""Does the training step slow down as a run goes on? Trainer.step (with its own batching) on a fresh
model of an existing, binarized experiment, in windows of updates: target tokens/s and the page
faults per window. In the one-hour recipe runs the rate falls from ~10k to ~7.5k tgt tokens/s within
the first few hundred updates; this separates the process's own drift from the loop around it.

    python -m bench.step_drift --exp experiments/bench-multi30k_en_de [--steps 400] [--window 50] [--trim-every 0]

Prints a table; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from bench.common import stamp

REPO = Path(__file__).resolve().parents[1]


def _rss_mb() -> int:
    """Resident memory now (not the peak): whether the heap keeps growing."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True, help="A binarized experiment (its config decides the model).")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--trim-every", type=int, default=None,
                        help="malloc_trim every N updates instead of mt's setting; 0 = never.")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc)

    import torch
    from rich.console import Console
    from rich.table import Table

    from mt.allocator import keep_freed_memory
    from mt.experiment.paths import Experiment
    from mt.training.setup import build_training

    keep_freed_memory()
    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    trainer = build_training(exp, exp.load_config()).trainer
    if args.trim_every is not None:
        trainer.trim_every = args.trim_every or 10**12
    trim_every = trainer.trim_every
    windows = []
    start, tokens, faults = time.perf_counter(), 0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for step in range(1, args.steps + 1):
        tokens += trainer.step()["tgt_tokens"]
        if step % args.window == 0:
            now, minflt = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            windows.append({"step": step, "tgt_tokens_per_s": round(tokens / (now - start), 1),
                            "page_faults": minflt - faults, "rss_mb": _rss_mb()})
            start, tokens, faults = now, 0, minflt

    allocator = allocator_name()
    trim = (trim_every if trim_every < 10**12 else 0) if allocator == "system" else None  # tcmalloc: no trimming
    trimming = f", malloc_trim every {trim or 'never'}" if trim is not None else ""
    table = Table(title=f"training step over time: {args.exp}, {args.threads} threads, malloc: {allocator}{trimming}")
    for column in ("updates", "tgt tok/s", "page faults", "RSS"):
        table.add_column(column, justify="right")
    for w in windows:
        table.add_row(str(w["step"]), f"{w['tgt_tokens_per_s']:,.0f}", f"{w['page_faults']:,}", f"{w['rss_mb']:,} MB")
    Console(stderr=True).print(table)
    print(json.dumps({**stamp(), "exp": args.exp, "allocator": allocator, "trim_every": trim, "windows": windows,
                      "first_over_last": round(windows[0]["tgt_tokens_per_s"] / windows[-1]["tgt_tokens_per_s"], 3)}))


if __name__ == "__main__":
    main()
