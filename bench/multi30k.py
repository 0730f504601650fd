"""Multi30k EN->DE benchmark: the `small` preset, trained for a fixed wall-clock budget.

    python -m bench.multi30k [--minutes 12] [--exp experiments/bench-multi30k] [--precision auto] [--steps N]
    python -m bench.multi30k --recipe recipes/multi30k_en_de.yaml [--exp experiments/bench-recipe]

Inputs: data/multi30k/{train,val,test_2016_flickr}.{en,de} (raw text, from data/multi30k/prepare.py). Joint SentencePiece
unigram 8000 on train.en+train.de; encoder/decoder 3 layers, d_model 256, 4 heads, FFN 1024, dropout
0.1, label smoothing 0.1, tied embeddings, Adam (0.9, 0.98, 1e-9), inverse-sqrt schedule with 1000
warmup steps and peak lr 7e-4, 4096 tokens per batch, 2 threads. Then test2016 at beam 5 with
sacrebleu's default BLEU and chrF. Each phase runs in its own process so that peak RSS is per phase.
With --recipe, the recipe's own settings instead (its time budget, model, decoding, checkpoint
averaging), the corpus files taken from --data; valid is scored too. Prints a table, and as its
last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue as queue_module
import resource
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path

from bench.common import stamp

REPO = Path(__file__).resolve().parents[1]

# fairseq 0.12.2 on this machine class, same setup (measured when the benchmark was set up).
REFERENCE = {
    "fairseq 0.12.2": dict(tgt_tokens_per_s=2461, steps=484, bleu=14.87, chrf=37.58, sent_per_s=62.9, rss="1.66 / 1.34"),
    "OpenNMT-py 3.5.1": dict(tgt_tokens_per_s=2328, steps=470, bleu=6.77, chrf=26.51, sent_per_s=85.8, rss="4.56 / 0.77"),
    "Sockeye 3.1.34": dict(tgt_tokens_per_s=2036, steps=440, bleu=6.10, chrf=26.81, sent_per_s=18.2, rss="2.27 / 1.48"),
    "Joey NMT 2.3.0": dict(tgt_tokens_per_s=746, steps=160, bleu=0.01, chrf=8.68, sent_per_s=None, rss="5.08 / 0.67"),
}


def recipe(args) -> dict:
    data = Path(args.data).resolve()
    return {
        "data": {
            "src_lang": "en", "tgt_lang": "de", "train": [f"files:{data / 'train'}"],
            "valid": [f"files:{data / 'val'}"], "test": [f"files:{data / 'test_2016_flickr'}"],
        },
        "tokenizer": {"model_type": "unigram", "vocab_size": 8000, "joint": True},
        "preset": "small",
        "model": {"dropout": 0.1, "tie_embeddings": True},
        "train": {
            "max_tokens": 4096, "max_steps": args.steps or 10**9, "max_time": None if args.steps else args.minutes * 60.0,
            "lr_peak": 7e-4,
            "warmup_steps": 1000, "label_smoothing": 0.1, "precision": args.precision, "seed": 1,
            # Validation and periodic checkpoints would eat into the budget: only at the end.
            "valid_every": 10**9, "save_every": 10**9, "log_every": 20,
            "cooldown": args.cooldown,
        },
        "decode": {"beam": 5, "alpha": 0.6, "length_penalty": "gnmt", "checkpoint": "last"},
    }


def _phase(name: str, exp_dir: str, threads: int, queue) -> None:
    """One pipeline phase in a fresh process; reports its result and its own peak RSS."""
    import torch

    from mt.apps.evaluate import evaluate_split
    from mt.data.binarize import binarize
    from mt.data.train_tokenizer import train_tokenizer
    from mt.experiment.paths import Experiment
    from mt.training.loop import train

    torch.set_num_threads(threads)
    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    if name == "prepare":
        train_tokenizer(exp, cfg)
        binarize(exp, cfg)
        result = {}
    elif name == "train":
        result = train(exp, cfg)
    elif name == "average":
        from mt.apps.run import average_step

        average_step(exp, cfg)
        result = {}
    else:
        result = evaluate_split(exp, cfg, "test")
        valid = evaluate_split(exp, cfg, "valid")
        result.update(valid_bleu=valid["bleu"], valid_chrf=valid["chrf"])
    queue.put({**result, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def run_phase(name: str, exp_dir: Path, threads: int) -> dict:
    """`name` in a child process; a SIGTERM or SIGINT to this one stops the child too (training saves its
    checkpoint first), so that `kill` of the benchmark leaves no hour-long phase behind on the CPU."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_phase, args=(name, str(exp_dir), threads, queue))
    start = time.perf_counter()
    process.start()
    result = None
    try:
        while result is None:
            alive = process.is_alive()  # before the get: a dead child's result is already in the pipe
            try:
                result = queue.get(timeout=1.0)
            except queue_module.Empty:
                if not alive:
                    break
    except BaseException:
        process.terminate()  # SIGTERM: a training phase stops after its update and saves
        process.join()
        raise
    process.join()
    if process.exitcode != 0 or result is None:
        raise SystemExit(f"phase {name} failed with exit code {process.exitcode}")
    if result.get("stopped_by") in ("SIGINT", "SIGTERM", "signal"):
        raise SystemExit(f"phase {name} was stopped by {result['stopped_by']}: no figures from a cut-short run")
    return {**result, "wall_seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO / "data" / "multi30k"), help="Multi30k text files (python data/multi30k/prepare.py writes them here)")
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--steps", type=int, default=None,
                        help="Train for this many updates instead of --minutes (to compare precisions at equal steps).")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                        help="auto (default): the fastest here of fp32, bf16 and fp16 (bf16 2.6x fp32 on the EPYC of"
                             " the earlier runs; on a Xeon without AMX bf16 0.5x, fp16 1.0x), as good at equal steps (README).")
    parser.add_argument("--recipe", default=None, help="Train and decode as this recipe says (e.g. the 40-BLEU one).")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cooldown", type=float, default=0.0,
                        help="Decay the lr linearly to 0 over this last fraction of the budget (0 = off).")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a config field of the recipe or preset (repeatable), e.g. train.warmup_steps=1000:"
                             " a variant without an edited copy of the recipe, recorded in the JSON.")
    parser.add_argument("--fresh", action="store_true", help="Delete --exp first (it must be a bench experiment).")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc)
    # After use_tcmalloc's restart (exec resets handlers). The default SIGTERM would end this process at
    # once and orphan its phase's child; as an exception it reaches run_phase's cleanup.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    from mt.config import schema as cfglib
    from mt.config.recipes import load_recipe, recipe_config
    from mt.config.resolve import apply_sets
    from mt.experiment.config import ConfigChange
    from mt.experiment.paths import Experiment

    if args.recipe and args.exp == parser.get_default("exp"):
        args.exp = str(REPO / "experiments" / f"bench-{Path(args.recipe).stem}")
    exp_dir = Path(args.exp)
    if args.fresh and exp_dir.exists():
        shutil.rmtree(exp_dir)
    if Experiment(exp_dir).has_config():
        raise SystemExit(f"{exp_dir} exists: pass --fresh to rebuild it or another --exp")
    if args.recipe:
        cfg, run = load_recipe(Path(args.recipe))
        data = Path(args.data).resolve()
        cfg.data.train, cfg.data.valid = [f"files:{data / 'train'}"], [f"files:{data / 'val'}"]
        cfg.data.test = [f"files:{data / 'test_2016_flickr'}"]
        if args.steps:  # a short check of the recipe: periodic checkpoints within reach of the average
            cfg.train.max_steps, cfg.train.max_time = args.steps, None
            cfg.train.save_every = min(cfg.train.save_every, max(1, args.steps // cfg.decode.average_last))
            cfg.train.valid_every = min(cfg.train.valid_every, args.steps)
        args.precision, args.minutes = cfg.train.precision, (cfg.train.max_time or 0) / 60
        averaging = "average" in (run.get("steps") or [])
    else:
        cfg, averaging = recipe_config(recipe(args), "bench/multi30k.py"), False
    try:
        apply_sets(cfg, args.sets)
    except cfglib.ConfigError as exc:
        raise SystemExit(str(exc)) from None
    ConfigChange(Experiment(exp_dir)).resolve({}, base=cfg)
    args.precision = cfg.train.precision  # a --set wins over the flag and the recipe
    budget = f"{args.steps} steps" if args.steps else f"{args.minutes:g} min"
    print(f"inputs: {args.data}; experiment: {exp_dir}; {budget}, {args.precision}, {args.threads} threads",
          file=sys.stderr)

    run_phase("prepare", exp_dir, args.threads)
    trained = run_phase("train", exp_dir, args.threads)
    records = [json.loads(line) for line in (exp_dir / "train.jsonl").read_text().splitlines()]
    speeds = [r for r in records if "tgt_tokens_per_s" in r][1:]  # the first window includes warm-up
    if not speeds:
        raise SystemExit(f"{exp_dir / 'train.jsonl'}: fewer than two speed records (train.log_every "
                         f"{cfg.train.log_every}): train longer for a speed figure")
    if averaging:
        run_phase("average", exp_dir, args.threads)
    decoded = run_phase("decode", exp_dir, args.threads)

    tgt_tps = statistics.median(r["tgt_tokens_per_s"] for r in speeds)
    all_tps = statistics.median(r["tokens_per_s"] for r in speeds)
    sentences = decoded["sentences"]
    result = {
        "bleu": round(decoded["bleu"], 2),
        "chrf": round(decoded["chrf"], 2),
        "valid_bleu": round(decoded["valid_bleu"], 2),
        "valid_chrf": round(decoded["valid_chrf"], 2),
        "train_minutes": round(trained["seconds"] / 60, 2),
        "tgt_tokens_per_s": round(tgt_tps, 1),
        "tokens_per_s": round(all_tps, 1),
        "steps": trained["steps"],
        "params": trained["params"],
        "train_seconds": round(trained["seconds"], 1),
        "decode_seconds": decoded["translate_seconds"],
        "sent_per_s": round(sentences / decoded["translate_seconds"], 1),
        "peak_rss_mb": round(max(trained["peak_rss_mb"], decoded["peak_rss_mb"]), 1),
        "peak_rss_train_mb": round(trained["peak_rss_mb"], 1),
        "peak_rss_decode_mb": round(decoded["peak_rss_mb"], 1),
        "valid_ppl": round(trained.get("valid_ppl", float("nan")), 2),
        "precision": trained["precision"],  # what training ran in (auto's choice)
        "cooldown": cfg.train.cooldown,
        "recipe": args.recipe,
        "overrides": args.sets,
        "config": {section: cfglib.to_dict(getattr(cfg, section)) for section in ("tokenizer", "model", "train", "decode")},
        "checkpoint": cfg.decode.checkpoint,
        "minutes": None if args.steps else args.minutes,
        "threads": args.threads,
        "allocator": allocator_name(),
        "bleu_signature": decoded["bleu_signature"],
    }

    from rich.console import Console
    from rich.table import Table

    title = f"recipe {args.recipe}" if args.recipe else "benchmark preset"
    table = Table(title=f"Multi30k EN->DE test2016, {title}, {budget} training, beam {cfg.decode.beam}"
                  + (f", cooldown {cfg.train.cooldown:g}" if cfg.train.cooldown else ""))
    for column in ("toolkit", "tgt tok/s (src+tgt)", "steps", "BLEU", "chrF", "sent/s", "peak RSS train / decode GB"):
        table.add_column(column, justify="left" if column == "toolkit" else "right")
    table.add_row(
        f"mt ({trained['precision']})", f"{tgt_tps:,.0f} ({all_tps:,.0f})", str(result["steps"]), f"{result['bleu']:.2f}",
        f"{result['chrf']:.2f}", f"{result['sent_per_s']:.1f}",
        f"{trained['peak_rss_mb'] / 1024:.2f} / {decoded['peak_rss_mb'] / 1024:.2f}",
    )
    for name, ref in ({} if args.recipe else REFERENCE).items():  # 12-minute figures: not comparable
        table.add_row(name, f"{ref['tgt_tokens_per_s']:,}", str(ref["steps"]), f"{ref['bleu']:.2f}", f"{ref['chrf']:.2f}",
                      "-" if ref["sent_per_s"] is None else f"{ref['sent_per_s']:.1f}", ref["rss"])
    Console(width=120).print(table)
    print(f"params {result['params']:,}; valid BLEU {result['valid_bleu']:.2f} chrF {result['valid_chrf']:.2f}; "
          f"{decoded['bleu_signature']}")
    print(json.dumps({**stamp(), **result}))


if __name__ == "__main__":
    main()
