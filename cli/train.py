"""`mt train`: training in this process, as one of torchrun's, or in N new ones; resumes where it stopped."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mt import log

from .options import Device, Exp, Recipe, Sets, Threads, examples

EXAMPLES = examples(
    "mt train --exp exp/de-en --preset small --max-time 2h",
    "mt train --exp exp/ft --init-from exp/pretrain --max-steps 2000 --lr 5e-4 --set train.warmup_steps=200",
)


def train(
    exp: Exp,
    recipe: Recipe = None,
    preset: Annotated[
        Optional[str],
        typer.Option(
            help="Model preset: base, big (the paper), small, tiny; student, student-tiny (deep encoder, shallow decoder: mt distill)."
        ),
    ] = None,
    max_tokens: Annotated[
        Optional[str],
        typer.Option(
            help="Tokens per batch (and process), or auto: as many as the GPU's memory holds (4096 on the CPU) [default: the config's; 4096 in a new experiment]."
        ),
    ] = None,
    max_steps: Annotated[
        Optional[int],
        typer.Option(help="Stop after this many updates [default: the config's; 100000 in a new experiment]."),
    ] = None,
    max_time: Annotated[
        Optional[str],
        typer.Option(
            help="Stop after this much training time (90s, 12m, 2h) in all runs; 0 = no limit [default: the config's; none in a new experiment]."
        ),
    ] = None,
    lr: Annotated[
        Optional[float], typer.Option("--lr", help="Peak learning rate (default: the paper's d^-0.5 * warmup^-0.5).")
    ] = None,
    warmup_steps: Annotated[
        Optional[int], typer.Option(help="Linear warmup steps [default: the config's; 4000 in a new experiment].")
    ] = None,
    update_freq: Annotated[
        Optional[int], typer.Option(help="Batches per update: K times the batch size, same memory [default: 1].")
    ] = None,
    clip_norm: Annotated[
        Optional[float], typer.Option(help="Clip the gradient norm to this (0 = off, as the paper) [default: 0].")
    ] = None,
    keep_last: Annotated[
        Optional[int], typer.Option(help="Periodic step_N.pt checkpoints to keep (0 = all) [default: 5].")
    ] = None,
    precision: Annotated[
        Optional[str],
        typer.Option(
            help="fp32, bf16, fp16 (with a dynamic loss scale) or auto (the fastest of the three here, timed at the start) [default: auto in a new experiment]."
        ),
    ] = None,
    compile: Annotated[
        Optional[bool],
        typer.Option(
            "--compile/--no-compile",
            help="torch.compile the encoder and decoder: for GPUs; on the CPU 0.77-0.91x after about 100 s of compiling (docs/training.md).",
        ),
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option(
            help="Seed of the initial weights, dropout and batch order; fixed once the first checkpoint is saved."
        ),
    ] = None,
    init_from: Annotated[
        Optional[str],
        typer.Option(
            help="Start from the weights of this experiment (its best checkpoint) or checkpoint file; same tokenizer and model."
        ),
    ] = None,
    nproc: Annotated[
        Optional[int],
        typer.Option(help="Train in N processes on this machine (DDP via torchrun): one per GPU, or gloo on the CPU."),
    ] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
) -> None:
    """Train the Transformer; resumes from the experiment's last checkpoint if there is one."""
    from mt.experiment.config import open_experiment
    from mt.training.launch import train_processes

    flags = {
        "train.max_tokens": max_tokens,
        "train.max_steps": max_steps,
        "train.max_time": max_time,
        "train.lr_peak": lr,
        "train.warmup_steps": warmup_steps,
        "train.update_freq": update_freq,
        "train.clip_norm": clip_norm,
        "train.keep_last": keep_last,
        "train.precision": precision,
        "train.compile": compile,
        "train.seed": seed,
    }
    train_processes(
        exp,
        lambda: open_experiment(exp, recipe, flags, sets, preset),
        nproc,
        init_from,
        threads,
        device,
        precision,
        log.debug,
    )
