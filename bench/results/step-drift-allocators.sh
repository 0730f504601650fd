#!/bin/bash
# How bench/results/step-drift-allocators.jsonl was made (2026-11-30, before mt preloaded tcmalloc itself):
# bench/step_drift.py on run 5's binarized experiment (the one-hour recipe's model, bf16), 300 updates,
# glibc (mt's heap settings, malloc_trim every 10 updates), jemalloc 5.3 and tcmalloc 2.10 preloaded, two rounds.
# Today the same comparison is: MT_ALLOCATOR=system python bench/step_drift.py ... against the default.
cd "$(dirname "$0")/../.."
for round in 1 2; do
for cfg in glibc je tc; do
  case $cfg in
    glibc) pre="";;
    je) pre=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2;;
    tc) pre=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4;;
  esac
  echo "== round $round $cfg"
  LD_PRELOAD=$pre python bench/step_drift.py --exp /tmp/r5/exp --steps 300 --window 50 2>/dev/null | tail -1
done
done
