"""A training update reads nothing back from the device (mt.training.trainer, mt.training.counters).

On a GPU every read of a tensor's value by the host (`.item()`, `float()`, `int()`, an `if` on a
tensor) waits for all the work queued before it, and then the GPU waits for the host. The proof on
the CPU: torch's dispatch mode sees every operator an update runs, and `HostReads` notes each that a
GPU would make the host wait for: an operator whose result is a Python number (`.item()`, `float()`,
`int()` and `bool()` of a tensor all end in aten._local_scalar_dense; aten.equal too), one whose
result's size depends on the data (nonzero, masked_select, unique, indexing by a boolean mask: the
host needs the count), and a copy from a device to the host. The attention takes the GPU's path
(SDPA) here, not the CPU's written-out one. On CUDA, torch's own sync debug mode checks the same.
"""

from __future__ import annotations

import sys
import traceback

import pytest
import torch
from helpers import copy_experiment
from torch.utils._python_dispatch import TorchDispatchMode

from mt.model.attention import MultiHeadAttention
from mt.training.loop import train
from mt.training.loss import output_loss
from mt.training.setup import build_training
from mt.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("single_thread")

DATA_DEPENDENT = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive", "repeat_interleave"}


class HostReads(TorchDispatchMode):
    """Notes (operator, where in mt, inside Trainer.update or not) for each operator that reads the
    device on the host; `copies_of` (a tensor) is noted apart when it is copied to the host."""

    def __init__(self, copies_of: torch.Tensor | None = None):
        super().__init__()
        self.reads: list[tuple[str, str, bool]] = []
        self.copies_of, self.copies = copies_of, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name == "_to_copy" and self.copies_of is not None and args[0] is self.copies_of:
            self.copies += 1
        elif (
            (isinstance(out, (bool, int, float)) and any(isinstance(a, torch.Tensor) for a in args))
            or name in DATA_DEPENDENT
            or (name in ("index", "index_put", "index_put_", "_index_put_impl_") and any(map(_is_mask, args[1])))
            or (name in ("_to_copy", "copy_") and _to_host(func, args, kwargs or {}, out))
        ):
            self.reads.append((str(func), _where(), _in_update()))
        return out

    def inside_updates(self) -> list[tuple[str, str, bool]]:
        return [read for read in self.reads if read[2]]


def _is_mask(index) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


def _to_host(func, args, kwargs, out) -> bool:
    source = args[1] if func.overloadpacket.__name__ == "copy_" else args[0]
    target = args[0] if func.overloadpacket.__name__ == "copy_" else out
    return source.device.type != "cpu" and target.device.type == "cpu"


def _where() -> str:
    """The innermost line of mt's code on the stack."""
    frames = [f for f in traceback.extract_stack() if "/mt/" in f.filename]
    return f"{frames[-1].filename.rpartition('/mt/')[2]}:{frames[-1].lineno}" if frames else "?"


def _in_update() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is Trainer.update.__code__:
            return True
        frame = frame.f_back
    return False


def _gpu_attention(trainer: Trainer) -> None:
    for module in trainer.model.modules():
        if isinstance(module, MultiHeadAttention):
            module.use_sdpa = True


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from helpers import build_experiment

    return build_experiment(tmp_path_factory.mktemp("syncs"))


@pytest.mark.parametrize(
    "fields",
    [
        dict(precision="fp32"),
        dict(precision="fp16", clip_norm=0.5),  # a loss scale, clipping
        dict(precision="bf16", ema_decay=0.99, update_freq=2, weight_decay=0.1),
    ],
    ids=["fp32", "fp16-clip", "bf16-ema-accumulate"],
)
def test_updates_between_two_reads_read_nothing_from_the_device(base, tmp_path, fields):
    exp, cfg = copy_experiment(base, tmp_path / "exp", **fields)
    trainer = build_training(exp, cfg).trainer
    _gpu_attention(trainer)
    trainer.step()  # the optimizer's state and the loss scale are made at the first update
    with HostReads() as mode:
        done = [trainer.update() for _ in range(5)]
    assert mode.reads == [], mode.reads
    assert all(d["tgt_tokens"] > 0 and not d["stop"] for d in done)
    counts = trainer.read()  # the one read, after the updates: what they summed on the device
    assert counts["tgt_tokens"] + counts["skipped"] > 0 and trainer.state.step + trainer.state.skipped == 6


def test_the_detector_sees_the_reads_an_update_used_to_make(base, tmp_path):
    """The old update read its loss with float(), and picked the target rows with a boolean mask."""
    exp, cfg = copy_experiment(base, tmp_path / "exp")
    trainer = build_training(exp, cfg).trainer
    batch = trainer.stream.next_batch()
    hidden = torch.randn(*batch.tgt_out.shape, 32, requires_grad=True)
    with HostReads() as mode:
        loss, nll, count = output_loss(trainer.model, hidden, batch.tgt_out, 0.1)  # no host-made positions
        float(loss), int(count)
        hidden[batch.tgt_out != 0]
    assert [read[0] for read in mode.reads] == [
        "aten.nonzero.default",
        "aten._local_scalar_dense.default",
        "aten._local_scalar_dense.default",
        "aten.index.Tensor",
    ]
    with HostReads() as mode:
        output_loss(trainer.model, hidden, batch.tgt_out, 0.1, batch.targets)  # positions from the host
    assert mode.reads == []


def test_the_loop_reads_the_device_only_at_its_log_points_and_the_end(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=12, log_every=4, valid_every=1000, save_every=1000)
    run = build_training(exp, cfg)
    _gpu_attention(run.trainer)
    steps_read = []

    class Watched(HostReads):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "_to_copy" and args[0] is run.trainer.counters.totals:
                steps_read.append(run.trainer.state.step)
            return super().__torch_dispatch__(func, types, args, kwargs)

    from mt.training import loop

    with Watched(copies_of=run.trainer.counters.totals) as mode:
        with loop._StopSignal() as stop, loop.log.make_progress() as progress:
            stopped_by = loop._Loop(run, stop, progress, None, saved_at=-1).run()
    assert stopped_by == "max_steps" and run.trainer.state.step == 12
    assert mode.inside_updates() == []  # validation at the end reads its losses: outside the updates
    assert sorted(set(steps_read)) == [0, 4, 8, 12] and mode.copies == len(steps_read)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="hardware: no CUDA device")
def test_on_cuda_updates_between_two_reads_never_synchronise(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", precision="bf16", clip_norm=1.0)
    trainer = build_training(exp, cfg, device="cuda").trainer
    trainer.step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        for _ in range(5):
            trainer.update()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.read()["tgt_tokens"] > 0


def test_train_through_the_loop_still_trains(base, tmp_path):
    exp, cfg = copy_experiment(base, tmp_path / "exp", max_steps=8, log_every=4)
    summary = train(exp, cfg)
    assert summary["steps"] == 8 and summary["skipped"] == 0
