"""Training throughput of two checkouts, side by side: did a change make training slower?

    git worktree add /tmp/old OLD_COMMIT
    python -m bench.throughput_ab --old /tmp/old --old-exp EXP_OLD --new-exp EXP_NEW [--pairs 5] [--steps 8]
        [--precision fp32|bf16|fp16] [--set SECTION.FIELD=VALUE ...]

Runs `python -m bench.throughput --precisions PRECISION` (fp32 by default; --set passed on) of the old checkout and of this one in turn, old then
new, `--pairs` times, so that both see the same drift in machine load; each run is its own process
(the old checkout's `mt` first on PYTHONPATH). EXP_OLD and EXP_NEW hold the same binarized data (an
experiment made by the old code may need its config rewritten for the new, or the other way round).
Prints each pair, the medians and their ratio, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]


def one_run(tree: Path, exp: str, steps: int, threads: int, precision: str = "fp32", sets: tuple = ()) -> float:
    """tgt tokens/s in `precision` of one bench/throughput.py run of the checkout at `tree` (`python -m
    bench.throughput` from its root: its own bench and, on PYTHONPATH, its own mt)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "bench.throughput", "--exp", exp, "--precisions", precision,
               "--steps", str(steps), "--threads", str(threads), *(f"--set={item}" for item in sets)]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: bench/throughput.py failed:\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return float(summary[f"tgt_tokens_per_s_{precision}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="The old checkout (a git worktree).")
    parser.add_argument("--old-exp", required=True)
    parser.add_argument("--new-exp", required=True)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", help="The step's precision: fp32, bf16 or fp16.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Passed on to bench/throughput.py (repeatable), for both checkouts.")
    args = parser.parse_args()
    old_tree = Path(args.old).resolve()
    def commit(tree: Path) -> str:  # a tree with changes not committed is its commit and "+changes"
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head.stdout.strip() + ("+changes" if dirty else "")

    commits = {name: commit(tree) for name, tree in (("old", old_tree), ("new", REPO))}
    old, new = [], []
    print(f"{'pair':>4} {'old tgt tok/s':>14} {'new tgt tok/s':>14} {'new/old':>8}", file=sys.stderr)
    started = time.time()
    for pair in range(1, args.pairs + 1):
        runs = [(old, old_tree, args.old_exp), (new, REPO, args.new_exp)]
        for results, tree, exp in runs if pair % 2 else runs[::-1]:  # each goes first every other pair
            results.append(one_run(tree, exp, args.steps, args.threads, args.precision, tuple(args.sets)))
        print(f"{pair:>4} {old[-1]:>14,.1f} {new[-1]:>14,.1f} {new[-1] / old[-1]:>8.3f}", file=sys.stderr)
    median_old, median_new = statistics.median(old), statistics.median(new)
    print(f"median {median_old:,.1f} (old {commits['old']}) against {median_new:,.1f} (new {commits['new']}): "
          f"{median_new / median_old:.3f}x; {time.time() - started:.0f} s", file=sys.stderr)
    print(json.dumps({
        "what": f"bench/throughput_ab.py: bench/throughput.py --precisions {args.precision}, old and new alternating, each first every other pair",
        "sets": args.sets,
        "cpu": f"{cpu_model()}, {os.cpu_count()} cores, {args.threads} threads",
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "old_commit": commits["old"], "new_commit": commits["new"],
        "steps": args.steps, "tgt_tokens_per_s_old": old, "tgt_tokens_per_s_new": new,
        "median_old": median_old, "median_new": median_new, "ratio": round(median_new / median_old, 3),
        "pair_ratios": [round(n / o, 3) for o, n in zip(old, new)],
    }))


if __name__ == "__main__":
    main()
