"""The quickstart as a user runs it: `mt run recipes/quickstart.yaml` end to end, timed, scored.

    python -m bench.quickstart [--recipe recipes/quickstart.yaml] [--set train.max_steps=1500] [--slow]

Inputs: the recipe (default: the quickstart, the Ding dictionary's German-English sentences, Debian's
trans-de-en) run in a fresh experiment directory (--exp, default a temporary one) by the `mt` command
in a subprocess. `--slow` simulates a machine about 3x slower: the run is pinned to one core
(`taskset`) with one thread, and a busy process pinned to the same core competes with it. Prints a
table (wall seconds of each step, updates, training seconds, tgt tokens/s, test BLEU and chrF, valid
BLEU, peak RSS) and the test samples `mt run` shows, and as its last line one JSON object with at
least `bleu`, `chrf`, `train_seconds`, `steps`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]
STEP_LINE = re.compile(r"^(train-tokenizer|binarize|train|average|evaluate)$")


def run_recipe(recipe: Path, exp: Path, sets: list[str], slow: bool,
               threads: int | None = None) -> tuple[float, dict[str, float], str, str]:
    """(wall seconds, seconds per step from the moment its status line appeared, stdout, stderr)."""
    command = [sys.executable, "-m", "mt", "run", str(recipe), "--exp", str(exp)]
    if threads and not slow:
        command += ["--threads", str(threads)]
    for item in sets:
        command += ["--set", item]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "100"}
    competitor = None
    if slow:
        command = ["taskset", "-c", "0", *command, "--threads", "1"]
        competitor = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    started = time.perf_counter()
    marks: dict[str, float] = {}
    err_lines: list[str] = []
    try:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        for line in process.stderr:
            err_lines.append(line)
            name = line.strip()
            if STEP_LINE.match(name) and name not in marks:
                marks[name] = time.perf_counter() - started
        out = process.stdout.read()
        process.wait()
    finally:
        if competitor is not None:
            competitor.kill()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"mt run failed ({process.returncode}):\n{''.join(err_lines[-30:])}")
    ordered = sorted(marks.items(), key=lambda item: item[1])
    steps = {name: (ordered[i + 1][1] if i + 1 < len(ordered) else wall) - at for i, (name, at) in enumerate(ordered)}
    return wall, steps, out, "".join(err_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(REPO / "recipes" / "quickstart.yaml"))
    parser.add_argument("--exp", default=None, help="Experiment directory (default: a new temporary one).")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="section.field=value, repeatable.")
    parser.add_argument("--slow", action="store_true", help="Simulate a ~3x slower machine (one core, shared).")
    parser.add_argument("--threads", type=int, default=None, help="mt's threads (default: torch's choice).")
    args = parser.parse_args()
    exp = Path(args.exp) if args.exp else Path(tempfile.mkdtemp(prefix="mt-quickstart-")) / "exp"
    if exp.exists():
        raise SystemExit(f"{exp} exists: give a new --exp")
    wall, steps, out, err = run_recipe(Path(args.recipe).resolve(), exp, args.sets, args.slow, args.threads)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    test = json.loads((exp / "scores" / "test.json").read_text())
    valid_path = exp / "scores" / "valid.json"
    valid = json.loads(valid_path.read_text()) if valid_path.exists() else {}
    records = [json.loads(line) for line in (exp / "train.jsonl").read_text().splitlines() if line.strip()]
    trained = [r for r in records if "loss" in r]
    last = trained[-1] if trained else {}
    train_seconds = float(last.get("elapsed", steps.get("train", 0.0)))
    speeds = sorted(r["tgt_tokens_per_s"] for r in trained if "tgt_tokens_per_s" in r)
    speed = speeds[len(speeds) // 2] if speeds else 0.0
    machine = f"{cpu_model()}, {os.cpu_count()} cores" + (" (--slow: one core, shared with a busy process)" if args.slow else "")
    rows = [("machine", machine), ("recipe", args.recipe + "".join(f" --set {s}" for s in args.sets)),
            *[(f"{name} (s)", f"{seconds:.1f}") for name, seconds in steps.items()], ("wall (s)", f"{wall:.1f}"),
            ("updates", f"{last.get('step', 0):,}"), ("training seconds", f"{train_seconds:.1f}"),
            ("tgt tokens/s (median)", f"{speed:,.0f}"), ("test BLEU", f"{test['bleu']:.2f}"),
            ("test chrF", f"{test['chrf']:.2f}"), ("valid BLEU", f"{valid.get('bleu', float('nan')):.2f}"),
            ("peak RSS (MB)", f"{peak_rss_mb:.0f}")]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    samples = err[err.find("test samples"):].splitlines() if "test samples" in err else []
    for line in samples[:13]:
        print(line)
    for line in out.splitlines():
        print(line)
    print(json.dumps({
        "bleu": test["bleu"], "chrf": test["chrf"], "valid_bleu": valid.get("bleu"), "train_seconds": train_seconds,
        "steps": last.get("step", 0), "wall_seconds": round(wall, 1), "step_seconds": {k: round(v, 1) for k, v in steps.items()},
        "tgt_tokens_per_s": speed, "peak_rss_mb": round(peak_rss_mb), "machine": machine, "slow": args.slow,
        "recipe": args.recipe, "sets": args.sets, "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "exp": str(exp),
    }))
    if not args.exp:
        shutil.rmtree(exp.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
