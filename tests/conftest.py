"""Fixtures shared by the test modules."""

import pytest
import torch


@pytest.fixture
def single_thread():
    """Tiny tensors on a shared 2-core machine: extra intra-op threads only add synchronisation and
    make a step up to ten times slower; one thread is fastest (and deterministic)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
