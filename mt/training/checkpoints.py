"""A training run's checkpoints: what they hold (the weights, the optimizer, the position in the data,
the counters and every process's random number generators, `training_checkpoint`), which are
written and kept (`save_training`), resuming from last.pt so that the run continues exactly as an
uninterrupted one would (`resume_training`), and starting from another experiment's weights
(`start_from_weights`).
"""

from __future__ import annotations

import random
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from mt import log
from mt.config.schema import ModelConfig
from mt.errors import MtError
from mt.experiment.checkpoint_file import (
    check_model_config,
    check_tokenizer,
    load_checkpoint,
    model_differences,
    peek_checkpoint,
    save_checkpoint,
    saved_step,
    tokenizer_difference,
)
from mt.experiment.paths import Experiment
from mt.training.average import run_checkpoints
from mt.training.ema import WeightAverage
from mt.training.optimizer import regroup_optimizer_state
from mt.training.state import TrainingState, bleu_setup

if TYPE_CHECKING:
    from mt.training.setup import Training


def saved_world_size(path: Path) -> int | None:
    """How many training processes saved checkpoint `path` (1 before the field): `mt train` compares
    it with --nproc before it starts a process. None when it cannot be peeked at."""
    state = peek_checkpoint(path)
    if state is None:
        return None
    return int(state.get("world_size", 1))


def check_world_size(path: Path, saved_world: int, world: int) -> None:
    """Refuse to resume checkpoint `path`, saved by saved_world processes, in `world`: each process saved
    its own random state and place in the data, and the batch is per process."""
    if saved_world != world:
        raise MtError(
            f"{path}: saved by {saved_world} training process(es), now {world}; "
            f"resume with the same number (`mt train --nproc {saved_world}` or torchrun)"
        )


# -- a training run's checkpoints -------------------------------------------------------------------
def save_training_checkpoint(
    exp: Experiment, state: dict[str, Any], step: int, is_best: bool, save_every: int, keep_last: int
) -> None:
    """best.pt on a new best, step_N.pt every save_every steps (keeping keep_last of them), then
    last.pt. last.pt is the commit point: a resume believes what it says (the step, the best value so
    far), so it is written after every file it vouches for. A save that fails before it leaves last.pt
    at the previous save, and the resumed run redoes the steps since, writing those files again."""
    periodic = step > 0 and step % save_every == 0
    paths = [exp.checkpoint_path("best")] if is_best else []
    if periodic:
        paths.append(exp.checkpoint_path(f"step_{step}"))
    save_checkpoint([*paths, exp.checkpoint_path("last")], state)
    if periodic and keep_last > 0:
        prune_step_checkpoints(exp, keep_last, step)


def prune_step_checkpoints(exp: Experiment, keep_last: int, step: int | None = None) -> list[Path]:
    """Remove all but the newest keep_last periodic checkpoints (step_N.pt) up to `step`; returns the
    removed. Those past it (a run resumed from an earlier last.pt) are left: this run writes over each
    as it reaches its step (they were pruned instead, the new ones with them)."""
    old = run_checkpoints(exp, step)[:-keep_last]
    for path in old:
        path.unlink(missing_ok=True)
    return old


# -- random number generators -----------------------------------------------------------------------
def rng_state(device: torch.device) -> dict[str, Any]:
    """Python's, numpy's global and torch's generators, as tensors and plain data (weights_only loads them)."""
    version, mt_state, gauss = random.getstate()
    name, key, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": {"version": version, "state": torch.tensor(mt_state, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "name": name,
            "key": torch.from_numpy(key.astype(np.int64)),  # type: ignore[attr-defined]
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore what `rng_state` saved (a checkpoint from before it holds the torch state only)."""
    if "python" in state:
        py = state["python"]
        random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
    if "numpy" in state:
        np_state = state["numpy"]
        np.random.set_state(
            (
                np_state["name"],
                np_state["key"].numpy().astype(np.uint32),
                np_state["pos"],
                np_state["has_gauss"],
                np_state["cached_gaussian"],
            )
        )
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def init_weights(source: str, tokenizer_sha256: dict[str, str], model_cfg: ModelConfig) -> tuple[Path, dict]:
    """The model weights a new training run starts from: another experiment's best checkpoint (or its
    last, without validation) or a checkpoint file. Its tokenizer and model config must be ours."""
    path = _init_path(source)
    state = load_checkpoint(path)
    side = tokenizer_difference(state, tokenizer_sha256)
    if side is not None:
        theirs = state.get("tokenizer_sha256") or {}
        raise MtError(
            f"--init-from {source}: {path} was trained with another tokenizer ({side} sha256 "
            f"{str(theirs.get(side))[:12]}, ours {tokenizer_sha256[side][:12]}); copy its experiment's "
            f"tokenizer/ into the new experiment before `mt binarize`"
        )
    differing = [
        f"model.{key} {theirs!r} (ours {ours!r})"
        for key, theirs, ours in model_differences(state.get("model_config"), model_cfg)
    ]
    if differing:
        raise MtError(
            f"--init-from {source}: {path} has another model: {', '.join(differing)}; "
            f"give the new experiment the same model settings"
        )
    return path, state["model"]


def _init_path(source: str) -> Path:
    candidate = Path(source)
    if candidate.is_dir():
        other = Experiment(candidate)
        other.load_config()  # a one-line error when it is not an experiment
        return other.find_checkpoint("best")
    if candidate.is_file():
        return candidate
    raise MtError(f"--init-from {source}: no such experiment directory or checkpoint file")


def training_checkpoint(run: Training) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly; every process must call it (it gathers
    their RNG states)."""
    trainer = run.trainer
    trainer.state.bad_in_row = trainer.bad_in_row
    return {
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
        "ema": trainer.ema.state_dict() if trainer.ema is not None else None,
        **run.metadata,  # model_config, vocab, tokenizer_sha256: what rebuilds the model
        "epoch": trainer.stream.epoch,
        "batch_in_epoch": trainer.stream.batch_in_epoch,
        "world_size": trainer.group.world_size,
        **trainer.state.to_checkpoint(),
        "rng": trainer.group.all_gather(rng_state(trainer.device)),  # one per process, in rank order
    }


def save_training(run: Training, is_best: bool = False) -> None:
    """The run's checkpoints now (see checkpoint.save_training_checkpoint). Every process calls this
    (it gathers their RNG states); rank 0 writes."""
    state = training_checkpoint(run)
    group, failure = run.trainer.group, None
    if group.is_main:
        try:
            tcfg = run.cfg.train
            if run.trainer.ema is not None:  # the average as a model of its own (`--checkpoint ema`), before last.pt
                save_checkpoint(
                    run.exp.checkpoint_path("ema"),
                    {
                        "model": run.trainer.ema.model_state(run.trainer.model),
                        **run.metadata,
                        "step": run.trainer.state.step,
                        "ema_decay": run.trainer.ema.decay,
                    },
                )
            save_training_checkpoint(run.exp, state, run.trainer.state.step, is_best, tcfg.save_every, tcfg.keep_last)
        except Exception as exc:  # a write that fails (a full disk): every process stops with it
            failure = exc
    # The others would go on into the next update's all-reduce and wait there for ever for rank 0.
    if group.any(failure is not None):
        if failure is not None:
            raise failure
        raise MtError("the main process could not write its checkpoint (its error is in its log): stopped")


def resume_training(run: Training) -> bool:
    """Continue from checkpoints/last.pt if there is one (saved with as many processes as now). Without
    it, periodic checkpoints of an earlier run are refused: the new run would overwrite and prune them
    (its own too, being older by step) and an average would mix the two runs."""
    path = run.exp.checkpoint_path("last")
    if not path.exists():
        # A new run would write over them (best.pt at its first validation, ema.pt, the periodic ones)
        earlier = [*(p for p in (run.exp.checkpoint_path(n) for n in ("best", "ema")) if p.exists())]
        earlier += run.exp.step_checkpoints()
        if earlier:
            raise MtError(
                f"{run.exp.checkpoints_dir}: {', '.join(p.name for p in earlier)} of an earlier run but no "
                f"last.pt; {_resume_advice(earlier, path)}, or move those checkpoints aside to start again"
            )
        return False
    saved = load_checkpoint(path)
    _check_resumable(run, path, saved)
    _set_aside_later_checkpoints(run, int(saved["step"]))
    trainer, tcfg = run.trainer, run.cfg.train
    trainer.model.load_state_dict(saved["model"])
    trainer.optimizer.load_state_dict(
        regroup_optimizer_state(
            saved["optimizer"], trainer.model, tcfg.weight_decay, (tcfg.adam_beta1, tcfg.adam_beta2), tcfg.adam_eps
        )
    )
    if trainer.scaler is not None and saved.get("scaler"):
        trainer.scaler.load_state_dict(saved["scaler"])
    if trainer.ema is not None:
        if saved.get("ema"):
            trainer.ema.load_state_dict(saved["ema"])
        else:  # train.ema_decay set on resume: the average starts from the resumed weights
            log.info(f"train.ema_decay {tcfg.ema_decay}: {path} holds no average; it starts from these weights")
            trainer.ema = WeightAverage(trainer.model, tcfg.ema_decay)
    batching = trainer.state.batching  # this run's (setup's fresh state)
    setup = bleu_setup(tcfg.best_metric, tcfg.valid_bleu_sentences, run.cfg.data.multilingual)
    trainer.state = TrainingState.from_checkpoint(saved, tcfg.best_metric, setup)
    if saved.get("best_metric") == tcfg.best_metric and saved.get("best_setup") not in (None, setup):
        if trainer.group.is_main:
            log.warn(
                f"validation BLEU measured otherwise: the best so far ({float(saved['best_valid']):.2f}) was "
                f"{saved['best_setup']}, this run's is {setup}: the best and patience start afresh"
            )
    trainer.counters.continue_bad_run(trainer.state.bad_in_row)
    _say_cooldown_undone(trainer)
    before, epoch, batch = trainer.state.max_tokens, int(saved["epoch"]), int(saved["batch_in_epoch"])
    cut = trainer.state.batching
    trainer.state.batching = batching
    if cut is not None and cut != batching and batch > 0 and trainer.group.is_main:
        log.warn(
            f"batches cut otherwise ({cut} -> {batching}: train.compile or train.direction_temperature) in the "
            f"middle of epoch {epoch}: its batches are cut anew and this run goes on from batch {batch} of the "
            "new ones, so some of the epoch's pairs are trained on twice or not at all (the epochs after are whole)"
        )
    trainer.state.max_tokens = int(tcfg.max_tokens)  # this run's (auto keeps the saved one: mt.training.token_budget)
    trainer.state.precision = trainer.precision  # this run's (auto keeps the saved one: setup.decided_precision)
    if before is not None and before != trainer.state.max_tokens and batch > 0 and trainer.group.is_main:
        log.warn(
            f"train.max_tokens {before} -> {trainer.state.max_tokens} in the middle of epoch {epoch}: its batches "
            f"are cut anew and this run goes on from batch {batch} of the new ones, so some of the epoch's pairs "
            f"are trained on twice or not at all (the epochs after are whole)"
        )
    trainer.stream.seek(epoch, batch)
    rng = saved["rng"][trainer.group.rank] if "rng" in saved else {"torch": saved["torch_rng"]}
    set_rng_state(rng, trainer.device)
    trainer.start_clock()
    return True


TRAINING_STATE = ("optimizer", "epoch", "batch_in_epoch", "step", "elapsed")  # what a resume reads besides the model


def _say_cooldown_undone(trainer) -> None:
    """A run whose cooldown had begun, resumed with a budget that puts it before the cooldown again
    (`--set train.max_time=null --max-steps N`, as the docs say to go on): the lr goes back up from
    near 0 to the schedule's at once, with no warmup. Said, with both rates."""
    state, schedule = trainer.state, trainer.schedule
    if state.cooldown_from is None or not trainer.group.is_main:
        return
    step = trainer.scheduled_step() + 1
    lr, going_on = schedule.lr(step, schedule.progress(step, state.elapsed), state.cooldown_from)
    if going_on is None:
        log.warn(
            f"the cooldown had begun (the lr falling from {state.cooldown_from:.2e}) and this budget puts update "
            f"{step} before it: the lr goes back up to {lr:.2e} at once, with no warmup; a larger train.cooldown "
            "keeps the new budget's end in it"
        )


def _set_aside_later_checkpoints(run: Training, step: int) -> None:
    """Checkpoints saved past the step last.pt holds (last.pt put back from an earlier step_N.pt or
    best.pt; or a save cut short after them) are another line of training: its periodic ones are moved
    into checkpoints/after-step-N-TIME/ (by the main process), since this run, saving at other steps,
    left them among its own, and an average or pruning took them with its own. best.pt and ema.pt are
    said: this run writes over them (best.pt at its first better validation)."""
    exp = run.exp
    later = [path for path in exp.step_checkpoints() if int(path.stem[5:]) > step]
    kept = [
        exp.checkpoint_path(name) for name in ("best", "ema") if (saved_step(exp.checkpoint_path(name)) or 0) > step
    ]
    if later and run.trainer.group.is_main:
        aside = exp.checkpoints_dir / f"after-step-{step}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir(exist_ok=True)  # (the same step set aside twice in one second: one folder)
        for path in later:
            path.rename(aside / path.name)
        log.warn(
            f"{exp.checkpoints_dir}: {', '.join(path.name for path in later)} saved past step {step}, which "
            f"last.pt holds (another line of training): moved to {aside}, so that no average or pruning mixes "
            "them with this run's"
        )
    if kept:
        log.warn(
            f"{exp.checkpoints_dir}: {', '.join(path.name for path in kept)} saved past step {step}, which last.pt "
            f"holds: this run writes over each (best.pt: at its first better validation)"
        )


def _resume_advice(earlier: list[Path], last: Path) -> str:
    """How to resume without last.pt (removed when damaged, or never written: a run killed in its first
    save): from the newest of `earlier` that holds the training state, the exact command."""
    held = []
    for path in earlier:
        state = peek_checkpoint(path)
        if state is not None and all(key in state for key in TRAINING_STATE):
            held.append((int(state["step"]), path))
    if not held:
        return "restore last.pt to resume"
    step, newest = max(reversed(held), key=lambda pair: pair[0])  # a tie: the periodic one, saved last
    return f"to resume from step {step}: cp {shlex.quote(str(newest))} {shlex.quote(str(last))}"


def _check_resumable(run: Training, path: Path, saved: dict[str, Any]) -> None:
    missing = [key for key in TRAINING_STATE if key not in saved]
    if missing:  # average.pt or ema.pt copied over last.pt: a KeyError's traceback
        raise MtError(
            f"{path}: holds a model but no training state ({', '.join(missing)}): not one of training's "
            "checkpoints (average.pt, ema.pt, an export?); put back a step_N.pt or best.pt as last.pt, or start "
            "another run with --init-from"
        )
    check_model_config(path, saved, run.cfg.model, run.exp.config_path)  # config.yaml edited by hand
    check_tokenizer(path, saved, run.metadata["tokenizer_sha256"], run.exp.tokenizer_dir)
    check_world_size(path, int(saved.get("world_size", 1)), run.trainer.group.world_size)


def start_from_weights(run: Training, source: str) -> Path:
    """Start from the weights of another experiment or checkpoint (fresh optimizer and schedule)."""
    path, weights = init_weights(source, run.metadata["tokenizer_sha256"], run.cfg.model)
    run.trainer.model.load_state_dict(weights)
    if run.trainer.ema is not None:  # the average starts from the loaded weights, not the random ones
        run.trainer.ema = WeightAverage(run.trainer.model, run.cfg.train.ema_decay)
    run.trainer.state.init_from = str(path)
    return path
