"""How far the bf16 training step is from one without casts: autocast bf16 against a model cast whole to bf16.

    python -m bench.bf16_bound --exp EXP [--steps 16] [--threads 2] [--set SECTION.FIELD=VALUE ...]

mt trains bf16 under autocast: fp32 weights and residual stream, each linear's input and weight cast to
bf16, LayerNorm, softmax and the loss's sums in fp32. A model cast whole to bf16 (weights, activations,
optimizer state; `model.to(torch.bfloat16)`, no autocast) is no way to train (its updates round away),
but its step is the fastest any cast-free bf16 design could be: the ratio bounds what keeping the
residual stream in bf16 could buy. Two trainers on the experiment's batches in the same order, a step of
each in turn, the order swapped every round (the first to see a batch's shapes pays oneDNN's kernels
for them, the second reuses them). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True, help="A binarized experiment (nothing is written into it).")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a field of the experiment's config (repeatable), e.g. model.d_model=256.")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()
    import torch

    from mt.config.resolve import apply_sets
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name
    from mt.training.setup import build_training

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)

    def trainer(whole_bf16: bool):
        cfg = exp.load_config()
        apply_sets(cfg, [*args.sets, "train.precision=bf16"])
        made = build_training(exp, cfg).trainer
        made.start_clock()
        if whole_bf16:
            made.model.to(torch.bfloat16)
            made.precision = "fp32"  # no autocast: the tensors are bf16 already
        return made

    runs = {"autocast bf16 (mt)": trainer(False), "whole model in bf16 (bound)": trainer(True)}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    tokens = dict.fromkeys(runs, 0)
    for run in runs.values():
        for _ in range(3):
            run.update()
    for step in range(args.steps):
        order = list(runs) if step % 2 else list(runs)[::-1]
        for name in order:
            start = time.perf_counter()
            stats = runs[name].update()
            seconds[name].append(time.perf_counter() - start)
            tokens[name] += stats["tgt_tokens"]
    rates = {name: tokens[name] / sum(seconds[name]) for name in runs}

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bf16 training step, {args.exp}, {args.steps} steps each, {args.threads} threads, {cpu_name()}")
    for column in ("step", "tgt tokens/s", "median s/step", "vs autocast"):
        table.add_column(column, justify="left" if column == "step" else "right")
    base = rates["autocast bf16 (mt)"]
    for name in runs:
        table.add_row(name, f"{rates[name]:,.0f}", f"{statistics.median(seconds[name]):.3f}", f"{rates[name] / base:.2f}x")
    Console(width=120).print(table)
    print(json.dumps({
        "cpu": cpu_name(), "threads": args.threads, "allocator": allocator_name(), "sets": args.sets,
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "steps": args.steps,
        "tgt_tokens_per_s_autocast": round(base, 1), "tgt_tokens_per_s_whole_bf16": round(rates["whole model in bf16 (bound)"], 1),
        "bound_ratio": round(rates["whole model in bf16 (bound)"] / base, 3),
    }))


if __name__ == "__main__":
    main()
