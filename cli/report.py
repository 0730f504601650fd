"""`mt report`: one self-contained HTML page about an experiment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .options import Checkpoint, Exp, Force, Threads, examples, one

EXAMPLES = examples("mt report --exp exp/en-de", "mt report --exp exp/en-de --samples 20 -o report.html")


def report(
    exp: Exp,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="HTML file to write (default: EXP/report.html).")
    ] = None,
    force: Force = False,
    samples: Annotated[int, typer.Option(help="Sample translations shown per split.")] = 10,
    sentence: Annotated[
        Optional[str], typer.Option(help="Sentence for the attention example (default: the first test sentence).")
    ] = None,
    checkpoint: Checkpoint = None,
    threads: Threads = 2,
) -> None:
    """One self-contained HTML page: config, data, curves, scores, sample translations, an attention example."""
    from mt.apps.report.page import report as run
    from mt.experiment.config import read_experiment
    from mt.hardware import set_threads

    experiment, _ = read_experiment(exp)  # a mistyped --exp is answered before torch loads
    set_threads(threads)
    print(run(experiment, output, force, samples, sentence, one(checkpoint)))
