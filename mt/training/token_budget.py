"""A run's batch: `train.max_tokens: auto` decided for this device, and the learning rate and warmup
scaled for a batch other than the one they were set for (`train.lr_scaling`).

auto, on a GPU: the model's forward and backward run on batches of the longest training pairs at
the two budgets of PROBE_TOKENS, and the peak memory of each is measured; through the two, peak =
fixed + per_token x tokens. The budget is the most tokens whose peak, plus what the first update
adds (Adam's two fp32 moments per parameter, DDP's gradient buckets), fits in HEADROOM of the memory
this process can have (free, plus what it holds), rounded down to a multiple of 1024 and at most
MAX_AUTO_TOKENS. The longest pairs are the worst case per token (attention grows with length), and
HEADROOM leaves room for the allocator's fragmentation across batch shapes and the kernels'
workspaces. Past MAX_AUTO_TOKENS a GPU is as busy as it gets (tools/gpu_check.py --sweep measures
8k-64k) and a larger batch only makes fewer updates. Every process takes the smallest of their
budgets (they share one batch order). On the CPU auto is CPU_TOKENS: a CPU's tokens/s is flat or
falls past 4k-token batches (docs/benchmarks.md, "Scaling"). A resume keeps the budget its
checkpoint trained with: a new one would cut the rest of the epoch differently.

lr_scaling: the recipe's lr_peak (or lr_scale) and warmup_steps were set for lr_reference_tokens
per update; with k = (max_tokens x update_freq x processes) / lr_reference_tokens, "sqrt" multiplies
the peak by sqrt(k), "linear" by k, and both divide the warmup by k, so that it spans as many tokens
as before (Goyal et al., 2017, keep the warmup's epochs). The square root is the rule for Adam:
Malladi et al. (NeurIPS 2022) derive it for adaptive methods and show linear scaling failing there,
as Hoffer et al. (2017) argued for large batches; linear is SGD's rule (Goyal et al.). Ott et al.
(2018), training the paper's big model on 16x the paper's batch, raised the lr 2x, nearer to sqrt
than linear. Applied only when asked: the paper's schedule is the default.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from mt.config.schema import TrainConfig
from mt.data.batching import Batch, collate
from mt.data.dataset import ParallelData
from mt.errors import MtError
from mt.experiment.checkpoint_file import peek_checkpoint
from mt.experiment.paths import Experiment
from mt.training.distributed import Distributed
from mt.training.loss import autocast

CPU_TOKENS = 4096
MAX_AUTO_TOKENS = 65536
PROBE_TOKENS = (4096, 8192)
HEADROOM = 0.8
ROUND = 1024


def tokens_that_fit(usable_bytes: float, extra_bytes: float, probes: list[tuple[int, int]]) -> int:
    """The budget for `usable_bytes` of device memory: the line through two (tokens, peak bytes)
    probes, `extra_bytes` more for what training adds after them; a multiple of ROUND, at most
    MAX_AUTO_TOKENS (below ROUND when not even that fits)."""
    (tokens_a, peak_a), (tokens_b, peak_b) = probes
    per_token = max((peak_b - peak_a) / (tokens_b - tokens_a), 1.0)
    fixed = peak_a - per_token * tokens_a
    room = usable_bytes * HEADROOM - extra_bytes - fixed
    return min(max(int(room / per_token), 0) // ROUND * ROUND, MAX_AUTO_TOKENS)


def longest_pairs(data: ParallelData, max_tokens: int) -> np.ndarray:
    """A batch of the longest pairs (by the longer side) whose padded size stays within max_tokens."""
    widths = np.maximum(data.src_lens, data.tgt_lens) + 1
    order = np.argsort(-widths, kind="stable")
    rows = max(1, min(len(order), max_tokens // int(widths[order[0]])))
    return np.sort(order[:rows])


def probe_peak(
    loss_of: Callable[[Batch], torch.Tensor], batch: Batch, model: torch.nn.Module, device, precision
) -> int:
    """Peak bytes allocated on the CUDA `device` over one forward and backward of `batch`."""
    batch = batch.to(device)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    with autocast(precision, device):
        loss = loss_of(batch)
    loss.backward()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    model.zero_grad(set_to_none=True)
    return peak


def decided_max_tokens(
    exp: Experiment,
    tcfg: TrainConfig,
    data: ParallelData,
    model: torch.nn.Module,
    loss_of: Callable[[Batch], torch.Tensor],
    group: Distributed,
) -> tuple[int, str]:
    """train.max_tokens as a number, and why: the config's; auto's, kept from last.pt; or decided
    here (see the module's docstring). `loss_of(batch)` is the summed loss of a batch, to probe with."""
    if tcfg.max_tokens != "auto":
        return int(tcfg.max_tokens), "set"
    saved = peek_checkpoint(exp.checkpoint_path("last"))
    if saved is not None and saved.get("max_tokens"):
        return int(saved["max_tokens"]), f"kept from {exp.checkpoint_path('last')}"
    device = group.device
    if device.type != "cuda":
        return CPU_TOKENS, f"{device.type}: past {CPU_TOKENS} tokens a CPU's tokens/s is flat or falls"
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    extra = 8 * sum(p.numel() for p in model.parameters()) + (params if group.world_size > 1 else 0)
    probes = []
    with torch.random.fork_rng(devices=[device]):  # the run's dropout masks are not the probe's
        for tokens in PROBE_TOKENS:
            batch = collate(data, longest_pairs(data, tokens))
            try:
                padded = batch.size * max(batch.src_ids.size(1), batch.tgt_in.size(1))
                probes.append((padded, probe_peak(loss_of, batch, model, device, tcfg.precision)))
            except torch.cuda.OutOfMemoryError:
                raise MtError(
                    f"train.max_tokens auto: {tokens} tokens of the longest pairs do not fit in this GPU's "
                    f"memory; set train.max_tokens (--max-tokens) lower"
                ) from None
    free, _ = torch.cuda.mem_get_info(device)
    usable = free + torch.cuda.memory_reserved(device)
    torch.cuda.empty_cache()
    mine = tokens_that_fit(usable, extra, probes)
    budget = min(group.all_gather(mine))
    if budget < ROUND:
        raise MtError(
            f"train.max_tokens auto: this GPU's memory ({usable / 2**30:.1f} GiB usable) holds the model but "
            f"under {ROUND} tokens a batch; set train.max_tokens (--max-tokens) and train.update_freq"
        )
    per_token = (probes[1][1] - probes[0][1]) / max(probes[1][0] - probes[0][0], 1)
    return budget, (
        f"{usable / 2**30:.1f} GiB usable, {per_token / 2**10:.0f} KiB a token on the longest pairs"
        + (f", capped at {MAX_AUTO_TOKENS}" if budget == MAX_AUTO_TOKENS else "")
        + (", the smallest of the processes'" if group.world_size > 1 else "")
    )


def lr_scaling(tcfg: TrainConfig, max_tokens: int, world_size: int) -> tuple[float, int]:
    """The peak lr's factor and the warmup steps for this run's batch (train.lr_scaling): (1.0,
    warmup_steps) unless asked."""
    if tcfg.lr_scaling == "none" or not tcfg.lr_reference_tokens:
        return 1.0, tcfg.warmup_steps
    k = max_tokens * tcfg.update_freq * world_size / tcfg.lr_reference_tokens
    factor = math.sqrt(k) if tcfg.lr_scaling == "sqrt" else k
    return factor, max(1, round(tcfg.warmup_steps / k))
