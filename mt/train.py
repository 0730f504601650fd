"""Training: the Trainer (one update) and the loop around it; loss in mt.loss, schedule in
mt.schedule, validation in mt.validate.

Sec. 5: Adam (beta1 0.9, beta2 0.98, eps 1e-9), lr = d_model^-0.5 * min(step^-0.5, step *
warmup^-1.5), label smoothing 0.1, batches of about equal source and target token counts.

Beyond the paper: several batches per update (update_freq) and several processes
(DistributedDataParallel, see mt.distributed), bf16/fp16 autocast, updates with a non-finite loss
or gradient norm skipped, a cooldown at the end of the budget, validation loss and greedy
BLEU with patience, and checkpoints from which a run resumes bitwise as if never interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import signal
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn

from mt import log
from mt.batching import Batch, collate, make_batches
from mt.binarize import ParallelData, check_data
from mt.checkpoint import (check_model_config, init_weights, load_checkpoint, rng_state, save_checkpoint,
                           set_rng_state)
from mt.config import ExperimentConfig, TrainConfig
from mt.distributed import Distributed
from mt.errors import MtError
from mt.experiment import Experiment, remove_abandoned_temporaries
from mt.loss import autocast, batch_loss
from mt.model import Embedding, Residual, Transformer, build_model, count_parameters
from mt.runtime import allocator_hint, fastest_precision, keep_freed_memory, release_freed_memory
from mt.schedule import cooldown_factor, inverse_sqrt_lr, peak_lr
from mt.tokenizer import load_tokenizers
from mt.validate import BleuSample, validate


TRIM_EVERY = 10  # updates between returning the heap's free pages to the kernel (CPU only)


class _LossModule(nn.Module):
    """The model and its loss as one module, so that DistributedDataParallel wraps the whole forward."""

    def __init__(self, model: Transformer, epsilon: float):
        super().__init__()
        self.model, self.epsilon = model, epsilon

    def forward(self, src_ids: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor):
        loss, nll, _ = batch_loss(self.model, Batch(src_ids, tgt_in, tgt_out, np.empty(0, np.int64)), self.epsilon)
        return loss, nll


class _StopSignal:
    """SIGINT/SIGTERM ask the loop to save and stop at the next step boundary."""

    def __init__(self):
        self.received: str | None = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW's parameter groups: decoupled weight decay (Loshchilov & Hutter, 2019) on the weight
    matrices and embeddings, none on biases and LayerNorm gains, whose scale is not capacity.
    Without decay one group, as checkpoints written before weight decay existed expect."""
    params = list(model.parameters())
    if weight_decay == 0:
        return [{"params": params, "weight_decay": 0.0}]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def regroup_optimizer_state(saved: dict[str, Any], model: torch.nn.Module, tcfg: TrainConfig) -> dict[str, Any]:
    """A saved AdamW state laid out for the groups `decay_groups` makes now, with this config's betas,
    eps and weight decay. torch's load_state_dict would keep the saved hyperparameters (a changed
    `train.weight_decay` or `adam_beta2` silently ignored on resume) and refuses another number of
    groups (weight decay turned on or off); each parameter keeps its moments either way."""
    saved_decay = 1.0 if len(saved["param_groups"]) == 2 else 0.0  # the layout that wrote it
    saved_order = [p for g in decay_groups(model, saved_decay) for p in g["params"]]
    groups = decay_groups(model, tcfg.weight_decay)
    index = {id(p): i for i, p in enumerate(p for g in groups for p in g["params"])}
    state = {index[id(saved_order[int(i)])]: s for i, s in saved["state"].items()}
    template = saved["param_groups"][0]
    param_groups, start = [], 0
    for g in groups:
        ids = list(range(start, start + len(g["params"])))
        start += len(ids)
        param_groups.append({**template, "params": ids, "weight_decay": g["weight_decay"],
                             "betas": (tcfg.adam_beta1, tcfg.adam_beta2), "eps": tcfg.adam_eps})
    return {"state": state, "param_groups": param_groups}


class Trainer:
    """Owns the model, optimizer and position in the data; one `step()` is one parameter update.

    With several processes (`group`), each holds a copy of the model inside DistributedDataParallel
    and reads its own share of the batches.
    """

    def __init__(self, exp: Experiment, cfg: ExperimentConfig, device: str = "cpu", group: Distributed | None = None):
        self.group = group or Distributed(device=torch.device(device))
        self.device = self.group.device
        if cfg.train.precision == "auto":  # decided on this machine, each run: a resume elsewhere decides again
            timed = fastest_precision(self.device, cfg.model.d_model, cfg.model.d_ff)
            precision, why = self.group.all_gather(timed)[0]  # every process trains as the first decided
            if self.group.is_main:
                log.info(f"precision auto: {precision} ({why})")
            cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))
        self.exp, self.cfg, self.tcfg = exp, cfg, cfg.train
        if self.device.type == "cpu":
            keep_freed_memory()  # large activations reused step after step instead of page-faulted in again
        src_tok, self.tgt_tok = load_tokenizers(exp, cfg)
        self.shared_vocab = src_tok is self.tgt_tok
        self.tokenizer_sha256 = {"src": src_tok.sha256, "tgt": self.tgt_tok.sha256}
        check_data(exp, self.tokenizer_sha256)  # data binarized with another tokenizer is refused
        self.vocab = {"src_size": src_tok.vocab_size, "tgt_size": self.tgt_tok.vocab_size, "shared": self.shared_vocab}
        self.train_data = ParallelData(exp, "train")
        self.valid_data = ParallelData(exp, "valid") if exp.ids_path("valid", "src").exists() else None
        self.model = self._build_model(src_tok.vocab_size)
        # model.dropout's modules (after each sub-layer, after the embeddings), for train.early_dropout
        self._scheduled_dropouts = [m.dropout for m in self.model.modules() if isinstance(m, (Residual, Embedding))]
        loss_module = _LossModule(self.model, self.tcfg.label_smoothing)
        if self.tcfg.compile:
            # In place (same module, same state_dict keys), and before DDP wraps it, as torch's docs
            # advise; self.model, which checkpoints save, stays the plain model.
            loss_module.compile()
        self.loss_module = self.group.wrap(loss_module)
        self.optimizer = torch.optim.AdamW(
            decay_groups(self.model, self.tcfg.weight_decay),
            lr=0.0,
            betas=(self.tcfg.adam_beta1, self.tcfg.adam_beta2),
            eps=self.tcfg.adam_eps,
            fused=True,  # one kernel over all parameters: ~3x faster than foreach on this CPU
        )
        self._fp16_scaler: torch.amp.GradScaler | None = None  # made on first use: see `scaler`
        self.peak_lr = peak_lr(self.tcfg, cfg.model.d_model)
        self.step_count = 0
        self.epoch = 0
        self.batch_in_epoch = 0  # batches of this epoch taken by all processes together
        self.best_valid = math.inf if self.tcfg.best_metric == "nll" else -math.inf
        self.bad_validations = 0  # validations in a row without a new best (for patience)
        self.cooldown_from: float | None = None  # the schedule's lr where the cooldown began
        self.skipped = 0  # updates skipped for a non-finite loss or gradient norm, all runs
        self.bad_in_row = 0
        self.init_source: str | None = None
        self.elapsed = 0.0  # training seconds over all runs of this experiment
        self._batches = None
        self._bleu: BleuSample | None = None
        self.start_clock()

    def _build_model(self, src_vocab_size: int) -> Transformer:
        """The model, initialised from the seed (the same on every process), and the seeded RNGs."""
        seed, rank = self.tcfg.seed, self.group.rank
        torch.manual_seed(seed)
        model = build_model(self.cfg.model, src_vocab_size, self.tgt_tok.vocab_size, self.shared_vocab)
        if rank:  # its own dropout masks; rank 0 continues the single-process stream
            torch.manual_seed(seed + rank)
        # Unused by training itself, but seeded and checkpointed too, so that whatever draws from
        # them (a library, a later feature) resumes exactly.
        random.seed(seed + rank)
        np.random.seed(seed + rank)
        return model.to(self.device)

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The loss scale while training in fp16, else None.

        fp16 needs a loss scale that keeps small gradients representable (bf16 has fp32's range).
        It follows `tcfg.precision`, which bench/throughput.py switches between steps; the one scaler
        is kept across switches, so its learned scale is not lost.
        """
        if self.tcfg.precision != "fp16":
            return None
        if self._fp16_scaler is None:
            self._fp16_scaler = torch.amp.GradScaler(self.device.type)
        return self._fp16_scaler

    def start_clock(self) -> None:
        """Count training time from now, on top of the `elapsed` of earlier runs."""
        self._clock = (time.perf_counter(), self.elapsed)

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly; every process must call it (RNG states)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "model_config": dataclasses.asdict(self.cfg.model),
            "vocab": self.vocab,
            "tokenizer_sha256": self.tokenizer_sha256,
            "step": self.step_count,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "world_size": self.group.world_size,
            "best_metric": self.tcfg.best_metric,
            "best_valid": self.best_valid,
            "bad_validations": self.bad_validations,
            "cooldown_from": self.cooldown_from,
            "skipped": self.skipped,
            "elapsed": self.elapsed,
            "init_from": self.init_source,
            "rng": self.group.all_gather(rng_state(self.device)),  # one per process, in rank order
        }

    def resume(self) -> bool:
        """Continue from checkpoints/last.pt if there is one (saved with as many processes as now)."""
        path = self.exp.checkpoint_path("last")
        if not path.exists():
            return False
        state = load_checkpoint(path)
        check_model_config(path, state, self.cfg.model, self.exp.config_path)  # config.yaml edited by hand
        if state.get("tokenizer_sha256") != self.tokenizer_sha256:
            raise MtError(f"{path}: trained with a different tokenizer than {self.exp.tokenizer_dir}")
        saved_world = int(state.get("world_size", 1))
        if saved_world != self.group.world_size:
            raise MtError(f"{path}: saved by {saved_world} training process(es), now {self.group.world_size}; "
                          f"resume with the same number (`mt train --nproc {saved_world}` or torchrun)")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(regroup_optimizer_state(state["optimizer"], self.model, self.tcfg))
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.step_count, self.epoch = int(state["step"]), int(state["epoch"])
        self.batch_in_epoch = int(state["batch_in_epoch"])
        if state.get("best_metric", "nll") == self.tcfg.best_metric:  # else: a new metric starts afresh
            self.best_valid = float(state["best_valid"])
            self.bad_validations = int(state.get("bad_validations", 0))
        self.cooldown_from = state.get("cooldown_from")
        self.skipped = int(state.get("skipped", 0))
        self.init_source = state.get("init_from")
        self.elapsed = float(state["elapsed"])
        rng = state["rng"][self.group.rank] if "rng" in state else {"torch": state["torch_rng"]}
        set_rng_state(rng, self.device)
        self.start_clock()
        return True

    def init_from(self, source: str) -> Path:
        """Start from the weights of another experiment or checkpoint (fresh optimizer and schedule)."""
        path, weights = init_weights(source, self.tokenizer_sha256, self.cfg.model)
        self.model.load_state_dict(weights)
        self.init_source = str(path)
        return path

    def save(self, is_best: bool = False) -> None:
        """last.pt, best.pt on a new best, step_N.pt every save_every steps (keeping keep_last).

        Every process calls this (it gathers their RNG states); rank 0 writes. last.pt is written
        first, so a run killed once step_N.pt exists resumes from step N.
        """
        state = self.state()
        if not self.group.is_main:
            return
        ckpt = self.exp.checkpoint_path
        periodic = self.step_count > 0 and self.step_count % self.tcfg.save_every == 0
        paths = [ckpt("last")]
        if is_best:
            paths.append(ckpt("best"))
        if periodic:
            paths.append(ckpt(f"step_{self.step_count}"))
        save_checkpoint(paths, state)
        if periodic and self.tcfg.keep_last > 0:
            for old in self.exp.step_checkpoints()[: -self.tcfg.keep_last]:
                old.unlink(missing_ok=True)

    # -- data ----------------------------------------------------------------------------------
    def next_batch(self) -> Batch:
        """This process's next batch: all processes step through one seeded order of the epoch's
        batches, process r taking batch batch_in_epoch + r. A new epoch reshuffles."""
        world = self.group.world_size
        if self._batches is None:
            self._batches = make_batches(
                self.train_data.src_lens, self.train_data.tgt_lens, self.tcfg.max_tokens, self.tcfg.seed, self.epoch
            )
            if len(self._batches) < world:
                raise MtError(f"{len(self._batches)} training batches for {world} processes: use a smaller max_tokens")
        if self.batch_in_epoch + world > len(self._batches):  # a last round short of one batch per process is left out
            self.epoch, self.batch_in_epoch, self._batches = self.epoch + 1, 0, None
            return self.next_batch()
        indices = self._batches[self.batch_in_epoch + self.group.rank]
        self.batch_in_epoch += world
        return collate(self.train_data, indices)

    # -- one update ----------------------------------------------------------------------------
    def progress(self, step: int) -> float:
        """How far into the budget update `step` (from 1) is: max_time's share if set, else max_steps's."""
        if self.tcfg.max_time is not None:
            return self.elapsed / self.tcfg.max_time
        return (step - 1) / max(self.tcfg.max_steps, 1)

    def learning_rate(self, step: int) -> float:
        """The lr of update `step` (from 1): the schedule (Sec. 5.3), then the cooldown's fall to 0."""
        lr = inverse_sqrt_lr(step, self.tcfg.warmup_steps, self.peak_lr)
        factor = cooldown_factor(self.progress(step), self.tcfg.cooldown, self.tcfg.cooldown_shape)
        if factor is None:
            self.cooldown_from = None
            return lr
        if self.cooldown_from is None:
            self.cooldown_from = lr
        return self.cooldown_from * factor

    def step(self, batches: list[Batch] | None = None, stop: bool = False) -> dict[str, Any]:
        """One update over update_freq batches of this process (or `batches`), the loss normalised by
        the target tokens of all batches of all processes. A non-finite loss or gradient norm skips
        the update: no optimizer step, gradients dropped, `skipped` counted. `stop` is this process's
        wish to stop; the result's "stop" is true on all processes if one wished so."""
        self.model.train()
        self.schedule_dropout(self.step_count + 1)
        if batches is None:
            batches = [self.next_batch() for _ in range(self.tcfg.update_freq)]
        local = self._forward_backward(batches)
        now = self._clock[1] + time.perf_counter() - self._clock[0]
        loss, nll, tgt_tokens, src_tokens, stops, seconds = self.group.all_sum([*local, stop, now])
        self.elapsed = seconds / self.group.world_size  # one clock for all: max_time and cooldown agree
        grad_norm = self._finish_gradients(tgt_tokens)
        finite = self._update(loss, grad_norm)
        if self.device.type == "cpu" and self.step_count % TRIM_EVERY == 0:
            release_freed_memory()  # bounds the heap's fragmentation (see mt.runtime)
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
        if self.tcfg.early_dropout is None:
            return self.cfg.model.dropout  # as built: nothing to set
        early = self.progress(step) < self.tcfg.early_dropout_until
        rate = self.tcfg.early_dropout if early else self.cfg.model.dropout
        for module in self._scheduled_dropouts:
            module.p = rate
        return rate

    def _update(self, loss: float, grad_norm: float) -> bool:
        """The optimizer step, unless the loss or the gradient norm is not finite; drops the gradients."""
        finite = math.isfinite(loss) and math.isfinite(grad_norm)
        if finite:
            self.step_count += 1
            lr = self.learning_rate(self.step_count)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            if self.scaler is not None:
                self.scaler.step(self.optimizer)  # it finds no inf (we checked): it steps
            else:
                self.optimizer.step()
        else:
            self.skipped += 1
        # With fp16, an overflow of the scaled gradients is the loss scale's doing: the scaler lowers it.
        overflow = self.scaler is not None and math.isfinite(loss)
        self.bad_in_row = 0 if finite or overflow else self.bad_in_row + 1
        if self.scaler is not None:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return finite

    def _forward_backward(self, batches: list[Batch]) -> list[float]:
        """Backward of each batch's summed loss; returns summed loss, NLL, target and source tokens."""
        totals = [0.0, 0.0, 0, 0]
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            # DDP averages the gradients over processes once, in the backward of the last batch.
            no_sync = nullcontext() if last or self.group.world_size == 1 else self.loss_module.no_sync()
            counts = (batch.n_tgt_tokens, batch.n_src_tokens)
            batch = batch.to(self.device)
            with no_sync:
                with autocast(self.tcfg.precision, self.device):
                    loss, nll = self.loss_module(batch.src_ids, batch.tgt_in, batch.tgt_out)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            totals = [totals[0] + float(loss.detach()), totals[1] + float(nll.detach()),
                      totals[2] + counts[0], totals[3] + counts[1]]
        return totals

    def _finish_gradients(self, tgt_tokens: float) -> float:
        """Gradients of the mean loss per target token, clipped; returns their norm before clipping."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        # Each process holds the mean over processes of their summed-loss gradients (DDP averages):
        # times world_size, over all target tokens, is the gradient of the loss per token.
        divisor = max(tgt_tokens, 1) / self.group.world_size
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.div_(divisor)
        max_norm = self.tcfg.clip_norm if self.tcfg.clip_norm > 0 else math.inf
        return float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))

    # -- validation ----------------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        """Validation loss, NLL and perplexity; with train.valid_bleu, greedy BLEU on a sample."""
        metrics = validate(self.model, self.valid_data, self.tcfg, self.device, self.group)
        if self.tcfg.valid_bleu:
            if self._bleu is None:
                self._bleu = BleuSample(self.exp, self.cfg, self.valid_data, self.tgt_tok)
            metrics["valid_bleu"] = round(self._bleu.score(self.model, self.device, self.group)[0], 2)
        return metrics

    def record_validation(self, metrics: dict[str, float]) -> bool:
        """Track the best value of best_metric and the validations since; True on a new best."""
        if self.tcfg.best_metric == "bleu":
            better = metrics["valid_bleu"] > self.best_valid
            value = metrics["valid_bleu"]
        else:
            better = metrics["valid_nll"] < self.best_valid
            value = metrics["valid_nll"]
        if better:
            self.best_valid, self.bad_validations = value, 0
        else:
            self.bad_validations += 1
        return better

    @property
    def out_of_patience(self) -> bool:
        return 0 < self.tcfg.patience <= self.bad_validations


@contextmanager
def _training_lock(exp: Experiment, group: Distributed) -> Iterator[None]:
    """Rank 0 holds the experiment's lock; the other processes go on only if it got it."""
    with ExitStack() as stack:
        error = None
        if group.is_main:
            try:
                stack.enter_context(exp.training_lock())
                # Saves a killed trainer never finished (no writer of checkpoints/ but us now runs).
                for path in remove_abandoned_temporaries(exp.checkpoints_dir):
                    log.info(f"removed {path}: a checkpoint an interrupted run did not finish writing")
            except MtError as exc:
                error = exc
        if group.any(error is not None):
            raise error or MtError(f"rank {group.rank}: not started: rank 0 could not lock {exp.root}")
        yield


def train(
    exp: Experiment,
    cfg: ExperimentConfig,
    device: str = "cpu",
    init_from: str | None = None,
    group: Distributed | None = None,
) -> dict[str, Any]:
    """`mt train`: train (or resume) until max_steps, max_time or patience; returns a summary.

    `init_from` (another experiment or a checkpoint file) gives a new run its starting weights.
    `group`: this process's place among several (see mt.distributed); one process by default.
    """
    group = group or Distributed(device=torch.device(device))
    with _training_lock(exp, group):
        trainer = Trainer(exp, cfg, device, group)
        resumed = trainer.resume()
        if init_from and resumed:
            log.info(f"--init-from {init_from}: ignored, this experiment resumes from its own checkpoint")
        elif init_from:
            log.info(f"starting from the weights of {trainer.init_from(init_from)}")
        _log_start(trainer, resumed)
        with _StopSignal() as stop, log.make_progress() as progress, _open_log(exp, group) as log_file:
            loop = _Loop(trainer, stop, progress, log_file, saved_at=trainer.step_count if resumed else -1)
            stopped_by = loop.run()
        if stopped_by in ("SIGINT", "SIGTERM", "signal"):
            again = f" with {group.world_size} processes" if group.world_size > 1 else ""
            log.info(f"{stopped_by}: saved {exp.checkpoint_path('last')} at step {trainer.step_count}; "
                     f"run `mt train --exp {exp.root}` again{again} to resume")
        return {
            "steps": trainer.step_count,
            "params": count_parameters(trainer.model),
            "stopped_by": stopped_by,
            "seconds": trainer.elapsed - loop.start_elapsed,
            "skipped": trainer.skipped,
            "world_size": group.world_size,
            "precision": trainer.tcfg.precision,  # auto's choice
            **loop.last_valid,
        }


def _log_start(trainer: Trainer, resumed: bool) -> None:
    tcfg, world = trainer.tcfg, trainer.group.world_size
    log.info(
        f"{'resuming at step ' + str(trainer.step_count) if resumed else 'training'}: "
        f"{count_parameters(trainer.model) / 1e6:.2f}M parameters, {len(trainer.train_data)} training pairs, "
        f"peak lr {trainer.peak_lr:.2e} at step {tcfg.warmup_steps}, {tcfg.precision}"
        + (f", {world} processes" if world > 1 else "")
        + (f", {tcfg.update_freq} batches per update" if tcfg.update_freq > 1 else "")
    )
    if trainer.device.type == "cpu" and (hint := allocator_hint()):
        log.info(hint)


@contextmanager
def _open_log(exp: Experiment, group: Distributed) -> Iterator[Any]:
    """train.jsonl for rank 0 (appended to over runs); None for the other processes."""
    if not group.is_main:
        yield None
        return
    with open(exp.train_log_path, "a", encoding="utf-8") as handle:
        yield handle


class _Loop:
    """One run's loop over updates: log records, validation, checkpoints and the rules that stop it."""

    def __init__(self, trainer: Trainer, stop: _StopSignal, progress, log_file, saved_at: int):
        self.trainer, self.tcfg, self.stop = trainer, trainer.tcfg, stop
        self.progress, self.log_file = progress, log_file
        self.task = progress.add_task("train", total=self.tcfg.max_steps, completed=trainer.step_count)
        self.saved_at = saved_at  # the step of the newest checkpoint, -1 if none
        self.start_elapsed = trainer.elapsed
        self.last_valid: dict[str, float] = {}
        self.window = _Window()
        trainer.start_clock()

    def run(self) -> str:
        """Updates until a budget or patience runs out or a signal arrives; then the final checkpoint."""
        stopped_by = None
        while stopped_by is None:
            stopped_by = self._spent()
            if stopped_by:
                break
            stats = self.trainer.step(stop=self.stop.received is not None)
            self.window.add(stats)
            if stats["skipped"]:
                self._check_bad_steps()
            else:
                self.progress.update(self.task, completed=self.trainer.step_count)
                self._after_update(stats)
            if stats["stop"]:
                stopped_by = self.stop.received or "signal"
        self._finish()
        return stopped_by

    def _spent(self) -> str | None:
        trainer = self.trainer
        if trainer.step_count >= self.tcfg.max_steps:
            return "max_steps"
        if self.tcfg.max_time is not None and trainer.elapsed >= self.tcfg.max_time:
            return "max_time"  # counts all runs of this experiment
        if trainer.out_of_patience:
            return "patience"
        return None

    def _after_update(self, stats: dict[str, Any]) -> None:
        step = self.trainer.step_count
        record = self.window.record(self.trainer, stats) if step % self.tcfg.log_every == 0 else None
        validated, is_best = False, False
        if self.trainer.valid_data is not None and step % self.tcfg.valid_every == 0:
            validated, (metrics, is_best) = True, self._validate()
            record = {**(record or self.window.record(self.trainer, stats)), **metrics}
        if record is not None:
            self._write(record)
        if step % self.tcfg.save_every == 0 or validated:
            self.trainer.save(is_best)
            self.saved_at = step

    def _validate(self) -> tuple[dict[str, float], bool]:
        metrics = self.trainer.validate()
        if self.trainer.device.type == "cpu":
            release_freed_memory()  # validation's batches (and greedy decoding's) leave their own holes
        is_best = self.trainer.record_validation(metrics)
        self.last_valid = metrics
        return metrics, is_best

    def _write(self, record: dict[str, Any]) -> None:
        if self.log_file is None:
            return
        self.log_file.write(json.dumps(record) + "\n")
        self.log_file.flush()
        _report(record, self.progress, self.task)

    def _check_bad_steps(self) -> None:
        trainer = self.trainer
        if trainer.bad_in_row < self.tcfg.max_bad_steps:
            return
        last = (f"{trainer.exp.checkpoint_path('last')} (step {self.saved_at})" if self.saved_at >= 0
                else "none saved yet")
        raise MtError(
            f"step {trainer.step_count + 1}: {trainer.bad_in_row} updates in a row had a non-finite loss or "
            f"gradient norm and were skipped (train.max_bad_steps); last good checkpoint: {last}; "
            f"lower the learning rate or set --clip-norm, then run `mt train` again"
        )

    def _finish(self) -> None:
        """The final checkpoint, validated, unless the last update just saved one."""
        trainer = self.trainer
        if self.saved_at == trainer.step_count:
            return
        is_best = False
        if trainer.valid_data is not None:
            metrics, is_best = self._validate()
            self._write({"step": trainer.step_count, "elapsed": round(trainer.elapsed, 2), **metrics})
        trainer.save(is_best)
        self.saved_at = trainer.step_count


class _Window:
    """Sums over the updates since the previous log record."""

    def __init__(self):
        self.reset(time.perf_counter())

    def reset(self, now: float) -> None:
        self.loss = self.nll = 0.0
        self.tgt = self.src = self.steps = self.skipped = 0
        self.time = now

    def add(self, stats: dict[str, Any]) -> None:
        if stats["skipped"]:
            self.skipped += 1
            return
        self.loss += stats["loss"] * stats["tgt_tokens"]
        self.nll += stats["nll"] * stats["tgt_tokens"]
        self.tgt += stats["tgt_tokens"]
        self.src += stats["src_tokens"]
        self.steps += 1

    def record(self, trainer: Trainer, stats: dict[str, Any]) -> dict[str, Any]:
        """Averages since the previous record; then start a new window."""
        now = time.perf_counter()
        seconds = max(now - self.time, 1e-9)
        tgt = max(self.tgt, 1)
        record = {
            "step": trainer.step_count,
            "epoch": trainer.epoch,
            "loss": round(self.loss / tgt, 4),
            "nll": round(self.nll / tgt, 4),
            "ppl": round(math.exp(min(self.nll / tgt, 50.0)), 2),
            "lr": stats["lr"],
            "grad_norm": round(stats["grad_norm"], 4),
            "tgt_tokens_per_s": round(self.tgt / seconds, 1),
            "tokens_per_s": round((self.tgt + self.src) / seconds, 1),
            "skipped": self.skipped,
            "elapsed": round(trainer.elapsed, 2),
        }
        if trainer.scaler is not None:
            record["loss_scale"] = trainer.scaler.get_scale()
        self.reset(now)
        return record


def _report(record: dict, progress, task) -> None:
    text = (
        f"step {record['step']}"
        + (f" loss {record['loss']:.3f} ppl {record['ppl']:.1f} lr {record['lr']:.2e} "
           f"{record['tgt_tokens_per_s']:.0f} tgt tok/s" if "loss" in record else "")
        + (f" skipped {record['skipped']}" if record.get("skipped") else "")
        + (f" | valid nll {record['valid_nll']:.3f} ppl {record['valid_ppl']:.2f}" if "valid_nll" in record else "")
        + (f" bleu {record['valid_bleu']:.2f}" if "valid_bleu" in record else "")
    )
    if progress.disable:
        log.info(text)
    else:
        progress.update(task, description=text)
