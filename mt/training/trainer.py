"""The Trainer: one parameter update over update_freq batches (Sec. 5.3), in one or several processes.

Beyond the paper: several batches per update and several processes (DistributedDataParallel, see
mt.training.distributed), bf16/fp16 autocast with a loss scale for fp16, updates with a non-finite loss or
gradient norm skipped, gradient clipping. What it updates is handed to it (mt.training.setup builds it
all); what it counts is a TrainingState, which checkpoints save (mt.training.checkpoints).
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from mt.allocator import release_freed_memory
from mt.data.batching import Batch, BatchStream
from mt.training.distributed import Distributed
from mt.training.ema import WeightAverage
from mt.training.loss import autocast
from mt.training.schedule import Schedule
from mt.training.state import TrainingState

TRIM_EVERY = 10  # updates between returning the heap's free pages to the kernel (CPU only)


class Trainer:
    """Owns the model, the optimizer and the batch stream; one `step()` is one parameter update.

    With several processes (`group`), each holds a copy of the model inside DistributedDataParallel
    (`loss_module`) and reads its own share of the batches. The phases of a step (`forward_backward`,
    `finish_gradients`, `apply_update`, the stream's `next_batch`) are public: bench/throughput.py --phases times them.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_module: nn.Module,  # the model and its loss, compiled and wrapped for DDP as configured
        optimizer: torch.optim.Optimizer,
        stream: BatchStream,
        schedule: Schedule,
        state: TrainingState,
        group: Distributed,
        dropouts: list[nn.Module],  # the dropout modules whose rate the schedule sets
        precision: str = "fp32",
        update_freq: int = 1,
        clip_norm: float = 0.0,
        ema: WeightAverage | None = None,  # train.ema_decay's moving average, updated after each update
    ):
        self.model, self.loss_module, self.optimizer = model, loss_module, optimizer
        self.stream, self.schedule, self.state, self.group = stream, schedule, state, group
        self.device = group.device
        self.dropouts = dropouts
        # May change between steps (bench/throughput.py interleaves precisions); `scaler` follows it.
        self.precision = precision
        self.update_freq, self.clip_norm = update_freq, clip_norm
        self.ema = ema
        self.trim_every = TRIM_EVERY
        self.bad_in_row = 0  # updates in a row skipped for a non-finite loss or gradient norm
        self._fp16_scaler: torch.amp.GradScaler | None = None  # made on first use: see `scaler`
        self.start_clock()

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The loss scale while training in fp16, else None.

        fp16 needs a loss scale that keeps small gradients representable (bf16 has fp32's range).
        The one scaler is kept across changes of `precision`, so its learned scale is not lost.
        """
        if self.precision != "fp16":
            return None
        if self._fp16_scaler is None:
            self._fp16_scaler = torch.amp.GradScaler(self.device.type)
        return self._fp16_scaler

    def start_clock(self) -> None:
        """Count training time from now, on top of the `elapsed` of earlier runs."""
        self._clock = (time.perf_counter(), self.state.elapsed)

    def step(self, batches: list[Batch] | None = None, stop: bool = False) -> dict[str, Any]:
        """One update over update_freq batches of this process (or `batches`), the loss normalised by
        the target tokens of all batches of all processes. A non-finite loss or gradient norm skips
        the update: no optimizer step, gradients dropped, `skipped` counted. `stop` is this process's
        wish to stop; the result's "stop" is true on all processes if one wished so."""
        self.model.train()
        self.schedule_dropout(self.state.step + 1)
        if batches is None:
            batches = [self.stream.next_batch() for _ in range(self.update_freq)]
        local = self.forward_backward(batches)
        now = self._clock[1] + time.perf_counter() - self._clock[0]
        loss, nll, tgt_tokens, src_tokens, stops, seconds = self.group.all_sum([*local, stop, now])
        self.state.elapsed = seconds / self.group.world_size  # one clock for all: max_time and cooldown agree
        grad_norm = self.finish_gradients(tgt_tokens)
        finite = self.apply_update(loss, grad_norm)
        if self.device.type == "cpu" and self.state.step % self.trim_every == 0:
            release_freed_memory()  # bounds the heap's fragmentation (see mt.hardware)
        return {
            "loss": loss / max(tgt_tokens, 1),
            "nll": nll / max(tgt_tokens, 1),
            "lr": self.optimizer.param_groups[0]["lr"],
            "grad_norm": grad_norm,
            "tgt_tokens": int(tgt_tokens),
            "src_tokens": int(src_tokens),
            "skipped": not finite,
            "stop": stops > 0,
        }

    def schedule_dropout(self, step: int) -> float:
        """train.early_dropout: the rate of the sub-layer and embedding dropout for update `step`."""
        if self.schedule.early_dropout is None:
            return self.schedule.model_dropout  # as built: nothing to set
        rate = self.schedule.dropout(self.schedule.progress(step, self.state.elapsed))
        for module in self.dropouts:
            module.p = rate
        return rate

    def forward_backward(self, batches: list[Batch]) -> list[float]:
        """Backward of each batch's summed loss; returns summed loss, NLL, target and source tokens."""
        totals = [0.0, 0.0, 0, 0]
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            # DDP averages the gradients over processes once, in the backward of the last batch.
            no_sync = nullcontext() if last or not self.group.joined else self.loss_module.no_sync()
            counts = (batch.n_tgt_tokens, batch.n_src_tokens)
            batch = batch.to(self.device)
            with no_sync:
                with autocast(self.precision, self.device):
                    loss, nll = self.loss_module(batch.src_ids, batch.tgt_in, batch.tgt_out)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            totals = [
                totals[0] + float(loss.detach()),
                totals[1] + float(nll.detach()),
                totals[2] + counts[0],
                totals[3] + counts[1],
            ]
        return totals

    def finish_gradients(self, tgt_tokens: float) -> float:
        """Gradients of the mean loss per target token, clipped; returns their norm before clipping."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        # Each process holds the mean over processes of their summed-loss gradients (DDP averages):
        # times world_size, over all target tokens, is the gradient of the loss per token.
        divisor = max(tgt_tokens, 1) / self.group.world_size
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.div_(divisor)
        max_norm = self.clip_norm if self.clip_norm > 0 else math.inf
        return float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))

    def apply_update(self, loss: float, grad_norm: float) -> bool:
        """The optimizer step at the schedule's lr, unless the loss or the gradient norm is not
        finite; drops the gradients either way. True if it stepped."""
        finite = math.isfinite(loss) and math.isfinite(grad_norm)
        state = self.state
        if finite:
            state.step += 1
            progress = self.schedule.progress(state.step, state.elapsed)
            lr, state.cooldown_from = self.schedule.lr(state.step, progress, state.cooldown_from)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            if self.scaler is not None:
                self.scaler.step(self.optimizer)  # it finds no inf (we checked): it steps
            else:
                self.optimizer.step()
            if self.ema is not None:
                self.ema.update(self.model, state.step)
        else:
            state.skipped += 1
        # With fp16, an overflow of the scaled gradients is the loss scale's doing: the scaler lowers it.
        overflow = self.scaler is not None and math.isfinite(loss)
        self.bad_in_row = 0 if finite or overflow else self.bad_in_row + 1
        if self.scaler is not None:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return finite
