"""Decoding choices of a trained Multi30k experiment, searched on val only: which checkpoint (last,
best, the average of the last N, an ensemble of several), beam size and length penalty.

    python -m bench.decode_search --exp experiments/bench-multi30k_en_de [--average 3,5] [--beams 4,5,8]
        [--alphas 0.6,1.0] [--length-penalties gnmt,length] [--ensembles last+step_9000] [--test]

Inputs: an experiment trained with periodic checkpoints (the one `python -m bench.multi30k --recipe
recipes/multi30k_en_de.yaml` leaves, or any other) and its valid split (Multi30k val: 1014 sentences).
Averaged checkpoints are written as checkpoints/avgN.pt; translations and scores of the experiment are
not touched. Every setting is scored on valid with sacrebleu's default BLEU and chrF; with --test, the
setting best on valid (and only that one) is then scored on the test split (test2016 for Multi30k).
Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.common import stamp

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k_en_de"))
    parser.add_argument("--average", default="3,5", help="Average the last N periodic checkpoints, for each N.")
    parser.add_argument("--beams", default="4,5,8")
    parser.add_argument("--alphas", default="0.6,1.0")
    parser.add_argument("--length-penalties", default="gnmt",
                        help="gnmt: ((5+|Y|)/6)^alpha (the paper); length: |Y|^alpha; none. Comma-separated.")
    parser.add_argument("--ensembles", default="",
                        help="Checkpoints decoded together, joined by '+', e.g. last+step_9000 (comma-separated).")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--test", action="store_true", help="Score the setting best on val on test2016 too.")
    args = parser.parse_args()
    for penalty in args.length_penalties.split(","):
        if penalty not in ("gnmt", "length", "none"):
            parser.error(f"--length-penalties: {penalty!r} is not gnmt, length or none")

    import torch

    from mt.data.corpus import load_split
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.metrics import score
    from mt.training.average import average_last

    torch.set_num_threads(args.threads)
    exp = Experiment(args.exp)
    cfg = exp.load_config()
    checkpoints = ["last", "best"]
    for n in (int(x) for x in args.average.split(",") if x):
        average_last(exp, n, f"avg{n}", force=True)
        checkpoints.append(f"avg{n}")
    checkpoints += [x for x in args.ensembles.split(",") if x]
    src, refs = load_split(cfg.data.sources("valid"))
    settings = [(beam, penalty, alpha) for beam in (int(x) for x in args.beams.split(","))
                for penalty in args.length_penalties.split(",") for alpha in (float(x) for x in args.alphas.split(","))]
    rows = []
    for checkpoint in checkpoints:
        # Loaded once (an ensemble: each member); it reads cfg.decode when it translates.
        translator = Translator.load(exp, cfg, checkpoint.split("+"))
        for beam, penalty, alpha in settings:
            cfg.decode.beam, cfg.decode.length_penalty, cfg.decode.alpha = beam, penalty, alpha
            start = time.perf_counter()
            hyps = translator.translate(src)
            seconds = time.perf_counter() - start
            result = score(hyps, refs)
            rows.append({"checkpoint": checkpoint, "beam": beam, "length_penalty": penalty, "alpha": alpha,
                         "valid_bleu": round(result["bleu"], 2), "valid_chrf": round(result["chrf"], 2),
                         "seconds": round(seconds, 1)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    best = max(rows, key=lambda r: (r["valid_bleu"], r["valid_chrf"]))
    summary = {"exp": str(exp.root), "best_on_valid": best, "runs": rows, "signature": result["bleu_signature"]}
    if args.test:
        cfg.decode.beam, cfg.decode.length_penalty, cfg.decode.alpha = best["beam"], best["length_penalty"], best["alpha"]
        test_src, test_refs = load_split(cfg.data.sources("test"))
        test = score(Translator.load(exp, cfg, best["checkpoint"].split("+")).translate(test_src), test_refs)
        summary.update(test_bleu=round(test["bleu"], 2), test_chrf=round(test["chrf"], 2))

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"decoding choices on the valid split ({len(src)} sentences of {', '.join(map(str, cfg.data.valid))}), {exp.root}")
    for column in ("checkpoint", "beam", "penalty", "alpha", "val BLEU", "val chrF", "seconds"):
        table.add_column(column, justify="left" if column == "checkpoint" else "right")
    for r in rows:
        mark = " *" if r is best else ""
        table.add_row(r["checkpoint"] + mark, str(r["beam"]), r["length_penalty"], f"{r['alpha']:g}", f"{r['valid_bleu']:.2f}",
                      f"{r['valid_chrf']:.2f}", f"{r['seconds']:.1f}")
    Console(width=120).print(table)
    if args.test:
        print(f"best on valid (*), on the test split: BLEU {summary['test_bleu']:.2f} chrF {summary['test_chrf']:.2f}")
    print(json.dumps({**stamp(), **summary}))


if __name__ == "__main__":
    main()
