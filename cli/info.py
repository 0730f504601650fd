"""`mt info`: what an experiment holds, as tables or as one JSON object."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from . import render
from .options import Exp, examples

EXAMPLES = examples("mt info --exp exp/de-en", "mt info --exp exp/de-en --json")


def info(
    exp: Exp,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object: the full config, data statistics, checkpoint sizes, training progress and the saved scores, as numbers.",
        ),
    ] = False,
) -> None:
    """What the experiment holds: config, data, checkpoints, scores."""
    from mt.apps.report.info import experiment_info, experiment_record, json_numbers
    from mt.experiment.paths import Experiment

    if json_out:
        print(json.dumps(json_numbers(experiment_record(Experiment(exp))), allow_nan=False))
    else:
        render.print_sections(experiment_info(Experiment(exp)))
