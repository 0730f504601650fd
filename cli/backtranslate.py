"""`mt backtranslate`: a reverse-direction model turns target-language monolingual text into synthetic training pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mt import log
from mt.decoding.options import DecodeOptions

from .options import (
    Checkpoint,
    ChunkLines,
    Device,
    Exp,
    Precision,
    Quantize,
    Sample,
    Seed,
    Temperature,
    Threads,
    TopK,
    TopP,
    decode_flags,
    examples,
    one,
    sampling_of,
)

EXAMPLES = examples(
    "mt backtranslate --reverse exp/de-en --mono text:news.de --exp exp/en-de",
    "mt backtranslate --reverse exp/de-en --mono text:news.de --exp exp/en-de --sample --top-k 10",
)


@decode_flags()
def backtranslate(
    exp: Exp,
    decode: DecodeOptions,
    reverse: Annotated[
        Path, typer.Option(help="The experiment of the reverse direction (for --exp en-de, a de-en model).")
    ],
    mono: Annotated[
        list[str],
        typer.Option(
            metavar="SPEC",
            help="Monolingual text in --exp's target language: text:FILE (one sentence a line, .gz too), or a parallel source spec whose target side is taken; repeatable.",
        ),
    ],
    sample: Sample = False,
    temperature: Temperature = 1.0,
    top_k: TopK = 0,
    top_p: TopP = 1.0,
    seed: Seed = 1,
    noise: Annotated[
        bool,
        typer.Option(
            help="Beam search, then noise: words deleted (0.1), replaced by <blank> (0.1), shuffled within 3 positions."
        ),
    ] = False,
    tag: Annotated[
        bool,
        typer.Option(help="Mark the synthetic pairs bt: so their sources start with <BT> (tagged back-translation)."),
    ] = True,
    weight: Annotated[
        float, typer.Option(help="The synthetic corpus' weight in --exp's data.train (binarize's upsampling factor).")
    ] = 1.0,
    checkpoint: Checkpoint = None,
    chunk_lines: ChunkLines = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Back-translate target-language text into synthetic pairs for the experiment's training data."""
    from dataclasses import replace

    from mt.apps.backtranslate import backtranslate as run
    from mt.experiment.paths import Experiment
    from mt.hardware import set_threads

    options = replace(decode, sampling=sampling_of(sample, temperature, top_k, top_p, seed))
    set_threads(threads)
    manifest = run(
        Experiment(reverse),
        Experiment(exp),
        mono,
        options,
        noise,
        tag,
        weight,
        chunk_lines,
        one(checkpoint),
        device,
        precision,
        quantize,
    )
    log.info(
        f"back-translated {manifest['lines']:,} lines in {manifest['seconds']:.0f}s; {exp} trains on {manifest['corpus']}"
    )
    print(manifest["corpus"])
