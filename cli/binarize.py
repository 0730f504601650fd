"""`mt binarize`: the splits as memory-mapped token-id arrays, and what was kept and dropped."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mt.errors import ConfigError

from . import render
from .options import Exp, Recipe, Sets, examples

EXAMPLES = examples(
    "mt binarize --exp exp/de-en",
    "mt binarize --exp exp/de-en --workers 4 --train-segmentations 8",
    "mt binarize --exp exp/de-en --force --max-len 100  # build data/ again",
)


def binarize(
    exp: Exp,
    recipe: Recipe = None,
    max_len: Annotated[Optional[int], typer.Option(help="Drop pairs longer than this many tokens on a side.")] = None,
    sets: Sets = None,
    workers: Annotated[int, typer.Option(help="Processes that encode in parallel.")] = 2,
    train_segmentations: Annotated[
        Optional[int],
        typer.Option(
            help="Write each training pair N times: its best segmentation and N-1 sampled (subword regularization; tokenizer.sampling_alpha)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            help="Build data/ again (changed corpus files, or other binarize settings); refused once a model was trained on it."
        ),
    ] = False,
) -> None:
    """Encode train/valid/test into memory-mapped token-id arrays; prints what was kept and dropped."""
    from mt.config.schema import MAX_WORKERS
    from mt.data.binarize import binarize as run
    from mt.experiment.config import open_experiment

    if not 1 <= workers <= MAX_WORKERS:  # each a process of its own
        raise ConfigError(f"--workers {workers}: expected 1 to {MAX_WORKERS}")
    flags = {"data.max_len": max_len, "tokenizer.train_segmentations": train_segmentations}
    experiment, cfg, change = open_experiment(exp, recipe, flags, sets, rebuild_data=force)
    with change.undo_if_fails():
        stats = run(experiment, cfg, workers=workers, force=force)
    render.print_data_table(stats)
