"""Binarizing at scale: pairs/s, peak memory and output size for a 2M-pair and a 200k-pair corpus.

    python -m bench.binarize [--sizes 200000,2000000] [--workers 2] [--save]

Inputs: Multi30k train (data/multi30k/train.de/.en from data/multi30k/prepare.py, 29,000 pairs) and, when Debian's
trans-de-en is installed, the Ding dictionary's sentence and phrase pairs (/usr/share/trans/de-en,
about 388k), repeated until the corpus has N pairs. Copy r > 0 of a pair starts with "r. " on both
sides, so every pair is distinct and deduplication keeps them all. A joint unigram tokenizer (8000
pieces) is trained once on the base pairs (not timed). Each size is binarized from plain text
files, German -> English, with the default cleaning, by `mt.data.binarize.binarize(workers=N)` in its
own process: pairs/s is the pairs read over binarize's wall time (interpreter start-up excluded);
peak RSS is the main process's and one worker's maximum resident set, and their total bound (main
+ N x worker); output is the size of the data directory. Prints a table, then one JSON line
(`--save` also writes it to bench/results/data/binarize-CPU-DATE.json, CPU one of xeon-amx, xeon, zen4,
epyc-avx2, from /proc/cpuinfo).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MULTI30K = REPO / "data" / "multi30k" / "train"
DING = Path("/usr/share/trans/de-en")


def base_pairs() -> tuple[list[tuple[str, str]], list[str]]:
    """The pairs the corpus repeats, and a description of where they come from."""
    from mt.data.ding import read_ding
    from mt.data.text_files import read_parallel_files

    de, en = read_parallel_files(f"{MULTI30K}.de", f"{MULTI30K}.en")
    pairs = list(zip(de, en))
    inputs = [f"Multi30k train ({len(pairs):,} pairs, {MULTI30K}.de/.en)"]
    if DING.exists():
        sentences, phrases = read_ding(DING)
        pairs += sentences + phrases
        inputs.append(f"Ding ({len(sentences) + len(phrases):,} sentence and phrase pairs, {DING})")
    return pairs, inputs


def write_corpus(pairs: list[tuple[str, str]], n: int, prefix: Path) -> None:
    """n distinct pairs: the base pairs in turn, copy r numbered "r. "."""
    with open(f"{prefix}.de", "w", encoding="utf-8") as de, open(f"{prefix}.en", "w", encoding="utf-8") as en:
        for start in range(0, n, len(pairs)):
            copy = start // len(pairs)
            mark = f"{copy}. " if copy else ""
            part = pairs[: min(len(pairs), n - start)]
            de.write("".join(f"{mark}{src}\n" for src, _ in part))
            en.write("".join(f"{mark}{tgt}\n" for _, tgt in part))


def make_experiment(root: Path, prefix: Path, tokenizer_dir: Path | None):
    from mt.atomic_files import write_text_atomic
    from mt.config.schema import DataConfig, ExperimentConfig, TokenizerConfig, save_yaml
    from mt.experiment.paths import Experiment

    exp = Experiment(root)
    cfg = ExperimentConfig(
        data=DataConfig(src_lang="de", tgt_lang="en", train=[f"files:{prefix}"]),
        tokenizer=TokenizerConfig(vocab_size=8000, input_sentence_size=200_000),
    )
    write_text_atomic(exp.config_path, save_yaml(cfg))
    if tokenizer_dir is not None:
        shutil.copytree(tokenizer_dir, exp.tokenizer_dir)
    return exp, cfg


def measure(exp_dir: str, workers: int) -> None:
    """In a process of its own: binarize, then print time, counts and peak RSS as one JSON line."""
    from mt.data.binarize import binarize
    from mt.experiment.paths import Experiment

    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    started = time.perf_counter()
    stats = binarize(exp, cfg, workers=workers)
    seconds = time.perf_counter() - started
    train = stats["splits"]["train"]
    output = sum(p.stat().st_size for p in exp.data_dir.iterdir())
    print(json.dumps({
        "pairs_in": train["pairs_in"], "kept": train["kept"], "dropped": train["dropped"],
        "src_tokens": train["src_tokens"], "tgt_tokens": train["tgt_tokens"], "seconds": seconds,
        "rss_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "output_mb": output / 1e6,
    }))


def run_size(pairs, n: int, work: Path, tokenizer_dir: Path, workers: int) -> dict:
    size_dir = work / f"corpus-{n}"
    size_dir.mkdir()
    started = time.perf_counter()
    write_corpus(pairs, n, size_dir / "train")
    print(f"  {n:,} pairs written in {time.perf_counter() - started:.1f}s; binarizing ...", file=sys.stderr)
    exp, _ = make_experiment(size_dir / "exp", size_dir / "train", tokenizer_dir)
    done = subprocess.run([sys.executable, __file__, "--measure", str(exp.root), "--workers", str(workers)],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"binarize of {n:,} pairs failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["pairs_per_s"] = result["pairs_in"] / result["seconds"]
    result["tokens_per_s"] = (result["src_tokens"] + result["tgt_tokens"]) / result["seconds"]
    result["rss_total_mb"] = result["rss_main_mb"] + workers * result["rss_worker_mb"]
    shutil.rmtree(size_dir)  # the next size needs the disk
    return result


def cpu_class() -> str:
    """The CPU in bench/results' file names: xeon-amx, xeon, zen4, epyc-avx2 (or unknown-cpu)."""
    from mt.hardware import cpu_name

    name, _, units = cpu_name().rpartition(", ")
    units = units.split()
    if "Intel" in name:
        return "xeon-amx" if "AMX" in units else "xeon" if "AVX-512" in units else "unknown-cpu"
    if "AMD" in name:
        return "zen4" if "AVX512-BF16" in units else "epyc-avx2" if "AVX2" in units else "unknown-cpu"
    return "unknown-cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000,2000000", help="corpus sizes in pairs, comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", action="store_true",
                        help="also write the JSON line to bench/results/data/binarize-CPU-DATE.json")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.workers)
        return
    from mt import log
    from mt.data.train_tokenizer import train_tokenizer

    log.quiet = True
    sizes = [int(s) for s in args.sizes.split(",")]
    pairs, inputs = base_pairs()
    work = Path(tempfile.mkdtemp(prefix="mt-bench-binarize-"))
    try:
        started = time.perf_counter()
        write_corpus(pairs, len(pairs), work / "base")
        tok_exp, tok_cfg = make_experiment(work / "tok", work / "base", None)
        train_tokenizer(tok_exp, tok_cfg)
        print(f"  tokenizer trained on {len(pairs):,} base pairs in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        results = {n: run_size(pairs, n, work, tok_exp.tokenizer_dir, args.workers) for n in sizes}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"mt binarize, {args.workers} workers, joint unigram 8000, default cleaning; inputs repeated to size:")
    for line in inputs:
        print(f"  {line}")
    print()
    print("| pairs | kept | tokens src/tgt | seconds | pairs/s | tokens/s | peak RSS main / worker / total | output |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r in results.items():
        print(f"| {n:,} | {r['kept']:,} | {r['src_tokens'] / 1e6:.1f}M/{r['tgt_tokens'] / 1e6:.1f}M | {r['seconds']:.1f} | "
              f"{r['pairs_per_s']:,.0f} | {r['tokens_per_s']:,.0f} | {r['rss_main_mb']:.0f} / {r['rss_worker_mb']:.0f} / "
              f"{r['rss_total_mb']:.0f} MB | {r['output_mb']:.0f} MB |")
    summary = {"workers": args.workers, "base_pairs": len(pairs)}
    for n, r in results.items():
        name = f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k"
        summary.update({f"pairs_per_s_{name}": round(r["pairs_per_s"]), f"tokens_per_s_{name}": round(r["tokens_per_s"]),
                        f"peak_rss_mb_{name}": round(r["rss_total_mb"]),
                        f"peak_rss_main_mb_{name}": round(r["rss_main_mb"]), f"seconds_{name}": round(r["seconds"], 1),
                        f"output_mb_{name}": round(r["output_mb"], 1)})
    if len(sizes) >= 2:
        small, large = min(sizes), max(sizes)
        growth = (results[large]["seconds"] / results[small]["seconds"]) / (large / small)
        print(f"\ntime grows {results[large]['seconds'] / results[small]['seconds']:.2f}x for {large / small:.0f}x the pairs "
              f"({growth:.2f} of linear); peak RSS {results[small]['rss_total_mb']:.0f} -> {results[large]['rss_total_mb']:.0f} MB")
        summary["time_growth_vs_linear"] = round(growth, 3)
    line = json.dumps(summary)
    if args.save:
        (REPO / "bench" / "results" / "data" / f"binarize-{cpu_class()}-{time.strftime('%Y-%m-%d')}.json").write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
