"""Heap settings against training speed and memory, one process per setting (mallopt is process-wide).

    python -m bench.heap [--exp experiments/bench-multi30k] [--steps 40] [--rounds 2] [--model recipe]

Inputs: a binarized Multi30k experiment (the one `bench/multi30k.py` leaves: joint unigram 8000,
~4096 tokens per batch); nothing is written into it. Settings:
- glibc: glibc's defaults (blocks over its mmap threshold mapped and unmapped on every use);
- heap + glibc trim: large blocks from the heap (M_MMAP_MAX 0), glibc still giving back the heap's
  top whenever 128 KB are free there (mt.hardware before 2026-11-30);
- heap (mt): the same with glibc's own trimming off (mt.hardware now).
The two heap settings also get the Trainer's malloc_trim every 10 updates. Each run: a fresh Trainer
of the one-hour recipe's model (4+4 layers, d_model 128, FFN 256, dropout 0.3) or of the benchmark
preset (`--model preset`), bf16, 5 warm-up steps, then --steps timed steps; settings alternate over
--rounds rounds. Reports the median ms per step, page faults per step, share of the time in the
kernel and peak RSS. Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SETTINGS = ("glibc", "heap + glibc trim", "heap (mt)")
MODELS = {
    "recipe": dict(enc_layers=4, dec_layers=4, d_model=128, d_ff=256, n_heads=4, dropout=0.3),
    "preset": {},  # the experiment's own config: the benchmark preset
}
GLIBC_TRIM_THRESHOLD = 128 * 1024  # glibc's default M_TRIM_THRESHOLD


def run_one(exp_dir: str, setting: str, model: str, steps: int) -> dict:
    """In this process: train `steps` steps under `setting`; the measurements."""
    import torch

    from mt import allocator
    from mt.experiment.paths import Experiment
    from mt.training.setup import build_training

    torch.set_num_threads(2)
    if setting != "glibc":  # glibc: build_training(keep_freed=False) leaves glibc as it is
        assert allocator.keep_freed_memory()
        if setting == "heap + glibc trim":
            allocator.set_trim_threshold(GLIBC_TRIM_THRESHOLD)  # back to glibc's default
    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    cfg.model.__dict__.update(MODELS[model])
    cfg.train.precision = "bf16"
    trainer = build_training(exp, cfg, keep_freed=setting != "glibc").trainer
    for _ in range(5):
        trainer.step()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start, times = time.perf_counter(), []
    for _ in range(steps):
        begin = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - begin)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "setting": setting,
        "ms_per_step": round(statistics.median(times) * 1e3, 1),
        "faults_per_step": round((after.ru_minflt - usage.ru_minflt) / steps),
        "kernel_share": round((after.ru_stime - usage.ru_stime) / (wall * torch.get_num_threads()), 3),
        "peak_rss_mb": round(after.ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", choices=sorted(MODELS), default="recipe")
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.exp, args.child, args.model, args.steps)))
        return

    from rich.console import Console
    from rich.table import Table

    runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
    for _ in range(args.rounds):
        for setting in SETTINGS:
            out = subprocess.run([sys.executable, __file__, "--exp", args.exp, "--steps", str(args.steps),
                                  "--model", args.model, "--child", setting],
                                 check=True, capture_output=True, text=True).stdout
            runs[setting].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for setting, results in runs.items():
        rows.append({key: statistics.median(r[key] for r in results) if key != "setting" else setting
                     for key in results[0]})
    table = Table(title=f"heap settings, {args.model} model, bf16, {args.steps} steps x {args.rounds} rounds "
                        f"(medians over rounds), {args.exp}")
    for column in ("setting", "ms/step", "page faults/step", "time in kernel", "peak RSS"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for r in rows:
        table.add_row(r["setting"], f"{r['ms_per_step']:.0f}", f"{r['faults_per_step']:,.0f}",
                      f"{r['kernel_share']:.0%}", f"{r['peak_rss_mb']:,.0f} MB")
    Console(width=120).print(table)
    print(json.dumps({"model": args.model, "steps": args.steps, "rounds": args.rounds, "settings": rows}))


if __name__ == "__main__":
    main()
