"""`mt average`: the mean of the last N periodic checkpoints (Sec. 6.1)."""

from __future__ import annotations

from typing import Annotated

import typer

from mt import log

from .options import Exp, Force, examples

EXAMPLES = examples("mt average --exp exp/de-en --last 5", "mt evaluate --exp exp/de-en --checkpoint average")


def average(
    exp: Exp,
    last: Annotated[int, typer.Option(help="Average the last N periodic checkpoints (step_N.pt).")] = 5,
    output: Annotated[
        str, typer.Option(help="Name of the result under checkpoints/ (use it with --checkpoint).")
    ] = "average",
    force: Force = False,
) -> None:
    """Average the parameters of the last N periodic checkpoints into checkpoints/average.pt (Sec. 6.1)."""
    from mt.experiment.config import read_experiment

    experiment, _ = read_experiment(exp)  # a mistyped --exp is answered before torch loads
    from mt.training.average import average_last

    path, used = average_last(experiment, last, output, force)
    log.info(f"averaged {', '.join(p.stem for p in used)} into {path}")
    print(path)  # what it wrote, on stdout, as export, plot and report say theirs
