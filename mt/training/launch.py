"""`mt train`'s processes: train in this one, as one of torchrun's, or in N new ones (`--nproc N`).

Under torchrun every process runs `mt train`: rank 0 resolves and saves the config, the others wait
for it and read it (`mt.training.distributed` joins them into one process group). `--nproc N` resolves the
config here, then starts N such processes through torch.distributed.run and waits for them. Nothing
here imports torch before the flags and the config are checked, but for a resume's check that its
last checkpoint was saved by as many processes as this run will have (before any starts).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Callable

from mt import log
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.experiment.config import ConfigChange
from mt.experiment.lock import experiment_lock
from mt.experiment.paths import Experiment
from mt.hardware import launched_by_torchrun

# The experiment, its config and the change this command made to it (saved): `open_experiment`.
Resolve = Callable[[], tuple[Experiment, ExperimentConfig, ConfigChange]]


def train_processes(
    exp_dir: Path,
    resolve: Resolve,
    nproc: int | None = None,
    init_from: str | None = None,
    threads: int | None = None,
    device: str = "cpu",
    precision: str | None = None,
    debug: bool = False,
) -> None:
    """`mt train`: all of training here, this rank's part under torchrun, or `nproc` new processes.

    `resolve` is called once, by the process that writes the config; `precision` is the flag's (for
    the slow-precision warning), `debug` goes on to the new processes. Under torchrun the process
    ends here.
    """
    if nproc is not None and nproc < 1:
        raise ConfigError(f"--nproc {nproc}: expected at least 1")
    torchrun = launched_by_torchrun()
    if nproc and nproc > 1 and torchrun:
        raise ConfigError("--nproc: this process was started by torchrun already; drop --nproc")
    if not torchrun:  # under torchrun each process checks as it resumes
        refuse_if_training(exp_dir)  # first: a running trainer explains a process-count mismatch
        refuse_other_world_size(exp_dir, nproc or 1)
    if os.environ.get("RANK", "0") == "0":  # one voice under torchrun
        from mt.hardware import warn_if_slow

        warn_if_slow(precision, device)
    if nproc and nproc > 1:
        args = ["train", "--exp", str(exp_dir), "--device", device]
        args += ["--init-from", init_from] if init_from else []
        each = threads or worker_threads(nproc, device)
        args += ["--threads", str(each)] if each else []
        launch_workers(exp_dir, resolve, nproc, (["-q"] if log.quiet else []) + (["--debug"] if debug else []) + args)
        return
    group = None
    if torchrun:  # join the other processes
        from mt.training import distributed

        group = distributed.setup(device)
    try:
        summary = train_here(exp_dir, resolve, init_from, threads, device, group)
    except Exception as exc:
        if group is not None:
            leave_alone(exc)
        raise
    except BaseException:  # Ctrl-C, SIGTERM: they reach every process, which leave together
        if group is not None:
            distributed.shutdown(group)
        raise
    if group is not None:
        distributed.shutdown(group)
    report_stop(summary)
    if torchrun:
        # Leave without the interpreter's teardown: destroying the process group's communication
        # threads there sometimes aborts a worker ("terminate called without an active exception").
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def leave_alone(exc: Exception) -> None:
    """A failure of this process alone (rank 0's log on a full disk, one GPU out of memory): said in one
    line, then this process leaves at once. The others wait in a collective it will never join, so
    leaving the group together (a barrier) waited with them until the group's timeout, the error
    unsaid; torchrun stops them once this one has ended. A failure the processes share (a checkpoint
    rank 0 cannot write) reaches every process, and each leaves this way."""
    import traceback

    if log.debug or os.environ.get("MT_DEBUG"):
        traceback.print_exception(exc)
    message = str(exc) if isinstance(exc, MtError) else f"{type(exc).__name__}: {exc}"
    log.console.print(f"error: {' '.join(message.split())}", markup=False, soft_wrap=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exc.exit_code if isinstance(exc, MtError) else 1)


def train_here(
    exp_dir: Path, resolve: Resolve, init_from: str | None, threads: int | None, device: str, group=None
) -> dict:
    """This process's part: all of training, or one rank of torchrun's `group` (rank 0 resolves the config)."""
    change = None  # rank 0's: the other ranks read its config
    if group is None or group.is_main:
        if group is not None:  # under torchrun; a process of its own checked in train_processes
            refuse_if_training(exp_dir)
        experiment, cfg, change = resolve()
    if group is not None:
        group.barrier()  # the other ranks read the config rank 0 has written
        if not group.is_main:
            log.quiet = True  # one voice: rank 0's
            experiment = Experiment(exp_dir)
            cfg = experiment.load_config()
    from mt.hardware import set_threads
    from mt.training.loop import train  # torch: imported after the flags are checked

    set_threads(threads)
    with change.undo_if_fails() if change is not None else contextlib.nullcontext():
        return train(experiment, cfg, device=device, init_from=init_from, group=group)


def refuse_if_training(exp_dir: Path) -> None:
    """A one-line error, before the config takes this run's flags, if another trainer holds the lock
    (train() takes the lock itself; this only spares the config and the workers a doomed start)."""
    if exp_dir.is_dir():
        with experiment_lock(Experiment(exp_dir)):
            pass


def refuse_other_world_size(exp_dir: Path, world: int) -> None:
    """A one-line error, before any training process starts (torchrun's take seconds and print banners),
    when the experiment's last checkpoint was saved by another number of processes than `world`."""
    last = Experiment(exp_dir).checkpoint_path("last")
    if last.is_file():
        from mt.training.checkpoints import check_world_size, saved_world_size  # torch: only for a resume

        saved = saved_world_size(last)
        if saved is not None:
            check_world_size(last, saved, world)


def worker_threads(nproc: int, device: str) -> int | None:
    """Each CPU worker's share of the cores, unless OMP_NUM_THREADS says otherwise: torchrun sets it to
    1 for every worker when it is unset (2 of 16 cores trained with --nproc 2). None: torch's choice."""
    if device != "cpu" or "OMP_NUM_THREADS" in os.environ:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // nproc)


def launch_workers(exp_dir: Path, resolve: Resolve, nproc: int, args: list[str]) -> None:
    """`mt train --nproc N`: resolve and save the config here (train_processes has checked the lock),
    then run `mt ARGS` in N workers that read it. After a signal, says what last.pt holds: a worker
    still validating when torchrun's patience ran out was killed unsaved."""
    experiment, _, change = resolve()
    from mt.experiment.checkpoint_file import saved_step

    last = experiment.checkpoint_path("last")
    before = saved_step(last)
    with change.undo_if_fails():  # workers that fail having saved nothing: the flags are taken back
        signal_name = start_workers(nproc, args)
    if signal_name:
        after = saved_step(last)
        if after is None:
            held = f"no checkpoint was saved ({last})"
        elif after == before:
            held = f"{last} holds step {after}, from before this run: nothing newer was saved"
        else:
            held = f"the training processes saved {last} at step {after}"
        log.info(f"{signal_name}: {held}; run `mt train --exp {exp_dir} --nproc {nproc}` again to resume")
        raise KeyboardInterrupt  # exit 130, as one process does (report_stop)


SHUTDOWN_SECONDS = 600  # how long the workers may take to save after a signal before torchrun kills them


def start_workers(nproc: int, args: list[str]) -> str | None:
    """`python -m mt ARGS` in N processes on this machine through torchrun.

    Returns the name of the signal that stopped training (the workers got it too and saved at a step
    boundary), or None. A failed worker has printed its own error line; this adds one with the count.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    # torchrun kills the workers 30 s after forwarding a signal unless told otherwise, and a worker stops
    # at its next step boundary: one validating (BLEU on a CPU) or writing checkpoints takes longer.
    patience = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_SECONDS))
    options = get_args_parser().parse_args(
        ["--standalone", f"--nproc-per-node={nproc}", f"--shutdown-timeout={patience}", "-m", "mt", *args]
    )
    try:
        run(options)
    except ChildFailedError as exc:
        raise MtError(f"{len(exc.failures)} of {nproc} training processes failed (their errors are above)") from None
    except SignalException as exc:
        return exc.sigval.name
    return None


def report_stop(summary: dict) -> None:
    """The status line that ends a training run: where and why it stopped, its validation perplexity
    and skipped updates. After a signal, train() has said what it did (saved at a step boundary), and
    this raises KeyboardInterrupt: the command exits 130, the shell's code for an interrupt, so that
    `mt train && mt evaluate` stops there, and so does `mt run`, before evaluating a half-trained model."""
    if summary["stopped_by"] in ("SIGINT", "SIGTERM", "signal"):
        raise KeyboardInterrupt
    log.info(
        f"stopped at step {summary['steps']} ({summary['stopped_by']}) after {summary['seconds']:.0f}s"
        + (f"; valid ppl {summary['valid_ppl']:.2f}" if "valid_ppl" in summary else "")
        + (f"; {summary['skipped']} updates skipped (non-finite)" if summary["skipped"] else "")
    )
