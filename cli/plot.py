"""`mt plot`: the training curves of one or more experiments, as one PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .options import Force, examples, exp_dir

EXAMPLES = examples("mt plot --exp exp/en-de", "mt plot --exp exp/en-de --exp exp/en-de-big -o compare.png")


def plot(
    exp: Annotated[
        list[Path],
        typer.Option(
            "--exp", "-e", metavar="DIR", help="Experiment directory; repeat to overlay several.", callback=exp_dir
        ),
    ],
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="PNG to write (default: curves.png in the first experiment)."),
    ] = None,
    force: Force = False,
) -> None:
    """Training and validation loss, perplexity, BLEU and learning rate against steps and wall time, as one PNG."""
    from mt.apps.report.plot import plot as run
    from mt.experiment.paths import Experiment

    print(run([Experiment(path) for path in exp], output, force))
