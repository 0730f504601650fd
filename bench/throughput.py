"""Training throughput: the machine's matmul peak, the benchmark preset's step in each precision, MFU.

    python bench/throughput.py [--exp experiments/bench-multi30k] [--steps 12] [--precisions fp32,bf16] [--profile]

Inputs: a binarized experiment with the benchmark preset (the one `bench/multi30k.py` leaves:
Multi30k EN->DE, joint unigram 8000, 3+3 layers, d_model 256, ~4096 tokens per batch); nothing is
written into it. (a) matmul GFLOP/s with --threads threads: 2048^3 fp32 and the training-shaped
4096x256 @ 256x1024 in fp32 and bf16, median of runs. (b) training steps of a fresh model on the
experiment's batches, precisions interleaved step by step so that they see the same machine load;
target tokens/s = tokens / time over the measured steps. MFU = 6 x (encoder params x src tokens/s +
(decoder params + output projection) x tgt tokens/s) / measured peak (embeddings excluded: lookups,
not matmuls; attention scores not counted, as in the reference figures). (c) pad fraction of the
epoch's batches. (d) with --profile, the top operators of an fp32 step (torch.profiler).
Prints tables, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FAIRSEQ_TGT_TOKENS_PER_S = 2461  # the pipeline issue's reference, same preset and machine class


def matmul_gflops(m: int, k: int, n: int, dtype, repeats: int = 7) -> float:
    import torch

    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * m * k * n / statistics.median(times) / 1e9


def model_flops_per_token(model) -> tuple[int, int]:
    """(encoder matmul params, decoder matmul params incl. output projection) for the 6N rule."""
    encoder = sum(p.numel() for layer in model.encoder for p in layer.parameters())
    decoder = sum(p.numel() for layer in model.decoder for p in layer.parameters())
    return encoder, decoder + model.output.weight.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--steps", type=int, default=12, help="Measured steps per precision.")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    import torch

    from mt.batching import make_batches, pad_fraction
    from mt.experiment import Experiment
    from mt.train import Trainer

    torch.set_num_threads(args.threads)
    precisions = [p.strip() for p in args.precisions.split(",")]
    peak = {
        "fp32 2048^3": matmul_gflops(2048, 2048, 2048, torch.float32),
        "fp32 4096x256x1024": matmul_gflops(4096, 256, 1024, torch.float32),
        "bf16 4096x256x1024": matmul_gflops(4096, 256, 1024, torch.bfloat16),
    }
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    trainer = Trainer(exp, cfg)
    trainer.start_clock()
    encoder_params, decoder_params = model_flops_per_token(trainer.model)
    batches = make_batches(trainer.train_data.src_lens, trainer.train_data.tgt_lens, cfg.train.max_tokens, cfg.train.seed, 0)
    src_pad, tgt_pad = pad_fraction(batches, trainer.train_data.src_lens, trainer.train_data.tgt_lens)

    for precision in precisions:  # warm-up: first-call allocations, kernel selection
        cfg.train.precision = precision
        for _ in range(2):
            trainer.step()
    measured = {p: {"seconds": [], "tgt": 0, "src": 0} for p in precisions}
    for _ in range(args.steps):
        for precision in precisions:
            cfg.train.precision = precision
            start = time.perf_counter()
            stats = trainer.step()
            measured[precision]["seconds"].append(time.perf_counter() - start)
            measured[precision]["tgt"] += stats["tgt_tokens"]
            measured[precision]["src"] += stats["src_tokens"]

    results = {}
    for precision, m in measured.items():
        seconds = sum(m["seconds"])
        tgt_per_s, src_per_s = m["tgt"] / seconds, m["src"] / seconds
        flops = 6 * (encoder_params * src_per_s + decoder_params * tgt_per_s)
        results[precision] = {
            "tgt_tokens_per_s": tgt_per_s,
            "tokens_per_s": tgt_per_s + src_per_s,
            "median_step_s": statistics.median(m["seconds"]),
            "achieved_gflops": flops / 1e9,
            "mfu_vs_fp32_peak": flops / 1e9 / peak["fp32 2048^3"],
        }

    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    table = Table(title=f"matmul peak, {args.threads} threads (median of 7)")
    table.add_column("product")
    table.add_column("GFLOP/s", justify="right")
    for name, value in peak.items():
        table.add_row(name, f"{value:.0f}")
    console.print(table)
    table = Table(title=f"training step, benchmark preset on {args.exp}, {args.steps} steps each, interleaved")
    for column in ("precision", "tgt tok/s", "src+tgt tok/s", "median s/step", "GFLOP/s", "MFU (fp32 peak)", "vs fairseq"):
        table.add_column(column, justify="left" if column == "precision" else "right")
    for precision, r in results.items():
        table.add_row(precision, f"{r['tgt_tokens_per_s']:,.0f}", f"{r['tokens_per_s']:,.0f}", f"{r['median_step_s']:.3f}",
                      f"{r['achieved_gflops']:.0f}", f"{r['mfu_vs_fp32_peak']:.0%}",
                      f"{r['tgt_tokens_per_s'] / FAIRSEQ_TGT_TOKENS_PER_S:.2f}x")
    console.print(table)
    print(f"pad fraction of the epoch's batches: source {src_pad:.1%}, target {tgt_pad:.1%}; "
          f"matmul params: encoder {encoder_params:,}, decoder + output {decoder_params:,}")

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        cfg.train.precision = "fp32"
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                trainer.step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=40))

    fast_mode = max(results, key=lambda p: results[p]["tgt_tokens_per_s"])
    fp32 = results.get("fp32", results[precisions[0]])
    summary = {
        "tgt_tokens_per_s_fp32": round(fp32["tgt_tokens_per_s"], 1),
        "mfu_fp32": round(fp32["mfu_vs_fp32_peak"], 3),
        "tgt_tokens_per_s_fast": round(results[fast_mode]["tgt_tokens_per_s"], 1),
        "fast_mode": fast_mode,
        "fast_over_fp32": round(results[fast_mode]["tgt_tokens_per_s"] / fp32["tgt_tokens_per_s"], 3),
        **{f"tgt_tokens_per_s_{p}": round(r["tgt_tokens_per_s"], 1) for p, r in results.items()},
        "matmul_gflops_fp32": round(peak["fp32 2048^3"], 1),
        "matmul_gflops_fp32_train_shape": round(peak["fp32 4096x256x1024"], 1),
        "matmul_gflops_bf16_train_shape": round(peak["bf16 4096x256x1024"], 1),
        "pad_fraction": round(max(src_pad, tgt_pad), 4),
        "pad_fraction_src": round(src_pad, 4),
        "pad_fraction_tgt": round(tgt_pad, 4),
        "steps": args.steps,
        "threads": args.threads,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
