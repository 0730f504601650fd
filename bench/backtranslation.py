"""Back-translation against its baseline and the real-pair ceiling, on Multi30k EN->DE.

    python data/multi30k_bt/prepare.py
    mt run recipes/multi30k_bt_en_de_10k.yaml      # the baseline: 10,000 real pairs, 30 minutes
    mt run recipes/multi30k_bt_en_de.yaml          # reverse model, back-translation, final model
    python -m bench.backtranslation --baseline experiments/multi30k_bt_en_de_10k \\
        --bt beam-tagged=experiments/multi30k_bt_en_de [--bt NAME=EXP ...] \\
        [--ceiling experiments/multi30k_en_de | --ceiling-json bench/results/multi30k/multi30k-recipe-....json]

Each experiment is decoded as its config says (decode.*: checkpoint, beam, alpha) on val and
test2016, read through the baseline's config so every model sees the same lines; sacreBLEU and chrF
as `mt evaluate` computes them. Beside the scores: the updates and training seconds each model had
(train.jsonl) and, for back-translated ones, how many synthetic pairs training kept (data/stats.json).
The ceiling is the one-hour recipe on all 29,000 real pairs: an experiment decoded here, or the
JSON line of an earlier run (its CPU and date are printed with it). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]


def training_record(exp: Path) -> dict:
    """Updates and seconds of training, from the last line of train.jsonl that has them."""
    last = {}
    for line in (exp / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "step" in record and "elapsed" in record:
            last = record
    return {"updates": last.get("step"), "train_seconds": round(last.get("elapsed", 0.0), 1)}


def synthetic_pairs(exp: Path) -> int | None:
    """Training pairs kept from `bt:` sources (None for an experiment without any)."""
    stats = json.loads((exp / "data" / "stats.json").read_text())
    kept = [source.get("kept", 0) for source in stats["splits"]["train"].get("sources", [])
            if str(source.get("source", "")).startswith("bt:")]
    return sum(kept) if kept else None


def score_experiment(path: str, splits: dict[str, tuple[list[str], list[str]]], threads: int) -> dict:
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.metrics import score

    exp = Experiment(path)
    translator = Translator.load(exp, exp.load_config())
    row = {"exp": path, **training_record(Path(path)), "synthetic_pairs": synthetic_pairs(Path(path))}
    for split, (lines, refs) in splits.items():
        hyps = [found[0][0] for found in translator.search(lines, DecodeOptions())]
        result = score(hyps, refs)
        row[split] = {"bleu": round(result["bleu"], 2), "chrf": round(result["chrf"], 2)}
        print(f"{path} {split}: {row[split]}", file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, metavar="[NAME=]EXP",
                        help="EN->DE on the 10,000 real pairs alone (or any model the others are compared with).")
    parser.add_argument("--bt", action="append", default=[], metavar="NAME=EXP",
                        help="A model trained on real + back-translated pairs (repeatable: beam, sampled, untagged ...).")
    parser.add_argument("--ceiling", help="The one-hour recipe on all 29,000 real pairs, an experiment to decode.")
    parser.add_argument("--ceiling-json", help="Or the JSON line of an earlier one-hour run (test2016_bleu, val_bleu).")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment

    torch.set_num_threads(args.threads)
    baseline_name, _, baseline = args.baseline.rpartition("=")
    baseline_name = baseline_name or "baseline"
    cfg = Experiment(baseline).load_config()
    splits = {"val": load_split(cfg.data.sources("valid")), "test": load_split(cfg.data.sources("test"))}
    rows = {baseline_name: score_experiment(baseline, splits, args.threads)}
    for spec in args.bt:
        name, _, path = spec.partition("=")
        rows[name] = score_experiment(path, splits, args.threads)
    if args.ceiling:
        rows["ceiling"] = score_experiment(args.ceiling, splits, args.threads)
    elif args.ceiling_json:
        earlier = json.loads(Path(args.ceiling_json).read_text().strip().splitlines()[-1])
        rows["ceiling"] = {"exp": args.ceiling_json, "updates": earlier.get("updates"),
                           "train_seconds": earlier.get("train_seconds"), "synthetic_pairs": None,
                           "val": {"bleu": earlier.get("val_bleu"), "chrf": earlier.get("val_chrf")},
                           "test": {"bleu": earlier.get("test2016_bleu"), "chrf": earlier.get("test2016_chrf")},
                           "note": f"an earlier run: {earlier.get('cpu')}, {earlier.get('date')}"}

    from rich.console import Console
    from rich.table import Table

    base_val, base = rows[baseline_name]["val"]["bleu"], rows[baseline_name]["test"]["bleu"]
    table = Table(title=f"Multi30k EN->DE, sacreBLEU / chrF; {cpu_model()}, {args.threads} threads")
    for column in ("model", "updates", "minutes", "synthetic", "val", "test2016", f"vs {baseline_name}: val / test"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, row in rows.items():
        val, test = row["val"], row["test"]
        table.add_row(name, f"{row['updates']:,}" if row["updates"] else "-",
                      f"{row['train_seconds'] / 60:.1f}" if row["train_seconds"] else "-",
                      f"{row['synthetic_pairs']:,}" if row["synthetic_pairs"] else "-",
                      f"{val['bleu']:.2f} / {val['chrf']:.2f}", f"{test['bleu']:.2f} / {test['chrf']:.2f}",
                      "-" if name == baseline_name else f"{val['bleu'] - base_val:+.2f} / {test['bleu'] - base:+.2f}")
    Console(width=130).print(table)
    if "ceiling" in rows and "note" in rows["ceiling"]:
        print(f"ceiling: {rows['ceiling']['note']}", file=sys.stderr)
    print(json.dumps({"what": "bench/backtranslation.py", "cpu": f"{cpu_model()}, {os.cpu_count()} cores",
                      "date": datetime.date.today().isoformat(), "baseline": baseline_name, "models": rows}))


if __name__ == "__main__":
    main()
