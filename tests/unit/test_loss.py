"""mt.training.loss: the label-smoothed loss by hand (Sec. 5.4), its hand-written gradient against autograd, and a
tiny Transformer that learns to reverse sequences with it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from mt.data.batching import Batch
from mt.model.transformer import Transformer
from mt.search.single_path import greedy_search
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mt.training.loss import batch_loss, label_smoothed_loss
from mt.training.schedule import inverse_sqrt_lr

pytestmark = pytest.mark.usefixtures("single_thread")


# -- Sec. 5.4: label smoothing -----------------------------------------------------------------------

LOGITS = [
    [1.0, 2.0, 0.5, -1.0, 0.0],
    [0.3, -0.2, 1.5, 0.7, 2.2],
    [4.0, 0.0, 0.0, 9.0, -3.0],  # its target is PAD: must not count, whatever the logits
]
TARGET = [2, 4, PAD_ID]


def hand_smoothed_loss(eps: float) -> tuple[float, float]:
    """-sum_j q_j log p_j with q = (1 - eps) on the target + eps / (V - 1) on every non-pad class."""
    vocab = 5
    loss = nll = 0.0
    for logits, target in zip(LOGITS, TARGET):
        if target == PAD_ID:
            continue
        log_z = math.log(sum(math.exp(v) for v in logits))
        logp = [v - log_z for v in logits]
        q = [0.0 if j == PAD_ID else eps / (vocab - 1) for j in range(vocab)]
        q[target] += 1 - eps
        assert sum(q) == pytest.approx(1.0)
        loss -= sum(qj * lj for qj, lj in zip(q, logp))
        nll -= logp[target]
    return loss, nll


def loss_of_logits(logits: torch.Tensor, target: torch.Tensor, eps: float, **kwargs):
    """label_smoothed_loss with the identity as output projection: logits in, the loss of them out."""
    return label_smoothed_loss(logits, torch.eye(logits.size(1), dtype=logits.dtype), target, eps, **kwargs)


def reference_loss(logits: torch.Tensor, target: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The smoothed loss by plain autograd: log_softmax, q written out, no hand-made gradient."""
    vocab = logits.size(-1)
    keep = target != PAD_ID
    logp = torch.log_softmax(logits[keep].float(), dim=-1)
    q = torch.full_like(logp, eps / (vocab - 1))
    q[:, PAD_ID] = 0.0
    q[torch.arange(len(q)), target[keep]] += 1 - eps
    return -(q * logp).sum(), -logp.gather(1, target[keep, None]).sum()


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_label_smoothed_loss_by_hand(eps):
    loss, nll, n = loss_of_logits(torch.tensor(LOGITS), torch.tensor(TARGET), eps)
    expected_loss, expected_nll = hand_smoothed_loss(eps)
    assert n == 2
    assert loss.item() == pytest.approx(expected_loss, abs=1e-5)
    assert nll.item() == pytest.approx(expected_nll, abs=1e-5)


def test_pad_targets_do_not_count():
    logits = torch.tensor(LOGITS, requires_grad=True)
    loss, _, _ = loss_of_logits(logits, torch.tensor(TARGET), 0.1)
    loss.backward()
    assert torch.count_nonzero(logits.grad[2]) == 0
    assert torch.count_nonzero(logits.grad[:2]) > 0


def test_epsilon_0_is_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(12, 9)
    target = torch.randint(0, 9, (12,))
    target[[3, 7]] = PAD_ID
    loss, nll, n = loss_of_logits(logits, target, 0.0)
    expected = F.cross_entropy(logits, target, ignore_index=PAD_ID, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected)
    assert n == int((target != PAD_ID).sum())


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_gradient_matches_numerical_differences(eps):
    """The gradients are written out by hand (softmax - q, then the projection's two products), in
    chunks of 2 rows; check both, w.r.t. the hidden states and the weights, in float64."""
    torch.manual_seed(1)
    hidden = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([2, 5, PAD_ID, 1, 3, PAD_ID, 4])
    assert torch.autograd.gradcheck(lambda h, w: label_smoothed_loss(h, w, target, eps, chunk_rows=2)[0],
                                    (hidden, weight))


@pytest.mark.parametrize("chunk_rows", [1, 4, 100, None])
def test_loss_and_gradients_match_autograd_of_the_reference(chunk_rows):
    """Any chunking (one row, uneven chunks, all at once, the default) gives the reference's loss and
    gradients, the rows padded to whole chunks (ROWS_MULTIPLE) or not."""
    torch.manual_seed(2)
    hidden = torch.randn(9, 5, requires_grad=True)
    weight = torch.randn(7, 5, requires_grad=True)
    target = torch.tensor([2, 5, PAD_ID, 1, 3, 6, PAD_ID, 4, 4])
    loss, nll, n = label_smoothed_loss(hidden, weight, target, 0.1, chunk_rows=chunk_rows)
    grads = torch.autograd.grad(loss, (hidden, weight))
    ref_loss, ref_nll = reference_loss(hidden @ weight.t(), target, 0.1)
    ref_grads = torch.autograd.grad(ref_loss, (hidden, weight))
    assert n == 7 and not nll.requires_grad
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(nll, ref_nll.detach())
    for grad, ref in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-6, rtol=1e-5)


def test_loss_under_bf16_autocast_is_the_reference_in_bf16():
    """Under autocast the projection runs in bf16 (as F.linear would), log_softmax and sums in fp32."""
    torch.manual_seed(4)
    hidden = torch.randn(40, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(1, 50, (40,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _, _ = label_smoothed_loss(hidden, weight, target, 0.1, chunk_rows=16)
        ref_loss, _ = reference_loss(F.linear(hidden, weight), target, 0.1)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref_loss, rtol=1e-3, atol=0)
    grads = torch.autograd.grad(loss, (hidden, weight))
    ref_grads = torch.autograd.grad(ref_loss, (hidden, weight))
    for grad, ref in zip(grads, ref_grads):
        assert grad.dtype == torch.float32
        torch.testing.assert_close(grad, ref, rtol=0.05, atol=0.02 * ref.abs().max().item())


def test_loss_without_gradients_is_the_same_loss():
    torch.manual_seed(5)
    hidden, weight = torch.randn(6, 3, requires_grad=True), torch.randn(8, 3)
    target = torch.tensor([1, 2, 3, PAD_ID, 5, 7])
    with torch.no_grad():
        quiet, _, _ = label_smoothed_loss(hidden, weight, target, 0.1)
    loss, _, _ = label_smoothed_loss(hidden, weight, target, 0.1)
    assert not quiet.requires_grad and loss.requires_grad
    torch.testing.assert_close(quiet, loss.detach())


def test_batch_loss_equals_the_reference_loss_over_all_logits():
    """batch_loss projects only the real target positions, in chunks, through the tied output
    layer: the same loss as the plain loss over the full logits, and the same gradient for every
    parameter (the tied embedding gets both its uses)."""
    torch.manual_seed(3)
    model = Transformer(20, 20, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1).eval()
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]])
    tgt_in = torch.tensor([[BOS_ID, 9, 10, 11], [BOS_ID, 12, PAD_ID, PAD_ID]])
    tgt_out = torch.tensor([[9, 10, 11, EOS_ID], [12, EOS_ID, PAD_ID, PAD_ID]])
    loss, nll, n = batch_loss(model, Batch(src, tgt_in, tgt_out, np.arange(2)), 0.1)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    ref_loss, ref_nll = reference_loss(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), 0.1)
    ref_grads = torch.autograd.grad(ref_loss, list(model.parameters()))
    assert n == 6
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(nll, ref_nll.detach())
    for grad, ref in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-6, rtol=1e-4)


# -- learning: reverse random sequences ---------------------------------------------------------------

N_REAL = 10  # real tokens 4..13
VOCAB = 4 + N_REAL


def random_sequences(n: int, gen: torch.Generator) -> list[list[int]]:
    lengths = torch.randint(3, 9, (n,), generator=gen).tolist()
    return [torch.randint(4, VOCAB, (length,), generator=gen).tolist() for length in lengths]


def padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows])


def reverse_batch(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src + EOS; BOS + reversed; reversed + EOS, as mt.data.batching.collate lays them out."""
    tgts = [s[::-1] for s in seqs]
    src = padded([s + [EOS_ID] for s in seqs])
    return src, padded([[BOS_ID] + t for t in tgts]), padded([t + [EOS_ID] for t in tgts])


@pytest.mark.slow
def test_a_tiny_transformer_learns_to_reverse():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = Transformer(VOCAB, VOCAB, d_model=32, d_ff=64, n_heads=4, enc_layers=2, dec_layers=2, dropout=0.1,
                        max_positions=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for step in range(1, 501):
        src, tgt_in, tgt_out = reverse_batch(random_sequences(64, gen))
        loss, _, n = loss_of_logits(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), 0.1)
        optimizer.zero_grad()
        (loss / n).backward()
        for group in optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(step, 100, 3e-3)
        optimizer.step()

    test = random_sequences(200, torch.Generator().manual_seed(123))
    src, _, _ = reverse_batch(test)
    hyps = greedy_search(model, src, max_len_a=1.0, max_len_b=2)
    output = [" ".join(map(str, h.tokens)) for h in hyps]
    refs = [" ".join(map(str, s[::-1])) for s in test]
    bleu = sacrebleu.corpus_bleu(output, [refs]).score
    assert bleu > 90, f"BLEU {bleu:.1f}; e.g. {output[0]!r} for {refs[0]!r}"
