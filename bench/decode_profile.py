"""Where mt's beam search spends its time: torch.profiler's op table over one pass of a test split.

    python bench/decode_profile.py --exp experiments/bench-multi30k [--sentences 1000] [--mode fp32|int8|bf16]

Inputs: a trained experiment and its test split (the first --sentences lines), decoded as
bench/translate.py decodes it (beam 5, `length` penalty at --alpha, 2 threads, the checkpoint named by
--checkpoint). Prints the ops by self CPU time, the share of the pass spent inside torch ops against
Python between them (the per-step overhead), and as its last line one JSON object: wall seconds, op
seconds, the top ops' self seconds, and decoder steps (calls of the model's decode).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--checkpoint", default="last")
    parser.add_argument("--mode", choices=("fp32", "int8", "bf16"), default="fp32")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=25, help="ops shown")
    args = parser.parse_args()

    from mt.allocator import use_tcmalloc

    use_tcmalloc()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from mt.data.corpus import load_split
    from mt.experiment import Experiment
    from mt.hardware import cpu_name
    from mt.translate import Translator

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    cfg.decode.beam, cfg.decode.alpha, cfg.decode.length_penalty = args.beam, args.alpha, "length"
    src, _ = load_split(cfg.data.sources("test"))
    src = src[:args.sentences]
    translator = Translator.load(exp, cfg, args.checkpoint, "cpu", "bf16" if args.mode == "bf16" else "fp32",
                                 "int8" if args.mode == "int8" else None)
    translator.decode_cfg.workers = 1  # one search at a time: a step's ops, not two searches interleaved
    translator.translate(src[:16])
    steps = 0
    decode = translator.model.decode

    def counted(*a, **k):
        nonlocal steps
        steps += 1
        return decode(*a, **k)

    translator.model.decode = counted
    start = time.perf_counter()
    translator.translate(src)
    plain = time.perf_counter() - start
    steps_plain, steps = steps, 0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        translator.translate(src)
        profiled = time.perf_counter() - start
    events = prof.key_averages()
    # Top-level ops only: an op's self time excludes its children, so the sum is the time spent in ops.
    op_seconds = sum(e.self_cpu_time_total for e in events) / 1e6
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.rows]
    print(f"{cpu_name()}, {args.threads} threads, {len(src)} sentences, beam {args.beam}, mode {args.mode}")
    print(f"pass without the profiler {plain:.2f} s, with it {profiled:.2f} s; time inside ops {op_seconds:.2f} s "
          f"({op_seconds / profiled:.0%}); decoder steps {steps_plain} ({plain / steps_plain * 1e3:.2f} ms each)")
    print(json.dumps({
        "wall_seconds": round(plain, 3), "profiled_seconds": round(profiled, 3), "op_seconds": round(op_seconds, 3),
        "decoder_steps": steps_plain, "ms_per_step": round(plain / steps_plain * 1e3, 3),
        "top_ops": {e.key: round(e.self_cpu_time_total / 1e6, 3) for e in top}, "calls": {e.key: e.count for e in top},
        "machine": cpu_name(), "threads": args.threads, "sentences": len(src), "beam": args.beam, "mode": args.mode,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }))


if __name__ == "__main__":
    main()
