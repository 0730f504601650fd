"""`mt export`: a trained checkpoint as a model directory another runtime loads (CTranslate2, Hugging Face,
Argos Translate and LibreTranslate)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt import log

from .options import Checkpoint, Exp, examples, one

EXAMPLES = examples(
    "mt export --exp exp/de-en --format ctranslate2 --output exp/de-en/ct2",
    "mt export --exp exp/de-en --format ctranslate2 --output ct2-int8 --quantize int8 --checkpoint average",
    "mt export --exp exp/de-en --format huggingface --output hf/de-en --license cc-by-4.0",
    "mt export --exp exp/de-en --format argos --output argos/de-en",
)


def export(
    exp: Exp,
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory to write (must not exist, or --force).")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="ctranslate2: a CTranslate2 model directory; huggingface: a "
            "transformers MarianMTModel with its tokenizer and model card; argos: Argos Translate packages "
            "(one .argosmodel per trained direction), which LibreTranslate serves.",
        ),
    ] = "ctranslate2",
    checkpoint: Checkpoint = None,
    quantize: Annotated[
        Optional[str],
        typer.Option(help="ctranslate2, argos: weights as int8, int8_float32 or float16 (default: float32)."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Replace the earlier export in --output (the files it wrote: others are kept).")
    ] = False,
    license: Annotated[
        Optional[str],
        typer.Option(
            help="huggingface: the model card's licence, a Hub identifier such as apache-2.0 (default: unknown)."
        ),
    ] = None,
) -> None:
    """Write a checkpoint for another runtime: CTranslate2 (model.bin, vocabularies, SentencePiece
    model(s), README.txt), Hugging Face transformers (config.json, model.safetensors,
    generation_config.json, the tokenizer's files, README.md) or Argos Translate
    (translate-SRC_TGT.argosmodel per trained direction, for argostranslate and LibreTranslate)."""
    from mt.apps.export.directory import export as run_export
    from mt.experiment.config import read_experiment

    experiment, cfg = read_experiment(exp)
    summary = run_export(experiment, cfg, output, fmt, one(checkpoint), quantize, force, license)
    log.info(
        f"exported {summary['checkpoint']} as {summary['format']} ({summary['quantize']}) to {summary['output']}: "
        f"{', '.join(summary['files'])}; {summary['bytes'] / 1e6:.1f} MB"
    )
    print(summary["output"])
