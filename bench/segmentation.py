"""Valid loss per sentence, for comparing runs whose tokenizers cut the text into different numbers of
pieces (per-piece perplexity rewards a tokenizer that makes more, easier pieces).

    python -m bench.segmentation EXP[,TRAIN_LOG] [EXP[,TRAIN_LOG] ...]

Inputs: binarized experiments (the ones `python -m bench.multi30k --recipe ...` leaves) and, for each, a
training log (default EXP/train.jsonl; another run's log may be named when that run used the same
tokenizer and data). For each: the tokenizer, mean pieces per valid sentence (source, target), the
log's last valid NLL per token, and that NLL times the tokens it was averaged over per sentence
(target pieces + EOS), i.e. nats per German sentence. Nothing is written. Prints a table, and as its
last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="EXP or EXP,TRAIN_LOG")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from mt.data.dataset import ParallelData
    from mt.experiment.paths import Experiment
    from mt.training.train_log import load_train_log

    rows = []
    for run in args.runs:
        root, _, log = run.partition(",")
        exp = Experiment(root)
        cfg = exp.load_config()
        log_path = Path(log) if log else exp.train_log_path
        valid = ParallelData(exp, "valid")
        src_pieces, tgt_pieces = float(valid.src_lens.mean()), float(valid.tgt_lens.mean())
        _, valid_records = load_train_log(log_path)
        if not valid_records:
            sys.exit(f"{log_path}: no validation in this training log")
        step, nll = valid_records[-1]["step"], valid_records[-1]["valid_nll"]
        rows.append({
            "exp": root, "train_log": str(log_path), "valid_sentences": len(valid),
            "tokenizer": f"{cfg.tokenizer.model_type} {cfg.tokenizer.vocab_size}",
            "src_pieces_per_sentence": round(src_pieces, 2), "tgt_pieces_per_sentence": round(tgt_pieces, 2),
            "step": step, "valid_nll": round(nll, 4), "nats_per_tgt_sentence": round(nll * (tgt_pieces + 1), 2),
        })
    table = Table(title="valid loss per sentence")
    for column in ("train log", "tokenizer", "src pieces/sent", "tgt pieces/sent", "step", "valid nll/piece",
                   "nats/tgt sentence"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["train_log"], r["tokenizer"], f"{r['src_pieces_per_sentence']:.2f}",
                      f"{r['tgt_pieces_per_sentence']:.2f}", str(r["step"]), f"{r['valid_nll']:.4f}",
                      f"{r['nats_per_tgt_sentence']:.2f}")
    Console(width=120).print(table)
    print(json.dumps({"runs": rows}))


if __name__ == "__main__":
    from mt.errors import MtError

    try:
        main()
    except MtError as exc:  # a missing experiment or log: one line, no traceback
        sys.exit(str(exc))
