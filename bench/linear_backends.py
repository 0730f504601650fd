"""Which matrix library runs decoding's linear layers fastest on this CPU: torch's default path, oneDNN, int8, bf16.

    python -m bench.linear_backends [--threads 2] [--d-model 128] [--d-ff 512] [--vocab 8000]

Inputs: random fp32 tensors of a decoder step's shapes for the one-hour Multi30k model (d_model 128,
FFN 512, vocabulary 8000), with M rows = live hypotheses (a 2000-token batch at beam 5 has ~700 of
them, the batch's tail a few dozen) and a whole batch's source tokens (2000, the encoder). Each
layer y = x W^T + b is timed as (a) `F.linear` in fp32, torch's default (on x86 builds Intel MKL's
sgemm, which picks its own code path by CPU vendor), (b) the same layer converted by
`torch.utils.mkldnn.to_mkldnn` (oneDNN's fp32 kernels, the library CTranslate2 uses for its fp32 GEMMs
on AMD CPUs), its dense input converted each call as a model would, (c) int8 dynamic quantization
(`torch.ao.quantization.quantize_dynamic`, what `--quantize int8` runs: fbgemm), (d) `F.linear` in
bf16. Medians of repeated calls; GFLOP/s = 2 M K N / time. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def median_seconds(fn, min_seconds: float = 0.3) -> float:
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(times) < 10:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=8000)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.ao.quantization import quantize_dynamic
    from torch.utils import mkldnn as mkldnn_utils

    from mt.hardware import cpu_name

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    d, f, v = args.d_model, args.d_ff, args.vocab
    layers = {"q/k/v/out d->d": (d, d), "FFN in d->ff": (d, f), "FFN out ff->d": (f, d), "vocabulary d->V": (d, v)}
    rows = []
    for name, (k, n) in layers.items():
        for m in (40, 700, 2000):
            if name.startswith("vocabulary") and m == 2000:
                continue  # the output layer runs only on decoder steps
            linear = torch.nn.Linear(k, n).eval()
            x = torch.randn(m, k)
            with torch.no_grad():
                onednn = mkldnn_utils.to_mkldnn(torch.nn.Sequential(torch.nn.Linear(k, n)).eval())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    int8 = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8)
                w16, b16, x16 = linear.weight.bfloat16(), linear.bias.bfloat16(), x.bfloat16()
                timings = {
                    "fp32 default": median_seconds(lambda: F.linear(x, linear.weight, linear.bias)),
                    "fp32 oneDNN": median_seconds(lambda: onednn(x)),
                    "int8 dynamic": median_seconds(lambda: int8(x)),
                    "bf16": median_seconds(lambda: F.linear(x16, w16, b16)),
                }
            flops = 2 * m * k * n
            rows.append({"layer": name, "m": m, "k": k, "n": n,
                         **{key: round(flops / s / 1e9, 1) for key, s in timings.items()}})

    from rich.console import Console
    from rich.table import Table

    columns = ("fp32 default", "fp32 oneDNN", "int8 dynamic", "bf16")
    table = Table(title=f"GFLOP/s per linear layer, {cpu_name()}, {args.threads} threads, torch {torch.__version__}")
    for col in ("layer", "M x K x N", *columns):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for row in rows:
        table.add_row(row["layer"], f"{row['m']} x {row['k']} x {row['n']}", *(f"{row[c]:,.1f}" for c in columns))
    Console(file=sys.stdout, width=140).print(table)
    blas = [line.strip() for line in torch.__config__.show().splitlines() if "BLAS" in line or "MKL" in line]
    print("; ".join(blas[:3]))
    print(json.dumps({"rows": rows, "machine": cpu_name(), "threads": args.threads, "torch": torch.__version__,
                      "date": time.strftime("%Y-%m-%d", time.gmtime())}))


if __name__ == "__main__":
    main()
