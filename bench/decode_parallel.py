"""Two cores, three ways to decode on them: one search on two threads, two searches on one thread each
in one process (decode.workers 2: threads, one interpreter), and two processes of one thread each.

    python -m bench.decode_parallel --exp EXP [--mode int8|fp32|bf16] [--repeats 3]

Whether mt's decoding is held back by sharing one Python interpreter between its workers: if two
processes (two interpreters) decode much faster than two workers, it is. The test split is decoded as
bench/translate.py decodes it (beam 5, `length` penalty at alpha 1, the last checkpoint); the two
processes each take every other line. The three ways run in turn, --repeats times; sentences/s from
the median run. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRECISIONS = {"fp32": ("fp32", None), "int8": ("fp32", "int8"), "bf16": ("bf16", None)}


def load(exp_dir: str, mode: str, threads: int, workers: int):
    import torch

    from mt.decoding.translator import Translator
    from mt.experiment.paths import Experiment

    torch.set_num_threads(threads)
    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    cfg.decode.beam, cfg.decode.alpha, cfg.decode.length_penalty, cfg.decode.workers = 5, 1.0, "length", workers
    cfg.decode.engine = "mt"  # mt's own search, whatever EXP's decode.engine
    return Translator.load(exp, cfg, "last", "cpu", *PRECISIONS[mode])


def child(exp_dir: str, mode: str, lines: list[str], commands, results) -> None:
    translator = load(exp_dir, mode, threads=1, workers=1)
    translator.translate(lines[:16])
    results.put("ready")
    while commands.get() == "go":
        translator.translate(lines)
        results.put("done")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True)
    parser.add_argument("--mode", choices=tuple(PRECISIONS), default="int8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from mt.allocator import use_tcmalloc
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name

    use_tcmalloc()
    lines, _ = load_split(Experiment(args.exp).load_config().data.sources("test"))
    ctx = multiprocessing.get_context("spawn")
    children = []
    for half in (lines[0::2], lines[1::2]):
        commands, results = ctx.Queue(), ctx.Queue()
        process = ctx.Process(target=child, args=(args.exp, args.mode, half, commands, results))
        process.start()
        children.append((process, commands, results))
    for _, _, results in children:
        assert results.get() == "ready"
    here = {workers: load(args.exp, args.mode, threads=2, workers=workers) for workers in (1, 2)}
    for translator in here.values():
        translator.translate(lines[:16])
    seconds: dict[str, list[float]] = {"one search, two threads": [], "two workers, one process": [],
                                       "two processes, one thread each": []}
    for _ in range(args.repeats):
        for name, workers in (("one search, two threads", 1), ("two workers, one process", 2)):
            start = time.perf_counter()
            here[workers].translate(lines)
            seconds[name].append(time.perf_counter() - start)
        start = time.perf_counter()
        for _, commands, _ in children:
            commands.put("go")
        for _, _, results in children:
            results.get()
        seconds["two processes, one thread each"].append(time.perf_counter() - start)
    for process, commands, _ in children:
        commands.put("stop")
        process.join()

    from rich.console import Console
    from rich.table import Table

    rates = {name: len(lines) / statistics.median(runs) for name, runs in seconds.items()}
    table = Table(title=f"{args.exp} test split ({len(lines)} lines), {args.mode}, beam 5; {cpu_name()}")
    for column in ("decoding", "sent/s", "runs (s)"):
        table.add_column(column, justify="left" if column == "decoding" else "right")
    for name, runs in seconds.items():
        table.add_row(name, f"{rates[name]:.1f}", " ".join(f"{s:.2f}" for s in runs))
    Console(width=120).print(table)
    print(json.dumps({"what": "bench/decode_parallel.py", "cpu": cpu_name(), "date": datetime.date.today().isoformat(),
                      "exp": args.exp, "mode": args.mode, "sent_per_s": {k: round(v, 1) for k, v in rates.items()},
                      "seconds": seconds}))


if __name__ == "__main__":
    main()
