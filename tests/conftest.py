"""Fixtures shared by the test modules, and the tiny model they build (`from conftest import tiny_model`)."""

import pytest
import torch

from mt.experiment import Experiment
from mt.model import Transformer


@pytest.fixture
def single_thread():
    """Tiny tensors on a shared 2-core machine: extra intra-op threads only add synchronisation and
    make a step up to ten times slower; one thread is fastest (and deterministic)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_model(vocab: int = 32, seed: int = 0, **kwargs) -> Transformer:
    """The tests' tiny Transformer, in eval mode: d_model 16, d_ff 32, 4 heads, 2+2 layers, dropout
    0.1, 64 positions, `vocab` tokens on each side; `kwargs` change any of these."""
    torch.manual_seed(seed)
    args = dict(d_model=16, d_ff=32, n_heads=4, enc_layers=2, dec_layers=2, dropout=0.1, max_positions=64)
    args.update(kwargs)
    return Transformer(vocab, vocab, **args).eval()


@pytest.fixture(scope="session")
def trained_experiment(tmp_path_factory) -> Experiment:
    """A tiny experiment trained on the toy corpus, shared by the tests that only read it: 1+2 layers,
    2 heads, 40 steps; validation every 15, periodic checkpoints at 20 and 40, and the log's last
    training record (step 36) before last.pt's step (40). Copy it to change it."""
    from mt.train import train
    from toy import one_thread, tiny_experiment

    exp, cfg = tiny_experiment(
        tmp_path_factory.mktemp("trained"), {"train": 400, "valid": 20, "test": 20},
        model=dict(enc_layers=1, dec_layers=2, dropout=0.0),
        train=dict(max_steps=40, max_tokens=600, lr_peak=3e-3, warmup_steps=10, log_every=6, valid_every=15,
                   save_every=20),
        decode=dict(max_len_b=10),
    )
    with one_thread():
        train(exp, cfg)
    return exp
