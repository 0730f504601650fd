"""The Trainer: one parameter update over update_freq batches (Sec. 5.3), in one or several processes.

Beyond the paper: several batches per update and several processes (DistributedDataParallel, see
mt.training.distributed), bf16/fp16 autocast with a loss scale for fp16, updates with a non-finite loss or
gradient norm skipped, gradient clipping. What it updates is handed to it (mt.training.setup builds it
all); what it counts is a TrainingState, which checkpoints save (mt.training.checkpoints).

An update reads nothing back from the device (`update`): the loss and the gradient norm stay there
(mt.training.counters), clipping scales the gradients by a tensor, and a non-finite update is skipped
by the fused optimizer itself (its `found_inf`: parameters, moments and step count untouched). The
host counts each update as made, and `read` takes back the ones the device skipped: the loop reads
every train.log_every updates and before validating or saving, so `state.step` is exact wherever it
is used and at most log_every updates late in finding skipped ones (which changed nothing).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from mt.allocator import release_freed_memory
from mt.data.batching import Batch
from mt.data.prefetch import PrefetchingStream
from mt.training.counters import UpdateCounters
from mt.training.distributed import Distributed
from mt.training.ema import WeightAverage
from mt.training.loss import autocast
from mt.training.schedule import Schedule
from mt.training.state import TrainingState

TRIM_EVERY = 10  # updates between returning the heap's free pages to the kernel (CPU only)


class Trainer:
    """Owns the model, the optimizer and the batch stream; one `update()` is one parameter update,
    `read()` what the device counted, `step()` the two together (for checks that want every loss).

    With several processes (`group`), each holds a copy of the model inside DistributedDataParallel
    (`loss_module`) and reads its own share of the batches. The phases of a step (`forward_backward`,
    `finish_gradients`, `apply_update`, the stream's `next_batch`) are public: bench/throughput.py --phases times them.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_module: nn.Module,  # the model and its loss, compiled and wrapped for DDP as configured
        optimizer: torch.optim.Optimizer,  # fused: it skips non-finite updates on the device
        stream: PrefetchingStream,
        schedule: Schedule,
        state: TrainingState,
        group: Distributed,
        dropouts: list[nn.Module],  # the dropout modules whose rate the schedule sets
        precision: str = "fp32",
        update_freq: int = 1,
        clip_norm: float = 0.0,
        ema: WeightAverage | None = None,  # train.ema_decay's moving average, updated after each update
        graphed: bool = False,  # the compiled stacks replay CUDA graphs (train.compile_mode reduce-overhead)
    ):
        if not all(group.get("fused") for group in optimizer.param_groups):
            raise ValueError("the Trainer skips non-finite updates through a fused optimizer's found_inf")
        self.model, self.loss_module, self.optimizer = model, loss_module, optimizer
        self.stream, self.schedule, self.state, self.group = stream, schedule, state, group
        self.device = group.device
        self.dropouts = dropouts
        # May change between steps (bench/throughput.py interleaves precisions); `scaler` follows it.
        self.precision = precision
        self.update_freq, self.clip_norm = update_freq, clip_norm
        self.ema = ema
        self.trim_every = TRIM_EVERY
        self.graphed = graphed
        self.counters = UpdateCounters(self.device)
        self._skipped_seen = 0  # the counters' skipped updates that `read` has taken off state.step
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

    def update(self, batches: list[Batch] | None = None, stop: bool = False) -> dict[str, Any]:
        """One update over update_freq batches of this process (or `batches`), the loss normalised by
        the target tokens of all batches of all processes, without reading the device. A non-finite
        loss or gradient norm skips it on the device (no parameter, moment or Adam step changes); the
        host counts it as made until `read`. `stop` is this process's wish to stop; the result's
        "stop" is true on all processes if one wished so. Returns what the host knows: the lr, the
        tokens, "stop"."""
        self.model.train()
        self.schedule_dropout(self.scheduled_step() + 1)
        if self.graphed:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs may be overwritten
        if batches is None:
            batches = [self.stream.next_batch() for _ in range(self.update_freq)]
        losses, tgt_tokens, src_tokens = self.forward_backward(batches)
        now = self._clock[1] + time.perf_counter() - self._clock[0]
        tgt_tokens, src_tokens, stops, seconds = self.group.all_sum([tgt_tokens, src_tokens, stop, now])
        self.state.elapsed = seconds / self.group.world_size  # one clock for all: max_time and cooldown agree
        losses = self.group.sum_on_device(losses)
        grad_norm = self.finish_gradients(tgt_tokens)
        self.apply_update(losses, grad_norm, tgt_tokens, src_tokens)
        if self.device.type == "cpu" and self.state.step % self.trim_every == 0:
            release_freed_memory()  # bounds the heap's fragmentation (see mt.hardware)
        return {
            "lr": self.optimizer.param_groups[0]["lr"],
            "tgt_tokens": int(tgt_tokens),
            "src_tokens": int(src_tokens),
            "stop": stops > 0,
        }

    def read(self) -> dict[str, float]:
        """The device's counters (mt.training.counters.NAMES) over all updates of this Trainer, read
        now: on a GPU the host waits here for the queued work. Updates found skipped since the last
        read are taken off `state.step` and added to `state.skipped`."""
        counts = self.counters.read()
        skipped = int(counts["skipped"]) - self._skipped_seen
        self._skipped_seen += skipped
        self.state.step -= skipped
        self.state.skipped += skipped
        return counts

    @property
    def bad_in_row(self) -> int:
        """Updates in a row, up to the latest, skipped for a non-finite loss or gradient norm (read now)."""
        return int(self.read()["bad_in_row"])

    def step(self, batches: list[Batch] | None = None, stop: bool = False) -> dict[str, Any]:
        """`update` then `read`: this update's loss and NLL per target token, gradient norm and whether
        it was skipped, at the price of a wait for the device each update."""
        done = self.update(batches, stop)
        seen = self._skipped_seen
        counts = self.read()
        tgt = max(done["tgt_tokens"], 1)
        return {
            **done,
            "loss": counts["last_loss"] / tgt,
            "nll": counts["last_nll"] / tgt,
            "grad_norm": counts["grad_norm"],
            "skipped": self._skipped_seen > seen,
        }

    def scheduled_step(self) -> int:
        """The updates tried so far, made or skipped: what the lr, dropout and EMA schedules count. A
        `read` moves skipped updates from `state.step` to `state.skipped`, never off their sum, so the
        schedules do not depend on when the loop reads (a run stopped and resumed reads where an
        unbroken one does not: its lr differed after fp16's skipped first updates)."""
        return self.state.step + self.state.skipped

    def schedule_dropout(self, step: int) -> float:
        """train.early_dropout: the rate of the sub-layer and embedding dropout for update `step`."""
        if self.schedule.early_dropout is None:
            return self.schedule.model_dropout  # as built: nothing to set
        rate = self.schedule.dropout(self.schedule.progress(step, self.state.elapsed))
        for module in self.dropouts:
            module.p = rate
        return rate

    def forward_backward(self, batches: list[Batch]) -> tuple[torch.Tensor, int, int]:
        """Backward of each batch's summed loss; returns the summed loss and NLL (a tensor on the
        device, never read here), and the target and source tokens (counted on the host)."""
        losses, tgt_tokens, src_tokens = None, 0, 0
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            # DDP averages the gradients over processes once, in the backward of the last batch.
            no_sync = nullcontext() if last or not self.group.joined else self.loss_module.no_sync()
            tgt_tokens, src_tokens = tgt_tokens + batch.n_tgt_tokens, src_tokens + batch.n_src_tokens
            batch = batch.to(self.device)
            with no_sync:
                with autocast(self.precision, self.device):
                    loss, nll = self.loss_module(batch.src_ids, batch.tgt_in, batch.tgt_out, batch.targets)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            both = torch.stack([loss.detach(), nll.detach()]).float()
            losses = both if losses is None else losses + both
        assert losses is not None, "an update needs at least one batch"
        return losses, tgt_tokens, src_tokens

    def finish_gradients(self, tgt_tokens: float) -> torch.Tensor:
        """Gradients of the mean loss per target token, clipped; returns their norm before clipping
        (a tensor on the device: clipping scales by it without reading it)."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        # Each process holds the mean over processes of their summed-loss gradients (DDP averages):
        # times world_size, over all target tokens, is the gradient of the loss per token.
        divisor = max(tgt_tokens, 1) / self.group.world_size
        grads = [param.grad for param in self.model.parameters() if param.grad is not None]
        torch._foreach_div_(grads, divisor)
        if self.clip_norm > 0:
            return torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        return torch.nn.utils.get_total_norm(grads)

    def apply_update(self, losses: torch.Tensor, grad_norm: torch.Tensor, tgt_tokens: float, src_tokens: float) -> None:
        """The optimizer step at the schedule's lr, made on the device only if the loss and the gradient
        norm are finite; the gradients are dropped either way. The host counts it as made (`read`
        corrects that)."""
        state = self.state
        loss, nll = losses[0], losses[1]
        finite_loss = torch.isfinite(loss)
        made = finite_loss & torch.isfinite(grad_norm)
        state.step += 1
        scheduled = self.scheduled_step()
        progress = self.schedule.progress(scheduled, state.elapsed)
        lr, state.cooldown_from = self.schedule.lr(scheduled, progress, state.cooldown_from)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        # The fused optimizer leaves everything as it was where found_inf is 1 (as under a GradScaler).
        self.optimizer.found_inf = (~made).float()  # type: ignore[attr-defined]
        self.optimizer.step()
        if self.ema is not None:
            self.ema.update(self.model, scheduled, made)
        # With fp16, an overflow of the scaled gradients is the loss scale's doing: the scaler lowers it.
        bad = ~made if self.scaler is None else ~made & ~finite_loss
        self.counters.add(loss, nll, grad_norm, tgt_tokens, src_tokens, made, bad)
        if self.scaler is not None:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
