"""Several searches side by side on a CPU, each batch on its share of torch's threads.

A small model's decoder step is hundreds of short operations, each too short for two threads to
share well: one search on two threads leaves the cores waiting between operations, where two
searches on one thread each keep both busier (on 2 cores, 1.06-1.16x more sentences a second:
docs/benchmarks.md, "Decoding speed"). Marian's CPU workers and CTranslate2's inter_threads do
the same. Each batch is searched alone, whatever runs beside it, so the translations do not change.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

import torch

Batch = TypeVar("Batch")
Result = TypeVar("Result")


BALANCED_GROUPS = 4  # length groups per worker from which a call's batches are left as they are (`balanced_for`)
AUTO_WORKERS = 4  # the most decode.workers 0 gives: the searches' Python shares one interpreter lock


def workers_for(setting: int, device: torch.device, threads: int | None = None) -> int:
    """decode.workers: 0 gives one per torch thread (`threads`, default the calling thread's) on a CPU,
    up to AUTO_WORKERS (measured on 2 cores only: with many more, the searches' Python between their
    ops would queue for the interpreter lock), and one on a GPU (one stream of kernels)."""
    if setting > 0:
        return setting
    return min(threads or torch.get_num_threads(), AUTO_WORKERS) if device.type == "cpu" else 1


def search_batches(batches: list[Batch], search: Callable[[Batch], Result], workers: int) -> Iterator[Result]:
    """search(batch) for each batch, in order, `workers` batches at a time (never more than there
    are): torch's intra-op threads are shared out among them while they run, then given back. One
    batch, or one worker, runs here on all the threads."""
    workers = min(workers, len(batches))
    if workers <= 1:
        yield from map(search, batches)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads // workers))  # before the pool: its threads start with it
    pool = ThreadPoolExecutor(workers, thread_name_prefix="mt-search")
    try:
        yield from pool.map(search, batches)
    finally:  # a failed batch, or a caller that stopped reading: the batches not started never start
        pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(threads)


def split_for(group: list[int], batches: int, workers: int) -> list[list[int]]:
    """A batch cut into sorted halves (parts of one length group: their lengths are alike) when there
    are fewer batches than workers (search processes, CTranslate2's inter_threads), so that a lone
    batch (a server's, a short file's) keeps them all busy; a batch of one sentence stays whole."""
    parts = max(1, min(len(group), workers // batches if batches < workers else 1))
    size = -(-len(group) // parts)
    return [group[i : i + size] for i in range(0, len(group), size)]


def balanced_for(groups: list[list[int]], lengths: list[int], workers: int, limit: int) -> list[list[int]]:
    """Batches for `workers` side-by-side searches that all end together: when a call has few length
    groups (a server's batch, a short file), its sentences, in the groups' length order, cut into a
    multiple of `workers` runs of equal source tokens (a search's cost grows with them); else the
    groups as they are (many batches share the workers out). The groups are kept where a run would
    pad to more than `limit` tokens (rows x (longest + 1))."""
    if not groups or len(groups) >= BALANCED_GROUPS * workers:  # none: a call of blank lines only
        return groups
    order = [i for group in groups for i in group]
    parts = min(len(order), -(-len(groups) // workers) * workers)
    total, runs, run, filled = sum(lengths[i] + 1 for i in order), [], [], 0
    for position, i in enumerate(order):
        run.append(i)
        filled += lengths[i] + 1
        left = parts - len(runs) - 1  # runs still to start after this one
        boundary = total * (len(runs) + 1) / parts  # where this run should end, in tokens
        if left and (filled >= boundary - (lengths[i] + 1) / 2 or len(order) - position - 1 == left):
            runs.append(run)
            run = []
    runs.append(run)
    if any(len(r) * (max(lengths[i] for i in r) + 1) > limit for r in runs):
        return [part for group in groups for part in split_for(group, len(groups), workers)]
    return runs
