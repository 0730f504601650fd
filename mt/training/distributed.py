"""Several training processes: the process group and sums over processes.

`torchrun --nproc-per-node N -m mt train ...` (or `mt train --nproc N`, which runs the same through
torch.distributed.run: `mt.training.launch`) starts N copies of `mt train`; each reads RANK, WORLD_SIZE,
LOCAL_RANK and MASTER_ADDR/MASTER_PORT from its environment and joins one process group: gloo on
the CPU, NCCL on GPUs (one GPU per process: cuda:LOCAL_RANK). The model is wrapped in
DistributedDataParallel, which averages the gradients over processes after each backward pass.
`torchrun --nproc-per-node 1` takes that path with one rank too (a check of NCCL and DDP on one GPU,
tools/gpu_check.py). A process that torchrun did not start needs none of this: `Distributed()` is
the one-process group, and every method below is then a no-op.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from mt.errors import ConfigError, MtError
from mt.hardware import launched_by_torchrun

ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass
class Distributed:
    """This process's place among the training processes, and the collectives training needs."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    joined: bool = False  # in a process group (`setup` under torchrun, one rank included): DDP, collectives
    # Host numbers' group: gloo beside NCCL, so that summing them never waits on the GPU (None: the default group).
    host_group: Any = None

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints and logs and holds the experiment's lock."""
        return self.rank == 0

    def all_sum(self, values: list[float]) -> list[float]:
        """Element-wise sums of host numbers over all processes (float64, so token counts stay exact),
        through the host's group: with NCCL, a gloo group of its own, so no GPU is waited for."""
        if not self.joined:
            return [float(v) for v in values]
        totals = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(totals, group=self.host_group)
        return totals.tolist()

    def sum_on_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over all processes where it lies (NCCL on GPUs), queued, never read here."""
        if self.joined:
            tensor = tensor.clone()
            dist.all_reduce(tensor)
        return tensor

    def all_gather(self, obj: Any) -> list[Any]:
        """Every process's `obj`, in rank order (pickled; for small things such as RNG states)."""
        if not self.joined:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def any(self, flag: bool) -> bool:
        """True on every process if it is true on one."""
        return self.all_sum([float(flag)])[0] > 0

    def barrier(self) -> None:
        if self.joined:
            dist.barrier()

    def wrap(self, module: nn.Module) -> nn.Module:
        """DistributedDataParallel around `module` when this process is in a process group."""
        if not self.joined:
            return module
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.device] if self.device.type == "cuda" else None
        # The only buffers are the sinusoid tables, which never change: no broadcast at every forward.
        # torch 2.13 renamed the flag (and deprecated the old name); torch before it knows the old one.
        known = inspect.signature(DistributedDataParallel).parameters
        flag = "forward_sync_buffers" if "forward_sync_buffers" in known else "broadcast_buffers"
        return DistributedDataParallel(module, device_ids=device_ids, **{flag: False})


def setup(device: str = "cpu") -> Distributed:
    """Join the process group that torchrun's environment describes; a single process otherwise.

    On CUDA each process takes the GPU of its local rank (whatever cuda:N `device` names).
    """
    if not launched_by_torchrun():
        return Distributed(device=torch.device(device))
    missing = [key for key in ENV_KEYS if key not in os.environ]
    if missing:
        raise ConfigError(
            f"this looks like a torchrun process (WORLD_SIZE or TORCHELASTIC_RUN_ID is set) but "
            f"{', '.join(missing)} is not: start with torchrun or `mt train --nproc N`"
        )
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    target = torch.device(device)
    if target.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise MtError(f"local rank {local_rank} needs a GPU, but this machine has {torch.cuda.device_count()}")
        target = torch.device("cuda", local_rank)
        torch.cuda.set_device(target)
    if not dist.is_initialized():
        if target.type == "cuda":  # device_id: NCCL knows this process's GPU from the start
            dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=target)
        else:
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
    # Host numbers (tokens, the clock, a wish to stop) are summed every update: over NCCL they would
    # go through the GPU and be read back, a wait for its whole queue.
    host_group = dist.new_group(backend="gloo") if dist.get_backend() == "nccl" else None
    return Distributed(rank, world_size, local_rank, target, joined=True, host_group=host_group)


def shutdown(group: Distributed) -> None:
    """Leave the process group together: a process tearing down its connections while another still
    writes its last checkpoint can abort the other's communication threads at exit."""
    if group.joined and dist.is_initialized():
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()
