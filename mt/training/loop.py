"""Training: `mt train`, the loop over updates around the Trainer (mt.training.trainer), written out: log
records, validation with patience, checkpoints, and the rules that stop a run.

Sec. 5: Adam (beta1 0.9, beta2 0.98, eps 1e-9), lr = d_model^-0.5 * min(step^-0.5, step *
warmup^-1.5), label smoothing 0.1, batches of about equal source and target token counts.
Setup is mt.training.setup; the update mt.training.trainer; the schedule mt.training.schedule; the saved state and
resuming mt.training.checkpoints; validation mt.training.validate.

Beyond the paper: a cooldown at the end of the budget, validation loss and greedy BLEU with
patience, SIGINT/SIGTERM saving at a step boundary, and checkpoints from which a run resumes
bitwise as if never interrupted.

The loop reads the device's counters (Trainer.read) only where it needs them: every train.log_every
updates, before a validation or a checkpoint, and at the end of the budget. In between, updates run
without the host waiting for the device; a run of non-finite updates (which change nothing) is found
at the next read, and train.max_bad_steps judged there.
"""

from __future__ import annotations

import math
import signal
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

import numpy as np
import torch

from mt import log
from mt.allocator import allocator_hint, release_freed_memory
from mt.atomic_files import remove_abandoned_temporaries
from mt.config.schema import ExperimentConfig
from mt.data.corpus import load_split
from mt.errors import MtError
from mt.experiment.lock import experiment_lock
from mt.experiment.paths import Experiment
from mt.hardware import checked_device
from mt.model.transformer import count_parameters
from mt.training.checkpoints import resume_training, save_training, start_from_weights
from mt.training.distributed import Distributed
from mt.training.setup import Training, build_training
from mt.training.train_log import open_train_log
from mt.training.trainer import Trainer
from mt.training.validate import BleuSample, validate


class _StopSignal:
    """SIGINT/SIGTERM ask the loop to save and stop at the next step boundary."""

    def __init__(self):
        self.received: str | None = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


@contextmanager
def _training_lock(exp: Experiment, group: Distributed) -> Iterator[None]:
    """Rank 0 holds the experiment's lock; the other processes go on only if it got it."""
    with ExitStack() as stack:
        error = None
        if group.is_main:
            try:
                stack.enter_context(experiment_lock(exp))
                # Saves a killed trainer never finished (no writer of checkpoints/ but us now runs).
                for path in remove_abandoned_temporaries(exp.checkpoints_dir):
                    log.info(f"removed {path}: a checkpoint an interrupted run did not finish writing")
            except MtError as exc:
                error = exc
        if group.any(error is not None):
            raise error or MtError(f"rank {group.rank}: not started: rank 0 could not lock {exp.root}")
        yield


def train(
    exp: Experiment,
    cfg: ExperimentConfig,
    device: str = "cpu",
    init_from: str | None = None,
    group: Distributed | None = None,
) -> dict[str, Any]:
    """`mt train`: train (or resume) until max_steps, max_time or patience; returns a summary.

    `init_from` (another experiment or a checkpoint file) gives a new run its starting weights.
    `group`: this process's place among several (see mt.training.distributed); one process by default.
    """
    group = group or Distributed(device=torch.device(checked_device(device, "device")))
    with _training_lock(exp, group):
        run = build_training(exp, cfg, device, group)
        trainer = run.trainer
        resumed = resume_training(run)
        if init_from and resumed:
            log.info(f"--init-from {init_from}: ignored, this experiment resumes from its own checkpoint")
        elif init_from:
            log.info(f"starting from the weights of {start_from_weights(run, init_from)}")
        if cfg.train.valid_bleu and run.valid_data is not None:
            run.bleu = bleu_sample(run)  # now: a reference file changed since binarize stops no trained step
        if run.valid_data is None:
            asked = [
                name
                for name, on in (
                    (f"train.patience {cfg.train.patience}", cfg.train.patience),
                    ("train.valid_bleu", cfg.train.valid_bleu),
                    (f"train.best_metric {cfg.train.best_metric}", cfg.train.best_metric != "nll"),
                )
                if on
            ]
            if asked:  # they read validation, which this experiment has none of: they would do nothing unsaid
                log.warn(f"{', '.join(asked)}: this experiment has no validation split (data.valid), so no effect")
        _log_start(run, resumed)
        _note_device(run, resumed)
        with (
            _StopSignal() as stop,
            log.make_progress() as progress,
            open_train_log(exp, group, cfg.train.tensorboard, trainer.state.step if resumed else None) as log_file,
        ):
            loop = _Loop(run, stop, progress, log_file, saved_at=trainer.state.step if resumed else -1)
            try:
                stopped_by = loop.run()
            finally:  # the batches' thread ends with the run: one left in a torch op aborts the exit
                trainer.stream.close()
        if stopped_by in ("SIGINT", "SIGTERM", "signal"):
            again = f" with {group.world_size} processes" if group.world_size > 1 else ""
            log.info(
                f"{stopped_by}: saved {exp.checkpoint_path('last')} at step {trainer.state.step}; "
                f"run `mt train --exp {exp.root}` again{again} to resume"
            )
        return {
            "steps": trainer.state.step,
            "params": count_parameters(trainer.model),
            "stopped_by": stopped_by,
            "seconds": trainer.state.elapsed - loop.start_elapsed,  # this run's
            "elapsed": trainer.state.elapsed,  # over all runs of the experiment
            "skipped": trainer.state.skipped,
            "world_size": group.world_size,
            "precision": trainer.precision,  # auto's choice
            **loop.last_valid,
        }


def _log_start(run: Training, resumed: bool) -> None:
    trainer, tcfg, world = run.trainer, run.cfg.train, run.trainer.group.world_size
    log.info(
        f"{'resuming at step ' + str(trainer.state.step) if resumed else 'training'}: "
        f"{count_parameters(trainer.model) / 1e6:.2f}M parameters, {len(run.train_data)} training pairs, "
        f"peak lr {trainer.schedule.peak_lr:.2e} at step {trainer.schedule.warmup_steps}, {trainer.precision}"
        + (
            f", {world} processes"
            if world > 1
            else ", 1 process in a process group (DDP)"
            if trainer.group.joined
            else ""
        )
        + (f", {tcfg.update_freq} batches per update" if tcfg.update_freq > 1 else "")
    )
    warmup = trainer.schedule.warmup_steps  # train.warmup_steps, or as train.lr_scaling scaled it
    if warmup >= tcfg.max_steps and trainer.group.is_main:  # a short trial run with the paper's warmup
        log.warn(
            f"train.warmup_steps {warmup} >= train.max_steps {tcfg.max_steps}: the learning rate "
            f"never reaches its peak; lower --warmup-steps"
        )
    if trainer.ema is None and run.exp.checkpoint_path("ema").exists() and trainer.group.is_main:
        log.warn(
            f"{run.exp.checkpoint_path('ema')} is from a run with train.ema_decay; with it off, it is no longer updated"
        )
    if trainer.device.type == "cpu" and (hint := allocator_hint()):
        log.info(hint)


def _note_device(run: Training, resumed: bool) -> None:
    """Say when a resume moves a run to another kind of device (--device is not part of the config),
    or when a GPU sits unused; the device is saved with the run's counters."""
    trainer = run.trainer
    now, before = trainer.device.type, trainer.state.device
    if trainer.group.is_main and resumed and before and before != now:
        log.warn(
            f"{run.exp.checkpoint_path('last')} was trained on {before}; this run continues on {now} "
            f"(--device {before} to stay there)"
        )
    if trainer.group.is_main and now == "cpu" and torch.cuda.is_available():
        log.warn(
            f"training on the CPU although {torch.cuda.device_count()} GPU(s) are present: --device cuda uses them"
        )
    trainer.state.device = now


def validate_run(run: Training) -> dict[str, float]:
    """Validation loss, NLL and perplexity; with train.valid_bleu, greedy BLEU on a sample."""
    trainer, tcfg = run.trainer, run.cfg.train
    metrics = validate(
        trainer.model,
        run.valid_data,
        tcfg.max_tokens,
        tcfg.precision,
        tcfg.label_smoothing,
        trainer.device,
        trainer.group,
    )
    if tcfg.valid_bleu:
        if run.bleu is None:
            run.bleu = bleu_sample(run)
        metrics["valid_bleu"] = round(run.bleu.score(trainer.model, trainer.device, trainer.group)[0], 2)
    return metrics


def bleu_sample(run: Training) -> BleuSample:
    """train.valid_bleu's sample, against the raw validation references of the binarized rows; the
    references must still be what binarize read (a file edited since would be scored against, or
    not line up with, the rows)."""
    cfg = run.cfg
    line_numbers = np.load(run.exp.lines_path("valid"))  # binarize may have dropped pairs
    # Line numbers count on through the directions' sources, in binarize's order.
    sources = [source for pair in cfg.data.pairs() for source in cfg.data.sources("valid", pair)]
    refs = [ref for pair in cfg.data.pairs() for ref in load_split(cfg.data.sources("valid", pair))[1]]
    changed = f"{', '.join(dict.fromkeys(s.name for s in sources))}: changed since `mt binarize`"
    if line_numbers.size and int(line_numbers.max()) >= len(refs):
        raise MtError(
            f"{changed} ({len(refs)} reference lines, binarize kept line {int(line_numbers.max()) + 1}); "
            f"restore it or binarize into a new --exp"
        )
    refs = [refs[int(n)] for n in line_numbers]
    for row, ids in enumerate(run.tgt_tok.encode(refs)):
        if not np.array_equal(np.asarray(ids), run.valid_data.tgt(row)):
            raise MtError(
                f"{changed} (reference line {int(line_numbers[row]) + 1} differs from the binarized one); "
                f"restore it or binarize into a new --exp"
            )
    return BleuSample(
        run.valid_data,
        refs,
        run.tgt_tok,
        cfg.train.valid_bleu_sentences,
        cfg.decode.max_tokens,
        cfg.decode.max_len_a,
        cfg.decode.max_len_b,
        cfg.train.precision,
        None if cfg.data.multilingual else cfg.data.tgt_lang,  # BLEU's tokenizer: a Chinese target's is zh
        [tgt for _, tgt in cfg.data.pairs()] if cfg.data.multilingual else None,  # each direction's, multilingual
    )


class _Loop:
    """One run's loop over updates: log records, validation, checkpoints and the rules that stop it."""

    def __init__(self, run: Training, stop: _StopSignal, progress, log_file, saved_at: int):
        self.training, self.trainer, self.tcfg, self.stop = run, run.trainer, run.cfg.train, stop
        self.progress, self.log_file = progress, log_file
        trainer = run.trainer
        self.task = progress.add_task("train", total=self.tcfg.max_steps, completed=trainer.state.step)
        self.saved_at = saved_at  # the step of the newest checkpoint, -1 if none
        # the step of the last validation: as the resumed checkpoint recorded it (one saved before it was
        # recorded: its own step, as it was left)
        self.validated_at = saved_at if trainer.state.validated_at is None else trainer.state.validated_at
        self.handled_at = trainer.state.step  # the last step whose log, validation and saving were done
        self.start_elapsed = trainer.state.elapsed
        self.last_valid: dict[str, float] = {}
        self.window = _Window(trainer.read(), trainer.state.step)
        trainer.start_clock()

    def run(self) -> str:
        """Updates until a budget or patience runs out or a signal arrives; then the final checkpoint."""
        stopped_by = None
        while stopped_by is None:
            stopped_by = self._spent()
            if stopped_by:
                break
            try:
                done = self.trainer.update(stop=self.stop.received is not None)
            except torch.cuda.OutOfMemoryError:  # one line, with what to do, not torch's traceback
                raise MtError(
                    f"out of GPU memory in update {self.trainer.state.step + 1} (train.max_tokens "
                    f"{self.trainer.state.max_tokens} a batch); set --max-tokens lower and --update-freq higher to "
                    "keep the batch; a run resumed goes on from its last checkpoint"
                ) from None
            self.progress.update(self.task, completed=self.trainer.state.step)
            self._after_update(done)
            if done["stop"]:
                stopped_by = self.stop.received or "signal"
        self._finish(validated=stopped_by not in ("SIGINT", "SIGTERM", "signal"))
        return stopped_by

    def _spent(self) -> str | None:
        state = self.trainer.state
        if state.step >= self.tcfg.max_steps:
            self._read()  # updates skipped on the device do not count
        if state.step >= self.tcfg.max_steps:
            return "max_steps"
        if self.tcfg.max_time and state.elapsed >= self.tcfg.max_time:  # None or 0: off
            return "max_time"  # counts all runs of this experiment
        if state.out_of_patience(self.tcfg.patience):
            return "patience"
        return None

    def _due(self, step: int) -> tuple[bool, bool, bool]:
        """Whether update `step` logs, validates and saves."""
        tcfg = self.tcfg
        validates = self.training.valid_data is not None and step % tcfg.valid_every == 0
        return step % tcfg.log_every == 0, validates, step % tcfg.save_every == 0 or validates

    def _read(self) -> None:
        """The device's counters into the window (state.step corrected), and max_bad_steps judged."""
        counts = self.trainer.read()
        self.window.add(counts)
        self._check_bad_steps(counts)

    def _after_update(self, done: dict[str, Any]) -> None:
        if not any(self._due(self.trainer.state.step)):
            return
        self._read()
        step = self.trainer.state.step  # less the updates the device skipped
        logs, validates, saves = self._due(step)
        if step <= self.handled_at or not (logs or saves):
            return
        self.handled_at = step
        # the window's rates are of training: recorded before validation, and the pause for validating
        # and saving kept out of the next record's seconds (its tokens/s counted them)
        record = self.window.record(self.trainer, done) if logs or validates else None
        paused = time.perf_counter()
        is_best = False
        if validates:
            metrics, is_best = self._validate()
            self.validated_at = step
            record = {**(record or {}), **metrics}
        if record is not None:
            self._write(record)
        if saves:
            save_training(self.training, is_best)
            self.saved_at = step
        self.window.time += time.perf_counter() - paused

    def _validate(self, on_schedule: bool = True) -> tuple[dict[str, float], bool]:
        metrics = validate_run(self.training)
        if self.trainer.device.type == "cpu":
            release_freed_memory()  # validation's batches (and greedy decoding's) leave their own holes
        is_best = self.trainer.state.record_validation(metrics, on_schedule)
        self.trainer.state.validated_at = self.trainer.state.step  # (saved with it: a resume knows)
        self.last_valid = metrics
        return metrics, is_best

    def _write(self, record: dict[str, Any]) -> None:
        if self.log_file is None:
            return
        self.log_file.write(record)
        _report(record, self.progress, self.task)

    def _check_bad_steps(self, counts: dict[str, float]) -> None:
        trainer = self.trainer
        worst = int(counts["most_bad_in_row"])
        if worst < self.tcfg.max_bad_steps:
            return
        last = (
            f"{self.training.exp.checkpoint_path('last')} (step {self.saved_at})"
            if self.saved_at >= 0
            else "none saved yet"
        )
        raise MtError(
            f"step {trainer.state.step + 1}: {worst} updates in a row had a non-finite loss or gradient norm "
            f"and were skipped (train.max_bad_steps {self.tcfg.max_bad_steps}); last good checkpoint: {last}; "
            f"lower the learning rate or set --clip-norm, then run `mt train` again"
        )

    def _finish(self, validated: bool) -> None:
        """The final checkpoint, unless the last update just saved one; `validated` at the end of the
        budget, not at a signal: a validation off the valid_every grid would move best.pt and
        patience, and the resumed run would then differ from one never stopped."""
        self._read()
        state = self.trainer.state
        # the last update may have saved (save_every) without validating: the final model is validated
        # all the same (best.pt, the summary's figures were an earlier step's)
        validates = validated and self.training.valid_data is not None and self.validated_at != state.step
        if self.saved_at == state.step and not validates:
            return
        is_best = False
        if validates:
            metrics, is_best = self._validate(on_schedule=state.step % self.tcfg.valid_every == 0)
            self.validated_at = state.step
            self._write({"step": state.step, "elapsed": round(state.elapsed, 2), **metrics})
        save_training(self.training, is_best)
        self.saved_at = state.step


class _Window:
    """Sums over the updates since the previous log record, from the differences of the Trainer's
    counters (mt.training.counters) between reads. A record says how many updates it averages: fewer
    than train.log_every after a resume or an off-grid validation."""

    def __init__(self, counts: dict[str, float], step: int):
        self.counts = counts  # the counters at the latest read
        self.reset(time.perf_counter(), step)

    def reset(self, now: float, step: int) -> None:
        self.loss = self.nll = 0.0
        self.tgt = self.src = self.skipped = 0
        self.time, self.start = now, step

    def add(self, counts: dict[str, float]) -> None:
        """The updates between the latest read and this one (`counts`)."""
        before, self.counts = self.counts, counts
        self.loss += counts["loss"] - before["loss"]
        self.nll += counts["nll"] - before["nll"]
        self.tgt += int(counts["tgt_tokens"] - before["tgt_tokens"])
        self.src += int(counts["src_tokens"] - before["src_tokens"])
        self.skipped += int(counts["skipped"] - before["skipped"])

    def record(self, trainer: Trainer, done: dict[str, Any]) -> dict[str, Any]:
        """Averages since the previous record; then start a new window."""
        now = time.perf_counter()
        seconds = max(now - self.time, 1e-9)
        tgt = max(self.tgt, 1)
        record = {
            "step": trainer.state.step,
            "epoch": trainer.stream.epoch,
            "loss": round(self.loss / tgt, 4),
            "nll": round(self.nll / tgt, 4),
            "ppl": round(math.exp(min(self.nll / tgt, 50.0)), 2),
            "lr": done["lr"],
            "grad_norm": round(self.counts["grad_norm"], 4),
            "tgt_tokens_per_s": round(self.tgt / seconds, 1),
            "tokens_per_s": round((self.tgt + self.src) / seconds, 1),
            "updates": trainer.state.step - self.start,
            "skipped": self.skipped,
            "elapsed": round(trainer.state.elapsed, 2),
        }
        if trainer.scaler is not None:
            record["loss_scale"] = trainer.scaler.get_scale()
        self.reset(now, trainer.state.step)
        return record


def _report(record: dict, progress, task) -> None:
    text = (
        f"step {record['step']}"
        + (
            f" loss {record['loss']:.3f} ppl {record['ppl']:.1f} lr {record['lr']:.2e} "
            f"{record['tgt_tokens_per_s']:.0f} tgt tok/s"
            if "loss" in record
            else ""
        )
        + (f" skipped {record['skipped']}" if record.get("skipped") else "")
        + (f" | valid nll {record['valid_nll']:.3f} ppl {record['valid_ppl']:.2f}" if "valid_nll" in record else "")
        + (f" bleu {record['valid_bleu']:.2f}" if "valid_bleu" in record else "")
    )
    if progress.disable:
        log.info(text)
    else:
        progress.update(task, description=text)
