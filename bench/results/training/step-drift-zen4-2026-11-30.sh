#!/bin/bash
# How bench/results/training/step-drift-zen4-2026-11-30.jsonl was made (2026-11-30): bench/step_drift.py on run 5's
# binarized experiment (the one-hour recipe's model, bf16), 300 updates in windows of 50; glibc's malloc
# (mt's heap settings, malloc_trim every 10 updates), jemalloc 5.3 and tcmalloc 2.10; two rounds.
# (The runs predate mt's own use of tcmalloc; the variables below make today's code do the same.
# The JSON lines were labelled with round and allocator afterwards.)
cd "$(dirname "$0")/../../.."
exp=${1:-/tmp/r5/exp}
for round in 1 2; do
  MT_ALLOCATOR=system python -m bench.step_drift --exp "$exp" --steps 300 --window 50 2>/dev/null | tail -1
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 python -m bench.step_drift --exp "$exp" --steps 300 --window 50 2>/dev/null | tail -1
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 python -m bench.step_drift --exp "$exp" --steps 300 --window 50 2>/dev/null | tail -1
done
