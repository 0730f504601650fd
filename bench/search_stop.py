"""Beam search's stopping rule, "exact" against "early", on one trained model: BLEU, speed, search length.

    python -m bench.search_stop --exp experiments/bench-multi30k [--checkpoint last] [--beam 5]
        [--settings gnmt:0.6,gnmt:1.4,length:1.0] [--repeats 3] [--threads 2]

Inputs: a trained experiment (e.g. the one `bench/multi30k.py` leaves) and its valid and test splits
(for Multi30k: val, 1014 sentences, and test2016, 1000). For each length penalty setting
(PENALTY:ALPHA) both rules decode both splits with one loaded model; the test split is timed
--repeats times per rule, the rules interleaved so that both see the same machine load, and
sentences/s is from the median. "steps/sent" counts decoder steps per sentence (batch rows / beam,
from a separate counting pass), beside the mean length limit (a * source length + b) and the mean
output length: how far the bound lets the search run. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]

RULES = ("early", "exact")


def count_steps(translator, lines: list[str], beam: int) -> float:
    """Decoder steps per sentence: every decode call's rows, over the beam, summed, per sentence."""
    model = translator.model
    rows = [0]
    decode = model.decode

    def counting(tgt_ids, *args, **kwargs):
        rows[0] += tgt_ids.size(0)
        return decode(tgt_ids, *args, **kwargs)

    model.decode = counting
    try:
        translator.translate(lines)
    finally:
        del model.decode  # back to the class's method
    return rows[0] / beam / len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--checkpoint", default="last")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--settings", default="gnmt:0.6,gnmt:1.4,length:1.0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()  # as `mt` does
    import torch

    from mt.data.corpus import load_split
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.metrics import score

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    cfg.decode.beam = args.beam
    cfg.decode.engine = "mt"  # the stopping rules of mt's own search, whatever EXP's decode.engine
    splits = {split: load_split(cfg.data.sources(split)) for split in ("valid", "test")}
    translator = Translator.load(exp, cfg, args.checkpoint, "cpu")
    src_len = [len(ids) for ids in translator.src_tok.encode(splits["test"][0])]
    mean_limit = statistics.mean(min(int(n * cfg.decode.max_len_a + cfg.decode.max_len_b),
                                     translator.model.max_positions - 1) for n in src_len)
    print(f"inputs: {args.exp} (valid {len(splits['valid'][0])}, test {len(splits['test'][0])} sentences, checkpoint "
          f"{args.checkpoint}); beam {args.beam}, {args.threads} threads, {args.repeats} timed runs per rule; "
          f"{cpu_model()}", file=sys.stderr)
    translator.translate(splits["test"][0][:16])  # warm-up

    rows = []
    for setting in args.settings.split(","):
        penalty, alpha = setting.split(":")
        cfg.decode.length_penalty, cfg.decode.alpha = penalty, float(alpha)
        result = {rule: {"seconds": []} for rule in RULES}
        for rule in RULES:
            cfg.decode.stop = rule
            for split, (src, refs) in splits.items():
                hyps = translator.translate(src)
                scores = score(hyps, refs)
                result[rule][f"bleu_{split}"] = scores["bleu"]
                result[rule][f"chrf_{split}"] = scores["chrf"]
                if split == "test":
                    result[rule]["out_tokens"] = sum(len(ids) for ids in translator.tgt_tok.encode(hyps)) / len(hyps)
                    result[rule]["signature"] = scores["bleu_signature"]
            result[rule]["steps_per_sentence"] = count_steps(translator, splits["test"][0], args.beam)
        for _ in range(args.repeats):
            for rule in RULES:  # interleaved
                cfg.decode.stop = rule
                start = time.perf_counter()
                translator.translate(splits["test"][0])
                result[rule]["seconds"].append(time.perf_counter() - start)
        for rule in RULES:
            r = result[rule]
            r["sent_per_s"] = len(splits["test"][0]) / statistics.median(r["seconds"])
            rows.append({"setting": setting, "stop": rule, **r})
            print(f"{setting} {rule}: test BLEU {r['bleu_test']:.2f}, {r['sent_per_s']:.1f} sent/s", file=sys.stderr)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Stopping rules on {args.exp}, beam {args.beam}, {args.threads} threads, {cpu_model()}")
    for column in ("penalty:alpha", "stop", "val BLEU", "test BLEU", "test chrF", "test sent/s",
                   "steps/sent (limit)", "output tokens", "runs (s)"):
        table.add_column(column, justify="left" if column in ("penalty:alpha", "stop", "runs (s)") else "right")
    for r in rows:
        table.add_row(r["setting"], r["stop"], f"{r['bleu_valid']:.2f}", f"{r['bleu_test']:.2f}", f"{r['chrf_test']:.2f}",
                      f"{r['sent_per_s']:.1f}", f"{r['steps_per_sentence']:.1f} ({mean_limit:.1f})",
                      f"{r['out_tokens']:.1f}", " ".join(f"{s:.2f}" for s in r["seconds"]))
    Console(width=140).print(table)
    summary = {"cpu": cpu_model(), "threads": args.threads, "beam": args.beam, "allocator": allocator_name(),
               "mean_length_limit": round(mean_limit, 1), "signature": rows[0]["signature"]}
    for r in rows:
        key = f"{r['setting'].replace(':', '')}_{r['stop']}"
        summary.update({f"bleu_valid_{key}": round(r["bleu_valid"], 2), f"bleu_test_{key}": round(r["bleu_test"], 2),
                        f"sent_per_s_{key}": round(r["sent_per_s"], 1),
                        f"steps_per_sentence_{key}": round(r["steps_per_sentence"], 2)})
    for setting in args.settings.split(","):
        key = setting.replace(":", "")
        summary[f"speed_exact_over_early_{key}"] = round(
            summary[f"sent_per_s_{key}_exact"] / summary[f"sent_per_s_{key}_early"], 3)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
