"""The training objective: label-smoothed cross entropy (Sec. 5.4) over the non-pad target tokens.

The output projection and the loss are one operation, run over row chunks of the target positions:
the (tokens, vocab) logits are the largest activation of a small model, and here no tensor of that
size exists at all, only one chunk of rows at a time (16 MB in fp32) while log_softmax, the loss and
the gradient (softmax - q, written out by hand) pass over them. Both gradients, w.r.t. the hidden
states and the output weights, are made in the forward pass, when the chunk is at hand; the backward
pass only scales them. Without gradients (validation) the chunks compute the loss alone.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from mt.data.batching import Batch
from mt.model.transformer import Transformer
from mt.tokenizer import PAD_ID

CHUNK_ELEMENTS = (
    1 << 22
)  # logits per chunk: 16 MB in fp32; smaller chunks lose more in the matmuls (bench/cpu_kernels.py)
# Rows are padded to a multiple of this (pad targets, no loss, no gradient), and chunks hold a multiple of
# it: oneDNN builds a bf16 matmul kernel for each new shape, and the last chunk's rows, the count of a
# batch's target tokens, would otherwise be new at nearly every step (~20 ms a kernel on a CPU with AMX).
ROWS_MULTIPLE = 64


def _compute_dtype(hidden: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """What F.linear would compute in here: the autocast dtype if autocast is on, else the inputs'."""
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return torch.promote_types(hidden.dtype, weight.dtype)


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    """Summed smoothed cross entropy and summed NLL of softmax(hidden @ weight^T), chunk by chunk."""

    @staticmethod
    def forward(ctx, hidden, weight, target, epsilon: float, pad_id: int, need_grad: bool, chunk_rows: int):
        dtype = _compute_dtype(hidden, weight)
        acc = torch.promote_types(dtype, torch.float32)  # log-probabilities and sums: at least fp32
        vocab = weight.size(0)
        spread = epsilon / (vocab - 1)  # q's mass on each non-pad class; the target gets 1 - eps more
        with torch.autocast(hidden.device.type, enabled=False):
            h, w = hidden.to(dtype), weight.to(dtype)
            count = h.size(0)
            extra = -count % min(ROWS_MULTIPLE, chunk_rows)
            if extra:
                h = torch.nn.functional.pad(h, (0, 0, 0, extra))
                target = torch.nn.functional.pad(target, (0, extra), value=pad_id)
            loss = torch.zeros((), dtype=acc, device=hidden.device)
            nll = torch.zeros((), dtype=acc, device=hidden.device)
            if need_grad:
                grad_hidden = hidden.new_empty((h.size(0), hidden.size(1)))
                grad_weight = torch.zeros_like(weight, dtype=torch.promote_types(weight.dtype, torch.float32))
            for start in range(0, h.size(0), chunk_rows):
                rows = slice(start, start + chunk_rows)
                h_c, t_c = h[rows], target[rows]
                keep = (t_c != pad_id).to(acc)
                logp = torch.log_softmax(h_c @ w.t(), dim=-1, dtype=acc)  # (rows, vocab)
                nll_rows = -logp.gather(1, t_c[:, None]).squeeze(1)
                # Mean of -log p over the V - 1 non-pad classes.
                uniform_rows = -(logp.sum(dim=-1) - logp[:, pad_id]) / (vocab - 1)
                loss += (((1.0 - epsilon) * nll_rows + epsilon * uniform_rows) * keep).sum()
                nll += (nll_rows * keep).sum()
                if need_grad:  # d loss / d logits = softmax - q on the non-pad rows, 0 on the others
                    grad = logp.exp_()
                    grad.sub_(spread)
                    grad[:, pad_id] += spread
                    grad.scatter_add_(1, t_c[:, None], torch.full_like(keep[:, None], epsilon - 1.0))
                    grad = grad.to(dtype)
                    row_keep = keep[:, None].to(dtype)  # pad rows: masked in the (rows, d) products
                    grad_hidden[rows] = (grad @ w) * row_keep
                    grad_weight += grad.t() @ (h_c * row_keep)
        ctx.mark_non_differentiable(nll)
        if need_grad:
            ctx.save_for_backward(grad_hidden[:count], grad_weight)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_weight * grad_loss, None, None, None, None, None


def label_smoothed_loss(
    hidden: torch.Tensor,  # (tokens, d_model)
    weight: torch.Tensor,  # (vocab, d_model): the output projection, logits = hidden @ weight^T
    target: torch.Tensor,  # (tokens,)
    epsilon: float,
    pad_id: int = PAD_ID,
    chunk_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed smoothed cross entropy and summed NLL over the non-pad targets, and their count (a
    tensor: read as a Python int, it would break a compiled graph).

    The smoothed target is (1 - eps) on the true class plus eps spread evenly over the V - 1
    non-pad classes (Szegedy et al. 2016, as in Sec. 5.4); the pad class gets no mass, and pad
    positions are not scored. The NLL is for reporting: it carries no gradient.
    """
    if chunk_rows is None:
        chunk_rows = max(ROWS_MULTIPLE, CHUNK_ELEMENTS // weight.size(0) // ROWS_MULTIPLE * ROWS_MULTIPLE)
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    loss, nll = _ProjectedSmoothedCrossEntropy.apply(hidden, weight, target, epsilon, pad_id, need_grad, chunk_rows)
    return loss, nll, (target != pad_id).sum()


def batch_loss(model: Transformer, batch: Batch, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward pass and loss of one batch."""
    hidden = decoder_states(model, batch.src_ids, batch.tgt_in)
    return output_loss(model, hidden, batch.tgt_out, epsilon, batch.targets)


def decoder_states(model: Transformer, src_ids: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """The encoder and decoder stacks: the decoder's last states, (batch, tgt_len, d_model)."""
    memory, src_mask = model.encode(src_ids)
    return model.decode_hidden(tgt_in, memory, src_mask)


def output_loss(
    model: Transformer,
    hidden: torch.Tensor,
    tgt_out: torch.Tensor,
    epsilon: float,
    targets: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The output layer and the loss of the decoder's `hidden` states, on non-pad target positions only.

    `targets`, the flat positions of those (Batch.targets, found on the host), picks them without a
    boolean mask: a mask's row count is data the host would have to read back from a GPU."""
    if targets is None:
        targets = (tgt_out != PAD_ID).flatten().nonzero().squeeze(1)
    picked = hidden.flatten(0, 1).index_select(0, targets)
    return label_smoothed_loss(picked, model.output.weight, tgt_out.flatten().index_select(0, targets), epsilon)


def autocast(precision: str, device: torch.device):
    """The forward pass under bf16/fp16 autocast, or as is for fp32."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    return nullcontext()
