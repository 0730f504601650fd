"""`mt distill`: in a module of its own so that cli/main.py stays one reading long; main.py registers it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.options import (
    Alpha,
    Beam,
    Checkpoint,
    DecodeTokens,
    Device,
    Exp,
    MaxLenA,
    MaxLenB,
    Penalty,
    Precision,
    Quantize,
    Stop,
    Threads,
    decode_overrides,
    examples,
)
from mt import log

EPILOG = examples("mt distill --teacher exp/teacher --exp exp/student --beam 5",
                  "mt distill --teacher exp/teacher --teacher exp/teacher-seed2 --exp exp/student  # an ensemble")


def distill(
    exp: Exp,
    teacher: Annotated[list[Path], typer.Option(help="The teacher experiment; repeat it for an ensemble (one tokenizer).")],
    checkpoint: Checkpoint = None,
    chunk_lines: Annotated[Optional[int], typer.Option(help="Lines translated and saved together (default 2000): a killed run resumes at the first unsaved chunk, with the size it started with.")] = None,
    mix_original: Annotated[bool, typer.Option(help="A new student trains on the original pairs too, beside the distilled ones.")] = False,
    beam: Beam = None,
    alpha: Alpha = None,
    length_penalty: Penalty = None,
    stop: Stop = None,
    max_len_a: MaxLenA = None,
    max_len_b: MaxLenB = None,
    batch_tokens: DecodeTokens = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate the teacher's training corpus into the student experiment (sequence-level distillation)."""
    from mt.distill import distill as run_distill
    from mt.experiment import Experiment
    from mt.hardware import set_threads
    from mt.translate import InferenceOptions

    set_threads(threads)
    decode = {key.removeprefix("decode."): value for key, value in
              decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, batch_tokens, stop).items()}
    manifest = run_distill([Experiment(t) for t in teacher], Experiment(exp), InferenceOptions(checkpoint, device, precision, quantize),
                           {k: v for k, v in decode.items() if v is not None}, chunk_lines, mix_original)
    log.info(f"distilled in {manifest['seconds']:.0f}s; train the student on {manifest['corpus']}")
    print(manifest["corpus"])
