"""Fine-tuning a Multi30k DE->EN model on the Ding dictionary's sentences: schedules against each other,
against the parent as it is, and what the parent's vocabulary costs.

    python -m bench.finetune --parent experiments/multi30k_bt_de_en_10k --out experiments/ft-ding \\
        [--steps 2000] [--max-tokens 1024] [--schedule NAME=SCHEDULE:LR:WARMUP:COOLDOWN ...]

Each schedule is a new experiment under --out, made with the commands a user types (docs/training.md,
"Fine-tuning"): the parent's tokenizer copied in, `mt binarize` of Ding's example sentences (the
quickstart's split: train on ding@sentences, valid and test the 500 held-out pairs each) with the
parent's config as the recipe, then `mt train --init-from PARENT` for --steps updates of --max-tokens
tokens (the quickstart's budget) with train.lr_schedule, lr_peak, warmup_steps and cooldown as given.
An experiment already trained is scored again, not retrained. Every model is decoded as the parent's
config says (decode.*) on Ding's test and on the parent's own test set (what fine-tuning forgets).

The vocabulary: the share of Ding test words (whitespace-split, both sides) that never occur in the
parent's training text, and the pieces per word under the parent's tokenizer and under one trained
on Ding itself (`mt train-tokenizer` with recipes/quickstart.yaml). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]

DING = ["--set", "data.src_lang=de", "--set", "data.tgt_lang=en", "--set", "data.train=[ding@sentences]",
        "--set", "data.valid=[ding]", "--set", "data.test=[ding]", "--set", "data.directions=[]"]
SCHEDULES = [  # name=shape:peak:warmup:cooldown; warmup and cooldown as shares of --steps
    "decay-1e-4=inverse_sqrt:1e-4:0.1:0.5",  # docs/training.md's example before it was measured
    "decay-5e-4=inverse_sqrt:5e-4:0.1:0.5",
    "constant-1e-4=constant:1e-4:0.1:0",
]


def mt(*args: str) -> None:
    command = [str(Path(sys.executable).with_name("mt")), *args]
    print("$ " + " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True, cwd=REPO)


def fine_tune(parent: Path, exp: Path, spec: str, steps: int, max_tokens: int) -> dict:
    shape, peak, warmup, cooldown = spec.split(":")
    settings = {"lr_schedule": shape, "lr_peak": float(peak), "warmup_steps": max(1, round(float(warmup) * steps)),
                "cooldown": float(cooldown)}
    if not (exp / "checkpoints" / "last.pt").exists():
        if not (exp / "tokenizer").exists():
            exp.mkdir(parents=True, exist_ok=True)
            shutil.copytree(parent / "tokenizer", exp / "tokenizer")
        if not (exp / "data" / "manifest.json").exists():
            mt("binarize", "--exp", str(exp), "--recipe", str(parent / "config.yaml"), *DING)
        sets = [item for key, value in settings.items() for item in ("--set", f"train.{key}={value}")]
        mt("train", "--exp", str(exp), "--init-from", str(parent), "--max-steps", str(steps),
           "--max-tokens", str(max_tokens), "--set", "train.max_time=0", "--set", f"train.valid_every={steps}",
           "--set", f"train.save_every={steps}", *sets)
    return settings


def scores(exp: Path, splits: dict) -> dict:
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment
    from mt.metrics import score

    experiment = Experiment(exp)
    translator = Translator.load(experiment, experiment.load_config())
    row = {}
    for name, (lines, refs) in splits.items():
        hyps = [found[0][0] for found in translator.search(lines, DecodeOptions())]
        result = score(hyps, refs)
        row[name] = {"bleu": round(result["bleu"], 2), "chrf": round(result["chrf"], 2)}
    print(f"{exp}: {row}", file=sys.stderr)
    return row


def vocabulary(parent: Path, ding_tokenizer: Path, ding_test: tuple[list[str], list[str]]) -> dict:
    """How well the parent's vocabulary covers Ding's test text, against a Ding-trained one."""
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment
    from mt.tokenizer import Tokenizer

    cfg = Experiment(parent).load_config()
    seen: set[str] = set()
    for side in load_split(cfg.data.sources("train")):
        for line in side:
            seen.update(line.split())
    words = [word for side in ding_test for line in side for word in line.split()]
    unseen = sum(word not in seen for word in words)

    def pieces_per_word(model: Path) -> float:
        tokenizer = Tokenizer.load(model)
        return round(sum(len(ids) for side in ding_test for ids in tokenizer.encode(side)) / len(words), 3)

    return {"test_words": len(words), "unseen_in_parent_training": round(unseen / len(words), 4),
            "pieces_per_word_parent": pieces_per_word(Experiment(parent).spm_model_path("joint")),
            "pieces_per_word_ding": pieces_per_word(Experiment(ding_tokenizer).spm_model_path("joint"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parent", required=True, type=Path, help="A trained DE->EN experiment (not Ding).")
    parser.add_argument("--out", required=True, type=Path, help="Where the fine-tuned experiments go.")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--schedule", action="append", metavar="NAME=SHAPE:LR:WARMUP:COOLDOWN",
                        help=f"Repeatable; default: {' '.join(SCHEDULES)}")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from mt.config.sources import parse_source
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment

    torch.set_num_threads(args.threads)
    parent = args.parent.resolve()
    ding_test = load_split([parse_source("ding", "test", ("de", "en"))])
    parent_test = load_split(Experiment(parent).load_config().data.sources("test"))
    splits = {"ding_test": ding_test, "parent_test": parent_test}
    rows = {"parent": {"settings": None, **scores(parent, splits)}}
    for spec in args.schedule or SCHEDULES:
        name, _, schedule = spec.partition("=")
        settings = fine_tune(parent, args.out / name, schedule, args.steps, args.max_tokens)
        rows[name] = {"settings": settings, **scores(args.out / name, splits)}
    ding_tokenizer = args.out / "ding-tokenizer"
    if not Experiment(ding_tokenizer).spm_model_path("joint").exists():
        mt("train-tokenizer", "--exp", str(ding_tokenizer), "--recipe", "recipes/quickstart.yaml")
    vocab = vocabulary(parent, ding_tokenizer, ding_test)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Ding DE->EN test (500 sentences), sacreBLEU / chrF; {cpu_model()}, {args.threads} threads")
    for column in ("model", "schedule", "Ding test", "parent's test"):
        table.add_column(column, justify="left" if column in ("model", "schedule") else "right")
    for name, row in rows.items():
        settings = row["settings"]
        described = ("-" if settings is None else f"{settings['lr_schedule']}, peak {settings['lr_peak']:g}, "
                     f"warmup {settings['warmup_steps']}, cooldown {settings['cooldown']:g}")
        table.add_row(name, described, *(f"{row[s]['bleu']:.2f} / {row[s]['chrf']:.2f}" for s in splits))
    Console(width=130).print(table)
    print(f"vocabulary: {vocab}", file=sys.stderr)
    print(json.dumps({"what": "bench/finetune.py", "cpu": f"{cpu_model()}, {os.cpu_count()} cores",
                      "date": datetime.date.today().isoformat(), "parent": str(args.parent), "steps": args.steps,
                      "max_tokens": args.max_tokens, "models": rows, "vocabulary": vocab}))


if __name__ == "__main__":
    main()
