"""Training: label-smoothed loss, the paper's schedule, the loop, validation, checkpoints.

Sec. 5: Adam (beta1 0.9, beta2 0.98, eps 1e-9), lr = d_model^-0.5 * min(step^-0.5, step *
warmup^-1.5), label smoothing 0.1, batches of about equal source and target token counts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import time
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mt import log
from mt.batching import Batch, collate, make_batches
from mt.binarize import ParallelData
from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.config import ExperimentConfig, TrainConfig
from mt.errors import MtError
from mt.experiment import Experiment
from mt.model import Transformer, build_model, count_parameters
from mt.tokenizer import PAD_ID, load_tokenizers


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-row smoothed cross entropy and NLL from logits, with the gradient written out.

    With q the smoothed target distribution, the gradient w.r.t. the logits is softmax - q: one
    (tokens, vocab) tensor in the backward pass instead of the several that log_softmax, gather and
    masking would keep alive (the output layer is the largest activation of this model).
    """

    @staticmethod
    def forward(ctx, logits, target, epsilon: float, pad_id: int):
        z = _at_least_fp32(logits)  # (n, vocab)
        lse = torch.logsumexp(z, dim=-1)  # (n,)
        keep = (target != pad_id).to(z.dtype)
        nll = (lse - z.gather(1, target[:, None]).squeeze(1)) * keep
        # Mean of -log p over the V - 1 non-pad classes.
        uniform = (lse - (z.sum(dim=-1) - z[:, pad_id]) / (z.size(-1) - 1)) * keep
        ctx.save_for_backward(logits, target, lse, keep)
        ctx.epsilon, ctx.pad_id = epsilon, pad_id
        return (1.0 - epsilon) * nll + epsilon * uniform, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        logits, target, lse, keep = ctx.saved_tensors
        eps, pad_id = ctx.epsilon, ctx.pad_id
        vocab = logits.size(-1)
        g_loss = (grad_loss if grad_loss is not None else torch.zeros_like(lse)) * keep  # (n,)
        g_nll = (grad_nll if grad_nll is not None else torch.zeros_like(lse)) * keep
        grad = torch.exp(_at_least_fp32(logits) - lse[:, None]).mul_((g_loss + g_nll)[:, None])  # softmax * g
        # minus q: eps / (V - 1) on every non-pad class, and (1 - eps) more on the target.
        grad.sub_((g_loss * eps / (vocab - 1))[:, None])
        grad[:, pad_id] += g_loss * eps / (vocab - 1)
        grad.scatter_add_(1, target[:, None], -(g_loss * (1.0 - eps) + g_nll)[:, None])
        return grad.to(logits.dtype), None, None, None


def label_smoothed_loss(
    logits: torch.Tensor,  # (tokens, vocab)
    target: torch.Tensor,  # (tokens,)
    epsilon: float,
    pad_id: int = PAD_ID,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Summed smoothed cross entropy and summed NLL over the non-pad targets, and their count.

    The smoothed target is (1 - eps) on the true class plus eps spread evenly over the V - 1
    non-pad classes (Szegedy et al. 2016, as in Sec. 5.4); the pad class gets no mass, and pad
    positions are not scored.
    """
    loss, nll = _SmoothedCrossEntropy.apply(logits, target, epsilon, pad_id)
    return loss.sum(), nll.sum(), int((target != pad_id).sum())


def batch_loss(model: Transformer, batch: Batch, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Forward pass and loss of one batch; the output layer runs on non-pad target positions only."""
    memory, src_mask = model.encode(batch.src_ids)
    hidden = model.decode_hidden(batch.tgt_in, memory, src_mask)  # (batch, tgt_len, d_model)
    keep = batch.tgt_out != PAD_ID
    logits = model.output(hidden[keep])  # (target tokens, vocab)
    return label_smoothed_loss(logits, batch.tgt_out[keep], epsilon)


def peak_lr(cfg: TrainConfig, d_model: int) -> float:
    """The schedule's maximum, reached at step = warmup: lr_peak, or the paper's d^-0.5 * warmup^-0.5."""
    if cfg.lr_peak is not None:
        return cfg.lr_peak
    return cfg.lr_scale * d_model**-0.5 * cfg.warmup_steps**-0.5


def inverse_sqrt_lr(step: int, warmup: int, peak: float) -> float:
    """Linear warmup to `peak`, then proportional to step^-0.5 (Sec. 5.3); step counts from 1.

    peak * min(step / warmup, sqrt(warmup / step)) equals the paper's
    d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) when peak = d_model^-0.5 * warmup^-0.5.
    """
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def _autocast(precision: str, device: torch.device):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp16":
        if device.type != "cuda":
            raise MtError("--precision fp16 needs a CUDA device; use bf16 on the CPU")
        return torch.autocast("cuda", dtype=torch.float16)
    return nullcontext()


def _to(batch: Batch, device: torch.device) -> Batch:
    if device.type == "cpu":
        return batch
    return dataclasses.replace(
        batch,
        src_ids=batch.src_ids.to(device, non_blocking=True),
        tgt_in=batch.tgt_in.to(device, non_blocking=True),
        tgt_out=batch.tgt_out.to(device, non_blocking=True),
    )


@torch.no_grad()
def validate(model: Transformer, data: ParallelData, cfg: TrainConfig, device: torch.device) -> dict[str, float]:
    """Validation loss (smoothed, per token), NLL per token and perplexity exp(NLL)."""
    model.eval()
    loss_sum = nll_sum = 0.0
    tokens = 0
    for indices in make_batches(data.src_lens, data.tgt_lens, cfg.max_tokens, cfg.seed, 0, shuffle=False):
        batch = _to(collate(data, indices), device)
        with _autocast(cfg.precision, device):
            loss, nll, n = batch_loss(model, batch, cfg.label_smoothing)
        loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + n
    model.train()
    nll = nll_sum / max(tokens, 1)
    return {"valid_loss": loss_sum / max(tokens, 1), "valid_nll": nll, "valid_ppl": math.exp(min(nll, 50.0))}


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


class Trainer:
    """Owns the model, optimizer and position in the data; one `step()` is one parameter update."""

    def __init__(self, exp: Experiment, cfg: ExperimentConfig, device: str = "cpu"):
        self.exp, self.cfg, self.tcfg = exp, cfg, cfg.train
        self.device = torch.device(device)
        src_tok, tgt_tok = load_tokenizers(exp, cfg)
        self.shared_vocab = src_tok is tgt_tok
        self.tokenizer_sha256 = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
        self.vocab = {"src_size": src_tok.vocab_size, "tgt_size": tgt_tok.vocab_size, "shared": self.shared_vocab}
        self.train_data = ParallelData(exp, "train")
        self.valid_data = ParallelData(exp, "valid") if exp.ids_path("valid", "src").exists() else None
        torch.manual_seed(self.tcfg.seed)
        self.model = build_model(cfg.model, src_tok.vocab_size, tgt_tok.vocab_size, self.shared_vocab).to(self.device)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=(self.tcfg.adam_beta1, self.tcfg.adam_beta2),
            eps=self.tcfg.adam_eps,
            weight_decay=self.tcfg.weight_decay,
            fused=True,  # one kernel over all parameters: ~3x faster than foreach on this CPU
        )
        self.peak_lr = peak_lr(self.tcfg, cfg.model.d_model)
        self.step_count = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.best_valid = math.inf
        self.elapsed = 0.0  # training seconds over all runs of this experiment
        self._batches = None

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "model_config": dataclasses.asdict(self.cfg.model),
            "vocab": self.vocab,
            "tokenizer_sha256": self.tokenizer_sha256,
            "step": self.step_count,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "best_valid": self.best_valid,
            "elapsed": self.elapsed,
            "torch_rng": torch.get_rng_state(),
        }

    def resume(self) -> bool:
        """Continue from checkpoints/last.pt if there is one."""
        path = self.exp.checkpoint_path("last")
        if not path.exists():
            return False
        state = load_checkpoint(path)
        if state.get("tokenizer_sha256") != self.tokenizer_sha256:
            raise MtError(f"{path}: trained with a different tokenizer than {self.exp.tokenizer_dir}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count, self.epoch = int(state["step"]), int(state["epoch"])
        self.batch_in_epoch = int(state["batch_in_epoch"])
        self.best_valid, self.elapsed = float(state["best_valid"]), float(state["elapsed"])
        torch.set_rng_state(state["torch_rng"])
        return True

    def save(self, valid_metric: float | None = None) -> None:
        """last.pt always; step_N.pt every save_every steps (keeping keep_last); best.pt on a new best."""
        state = self.state()
        ckpt = self.exp.checkpoint_path
        if self.step_count % self.tcfg.save_every == 0:
            save_checkpoint(ckpt(f"step_{self.step_count}"), state)
            for old in self.exp.step_checkpoints()[: -self.tcfg.keep_last or None]:
                old.unlink(missing_ok=True)
        if valid_metric is not None and valid_metric <= self.best_valid:
            save_checkpoint(ckpt("best"), state)
        save_checkpoint(ckpt("last"), state)

    # -- data ----------------------------------------------------------------------------------
    def next_batch(self) -> Batch:
        """The next batch in the seeded order; a new epoch reshuffles."""
        if self._batches is None:
            self._batches = make_batches(
                self.train_data.src_lens, self.train_data.tgt_lens, self.tcfg.max_tokens, self.tcfg.seed, self.epoch
            )
        if self.batch_in_epoch >= len(self._batches):
            self.epoch, self.batch_in_epoch, self._batches = self.epoch + 1, 0, None
            return self.next_batch()
        indices = self._batches[self.batch_in_epoch]
        self.batch_in_epoch += 1
        return collate(self.train_data, indices)

    # -- one update ----------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """Forward/backward over update_freq batches, loss normalised by their target tokens, one Adam step."""
        self.model.train()
        loss_sum = nll_sum = 0.0
        tgt_tokens = src_tokens = 0
        for _ in range(self.tcfg.update_freq):
            batch = _to(self.next_batch(), self.device)
            with _autocast(self.tcfg.precision, self.device):
                loss, nll, n = batch_loss(self.model, batch, self.tcfg.label_smoothing)
            loss.backward()  # summed over tokens; divided by the total below
            loss_sum, nll_sum = loss_sum + float(loss.detach()), nll_sum + float(nll.detach())
            tgt_tokens, src_tokens = tgt_tokens + n, src_tokens + batch.n_src_tokens
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.div_(max(tgt_tokens, 1))
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tcfg.clip_norm if self.tcfg.clip_norm > 0 else math.inf
        )
        self.step_count += 1
        lr = inverse_sqrt_lr(self.step_count, self.tcfg.warmup_steps, self.peak_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {
            "loss": loss_sum / max(tgt_tokens, 1),
            "nll": nll_sum / max(tgt_tokens, 1),
            "lr": lr,
            "grad_norm": float(grad_norm),
            "tgt_tokens": tgt_tokens,
            "src_tokens": src_tokens,
        }


def train(exp: Experiment, cfg: ExperimentConfig, device: str = "cpu") -> dict[str, Any]:
    """`mt train`: train (or resume) until max_steps or max_time; returns a summary."""
    with exp.training_lock():
        trainer = Trainer(exp, cfg, device)
        resumed = trainer.resume()
        tcfg = cfg.train
        params = count_parameters(trainer.model)
        log.info(
            f"{'resuming at step ' + str(trainer.step_count) if resumed else 'training'}: "
            f"{params / 1e6:.2f}M parameters, {len(trainer.train_data)} training pairs, "
            f"peak lr {trainer.peak_lr:.2e} at step {tcfg.warmup_steps}"
        )
        budget = tcfg.max_time if tcfg.max_time is not None else math.inf
        start_elapsed = trainer.elapsed
        start = time.perf_counter()
        window = {"loss": 0.0, "nll": 0.0, "tgt": 0, "src": 0, "steps": 0, "time": time.perf_counter()}
        last_valid: dict[str, float] = {}
        stopped_by = "max_steps"
        saved_at = trainer.step_count if resumed else -1
        with _StopSignal() as stop, log.make_progress() as progress, open(exp.train_log_path, "a") as log_file:
            task = progress.add_task("train", total=tcfg.max_steps, completed=trainer.step_count)
            while trainer.step_count < tcfg.max_steps:
                if trainer.elapsed >= budget:  # max_time counts all runs of this experiment
                    stopped_by = "max_time"
                    break
                stats = trainer.step()
                trainer.elapsed = start_elapsed + time.perf_counter() - start
                _accumulate(window, stats)
                progress.update(task, completed=trainer.step_count)
                step = trainer.step_count
                record = None
                if step % tcfg.log_every == 0:
                    record = _window_record(window, trainer, stats)
                valid_metric = None
                if trainer.valid_data is not None and step % tcfg.valid_every == 0:
                    last_valid = validate(trainer.model, trainer.valid_data, tcfg, trainer.device)
                    valid_metric = last_valid["valid_nll"]
                    record = {**(record or _window_record(window, trainer, stats)), **last_valid}
                if record is not None:
                    log_file.write(json.dumps(record) + "\n")
                    log_file.flush()
                    _report(record, progress, task)
                if step % tcfg.save_every == 0 or valid_metric is not None:
                    if valid_metric is not None and valid_metric <= trainer.best_valid:
                        trainer.best_valid = valid_metric
                    trainer.save(valid_metric)
                    saved_at = step
                if stop.received:
                    stopped_by = stop.received
                    break
            # Final checkpoint, validated, unless the last step just saved one.
            if saved_at != trainer.step_count:
                valid_metric = None
                if trainer.valid_data is not None:
                    last_valid = validate(trainer.model, trainer.valid_data, tcfg, trainer.device)
                    record = {"step": trainer.step_count, "elapsed": round(trainer.elapsed, 2), **last_valid}
                    log_file.write(json.dumps(record) + "\n")
                    valid_metric = last_valid["valid_nll"]
                    trainer.best_valid = min(trainer.best_valid, valid_metric)
                trainer.save(valid_metric)
        if stopped_by in ("SIGINT", "SIGTERM"):
            log.info(f"{stopped_by}: saved {exp.checkpoint_path('last')} at step {trainer.step_count}; run `mt train` again to resume")
        return {
            "steps": trainer.step_count,
            "params": params,
            "stopped_by": stopped_by,
            "seconds": trainer.elapsed - start_elapsed,
            **last_valid,
        }


def _accumulate(window: dict, stats: dict) -> None:
    window["loss"] += stats["loss"] * stats["tgt_tokens"]
    window["nll"] += stats["nll"] * stats["tgt_tokens"]
    window["tgt"] += stats["tgt_tokens"]
    window["src"] += stats["src_tokens"]
    window["steps"] += 1


def _window_record(window: dict, trainer: Trainer, stats: dict) -> dict[str, Any]:
    """Averages since the previous record, then reset the window."""
    now = time.perf_counter()
    seconds = max(now - window["time"], 1e-9)
    tgt = max(window["tgt"], 1)
    record = {
        "step": trainer.step_count,
        "epoch": trainer.epoch,
        "loss": round(window["loss"] / tgt, 4),
        "nll": round(window["nll"] / tgt, 4),
        "ppl": round(math.exp(min(window["nll"] / tgt, 50.0)), 2),
        "lr": stats["lr"],
        "grad_norm": round(stats["grad_norm"], 4),
        "tgt_tokens_per_s": round(window["tgt"] / seconds, 1),
        "tokens_per_s": round((window["tgt"] + window["src"]) / seconds, 1),
        "elapsed": round(trainer.elapsed, 2),
    }
    window.update(loss=0.0, nll=0.0, tgt=0, src=0, steps=0, time=now)
    return record


def _report(record: dict, progress, task) -> None:
    text = (
        f"step {record['step']}"
        + (f" loss {record['loss']:.3f} ppl {record['ppl']:.1f} lr {record['lr']:.2e} "
           f"{record['tgt_tokens_per_s']:.0f} tgt tok/s" if "loss" in record else "")
        + (f" | valid nll {record['valid_nll']:.3f} ppl {record['valid_ppl']:.2f}" if "valid_nll" in record else "")
    )
    if progress.disable:
        log.info(text)
    else:
        progress.update(task, description=text)
