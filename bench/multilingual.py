"""One multilingual model against bilingual ones, and zero-shot against pivoting, on Multi30k test2016.

    python -m bench.multilingual --multi experiments/multi30k_multilingual \\
        --bilingual en-de=experiments/multi30k_en_de --bilingual en-fr=experiments/multi30k_en_fr \\
        [--zero-shot de-fr,fr-de] [--pivot en]

Inputs: trained experiments (`mt run recipes/multi30k_multilingual.yaml`; the bilingual ones with
`mt run recipes/multi30k_en_de.yaml [--exp DIR --set data.src_lang=.. --set data.tgt_lang=..]`), each
given the same hour on this machine. Each is decoded as its config says (decode.*: checkpoint, beam,
alpha) on the test split of each direction: the multilingual model on every direction it was
trained on, each bilingual model on its own; then the multilingual model on each --zero-shot
direction twice, asked directly (the target's tag on a source it never saw with it) and through
--pivot (source -> pivot -> target, two trained directions). Test sources and references are read
through the multilingual experiment's config, so every model sees the same lines. sacreBLEU and
chrF as `mt evaluate` computes them. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]


def test_split(cfg, direction: tuple[str, str]) -> tuple[list[str], list[str]]:
    """The test sources and references of one direction, through `cfg`'s test specs."""
    from mt.data.corpus import load_split

    return load_split(cfg.data.sources("test", direction))


def score_direction(translator, lines: list[str], refs: list[str], options) -> dict:
    from mt.metrics import score

    start = time.perf_counter()
    hyps = [found[0][0] for found in translator.search(lines, options)]
    result = score(hyps, refs)
    return {"bleu": round(result["bleu"], 2), "chrf": round(result["chrf"], 2),
            "sent_per_s": round(len(lines) / (time.perf_counter() - start), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multi", required=True, help="The multilingual experiment.")
    parser.add_argument("--bilingual", action="append", default=[], metavar="SRC-TGT=EXP",
                        help="A bilingual experiment given the same hour, for one direction (repeatable).")
    parser.add_argument("--zero-shot", default="de-fr,fr-de", help="Directions not trained, comma-separated.")
    parser.add_argument("--pivot", default="en", help="The language zero-shot directions are pivoted through.")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from mt.config.sources import parse_direction
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment

    torch.set_num_threads(args.threads)
    multi_exp = Experiment(args.multi)
    multi_cfg = multi_exp.load_config()
    multi = Translator.load(multi_exp, multi_cfg)
    rows: dict[str, dict] = {}
    for pair in multi_cfg.data.pairs():
        name = "-".join(pair)
        lines, refs = test_split(multi_cfg, pair)
        rows[name] = {"multilingual": score_direction(multi, lines, refs, DecodeOptions(src_lang=pair[0], tgt_lang=pair[1]))}
        print(f"{name}: multilingual {rows[name]['multilingual']}", file=sys.stderr)
    for spec in args.bilingual:
        name, _, path = spec.partition("=")
        pair = parse_direction(name, "--bilingual")
        exp = Experiment(path)
        translator = Translator.load(exp, exp.load_config())
        lines, refs = test_split(multi_cfg, pair)
        rows.setdefault(name, {})["bilingual"] = score_direction(translator, lines, refs, DecodeOptions())
        rows[name]["bilingual_exp"] = path
        print(f"{name}: bilingual {rows[name]['bilingual']}", file=sys.stderr)
    zero = {}
    for name in filter(None, args.zero_shot.split(",")):
        pair = parse_direction(name, "--zero-shot")
        lines, refs = test_split(multi_cfg, pair)
        zero[name] = {
            "zero_shot": score_direction(multi, lines, refs, DecodeOptions(src_lang=pair[0], tgt_lang=pair[1])),
            "pivot": score_direction(multi, lines, refs, DecodeOptions(src_lang=pair[0], tgt_lang=pair[1], pivot=args.pivot)),
        }
        print(f"{name}: {zero[name]}", file=sys.stderr)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Multi30k test2016, sacreBLEU / chrF; {cpu_model()}, {args.threads} threads")
    for column in ("direction", "multilingual", "bilingual", "difference"):
        table.add_column(column, justify="left" if column == "direction" else "right")
    for name, row in rows.items():
        m, b = row.get("multilingual"), row.get("bilingual")
        table.add_row(name, f"{m['bleu']:.2f} / {m['chrf']:.2f}" if m else "-", f"{b['bleu']:.2f} / {b['chrf']:.2f}" if b else "-",
                      f"{m['bleu'] - b['bleu']:+.2f}" if m and b else "-")
    for name, row in zero.items():
        z, p = row["zero_shot"], row["pivot"]
        table.add_row(f"{name} zero-shot / pivot {args.pivot}", f"{z['bleu']:.2f} / {z['chrf']:.2f}",
                      f"{p['bleu']:.2f} / {p['chrf']:.2f}", f"{z['bleu'] - p['bleu']:+.2f}")
    Console(width=130).print(table)
    print(json.dumps({"what": "bench/multilingual.py", "cpu": f"{cpu_model()}, {os.cpu_count()} cores",
                      "date": datetime.date.today().isoformat(), "multi": args.multi, "directions": rows,
                      "zero_shot": zero, "pivot": args.pivot,
                      "multi_checkpoint": [p.name for p in multi.checkpoint_paths]}))


if __name__ == "__main__":
    main()
