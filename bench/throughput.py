"""Training throughput: the machine's matmul peak, the benchmark preset's step in each precision, MFU.

    python bench/throughput.py [--exp experiments/bench-multi30k] [--steps 12] [--precisions fp32,bf16,fp16] [--profile]
        [--set model.dropout=0]

Inputs: a binarized experiment with the benchmark preset (the one `bench/multi30k.py` leaves:
Multi30k EN->DE, joint unigram 8000, 3+3 layers, d_model 256, ~4096 tokens per batch); nothing is
written into it. (a) matmul GFLOP/s with --threads threads: 2048^3 fp32 and the training-shaped
4096x256 @ 256x1024 in fp32, bf16 and fp16, median of runs. (b) training steps of a fresh model on the
experiment's batches, precisions interleaved step by step so that they see the same machine load;
target tokens/s = tokens / time over the measured steps. Without --precisions, a half precision this
CPU runs 10x or more slower than fp32 (no bf16/fp16 hardware; mt.hardware.too_slow) is left out of
(a) and (b) and everything after, and the step table says so. MFU = 6 x (encoder params x src tokens/s +
(decoder params + output projection) x tgt tokens/s) / measured peak (embeddings excluded: lookups,
not matmuls; attention scores not counted, as in the reference figures). (c) pad fraction of the
epoch's batches. (d) with --profile, the top operators of an fp32 step (torch.profiler).
(e) with --phases (and --profile), the step split into phases (embedding, attention, FFN, residual +
LayerNorm, output layer + loss, optimizer, data, other) in each precision, see mt.training.profile.
(f) with --scaling, tokens/s and MFU of d_model 256 and 512 (3+3 layers) at 2048/4096/8192 tokens
per batch, fresh models on the same data. (g) with --compile, the train.compile step: compile time
and tokens/s. Prints tables, and as its last line one JSON object.

    python bench/throughput.py --profile --compile --scaling --steps 12
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FAIRSEQ_TGT_TOKENS_PER_S = 2461  # fairseq 0.12.2's fp32 figure on this preset and machine class (not side by side)


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


SCALING_MODELS = {256: dict(d_ff=1024, n_heads=4), 512: dict(d_ff=2048, n_heads=8)}
SCALING_MAX_TOKENS = (2048, 4096, 8192)


def measure(trainer, precisions: list[str], steps: int, warmup: int = 2) -> dict[str, dict]:
    """Warm-up steps per precision, then `steps` steps of each, interleaved step by step so that
    all precisions see the same machine load; seconds of every step and the tokens."""
    measured = {p: {"warmup_seconds": [], "seconds": [], "tgt": 0, "src": 0} for p in precisions}
    for precision in precisions:  # first-call allocations, kernel selection (or compilation)
        trainer.precision = precision
        for _ in range(warmup):
            start = time.perf_counter()
            trainer.step()
            measured[precision]["warmup_seconds"].append(time.perf_counter() - start)
    for _ in range(steps):
        for precision in precisions:
            trainer.precision = precision
            start = time.perf_counter()
            stats = trainer.step()
            measured[precision]["seconds"].append(time.perf_counter() - start)
            measured[precision]["tgt"] += stats["tgt_tokens"]
            measured[precision]["src"] += stats["src_tokens"]
    return measured


def rates(m: dict, encoder_params: int, decoder_params: int, peak: dict[str, float], precision: str) -> dict[str, float]:
    """Tokens/s, GFLOP/s by the 6N rule and MFU against the fp32 (and, for bf16/fp16, their own) peak."""
    seconds = sum(m["seconds"])
    tgt_per_s, src_per_s = m["tgt"] / seconds, m["src"] / seconds
    flops = 6 * (encoder_params * src_per_s + decoder_params * tgt_per_s)
    result = {
        "tgt_tokens_per_s": tgt_per_s,
        "tokens_per_s": tgt_per_s + src_per_s,
        "median_step_s": statistics.median(m["seconds"]),
        "achieved_gflops": flops / 1e9,
        "mfu_vs_fp32_peak": flops / 1e9 / peak["fp32 2048^3"],
    }
    if precision in ("bf16", "fp16"):
        result["mfu_vs_half_peak"] = flops / 1e9 / peak[f"{precision} 2048^3"]
    return result


def scaling(exp, cfg, precisions: list[str], steps: int, peak: dict[str, float]) -> list[dict]:
    """Each SCALING_MODELS size (3+3 layers) at each of SCALING_MAX_TOKENS: a fresh Trainer on the
    same experiment (it reads the experiment, writes nothing unless save() is called)."""
    from mt.training.setup import build_training

    rows = []
    for d_model, shape in SCALING_MODELS.items():
        for max_tokens in SCALING_MAX_TOKENS:
            run_cfg = copy.deepcopy(cfg)
            run_cfg.model.__dict__.update(d_model=d_model, enc_layers=3, dec_layers=3, **shape)
            run_cfg.train.max_tokens = max_tokens
            trainer = build_training(exp, run_cfg).trainer
            encoder_params, decoder_params = model_flops_per_token(trainer.model)
            measured = measure(trainer, precisions, steps)
            for precision in precisions:
                rows.append({"d_model": d_model, "max_tokens": max_tokens, "precision": precision,
                             **{k: round(v, 4 if "mfu" in k or k == "median_step_s" else 1)
                                for k, v in rates(measured[precision], encoder_params, decoder_params, peak, precision).items()}})
            del trainer
    return rows


def measure_compiled(exp, cfg, precisions: list[str], steps: int, eager: dict[str, dict], peak) -> dict:
    """A fresh Trainer with train.compile: compile seconds (its first steps in each precision less as
    many plain steps) and its tokens/s; {"error": text} where torch.compile fails here."""
    from mt.training.setup import build_training

    run_cfg = copy.deepcopy(cfg)
    run_cfg.train.compile = True
    try:
        trainer = build_training(exp, run_cfg).trainer
        encoder_params, decoder_params = model_flops_per_token(trainer.model)
        # Three warm-up steps: the first compiles, the next shapes recompile with dynamic sizes.
        measured = measure(trainer, precisions, steps, warmup=3)
    except Exception as exc:  # noqa: BLE001 - any compiler failure is a result to report
        return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]}
    result = {}
    for precision in precisions:
        m = measured[precision]
        plain = eager[precision]["median_step_s"]
        result[precision] = {
            "compile_seconds": sum(m["warmup_seconds"]) - len(m["warmup_seconds"]) * plain,
            **rates(m, encoder_params, decoder_params, peak, precision),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--steps", type=int, default=12, help="Measured steps per precision (and per scaling point).")
    parser.add_argument("--precisions", default=None,
                        help="Default fp32,bf16,fp16, less a half precision this CPU runs 10x or more slower than "
                             "fp32 (mt.hardware.too_slow); named here, a precision always runs.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="Top operators of an fp32 step, and --phases.")
    parser.add_argument("--phases", action="store_true", help="The step split into phases, in each precision.")
    parser.add_argument("--phase-steps", type=int, default=3, help="Profiled steps per precision for --phases.")
    parser.add_argument("--scaling", action="store_true", help="d_model 256/512 at 2048/4096/8192 tokens per batch.")
    parser.add_argument("--compile", action="store_true", help="Also the train.compile step: compile time and tokens/s.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a field of the experiment's config for this measurement (repeatable), e.g. "
                             "model.dropout=0 to time the step without random masks; recorded in the JSON.")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc
    from mt.hardware import too_slow

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc)

    import torch

    from mt.config.resolve import apply_sets
    from mt.data.batching import make_batches, pad_fraction
    from mt.errors import ConfigError
    from mt.experiment.paths import Experiment
    from mt.training.profile import PHASES, profile_phases
    from mt.training.setup import build_training

    torch.set_num_threads(args.threads)
    skipped = {}  # precision -> why: only from the default list (without hardware, half an hour of steps)
    if args.precisions is None:
        skipped = {p: reason for p in ("bf16", "fp16") if (reason := too_slow(p))}
        args.precisions = ",".join(p for p in ("fp32", "bf16", "fp16") if p not in skipped)
    precisions = [p.strip() for p in args.precisions.split(",")]
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    peak = {}
    for shape in ((2048, 2048, 2048), (4096, 256, 1024)):
        for name in ("fp32", "bf16", "fp16"):
            if name not in skipped and (name == "fp32" or name in precisions):  # 2 min each without hardware
                label = "2048^3" if shape[0] == 2048 else "4096x256x1024"
                peak[f"{name} {label}"] = matmul_gflops(*shape, dtypes[name])
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    try:
        apply_sets(cfg, args.sets)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    trainer = build_training(exp, cfg).trainer
    trainer.start_clock()
    encoder_params, decoder_params = model_flops_per_token(trainer.model)
    batches = make_batches(trainer.stream.data.src_lens, trainer.stream.data.tgt_lens, cfg.train.max_tokens, cfg.train.seed, 0)
    src_pad, tgt_pad = pad_fraction(batches, trainer.stream.data.src_lens, trainer.stream.data.tgt_lens)

    measured = measure(trainer, precisions, args.steps)
    results = {p: rates(m, encoder_params, decoder_params, peak, p) for p, m in measured.items()}

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
    for precision in skipped:
        table.add_row(precision, "skipped", "", "", "", "", "")
    if skipped:
        table.caption = "; ".join(f"{p} skipped: {reason}" for p, reason in skipped.items()) + \
            " (a short matmul); pass --precisions explicitly to force"
    console.print(table)
    print(f"pad fraction of the epoch's batches: source {src_pad:.1%}, target {tgt_pad:.1%}; "
          f"matmul params: encoder {encoder_params:,}, decoder + output {decoder_params:,}")

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        trainer.precision = "fp32"
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                trainer.step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=40))

    phases = {}
    if args.phases or args.profile:
        for precision in precisions:
            trainer.precision = precision
            phases[precision] = profile_phases(trainer, args.phase_steps)
        table = Table(title=f"where a step's time goes, {args.phase_steps} profiled steps each (profiler overhead included)")
        table.add_column("phase")
        for precision in precisions:
            table.add_column(f"{precision} ms/step", justify="right")
            table.add_column(f"{precision} %", justify="right")
        for phase in (*PHASES, "other", "step"):
            cells = []
            for precision in precisions:
                ms, step = phases[precision][phase], phases[precision]["step"]
                cells += [f"{ms:.1f}", f"{ms / step:.0%}"]
            table.add_row("other / Python overhead" if phase == "other" else phase, *cells)
        console.print(table)

    compiled = {}
    if args.compile:
        compiled = measure_compiled(exp, cfg, precisions, args.steps, results, peak)
        table = Table(title=f"train.compile: the encoder and decoder torch.compile'd, {args.steps} steps each")
        for column in ("precision", "compile s", "tgt tok/s", "src+tgt tok/s", "median s/step", "vs eager"):
            table.add_column(column, justify="left" if column == "precision" else "right")
        if "error" in compiled:
            table.add_row("failed", compiled["error"], "", "", "", "")
        for precision, r in compiled.items():
            if precision != "error":
                table.add_row(precision, f"{r['compile_seconds']:.1f}", f"{r['tgt_tokens_per_s']:,.0f}",
                              f"{r['tokens_per_s']:,.0f}", f"{r['median_step_s']:.3f}",
                              f"{r['tgt_tokens_per_s'] / results[precision]['tgt_tokens_per_s']:.2f}x")
        console.print(table)

    scaling_rows = []
    if args.scaling:
        del trainer  # its activations' memory goes back before the larger models
        scaling_rows = scaling(exp, cfg, precisions, args.steps, peak)
        table = Table(title=f"scaling, 3+3 layers, {args.steps} steps each (after 2 warm-up), fresh models")
        for column in ("d_model", "max_tokens", "precision", "tgt tok/s", "src+tgt tok/s", "median s/step", "GFLOP/s",
                       "MFU fp32 peak", "MFU own peak"):
            table.add_column(column, justify="right")
        for r in scaling_rows:
            half_mfu = f"{r['mfu_vs_half_peak']:.0%}" if "mfu_vs_half_peak" in r else ""
            table.add_row(str(r["d_model"]), str(r["max_tokens"]), r["precision"], f"{r['tgt_tokens_per_s']:,.0f}",
                          f"{r['tokens_per_s']:,.0f}", f"{r['median_step_s']:.3f}", f"{r['achieved_gflops']:.0f}",
                          f"{r['mfu_vs_fp32_peak']:.0%}", half_mfu)
        console.print(table)

    fast_mode = max(results, key=lambda p: results[p]["tgt_tokens_per_s"])
    fp32 = results.get("fp32", results[precisions[0]])
    summary = {
        "sets": args.sets,
        "allocator": allocator_name(),
        "tgt_tokens_per_s_fp32": round(fp32["tgt_tokens_per_s"], 1),
        "mfu_fp32": round(fp32["mfu_vs_fp32_peak"], 3),
        "tgt_tokens_per_s_fast": round(results[fast_mode]["tgt_tokens_per_s"], 1),
        "fast_mode": fast_mode,
        "fast_over_fp32": round(results[fast_mode]["tgt_tokens_per_s"] / fp32["tgt_tokens_per_s"], 3),
        **{f"tgt_tokens_per_s_{p}": round(r["tgt_tokens_per_s"], 1) for p, r in results.items()},
        **{f"matmul_gflops_{p}": round(peak[f"{p} 2048^3"], 1) for p in ("fp32", "bf16", "fp16") if f"{p} 2048^3" in peak},
        **{f"matmul_gflops_{p}_train_shape": round(peak[f"{p} 4096x256x1024"], 1)
           for p in ("fp32", "bf16", "fp16") if f"{p} 4096x256x1024" in peak},
        **({"skipped": skipped} if skipped else {}),
        "pad_fraction": round(max(src_pad, tgt_pad), 4),
        "pad_fraction_src": round(src_pad, 4),
        "pad_fraction_tgt": round(tgt_pad, 4),
        "steps": args.steps,
        "threads": args.threads,
    }
    for half in ("bf16", "fp16"):
        if half in results:
            summary[f"mfu_{half}_vs_{half}_peak"] = round(results[half]["mfu_vs_half_peak"], 3)
    for precision, ms in phases.items():
        summary[f"phases_ms_{precision}"] = {phase: round(value, 2) for phase, value in ms.items()}
    if "error" in compiled:
        summary["compile_error"] = compiled["error"]
    elif compiled:
        summary["compile_seconds"] = round(compiled[precisions[0]]["compile_seconds"], 1)
        for precision, r in compiled.items():
            summary[f"compile_seconds_{precision}"] = round(r["compile_seconds"], 1)
            summary[f"tgt_tokens_per_s_compiled_{precision}"] = round(r["tgt_tokens_per_s"], 1)
    if scaling_rows:
        summary["scaling"] = scaling_rows
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
