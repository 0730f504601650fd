"""The CPU kernels behind mt's training speed, each against the torch default it replaces.

    python -m bench.cpu_kernels [--threads 2]

Inputs: random tensors of the benchmark preset's shapes (a batch of 300 sentences x 14 tokens,
d_model 256, 4 heads; logits 4096 x 8000). (a) dropout: F.dropout against mt.model.dropout; (b) attention forward + backward: F.scaled_dot_product_attention against mt's written-out attention, fp32 and
bf16, on the strided per-head views the model gives them; (c) allocating and filling the logits-sized tensor, and log_softmax over it, before and after
mt.allocator.keep_freed_memory() (process-wide: measured in that order; the attention rows after it,
as in training); (d) the output layer and smoothed loss, forward + backward under bf16 autocast, for
3,500 target tokens, vocabulary 8000, d_model 128 and 256: F.linear + log_softmax + the smoothed
target under autocast against mt.training.loss.label_smoothed_loss (projection and loss in row chunks, the
gradient written out), at several chunk sizes; (e) one AdamW step over the benchmark preset's
parameters (7.6M, with gradients): torch's CPU default (a loop over the tensors) and foreach=True
against fused=True (mt.training.optimizer). Medians of repeated runs.
Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import median_ms

REPO = Path(__file__).resolve().parents[1]


def output_and_loss_rows(torch, F) -> list[tuple[str, float, float]]:
    """(d): the unfused output layer + loss against mt's chunked one, per d_model and chunk size."""
    from mt.training.loss import CHUNK_ELEMENTS, label_smoothed_loss

    tokens, vocab, eps = 3500, 8000, 0.1
    target = torch.randint(1, vocab, (tokens,))
    rows = []
    for d_model in (128, 256):
        hidden = torch.randn(tokens, d_model, requires_grad=True)
        weight = (torch.randn(vocab, d_model) * d_model**-0.5).requires_grad_()

        def unfused():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logp = torch.log_softmax(F.linear(hidden, weight), dim=-1, dtype=torch.float32)
            nll = -logp.gather(1, target[:, None]).sum()
            smooth = -(logp.sum() - logp[:, 0].sum()) / (vocab - 1)
            ((1 - eps) * nll + eps * smooth).backward()

        default = median_ms(unfused, 10)
        for elements in (CHUNK_ELEMENTS // 4, CHUNK_ELEMENTS, CHUNK_ELEMENTS * 4, tokens * vocab):
            chunk_rows = max(1, elements // vocab)

            def chunked():
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss, _, _ = label_smoothed_loss(hidden, weight, target, eps, chunk_rows=chunk_rows)
                loss.backward()

            label = "all rows" if chunk_rows >= tokens else f"{chunk_rows} rows"
            default_mark = " (default)" if elements == CHUNK_ELEMENTS else ""
            rows.append((f"output + loss fwd+bwd, bf16, d{d_model}, chunks of {label}{default_mark}",
                         default, median_ms(chunked, 10)))
    return rows


def optimizer_rows(torch) -> list[tuple[str, float, float]]:
    """(e): AdamW steps over the preset's parameters, torch's CPU default and foreach against fused."""
    from mt.config.recipes import MODEL_PRESETS
    from mt.config.schema import ModelConfig
    from mt.model.transformer import build_model

    model = build_model(ModelConfig(**MODEL_PRESETS["small"]), 8000, 8000, True)
    for param in model.parameters():
        param.grad = torch.randn_like(param)

    def steps(**how):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **how)
        return median_ms(optimizer.step, 10)

    fused = steps(fused=True)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    return [(f"AdamW step, {params:.1f}M params: default (for-loop)", steps(foreach=False), fused),
            (f"AdamW step, {params:.1f}M params: foreach", steps(foreach=True), fused)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from rich.console import Console
    from rich.table import Table

    from mt import allocator
    from mt.model.attention import MultiHeadAttention
    from mt.model.dropout import dropout

    torch.set_num_threads(args.threads)
    rows = []  # (kernel, torch default ms, mt ms)
    x = torch.randn(300, 14, 256)
    rows.append(("dropout 0.1, 300x14x256", median_ms(lambda: F.dropout(x, 0.1, True)),
                 median_ms(lambda: dropout(x, 0.1, True))))

    logits = torch.randn(4096, 8000)
    fill = lambda: torch.empty_like(logits).fill_(1.0)  # noqa: E731
    log_softmax = lambda: torch.log_softmax(logits, dim=-1)  # noqa: E731
    before = (median_ms(fill, 10), median_ms(log_softmax, 10))
    allocator.keep_freed_memory()
    after = (median_ms(fill, 10), median_ms(log_softmax, 10))
    attn = MultiHeadAttention(256, 4, 0.0, self_attention=True)
    for dtype in (torch.float32, torch.bfloat16):
        # As in the model: heads are strided views of one fused projection, (300, 14, 3 x 256).
        qkv = torch.randn(300, 14, 3 * 256, dtype=dtype, requires_grad=True)
        q, k, v = (attn.split_heads(t) for t in qkv.detach().requires_grad_().chunk(3, dim=-1))

        def sdpa():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

        def written_out():
            attn.attend_explicit(q, k, v, None, True).sum().backward()

        rows.append((f"causal attention fwd+bwd, {str(dtype)[6:]}", median_ms(sdpa), median_ms(written_out)))

    rows.append(("allocate + fill 4096x8000 fp32", before[0], after[0]))
    rows.append(("log_softmax 4096x8000 fp32", before[1], after[1]))
    rows.extend(output_and_loss_rows(torch, F))
    rows.extend(optimizer_rows(torch))

    table = Table(title=f"CPU kernels, {args.threads} threads, median ms")
    for column in ("kernel", "torch default", "mt", "speed-up"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for name, default, ours in rows:
        table.add_row(name, f"{default:.2f}", f"{ours:.2f}", f"{default / ours:.1f}x")
    Console(width=120).print(table)
    print(json.dumps({"kernels": [{"kernel": n, "torch_ms": round(a, 2), "mt_ms": round(b, 2)} for n, a, b in rows],
                      "threads": args.threads}))


if __name__ == "__main__":
    main()
