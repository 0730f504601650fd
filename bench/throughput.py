"""Training throughput: the machine's matmul peak, the benchmark preset's step in each precision, MFU.

    python -m bench.throughput [--exp experiments/bench-multi30k] [--steps 12] [--precisions fp32,bf16,fp16] [--profile]
        [--set model.dropout=0]

Inputs: a binarized experiment with the benchmark preset (the one `bench/multi30k.py` leaves:
Multi30k EN->DE, joint unigram 8000, 3+3 layers, d_model 256, ~4096 tokens per batch); nothing is
written into it. (a) matmul GFLOP/s with --threads threads: 2048^3 fp32 and the training-shaped
4096x256 @ 256x1024 in fp32, bf16 and fp16, the fastest of 7 runs, precisions interleaved
(mt.hardware.matmul_gflops, as `train.precision: auto` times them). (b) training steps of a fresh
model on the experiment's batches, precisions interleaved step by step so that they see the same machine load;
target tokens/s = tokens / time over the measured steps. Without --precisions, a half precision this
CPU runs 10x or more slower than fp32 (no bf16/fp16 hardware; mt.hardware.too_slow) is left out of
(a) and (b) and everything after, and the step table says so. MFU = 6 x (encoder params x src tokens/s +
(decoder params + output projection) x tgt tokens/s) / measured peak (embeddings excluded: lookups,
not matmuls; attention scores not counted, as in the reference figures). (c) pad fraction of the
epoch's batches. (d) with --profile, the top operators of a step in each precision (torch.profiler), and the matmul
operators' share of their time.
(e) with --phases (and --profile), the step split into phases (embedding, attention, FFN, residual +
LayerNorm, output layer + loss, optimizer, data, other) in each precision, see profile_phases.
(f) with --scaling, tokens/s and MFU of d_model 256 and 512 (3+3 layers) at 2048/4096/8192 tokens
per batch, fresh models on the same data. (g) with --compile, the train.compile step: compile time
and tokens/s. Prints tables, and as its last line one JSON object.

    python -m bench.throughput --profile --compile --scaling --steps 12
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import measure, model_flops_per_token, stamp

if TYPE_CHECKING:
    from torch import nn

    from mt.training.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]

MATMUL_OPERATORS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")  # the products the 6N count is of
FAIRSEQ_TGT_TOKENS_PER_S = 2461  # fairseq 0.12.2's fp32 figure on the small preset, EPYC (Zen 4), not side by side


SCALING_MODELS = {256: dict(d_ff=1024, n_heads=4), 512: dict(d_ff=2048, n_heads=8)}
SCALING_MAX_TOKENS = (2048, 4096, 8192)


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


def scaling(exp, cfg, precisions: list[str], steps: int, peak: dict[str, float], warmup: int) -> list[dict]:
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
            measured = measure(trainer, precisions, steps, warmup=warmup)
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


# -- where a step's time goes (--phases) ------------------------------------------------------------
# The step split into phases (embedding, attention, FFN, residual + LayerNorm, output layer + loss,
# optimizer, data, other) with torch's profiler. It hooks the model's sub-layers and the Trainer's
# public phases (the stream's `next_batch`, `finish_gradients`, `apply_update`) and removes every hook after.
PHASES = ("embedding", "attention", "FFN", "residual+LayerNorm", "output+loss", "optimizer", "data")


def phase_of_module(module: nn.Module, trainer: Trainer) -> str | None:
    """The phase whose time a module's forward (and the backward of what it made) counts to."""
    from mt.model.attention import MultiHeadAttention
    from mt.model.layers import Embedding, FeedForward, Residual

    if isinstance(module, Embedding):
        return "embedding"
    if isinstance(module, MultiHeadAttention):  # self and cross, with their projections
        return "attention"
    if isinstance(module, FeedForward):
        return "FFN"
    if isinstance(module, Residual):  # its LayerNorm, dropout and sum; the sublayer is its own scope
        return "residual+LayerNorm"
    if module is trainer.model.output or module is trainer.loss_module:
        # The loss module's scope is the outermost: whatever the forward does outside the model's
        # sub-layers (masks, picking the non-pad positions, the loss itself) counts here.
        return "output+loss"
    return None


def profile_phases(trainer: Trainer, steps: int) -> dict[str, float]:
    """Milliseconds per step of each of PHASES, "other" (the step less all of them) and "step".

    Why this way: the profiler sees operators, not the model's structure. Forward hooks open a
    record_function scope per sub-layer; a forward operator belongs to its innermost scope, and a
    backward node to the phase of the forward operator that made it (same autograd sequence_nr).
    Data (next_batch + collate) and optimizer (gradient scaling and clipping, Adam, zero_grad) are
    scopes around the Trainer's phases. Times are those of the profiled steps, which the
    profiler's own overhead makes slower than plain ones; shares are of the profiled step.
    """
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    open_scopes: dict[int, list] = {}

    def enter(phase):
        def hook(module, args):
            scope = record_function(f"phase:{phase}")
            scope.__enter__()
            open_scopes.setdefault(id(module), []).append(scope)
        return hook

    def leave(module, args, output):
        open_scopes[id(module)].pop().__exit__(None, None, None)

    def scoped(phase, method):
        def run(*args, **kwargs):
            with record_function(f"phase:{phase}"):
                return method(*args, **kwargs)
        return run

    with ExitStack() as stack:
        for module in [*trainer.model.modules(), trainer.loss_module]:
            phase = phase_of_module(module, trainer)
            if phase is not None:
                stack.callback(module.register_forward_pre_hook(enter(phase)).remove)
                stack.callback(module.register_forward_hook(leave, always_call=True).remove)
        for owner, name, phase in ((trainer.stream, "next_batch", "data"), (trainer, "finish_gradients", "optimizer"),
                                   (trainer, "apply_update", "optimizer")):
            setattr(owner, name, scoped(phase, getattr(owner, name)))
            stack.callback(delattr, owner, name)  # back to the class's method
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                with record_function("phase:step"):
                    trainer.step()
    return attribute_phases(prof.events(), steps)


def attribute_phases(events, steps: int) -> dict[str, float]:
    """The arithmetic of `profile_phases` on a profiler's events: exclusive time of each phase
    scope (its span less the phase scopes nested in it) plus the backward nodes of its operators."""
    def phase_above(event):
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("phase:"):
            parent = parent.cpu_parent
        return parent

    totals = dict.fromkeys(PHASES, 0.0)
    step = 0.0
    forward_phase: dict[int, str] = {}  # autograd sequence_nr -> phase of the op that made the node
    backward = []
    for event in events:
        duration = event.time_range.end - event.time_range.start  # microseconds
        if event.name == "phase:step":
            step += duration
        elif event.name.startswith("phase:"):
            totals[event.name[6:]] += duration
            scope = phase_above(event)
            if scope is not None and scope.name != "phase:step":
                totals[scope.name[6:]] -= duration
        elif event.name.startswith("autograd::engine::evaluate_function:"):
            backward.append((event.sequence_nr, duration))
        elif event.sequence_nr >= 0:
            scope = phase_above(event)
            if scope is not None and scope.name != "phase:step":
                forward_phase.setdefault(event.sequence_nr, scope.name[6:])
    for sequence_nr, duration in backward:
        phase = forward_phase.get(sequence_nr)
        if phase is not None:  # else (AccumulateGrad, ...) it stays in "other"
            totals[phase] += duration
    result = {phase: totals[phase] / steps / 1e3 for phase in PHASES}
    result["other"] = step / steps / 1e3 - sum(result.values())
    result["step"] = step / steps / 1e3
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--steps", type=int, default=12, help="Measured steps per precision (and per scaling point).")
    parser.add_argument("--precisions", default=None,
                        help="Default fp32,bf16,fp16, less a half precision this CPU runs 10x or more slower than "
                             "fp32 (mt.hardware.too_slow); named here, a precision always runs.")
    parser.add_argument("--warmup", type=int, default=2,
                        help="Warm-up updates per precision before the measured ones (oneDNN builds its kernels "
                             "for a precision over its first updates; a training run's thousands amortise that).")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="Top operators of a step in each precision, and --phases.")
    parser.add_argument("--phases", action="store_true", help="The step split into phases, in each precision.")
    parser.add_argument("--phase-steps", type=int, default=3, help="Profiled steps per precision for --phases.")
    parser.add_argument("--scaling", action="store_true", help="d_model 256/512 at 2048/4096/8192 tokens per batch.")
    parser.add_argument("--compile", action="store_true", help="Also the train.compile step: compile time and tokens/s.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a field of the experiment's config for this measurement (repeatable), e.g. "
                             "model.dropout=0 to time the step without random masks; recorded in the JSON.")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc
    from mt.hardware import matmul_gflops, too_slow

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc)

    import torch

    from mt.config.resolve import apply_sets
    from mt.data.batching import make_batches, pad_fraction
    from mt.errors import ConfigError
    from mt.experiment.paths import Experiment
    from mt.training.setup import build_training

    torch.set_num_threads(args.threads)
    skipped = {}  # precision -> why: only from the default list (without hardware, half an hour of steps)
    if args.precisions is None:
        skipped = {p: reason for p in ("bf16", "fp16") if (reason := too_slow(p))}
        args.precisions = ",".join(p for p in ("fp32", "bf16", "fp16") if p not in skipped)
    precisions = [p.strip() for p in args.precisions.split(",")]
    timed = tuple(name for name in ("fp32", "bf16", "fp16")  # 2 min each without hardware
                  if name not in skipped and (name == "fp32" or name in precisions))
    peak = {}
    for shape, label in (((2048, 2048, 2048), "2048^3"), ((4096, 256, 1024), "4096x256x1024")):
        for name, gflops in matmul_gflops(*shape, warmup=2, timed=7, names=timed).items():
            peak[f"{name} {label}"] = gflops
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

    measured = measure(trainer, precisions, args.steps, warmup=args.warmup)
    results = {p: rates(m, encoder_params, decoder_params, peak, p) for p, m in measured.items()}

    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    table = Table(title=f"matmul peak, {args.threads} threads (fastest of 7)")
    table.add_column("product")
    table.add_column("GFLOP/s", justify="right")
    for name, value in peak.items():
        table.add_row(name, f"{value:.0f}")
    console.print(table)
    table = Table(title=f"training step, benchmark preset on {args.exp}, {args.steps} steps each after {args.warmup} warm-up, interleaved")
    for column in ("precision", "tgt tok/s", "src+tgt tok/s", "median s/step", "GFLOP/s", "MFU (fp32 peak)"):
        table.add_column(column, justify="left" if column == "precision" else "right")
    for precision, r in results.items():
        table.add_row(precision, f"{r['tgt_tokens_per_s']:,.0f}", f"{r['tokens_per_s']:,.0f}", f"{r['median_step_s']:.3f}",
                      f"{r['achieved_gflops']:.0f}", f"{r['mfu_vs_fp32_peak']:.0%}")
    for precision in skipped:
        table.add_row(precision, "skipped", "", "", "", "")
    # A reference, not a ratio: fairseq's figure was measured on another machine, on the preset's own shape.
    table.caption = f"fairseq 0.12.2, fp32, the small preset, not side by side: {FAIRSEQ_TGT_TOKENS_PER_S:,} tgt tok/s"
    if skipped:
        table.caption += "; " + "; ".join(f"{p} skipped: {reason}" for p, reason in skipped.items()) + \
            " (a short matmul); pass --precisions explicitly to force"
    console.print(table)
    print(f"pad fraction of the epoch's batches: source {src_pad:.1%}, target {tgt_pad:.1%}; "
          f"matmul params: encoder {encoder_params:,}, decoder + output {decoder_params:,}")

    matmul_share = {}  # precision -> the matmul operators' share of a profiled step's operator time
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for precision in precisions:
            trainer.precision = precision
            trainer.step()  # this precision's first shapes outside the profile
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(3):
                    trainer.step()
            averages = prof.key_averages()
            total = sum(event.self_cpu_time_total for event in averages)
            matmul = sum(event.self_cpu_time_total for event in averages if event.key in MATMUL_OPERATORS)
            matmul_share[precision] = round(matmul / total, 3) if total else 0.0
            print(f"{precision}: top operators of 3 profiled steps; the matmul operators ({', '.join(MATMUL_OPERATORS)}) "
                  f"take {matmul_share[precision]:.0%} of their self time")
            print(averages.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=40))

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
        scaling_rows = scaling(exp, cfg, precisions, args.steps, peak, args.warmup)
        table = Table(title=f"scaling, 3+3 layers, {args.steps} steps each (after {args.warmup} warm-up), fresh models")
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
    fp32 = results.get("fp32")  # without fp32 measured, no fp32 figure or ratio (another precision's is not one)
    summary = {
        **stamp(),
        "sets": args.sets,
        "allocator": allocator_name(),
        **({"tgt_tokens_per_s_fp32": round(fp32["tgt_tokens_per_s"], 1), "mfu_fp32": round(fp32["mfu_vs_fp32_peak"], 3),
            "fast_over_fp32": round(results[fast_mode]["tgt_tokens_per_s"] / fp32["tgt_tokens_per_s"], 3)}
           if fp32 else {}),
        "tgt_tokens_per_s_fast": round(results[fast_mode]["tgt_tokens_per_s"], 1),
        "fast_mode": fast_mode,
        **{f"tgt_tokens_per_s_{p}": round(r["tgt_tokens_per_s"], 1) for p, r in results.items()},
        **{f"matmul_gflops_{p}": round(peak[f"{p} 2048^3"], 1) for p in ("fp32", "bf16", "fp16") if f"{p} 2048^3" in peak},
        **{f"matmul_gflops_{p}_train_shape": round(peak[f"{p} 4096x256x1024"], 1)
           for p in ("fp32", "bf16", "fp16") if f"{p} 4096x256x1024" in peak},
        **({"skipped": skipped} if skipped else {}),
        "pad_fraction": round(max(src_pad, tgt_pad), 4),
        "pad_fraction_src": round(src_pad, 4),
        "pad_fraction_tgt": round(tgt_pad, 4),
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": args.threads,
    }
    for half in ("bf16", "fp16"):
        if half in results:
            summary[f"mfu_{half}_vs_{half}_peak"] = round(results[half]["mfu_vs_half_peak"], 3)
    for precision, share in matmul_share.items():
        summary[f"matmul_share_profiled_{precision}"] = share
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
