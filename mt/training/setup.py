"""Setting up a training run: from an experiment and its config to the plain objects a Trainer updates.

The tokenizers and the binarized data are checked against each other, the model is initialised
from the seed (the same on every process) and the random number generators seeded, the loss module
compiled (train.compile) and wrapped for several processes, the optimizer made,
`train.precision: auto` decided by timing on this machine, `train.max_tokens: auto` by the device's
memory and the lr and warmup scaled to the batch when asked (mt.training.token_budget).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from mt import log
from mt.allocator import keep_freed_memory
from mt.config.schema import ExperimentConfig, ModelConfig
from mt.data.batching import Batch, BatchStream
from mt.data.dataset import ParallelData, check_data
from mt.data.prefetch import PrefetchingStream
from mt.experiment.checkpoint_file import peek_checkpoint
from mt.experiment.paths import Experiment
from mt.hardware import fastest_precision
from mt.model.layers import Embedding, Residual
from mt.model.transformer import Transformer, build_model
from mt.tokenizer import Tokenizer
from mt.training.distributed import Distributed
from mt.training.ema import WeightAverage
from mt.training.loss import decoder_states, output_loss
from mt.training.optimizer import build_optimizer
from mt.training.schedule import Schedule, peak_lr
from mt.training.state import TrainingState, batching_of, bleu_setup
from mt.training.token_budget import decided_max_tokens, lr_scaling
from mt.training.trainer import Trainer
from mt.training.validate import BleuSample


class LossModule(nn.Module):
    """The model and its loss as one module, so that DistributedDataParallel wraps the whole forward.

    With `compile`, torch.compile takes the encoder and decoder stacks (dynamic shapes: token-budget
    batches change both sizes every step) and the loss stays as written: its chunk loop over a
    data-dependent number of target rows would recompile at every new size, and it is already one
    fused pass (mt.training.loss). `mode` is torch.compile's (train.compile_mode)."""

    def __init__(self, model: Transformer, epsilon: float, compile: bool = False, mode: str = "default"):
        super().__init__()
        self.model, self.epsilon = model, epsilon
        self.hidden = torch.compile(self._hidden, dynamic=True, mode=mode) if compile else self._hidden

    def _hidden(self, src_ids: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return decoder_states(self.model, src_ids, tgt_in)

    def forward(
        self, src_ids: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor, targets: torch.Tensor | None = None
    ):
        loss, nll, _ = output_loss(self.model, self.hidden(src_ids, tgt_in), tgt_out, self.epsilon, targets)
        return loss, nll


@dataclass
class Training:
    """One run's parts, as `build_training` makes them: the Trainer and what the loop around it needs."""

    exp: Experiment
    cfg: ExperimentConfig  # with train.precision's and train.max_tokens's auto decided
    trainer: Trainer
    train_data: ParallelData
    valid_data: ParallelData | None  # None without a validation set
    tgt_tok: Tokenizer
    metadata: dict[str, Any]  # model_config, vocab, tokenizer_sha256: what checkpoints carry
    bleu: BleuSample | None = None  # train.valid_bleu's sample, made at the first validation


def build_training(
    exp: Experiment,
    cfg: ExperimentConfig,
    device: str = "cpu",
    group: Distributed | None = None,
    keep_freed: bool = True,
) -> Training:
    """A fresh run of `exp` (mt.training.checkpoints resumes it). `group`: this process's place among
    several (one process by default). `keep_freed`: ask glibc to keep freed memory for reuse (see
    mt.hardware); bench/heap.py turns it off to measure glibc's defaults."""
    group = group or Distributed(device=torch.device(device))
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    tokenizer_sha256 = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
    check_data(exp, tokenizer_sha256)  # data binarized with another tokenizer is refused
    cfg = decided_precision(exp, cfg, group)  # after the refusals: it times matmuls
    tcfg = cfg.train
    if group.device.type == "cpu" and keep_freed:
        keep_freed_memory()  # large activations reused step after step instead of page-faulted in again
    vocab = {"src_size": src_tok.vocab_size, "tgt_size": tgt_tok.vocab_size, "shared": src_tok is tgt_tok}
    train_data = ParallelData(exp, "train")
    valid_data = ParallelData(exp, "valid") if exp.ids_path("valid", "src").exists() else None
    model = seeded_model(cfg.model, vocab, tcfg.seed, group)
    probe = LossModule(model, tcfg.label_smoothing)  # plain: not compiled for the probe's shapes
    max_tokens, why = decided_max_tokens(exp, tcfg, train_data, model, lambda b: _summed_loss(probe, b), group)
    if tcfg.max_tokens == "auto" and group.is_main:
        log.info(f"max_tokens auto: {max_tokens} ({why})")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(tcfg, max_tokens=max_tokens))
    tcfg = cfg.train
    lr_factor, warmup_steps = lr_scaling(tcfg, max_tokens, group.world_size)
    if tcfg.lr_scaling != "none" and group.is_main:
        batch = max_tokens * tcfg.update_freq * group.world_size
        log.info(
            f"lr_scaling {tcfg.lr_scaling}: {batch} tokens an update, {batch / tcfg.lr_reference_tokens:.2f}x "
            f"lr_reference_tokens: peak lr x{lr_factor:.3f}, warmup {warmup_steps} updates"
        )
    # Compiled inside (the model, which checkpoints save, stays the plain model) and before DDP wraps it.
    loss_module = LossModule(model, tcfg.label_smoothing, tcfg.compile, tcfg.compile_mode)
    stream = BatchStream(
        train_data,
        max_tokens,
        tcfg.seed,
        group.rank,
        group.world_size,
        tcfg.direction_temperature,
        bucketed=tcfg.compile,  # a few shapes for the compiled step (and its CUDA graphs)
        max_width=cfg.model.max_positions,
    )
    state = TrainingState.fresh(
        tcfg.best_metric, bleu_setup(tcfg.best_metric, tcfg.valid_bleu_sentences, cfg.data.multilingual)
    )
    state.max_tokens, state.precision = max_tokens, tcfg.precision
    state.batching = batching(tcfg, train_data)
    trainer = Trainer(
        model,
        group.wrap(loss_module),
        build_optimizer(model, tcfg.weight_decay, (tcfg.adam_beta1, tcfg.adam_beta2), tcfg.adam_eps),
        PrefetchingStream(stream, group.device),
        Schedule(
            peak_lr(tcfg.lr_peak, tcfg.lr_scale, tcfg.warmup_steps, cfg.model.d_model) * lr_factor,
            warmup_steps,
            tcfg.max_steps,
            tcfg.max_time,
            tcfg.cooldown,
            tcfg.cooldown_shape,
            tcfg.lr_schedule,
            cfg.model.dropout,
            tcfg.early_dropout,
            tcfg.early_dropout_until,
        ),
        state,
        group,
        scheduled_dropouts(model),
        precision=tcfg.precision,
        update_freq=tcfg.update_freq,
        clip_norm=tcfg.clip_norm,
        ema=WeightAverage(model, tcfg.ema_decay) if tcfg.ema_decay > 0 else None,
        graphed=tcfg.compile and tcfg.compile_mode == "reduce-overhead" and group.device.type == "cuda",
    )
    metadata = {"model_config": dataclasses.asdict(cfg.model), "vocab": vocab, "tokenizer_sha256": tokenizer_sha256}
    return Training(exp, cfg, trainer, train_data, valid_data, tgt_tok, metadata)


def _summed_loss(module: LossModule, batch: Batch) -> torch.Tensor:
    return module(batch.src_ids, batch.tgt_in, batch.tgt_out, batch.targets)[0]


def decided_precision(exp: Experiment, cfg: ExperimentConfig, group: Distributed) -> ExperimentConfig:
    """cfg with `train.precision: auto` replaced by what is fastest here: decided by timing, or kept
    from last.pt when it trained on this kind of device (a timing near the line, or a busy machine,
    would switch a resumed run's precision: no longer the run it was); a resume on another kind of
    device decides again (the saved config keeps auto)."""
    if cfg.train.precision != "auto":
        return cfg
    saved = peek_checkpoint(exp.checkpoint_path("last"))
    if saved is not None and saved.get("precision") and saved.get("device") == group.device.type:
        timed = (str(saved["precision"]), f"kept from {exp.checkpoint_path('last')}, trained on {group.device.type}")
    else:
        timed = fastest_precision(group.device, cfg.model.d_model, cfg.model.d_ff)
    precision, why = group.all_gather(timed)[0]  # every process trains as the first decided
    if group.is_main:
        log.info(f"precision auto: {precision} ({why})")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))


def seeded_model(model_cfg: ModelConfig, vocab: dict[str, Any], seed: int, group: Distributed) -> Transformer:
    """The model, initialised from the seed (the same on every process), and the seeded RNGs."""
    torch.manual_seed(seed)
    model = build_model(model_cfg, vocab["src_size"], vocab["tgt_size"], vocab["shared"])
    if group.rank:  # its own dropout masks; rank 0 continues the single-process stream
        torch.manual_seed(seed + group.rank)
    # Unused by training itself, but seeded and checkpointed too, so that whatever draws from
    # them (a library, a later feature) resumes exactly.
    random.seed(seed + group.rank)
    np.random.seed(seed + group.rank)
    return model.to(group.device)


def scheduled_dropouts(model: Transformer) -> list[nn.Module]:
    """model.dropout's modules (after each sub-layer, after the embeddings), for train.early_dropout."""
    return [m.dropout for m in model.modules() if isinstance(m, (Residual, Embedding))]


def batching(tcfg, train_data) -> str:
    """This run's `batching_of`: the temperature only where the data has several directions."""
    import numpy as np

    directions = getattr(train_data, "directions", None)
    several = directions is not None and len(directions) > 0 and int(np.min(directions)) != int(np.max(directions))
    return batching_of(tcfg.compile, tcfg.direction_temperature if several else None)
