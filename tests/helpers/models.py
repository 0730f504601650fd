"""Tiny models and tensors: the tests' tiny Transformer, padded sources, and comparisons of parameters and
of whole states (checkpoints, RNG states) down to the last bit."""

from __future__ import annotations

import torch

from mt.model.transformer import Transformer
from mt.tokenizer import EOS_ID, PAD_ID


def tiny_model(vocab: int = 32, seed: int = 0, **kwargs) -> Transformer:
    """The tests' tiny Transformer, in eval mode: d_model 16, d_ff 32, 4 heads, 2+2 layers, dropout
    0.1, 64 positions, `vocab` tokens on each side; `kwargs` change any of these."""
    torch.manual_seed(seed)
    args = dict(d_model=16, d_ff=32, n_heads=4, enc_layers=2, dec_layers=2, dropout=0.1, max_positions=64)
    args.update(kwargs)
    return Transformer(vocab, vocab, **args).eval()


def sources(lengths: list[int], vocab: int = 32, seed: int = 0) -> torch.Tensor:
    """Right-padded sources of real tokens ending in EOS."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, vocab, (n,), generator=gen)
        ids[row, n] = EOS_ID
    return ids


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def assert_params_close(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=0, msg=lambda m: f"{name}: {m}")


def assert_same(a, b, where: str = "") -> None:
    """Equal down to the last bit: tensors with torch.equal, containers item by item."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
