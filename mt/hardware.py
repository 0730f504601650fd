"""What this machine and process can do: the CPU's name, torch's threads, which precision trains
fastest here (`train.precision: auto`, timed), a warning before a precision that runs far slower
than fp32 on this CPU, and whether torchrun started this process.

Nothing here imports torch at import time: `mt train` checks its flags and config before paying
for it.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from pathlib import Path
from typing import TYPE_CHECKING

from mt.errors import ConfigError

if TYPE_CHECKING:
    import torch

WARMUP_ROUNDS, TIMED_ROUNDS = 3, 12  # ~0.3 s in all for the recipe's model on 2 cores
HALF_PRECISION_MIN_SPEEDUP = 1.3  # over fp32, on the matmul timed, for auto to take bf16/fp16


def fastest_precision(device: "torch.device", d_model: int, d_ff: int) -> tuple[str, str]:
    """What `train.precision: auto` trains in here, and why (for the log).

    On the CPU the answer depends on the chip, not on torch: with AMX, or on AMD's Zen 4, bf16
    matmuls run several times faster than fp32; on an Intel Xeon whose AMX is hidden by its
    hypervisor they run at about half fp32's speed, and fp16 (AVX512-FP16) at about fp32's (the
    figures: docs/performance-notes.md). So time the model's largest training product, a batch of 8192 rows through the first FFN layer, in all three and take
    the faster half precision only when it is clearly faster than fp32 (fp16 trains with a dynamic
    loss scale). CUDA: bf16 where the GPU has it, else fp16.
    """
    import torch

    if device.type == "cuda":
        # this process's GPU (not the current device's), with bf16 in its tensor cores (Ampere, compute
        # capability 8, and later): torch.cuda.is_bf16_supported() also says yes where bf16 is emulated
        # (a V100, a T4), several times slower than fp16 there
        major, minor = torch.cuda.get_device_capability(device)
        if major >= 8:
            return "bf16", f"CUDA with bf16 (compute capability {major}.{minor})"
        return "fp16", f"CUDA compute capability {major}.{minor}: no bf16 units (fp16 with a dynamic loss scale)"
    if device.type != "cpu":
        return "fp32", f"{device.type}: no mixed precision tried"
    rows = 8192
    # A half precision without hardware (~1 GFLOP/s on an AVX2-only EPYC) would take minutes to time
    # at this size and can never win: a short product rules it out first.
    slow = {name: reason for name in ("bf16", "fp16") if (reason := too_slow(name))}
    gflops = matmul_gflops(
        rows, d_model, d_ff, WARMUP_ROUNDS, TIMED_ROUNDS, tuple(name for name in PRECISIONS if name not in slow)
    )
    # A step is not all matmuls (softmax, LayerNorm and casts do not speed up): on the Xeon an fp16
    # product at 0.9-1.1x fp32's made a 0.96-1.06x step (bench/throughput.py). 1.3x leaves bf16 on
    # Zen 4 (2.6x) and AMX (~5x).
    half = max((name for name in ("bf16", "fp16") if name in gflops), key=gflops.__getitem__, default="fp32")
    choice = half if gflops[half] > HALF_PRECISION_MIN_SPEEDUP * gflops["fp32"] else "fp32"
    measured = ", ".join(f"{name} {gflops[name]:.0f}" for name in ("bf16", "fp16", "fp32") if name in gflops)
    skipped = "".join(f"; {reason}, not timed" for reason in slow.values())
    return choice, f"{rows}x{d_model}x{d_ff} matmul GFLOP/s: {measured}{skipped}"


PRECISIONS = ("fp32", "bf16", "fp16")
# A half precision this many times slower than fp32 on the CPU (no bf16/fp16 hardware: ~1 GFLOP/s
# against ~110 in fp32 on an AVX2-only EPYC) is warned about by `mt`, and skipped by bench/ unless asked for.
SLOW_PRECISION_FACTOR = 10.0


def matmul_gflops(
    rows: int, d_in: int, d_out: int, warmup: int, timed: int, names: tuple[str, ...] = PRECISIONS
) -> dict[str, float]:
    """GFLOP/s on the CPU of a (rows x d_in) @ (d_in x d_out) product in each precision named: the
    fastest of `timed` runs after `warmup`, precisions interleaved so that all see the same load."""
    import time

    import torch

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    x, w = torch.randn(rows, d_in), torch.randn(d_in, d_out)
    operands = {name: (x.to(dtypes[name]), w.to(dtypes[name])) for name in names}
    times: dict[str, list[float]] = {name: [] for name in operands}
    for repeat in range(warmup + timed):
        for name, (a, b) in operands.items():
            start = time.perf_counter()
            torch.mm(a, b)
            if repeat >= warmup:
                times[name].append(time.perf_counter() - start)
    # The fastest of each: other work on the machine only ever adds time, and a median of few runs
    # let one noisy start pick fp16 on a CPU where it is level with fp32.
    return {name: 2 * rows * d_in * d_out / min(t) / 1e9 for name, t in times.items()}


@functools.lru_cache(maxsize=None)
def short_matmul_gflops(names: tuple[str, ...]) -> dict[str, float]:
    """`matmul_gflops` of a short 256^3 product, once per process and set of precisions: ~0.1 s for
    a half precision without hardware, a few ms otherwise. On one thread: the ratio between
    precisions is the chip's, and threads waiting on a busy machine's cores would blur it (2 threads
    beside another job here made fp32 ten times slower, bf16 not)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return matmul_gflops(256, 256, 256, warmup=1, timed=3, names=names)
    finally:
        torch.set_num_threads(threads)


def slowdown(precision: str, gflops: dict[str, float] | None = None) -> float:
    """How many times slower a `precision` matmul runs than an fp32 one on this CPU (under 1: faster),
    from `gflops` (GFLOP/s by precision) or from a short product timed here."""
    if precision == "fp32":
        return 1.0
    gflops = short_matmul_gflops(("fp32", precision)) if gflops is None else gflops
    return gflops["fp32"] / gflops[precision]


def too_slow(precision: str, gflops: dict[str, float] | None = None) -> str | None:
    """ "bf16 is 100x slower than fp32 on this CPU" where a half precision is SLOW_PRECISION_FACTOR
    times slower or more (`slowdown`); None for fp32, auto and a half precision that is not."""
    if precision not in ("bf16", "fp16"):
        return None
    factor = slowdown(precision, gflops)
    if factor < SLOW_PRECISION_FACTOR:
        return None
    return f"{precision} is {factor:.0f}x slower than fp32 on this CPU"


def warn_if_slow(precision: str | None, device: str) -> None:
    """One warning line where --precision asks for a half precision that this CPU runs ~10x or more
    slower than fp32 (no bf16/fp16 hardware: `too_slow` times a short matmul)."""
    from mt import log

    if precision in ("bf16", "fp16") and device == "cpu":
        reason = too_slow(precision)
        if reason:
            log.warn(f"--precision {precision}: {reason} (a short matmul timed here); --precision fp32 will be faster")
    if precision == "bf16" and device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(torch.device(device))
            if major < 8:  # emulated: torch runs it, several times slower than fp16's tensor cores
                log.warn(
                    f"--precision bf16: this GPU (compute capability {major}.{minor}) has no bf16 units; "
                    "--precision fp16 (or auto) will be faster"
                )


def set_threads(threads: int | None) -> None:
    """torch's intra-op threads (--threads); None or 0 leaves torch's own choice, and torch unimported
    (a command's refusals come before torch's seconds of loading)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def cpu_name() -> str:
    """The CPU's name and its widest vector units ("AMD EPYC, AVX2"), for benchmark tables: the name
    alone does not tell an AVX2-only EPYC from a Zen 4 one."""

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next(
        (line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
        platform.processor() or "unknown CPU",
    )
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    units = [
        unit
        for unit, flag in (
            ("AMX", "amx_tile"),
            ("AVX512-BF16", "avx512_bf16"),
            ("AVX-512", "avx512f"),
            ("AVX2", "avx2"),
        )
        if flag in flags
    ]
    return f"{name}, {' '.join(units) or 'no AVX2'}"


def launched_by_torchrun() -> bool:
    """Whether torchrun started this process: one of several, or its only rank (TORCHELASTIC_RUN_ID
    is torchrun's own variable), which then takes the same process group and DDP path as several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 or "TORCHELASTIC_RUN_ID" in os.environ


def checked_device(value: str, name: str = "--device") -> str:
    """cpu, cuda or cuda:N, and a CUDA device only where torch can use one: else a one-line error
    naming `name`, before anything loads (torch's own was an assertion when the model moved). A
    torch.device is taken as its name."""
    value = str(value)
    if value == "cpu":
        return value
    match = re.fullmatch(r"cuda(?::(\d+))?", value)
    if match is None:
        raise ConfigError(f"{name} {value}: expected cpu, cuda or cuda:N")
    import torch

    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "no CUDA device visible"
        raise ConfigError(f"{name} {value}: torch {torch.__version__} cannot use CUDA here ({build}); use {name} cpu")
    if match.group(1) is not None and int(match.group(1)) >= torch.cuda.device_count():
        raise ConfigError(f"{name} {value}: there are {torch.cuda.device_count()} CUDA devices (cuda:0 ...)")
    return value
