"""`mt distill`: a teacher translates its training corpus into a student experiment (sequence-level distillation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mt import log
from mt.decoding.options import DecodeOptions

from .options import Checkpoint, ChunkLines, Device, Exp, Precision, Quantize, Threads, decode_flags, examples, one

EXAMPLES = examples(
    "mt distill --teacher exp/teacher --exp exp/student --beam 5",
    "mt distill --teacher exp/teacher --teacher exp/teacher-seed2 --exp exp/student  # an ensemble",
)


@decode_flags()
def distill(
    exp: Exp,
    decode: DecodeOptions,
    teacher: Annotated[
        list[Path],
        typer.Option(metavar="DIR", help="The teacher experiment; repeat it for an ensemble (one tokenizer)."),
    ],
    checkpoint: Checkpoint = None,
    chunk_lines: ChunkLines = None,
    mix_original: Annotated[
        bool, typer.Option(help="The student trains on the original pairs too, beside the distilled ones.")
    ] = False,
    keep_bt: Annotated[
        bool,
        typer.Option(
            "--keep-bt",
            help="Translate the teacher's back-translated sources (bt:) "
            "too; skipped by default (noised synthetic text).",
        ),
    ] = False,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate the teacher's training corpus into the student experiment (sequence-level distillation)."""
    from mt.apps.distill import distill as run
    from mt.experiment.paths import Experiment

    manifest = run(
        [Experiment(t) for t in teacher],
        Experiment(exp),
        decode,
        chunk_lines,
        mix_original,
        one(checkpoint),
        device,
        precision,
        quantize,
        keep_bt=keep_bt,
        threads=threads,
    )
    corpus = manifest["corpus"] if isinstance(manifest["corpus"], list) else [manifest["corpus"]]  # one a direction
    log.info(f"distilled in {manifest['seconds']:.0f}s; train the student on {', '.join(corpus)}")
    print("\n".join(corpus))
