"""The training objective: label-smoothed cross entropy (Sec. 5.4) over the non-pad target tokens.

The gradient of the smoothed loss w.r.t. the logits is written out by hand (softmax - q): the output
layer is the largest activation of this model, and this keeps one vocabulary-sized tensor alive in
the backward pass instead of the several that log_softmax, gather and masking would.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from mt.batching import Batch
from mt.errors import MtError
from mt.model import Transformer
from mt.tokenizer import PAD_ID


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-row smoothed cross entropy and NLL from logits, with the gradient written out.

    The forward pass keeps one (tokens, vocab) tensor, the log-probabilities (at least fp32); the
    backward pass makes one more, the gradient softmax * g - q * g, in three passes (log_softmax,
    gather and masking under autograd would keep several).
    """

    @staticmethod
    def forward(ctx, logits, target, epsilon: float, pad_id: int):
        dtype = torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype
        logp = torch.log_softmax(logits, dim=-1, dtype=dtype)  # (n, vocab)
        keep = (target != pad_id).to(logp.dtype)
        nll = -logp.gather(1, target[:, None]).squeeze(1) * keep
        # Mean of -log p over the V - 1 non-pad classes.
        uniform = -(logp.sum(dim=-1) - logp[:, pad_id]) / (logp.size(-1) - 1) * keep
        ctx.save_for_backward(logp, target, keep)
        ctx.epsilon, ctx.pad_id, ctx.logits_dtype = epsilon, pad_id, logits.dtype
        return (1.0 - epsilon) * nll + epsilon * uniform, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        logp, target, keep = ctx.saved_tensors
        eps, pad_id = ctx.epsilon, ctx.pad_id
        vocab = logp.size(-1)
        g_loss = (grad_loss if grad_loss is not None else torch.zeros_like(keep)) * keep  # (n,)
        g_nll = (grad_nll if grad_nll is not None else torch.zeros_like(keep)) * keep
        grad = logp.exp().mul_((g_loss + g_nll)[:, None])  # softmax * g
        # minus q: eps / (V - 1) on every non-pad class, and (1 - eps) more on the target.
        grad.sub_((g_loss * eps / (vocab - 1))[:, None])
        grad[:, pad_id] += g_loss * eps / (vocab - 1)
        grad.scatter_add_(1, target[:, None], -(g_loss * (1.0 - eps) + g_nll)[:, None])
        return grad.to(ctx.logits_dtype), None, None, None


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


def autocast(precision: str, device: torch.device):
    """The forward pass under bf16/fp16 autocast, or as is for fp32."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp16":
        if device.type != "cuda":
            raise MtError("--precision fp16 needs a CUDA device; use bf16 on the CPU")
        return torch.autocast("cuda", dtype=torch.float16)
    return nullcontext()
