"""mt.train and mt.checkpoint: the label-smoothed loss and the schedule by hand (Sec. 5.3, 5.4), a tiny
Transformer that learns to reverse sequences, and checkpoints that round-trip, refuse and average.
"""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from mt.checkpoint import average_checkpoints, load_checkpoint, model_from_checkpoint, save_checkpoint
from mt.config import ModelConfig, TrainConfig
from mt.errors import MtError
from mt.model import Transformer, build_model
from mt.search import greedy_search
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mt.batching import Batch
from mt.loss import batch_loss, label_smoothed_loss
from mt.schedule import inverse_sqrt_lr, peak_lr


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


@pytest.mark.parametrize("chunk_rows", [1, 4, 100])
def test_loss_and_gradients_match_autograd_of_the_reference(chunk_rows):
    """Any chunking (one row, uneven chunks, all at once) gives the reference's loss and gradients."""
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


# -- Sec. 5.3: the learning-rate schedule ------------------------------------------------------------


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (256, 1000)])
def test_schedule_is_the_papers_formula(d_model, warmup):
    peak = peak_lr(TrainConfig(lr_peak=None, warmup_steps=warmup), d_model)
    for step in (1, warmup // 2, warmup, 4 * warmup, 10 * warmup):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert inverse_sqrt_lr(step, warmup, peak) == pytest.approx(paper, rel=1e-9)
    assert peak == pytest.approx(d_model**-0.5 * warmup**-0.5, rel=1e-9)
    scaled = peak_lr(TrainConfig(lr_peak=None, lr_scale=2.0, warmup_steps=warmup), d_model)
    assert scaled == pytest.approx(2 * peak)


def test_schedule_with_a_peak_lr():
    peak = peak_lr(TrainConfig(lr_peak=7e-4, warmup_steps=4000), 512)
    assert peak == 7e-4
    assert inverse_sqrt_lr(4000, 4000, peak) == pytest.approx(7e-4)
    assert inverse_sqrt_lr(16000, 4000, peak) == pytest.approx(3.5e-4)
    assert inverse_sqrt_lr(2000, 4000, peak) == pytest.approx(3.5e-4)  # linear warmup
    assert inverse_sqrt_lr(1, 4000, peak) == pytest.approx(7e-4 / 4000)


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
    """src + EOS; BOS + reversed; reversed + EOS, as mt.batching.collate lays them out."""
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


# -- checkpoints ------------------------------------------------------------------------------------------

TINY = ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=4, max_positions=32)


def tiny_state() -> tuple[Transformer, dict]:
    torch.manual_seed(0)
    model = build_model(TINY, 20, 20, shared_vocab=True)
    state = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(TINY),
        "vocab": {"src_size": 20, "tgt_size": 20, "shared": True},
        "tokenizer_sha256": {"src": "ab" * 32, "tgt": "ab" * 32},
        "step": 7,
        "best_valid": 1.5,
    }
    return model, state


def test_checkpoint_round_trip(tmp_path):
    model, state = tiny_state()
    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(path, state)
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.pt"]  # no temporary file left
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and loaded["best_valid"] == 1.5 and loaded["vocab"] == state["vocab"]
    assert loaded["tokenizer_sha256"] == state["tokenizer_sha256"]
    for key, value in state["model"].items():
        torch.testing.assert_close(loaded["model"][key], value, atol=0, rtol=0)
    rebuilt = model_from_checkpoint(loaded).eval()
    assert rebuilt.output.weight is rebuilt.src_embed.tokens.weight  # still tied after loading
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    tgt = torch.tensor([[BOS_ID, 8, 9]])
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(src, tgt), model.eval()(src, tgt), atol=0, rtol=0)


def assert_one_line_error(path, match: str) -> None:
    with pytest.raises(MtError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message
    assert message.startswith(f"{path}: ") and match in message
    assert len(message) < 300


@pytest.mark.parametrize("keep", [0.0, 0.001, 0.01, 0.5, 0.999])
def test_truncated_checkpoint_is_a_one_line_error(tmp_path, keep):
    _, state = tiny_state()
    path = tmp_path / "last.pt"
    save_checkpoint(path, state)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(MtError):
        load_checkpoint(path)
    assert_one_line_error(path, "")


RAN = []


def _record(what):
    RAN.append(what)
    return what


class Sneaky:
    """Unpickling this calls _record: code a checkpoint must never run."""

    def __reduce__(self):
        return (_record, ("unpickled code ran",))


def test_foreign_files_are_refused_with_one_line(tmp_path):
    plain = tmp_path / "plain.pt"
    torch.save({"model": {"w": torch.zeros(2)}}, plain)  # a torch file, but not ours
    assert_one_line_error(plain, "not an mt checkpoint")

    listed = tmp_path / "list.pt"
    torch.save([torch.zeros(2)], listed)
    assert_one_line_error(listed, "not an mt checkpoint")

    torch_object = tmp_path / "object.pt"
    torch.save({"format": "mt-checkpoint-1", "model": Sneaky()}, torch_object)
    assert_one_line_error(torch_object, "refused")

    pickled = tmp_path / "pickled.pt"
    pickled.write_bytes(pickle.dumps(Sneaky(), protocol=2))
    assert_one_line_error(pickled, "")

    text = tmp_path / "notes.pt"
    text.write_text("hello\n")
    assert_one_line_error(text, "truncated or not a checkpoint")

    assert_one_line_error(tmp_path / "missing.pt", "no such checkpoint")
    assert RAN == []


def test_average_checkpoints_is_the_mean(tmp_path):
    _, state = tiny_state()
    paths = []
    for k in (1, 2, 6):
        weights = {
            "w": torch.tensor([[1.0, -2.0], [0.5, 4.0]]) * k,
            "b": torch.full((3,), float(k)),
            "steps": torch.tensor(k),  # not floating point: taken from the last checkpoint
        }
        path = tmp_path / f"step_{k}.pt"
        save_checkpoint(path, {**state, "model": weights, "step": k})
        paths.append(path)
    averaged = average_checkpoints(paths)
    torch.testing.assert_close(averaged["model"]["w"], torch.tensor([[3.0, -6.0], [1.5, 12.0]]))
    torch.testing.assert_close(averaged["model"]["b"], torch.full((3,), 3.0))
    assert averaged["model"]["w"].dtype == torch.float32
    assert int(averaged["model"]["steps"]) == 6
    assert averaged["step"] == 6 and averaged["model_config"] == state["model_config"]
    assert averaged["averaged_from"] == ["step_1.pt", "step_2.pt", "step_6.pt"]
    with pytest.raises(MtError, match="no checkpoints to average"):
        average_checkpoints([])
