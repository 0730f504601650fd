"""`mt run`: a recipe's steps in order into its experiment, skipping what is done."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import render
from .options import Device, Sets, Threads, examples, exp_dir

EXAMPLES = examples(
    "mt run recipes/multi30k_en_de.yaml",
    "mt run recipes/multi30k_en_de.yaml --exp exp/seed2 --set train.seed=2",
    "mt run recipes/multi30k_en_de.yaml --dry-run",
)


def run(
    recipe: Annotated[Path, typer.Argument(help="Recipe file (YAML).")],
    exp: Annotated[
        Optional[Path],
        typer.Option("--exp", "-e", help="Experiment directory (default: the recipe's exp).", callback=exp_dir),
    ] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the resolved config (stdout) and which steps are done, write nothing."),
    ] = False,
) -> None:
    """Run a recipe's steps in order into its experiment, skipping steps already done."""
    from mt.apps.run import run_recipe
    from mt.config.resolve import parse_sets
    from mt.hardware import set_threads

    set_threads(threads)
    run_recipe(
        recipe,
        exp,
        parse_sets(sets),
        device=device,
        print_result=print,
        print_data=render.print_data_table,
        dry_run=dry_run,
    )
