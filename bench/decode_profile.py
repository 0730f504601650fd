"""Where mt's beam search spends its time: torch.profiler's op table over one pass of a test split.

    python -m bench.decode_profile --exp experiments/bench-multi30k [--sentences 1000] [--mode fp32|int8|bf16]

Inputs: a trained experiment and its test split (the first --sentences lines), decoded as
bench/translate.py decodes it (beam 5, `length` penalty at --alpha, 2 threads, the checkpoint named by
--checkpoint; mt's own search, with the experiment's decode.shortlist). Prints the ops by self CPU
time, the share of the pass spent inside torch ops against Python between them (the per-step
overhead), the pass split into phases (the encoder, the decoder's layers, its output projection,
ranking each step's candidates, and the search's own bookkeeping with tokenizing), the
vocabulary-wide ops on the logits of the step with the most rows (log_softmax; torch's topk against
mt's `row_topk`; greedy search's pick, torch's argmax against max's indices), each against one plain
read of the same logits (`amax`, the floor a fused pass would approach), and attention's softmax over rows of a few keys, torch's against mt's `softmax_rows`. The
last line is one JSON object: wall seconds, op seconds, the top ops' self seconds, decoder steps
(calls of the decoder's layers), the phases and those timings.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    cfg.decode.beam, cfg.decode.alpha, cfg.decode.length_penalty = args.beam, args.alpha, "length"
    src, _ = load_split(cfg.data.sources("test"))
    src = src[:args.sentences]
    translator = Translator.load(exp, cfg, args.checkpoint, "cpu", "bf16" if args.mode == "bf16" else "fp32",
                                 "int8" if args.mode == "int8" else None)
    translator.decode_cfg.workers = 1  # one search at a time: a step's ops, not two searches interleaved
    translator.decode_cfg.engine = "mt"  # what is profiled is mt's own search, whatever EXP's decode.engine
    translator.translate(src[:16])
    steps = 0
    decode_hidden = translator.model.decode_hidden  # every step passes here, with a shortlist or without

    def counted(*a, **k):
        nonlocal steps
        steps += 1
        return decode_hidden(*a, **k)

    translator.model.decode_hidden = counted
    start = time.perf_counter()
    translator.translate(src)
    plain = time.perf_counter() - start
    steps_plain, steps = steps, 0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        translator.translate(src)
        profiled = time.perf_counter() - start
    phases, largest = phase_split(translator, src)
    vocab_ops = vocabulary_ops(largest)
    softmax_ms = attention_softmax()
    events = prof.key_averages()
    # Top-level ops only: an op's self time excludes its children, so the sum is the time spent in ops.
    op_seconds = sum(e.self_cpu_time_total for e in events) / 1e6
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.rows]
    print(f"{cpu_name()}, {args.threads} threads, {len(src)} sentences, beam {args.beam}, mode {args.mode}")
    print(f"pass without the profiler {plain:.2f} s, with it {profiled:.2f} s; time inside ops {op_seconds:.2f} s "
          f"({op_seconds / profiled:.0%}); decoder steps {steps_plain} ({plain / steps_plain * 1e3:.2f} ms each)")
    total = sum(phases.values())
    print("phases (s): " + ", ".join(f"{name} {seconds:.2f} ({seconds / total:.0%})" for name, seconds in phases.items()))
    print(f"vocabulary ops on {largest.size(0)} x {largest.size(1)} logits (ms): "
          + ", ".join(f"{name} {ms:.2f}" for name, ms in vocab_ops.items()))
    print("attention softmax over 2000 rows (ms), torch / mt's softmax_rows: " + ", ".join(
        f"{keys} keys {ms['torch']:.3f} / {ms['mt']:.3f}" for keys, ms in softmax_ms.items()))
    print(json.dumps({
        "phases_seconds": {name: round(seconds, 3) for name, seconds in phases.items()},
        "vocabulary_ops_ms": {name: round(ms, 3) for name, ms in vocab_ops.items()},
        "attention_softmax_ms": softmax_ms, "largest_step_rows": largest.size(0), "vocab": largest.size(1),
        "wall_seconds": round(plain, 3), "profiled_seconds": round(profiled, 3), "op_seconds": round(op_seconds, 3),
        "decoder_steps": steps_plain, "ms_per_step": round(plain / steps_plain * 1e3, 3),
        "top_ops": {e.key: round(e.self_cpu_time_total / 1e6, 3) for e in top}, "calls": {e.key: e.count for e in top},
        "machine": cpu_name(), "threads": args.threads, "sentences": len(src), "beam": args.beam, "mode": args.mode,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }))


def phase_split(translator, src):
    """One more pass with the encoder, the decoder and the candidates' ranking timed apart (what is
    left is the search's bookkeeping, tokenizing and detokenizing); also the logits of the step with
    the most rows."""
    import torch

    import mt.search.steps as steps
    from mt.decoding.shortlist import Shortlisted

    seconds = {"encoder": 0.0, "decoder layers": 0.0, "output projection": 0.0,
               "ranking candidates (vocabulary-wide)": 0.0}
    largest = [torch.empty(0, 0)]
    model, rank = translator.model, steps.top_candidates

    def timed(name, fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            result = fn(*args, **kwargs)
            seconds[name] += time.perf_counter() - start
            return result
        return call

    def rank_and_keep(logits, *args):
        if logits.size(0) > largest[0].size(0):
            largest[0] = logits.detach().clone()
        return rank(logits, *args)

    # The decoder's calls, whole (the model's own, or a shortlist's over its candidates), and its layers
    # apart: the output projection is the difference.
    saved = model.encode, model.decode, model.decode_hidden, Shortlisted.decode
    model.encode = timed("encoder", saved[0])
    model.decode_hidden = timed("decoder layers", saved[2])
    seconds["decoder"] = 0.0
    model.decode = timed("decoder", saved[1])
    Shortlisted.decode = timed("decoder", saved[3])
    steps.top_candidates = timed("ranking candidates (vocabulary-wide)", rank_and_keep)
    try:
        start = time.perf_counter()
        translator.translate(src)
        wall = time.perf_counter() - start
    finally:
        model.encode, model.decode, model.decode_hidden, Shortlisted.decode = saved
        steps.top_candidates = rank
    seconds["output projection"] = seconds.pop("decoder") - seconds["decoder layers"]
    seconds["search bookkeeping + tokenizing"] = wall - sum(seconds.values())
    return seconds, largest[0].float()


def vocabulary_ops(logits, repeats: int = 20) -> dict[str, float]:
    """Median ms of each vocabulary-wide op of a step on these logits, and of one plain read (amax)."""
    import torch

    from bench.common import median_ms
    from mt.search.steps import row_topk

    logprobs = torch.log_softmax(logits, dim=-1)
    ops = {"log_softmax": lambda: torch.log_softmax(logits, dim=-1), "topk 10 per row": lambda: logprobs.topk(10, dim=1),
           "row_topk 10 (blocks)": lambda: row_topk(logprobs, 10), "argmax (greedy, before)": lambda: logprobs.argmax(dim=-1),
           "max's indices (greedy)": lambda: logprobs.max(dim=-1).indices, "one read (amax)": lambda: logits.amax(dim=-1)}
    return {name: median_ms(op, repeats, warmup=1) for name, op in ops.items()}


def attention_softmax(rows: int = 2000, repeats: int = 50) -> dict[int, dict[str, float]]:
    """Median ms of torch's softmax and mt's softmax_rows over the last dimension of (rows, 1, keys)
    scores, at key lengths below and above one vector of floats: a decoder step's attention shapes."""
    import torch

    from bench.common import median_ms
    from mt.model.attention import softmax_rows

    result = {}
    for keys in (8, 15, 16, 31):
        scores = torch.randn(rows, 1, keys)
        result[keys] = {name: round(median_ms(lambda: op(scores), repeats, warmup=0), 4)  # noqa: B023 (called at once)
                        for name, op in (("torch", lambda s: s.softmax(dim=-1)), ("mt", softmax_rows))}
    return result


if __name__ == "__main__":
    main()
