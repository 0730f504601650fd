"""Training speed of candidate models for the one-hour Multi30k recipe, fp32 and bf16 interleaved.

    python -m bench.model_speed [--exp experiments/bench-multi30k] [--steps 10]

Inputs: a binarized Multi30k experiment (the one `bench/multi30k.py` leaves: joint unigram 8000,
~4096 tokens per batch); nothing is written into it. Each model is a fresh Trainer on those batches
(dropout 0.3 as in the recipe); 3 warm-up steps per precision, then --steps steps of each,
alternating. Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from pathlib import Path

from bench.common import stamp

REPO = Path(__file__).resolve().parents[1]

MODELS = {
    "4+4, d128, FFN 256 (Wu et al.'s tiny)": dict(enc_layers=4, dec_layers=4, d_model=128, d_ff=256, n_heads=4),
    "3+3, d256, FFN 1024 (benchmark preset)": dict(enc_layers=3, dec_layers=3, d_model=256, d_ff=1024, n_heads=4),
    "4+4, d256, FFN 512": dict(enc_layers=4, dec_layers=4, d_model=256, d_ff=512, n_heads=4),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    from bench.common import measure
    from mt.experiment.paths import Experiment
    from mt.training.setup import build_training

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    rows = []
    for name, shape in MODELS.items():
        run_cfg = copy.deepcopy(cfg)
        run_cfg.model.__dict__.update(dropout=0.3, **shape)
        measured = measure(build_training(exp, run_cfg).trainer, ["fp32", "bf16"], args.steps, warmup=3)
        row = {"model": name}
        for precision, m in measured.items():
            row[f"tgt_tokens_per_s_{precision}"] = round(m["tgt"] / sum(m["seconds"]), 1)
            row[f"median_step_s_{precision}"] = round(statistics.median(m["seconds"]), 3)
        rows.append(row)
    table = Table(title=f"training speed on {args.exp}, {args.steps} steps per precision, interleaved")
    for column in ("model", "fp32 tgt tok/s", "bf16 tgt tok/s", "bf16 s/step", "bf16 / fp32"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['tgt_tokens_per_s_fp32']:,.0f}", f"{r['tgt_tokens_per_s_bf16']:,.0f}",
                      f"{r['median_step_s_bf16']:.2f}", f"{r['tgt_tokens_per_s_bf16'] / r['tgt_tokens_per_s_fp32']:.2f}x")
    Console(width=120).print(table)
    print(json.dumps({**stamp(), "models": rows, "steps": args.steps, "threads": args.threads}))


if __name__ == "__main__":
    main()
