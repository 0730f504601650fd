"""Streaming memory: peak RSS of `mt translate` on 100,000 and 1,000,000 piped lines.

    python -m bench.stream_memory [--lines 100000,1000000] [--work /tmp/mt-stream-bench]

Inputs: the first 2000 lines of data/multi30k/train.{en,de} (data/multi30k/prepare.py) build a tiny experiment
(vocabulary 1000, 1+1 layers, d_model 32, 20 training steps) in --work; the piped input repeats
test_2016_flickr.en, with every tenth line empty. Each size runs `python -m mt translate --beam 1
--max-len-b 2` in a fresh process whose peak RSS is read with getrusage; output lines are counted.
The point is the streaming path (read, batch, translate, write in order), not translation quality:
memory must not grow with the input. Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import resource, subprocess, sys
with open(sys.argv[1], "rb") as source, open(sys.argv[2], "wb") as sink:
    subprocess.run(sys.argv[3:], stdin=source, stdout=sink, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def build_experiment(data: Path, work: Path) -> Path:
    import torch

    from mt.atomic_files import write_text_atomic
    from mt.config.schema import ExperimentConfig, save_yaml
    from mt.data.binarize import binarize
    from mt.data.train_tokenizer import train_tokenizer
    from mt.experiment.paths import Experiment
    from mt.training.loop import train

    cfg = ExperimentConfig()
    cfg.data.src_lang, cfg.data.tgt_lang = "en", "de"
    for split, name in (("train", "train"), ("valid", "val")):
        for lang in ("en", "de"):
            lines = (data / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()[:2000]
            (work / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        setattr(cfg.data, split, [f"files:{work / split}"])
    cfg.tokenizer.vocab_size = 1000
    cfg.model.__dict__.update(enc_layers=1, dec_layers=1, d_model=32, d_ff=64, n_heads=2)
    cfg.train.__dict__.update(max_steps=20, max_tokens=2000, lr_peak=1e-3, warmup_steps=10, valid_every=20, save_every=20)
    exp = Experiment(work / "exp")
    write_text_atomic(exp.config_path, save_yaml(cfg))
    torch.set_num_threads(2)
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    train(exp, cfg)
    return exp.root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO / "data" / "multi30k"), help="Multi30k text files (python data/multi30k/prepare.py writes them here)")
    parser.add_argument("--work", default="/tmp/mt-stream-bench")
    parser.add_argument("--lines", default="100000,1000000")
    args = parser.parse_args()
    data, work = Path(args.data), Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    exp_dir = build_experiment(data, work)
    source = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
    rows = []
    for n in (int(x) for x in args.lines.split(",")):
        lines = ("" if i % 10 == 9 else line for i, line in zip(range(n), itertools.cycle(source)))
        inp, out = work / f"in.{n}.txt", work / f"out.{n}.txt"
        inp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        command = [sys.executable, "-m", "mt", "-q", "translate", "--exp", str(exp_dir), "--beam", "1",
                   "--max-len-a", "0", "--max-len-b", "2", "--threads", "2"]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(inp), str(out), *command], capture_output=True,
                              text=True, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        seconds = time.perf_counter() - start
        with open(out, "rb") as handle:
            out_lines = sum(1 for _ in handle)
        rows.append({"lines": n, "out_lines": out_lines, "peak_rss_mb": int(done.stdout.split()[-1]) / 1024,
                     "seconds": seconds, "input_mb": inp.stat().st_size / 1e6})
        inp.unlink()
        out.unlink()

    from rich.console import Console
    from rich.table import Table

    table = Table(title="mt translate, streaming from a pipe (tiny model, greedy, 2 threads)")
    for column in ("input lines", "input MB", "output lines", "seconds", "lines/s", "peak RSS MB"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(f"{r['lines']:,}", f"{r['input_mb']:.1f}", f"{r['out_lines']:,}", f"{r['seconds']:.1f}",
                      f"{r['lines'] / r['seconds']:,.0f}", f"{r['peak_rss_mb']:.0f}")
    Console(width=120).print(table)
    print(json.dumps({f"peak_rss_mb_{r['lines']}": round(r["peak_rss_mb"], 1) for r in rows}
                     | {f"out_lines_{r['lines']}": r["out_lines"] for r in rows}
                     | {f"seconds_{r['lines']}": round(r["seconds"], 1) for r in rows}))


if __name__ == "__main__":
    main()
