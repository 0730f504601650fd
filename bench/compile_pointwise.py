"""Why `train.compile` loses on the CPU: Inductor's generated kernels for the step's pointwise parts
against mt's eager ones, forward + backward.

    python -m bench.compile_pointwise [--threads 2] [--repeats 30]

Each row runs one piece of the benchmark preset's step on ~4,000 tokens (the row count changes from
call to call, as token-budget batches do; compiled with dynamic shapes, as train.compile compiles):
(a) the FFN's ReLU + dropout on (rows, 1024) bf16; (b) the post-norm residual, LayerNorm(x +
dropout(y)), x fp32 and y bf16 under autocast; (c) the ReLU alone, whose backward needs a mask of the
positive inputs; then, without autograd, (d) a ReLU that also returns that mask as bool, and (e) the
same mask as uint8: the same bytes, written by another path of the generated code. Eager rows use mt's
dropout (mt.model.dropout); compiled rows F.dropout, as mt does under torch.compile. tcmalloc as in
training. Medians over the repeats, compilation excluded. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.common import stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()
    import torch
    import torch.nn.functional as F
    from rich.console import Console
    from rich.table import Table

    from mt.model.dropout import dropout

    torch.set_num_threads(args.threads)
    norm = torch.nn.LayerNorm(256)

    def act_eager(h):
        return dropout(F.relu(h), 0.1, True)

    def act_compiled(h):
        return F.dropout(F.relu(h), 0.1, True)

    def residual_eager(x, y):
        return norm(x + dropout(y, 0.1, True))

    def residual_compiled(x, y):
        return norm(x + F.dropout(y, 0.1, True))

    def relu(h):
        return F.relu(h)

    def relu_bool(h):
        return F.relu(h), h > 0

    def relu_uint8(h):
        return F.relu(h), (h > 0).to(torch.uint8)

    def wide(rows):
        return [torch.randn(rows, 1024, dtype=torch.bfloat16, requires_grad=True)]

    def narrow(rows):
        return [torch.randn(rows, 256, requires_grad=True), torch.randn(rows, 256, dtype=torch.bfloat16, requires_grad=True)]

    def plain(rows):
        return [torch.randn(rows, 1024, dtype=torch.bfloat16)]

    cases = [  # name, eager fn, fn to compile, inputs, backward
        ("ReLU + dropout, (rows, 1024) bf16, fwd+bwd", act_eager, act_compiled, wide, True),
        ("LayerNorm(x + dropout(y)), (rows, 256), fwd+bwd", residual_eager, residual_compiled, narrow, True),
        ("ReLU, (rows, 1024) bf16, fwd+bwd", relu, relu, wide, True),
        ("ReLU + its mask as bool, no grad", relu_bool, relu_bool, plain, False),
        ("ReLU + its mask as uint8, no grad", relu_uint8, relu_uint8, plain, False),
    ]
    row_counts = [3600 + 97 * (i % 9) for i in range(args.repeats)]  # nine sizes around 4,000 tokens

    def timed(fn, inputs, backward) -> float:
        seconds = []
        for rows in row_counts:
            tensors = inputs(rows)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                start = time.perf_counter()
                out = fn(*tensors)
                if backward:
                    out.backward(torch.ones_like(out))
                seconds.append(time.perf_counter() - start)
        return statistics.median(seconds) * 1000

    results = []
    for name, eager, to_compile, inputs, backward in cases:
        compiled = torch.compile(to_compile, dynamic=True)
        start = time.perf_counter()
        timed(compiled, inputs, backward)  # the first pass compiles
        compile_s = time.perf_counter() - start
        timed(eager, inputs, backward)
        results.append({"case": name, "eager_ms": round(timed(eager, inputs, backward), 2),
                        "compiled_ms": round(timed(compiled, inputs, backward), 2),
                        "first_compiled_pass_s": round(compile_s, 1)})

    table = Table(title=f"pointwise parts of the step, eager against torch.compile (dynamic shapes), "
                        f"{args.threads} threads, median ms of {args.repeats}")
    for column in ("case", "eager", "compiled", "compiled / eager"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for r in results:
        table.add_row(r["case"], f"{r['eager_ms']:.2f}", f"{r['compiled_ms']:.2f}", f"{r['compiled_ms'] / r['eager_ms']:.2f}x")
    Console(width=130).print(table)
    print(json.dumps({**stamp(), "torch": torch.__version__, "threads": args.threads, "allocator": allocator_name(),
                      "repeats": args.repeats, "cases": results}))


if __name__ == "__main__":
    main()
