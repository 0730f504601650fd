"""`mt backtranslate`: a reverse-direction model turns target-language monolingual text into synthetic training pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.options import Checkpoint, Device, Exp, Precision, Quantize, Threads, decode_flags, examples
from mt import log

EXAMPLES = examples("mt backtranslate --reverse exp/de-en --mono text:news.de --exp exp/en-de",
                    "mt backtranslate --reverse exp/de-en --mono text:news.de --exp exp/en-de --sample --top-k 10")


@decode_flags()
def backtranslate(
    exp: Exp,
    decode: dict,
    reverse: Annotated[Path, typer.Option(help="The experiment of the reverse direction (for --exp en-de, a de-en model).")],
    mono: Annotated[list[str], typer.Option(metavar="SPEC", help="Monolingual text in --exp's target language: text:FILE (one sentence a line, .gz too), or a parallel source spec whose target side is taken; repeatable.")],
    sample: Annotated[bool, typer.Option(help="Sample the synthetic sources instead of searching (Edunov et al., 2018).")] = False,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    top_k: Annotated[int, typer.Option(help="Sample among the k most probable tokens (0 = all).")] = 0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling: the smallest set of tokens with this much probability.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Sampling seed (each chunk draws from seed + its number).")] = 1,
    noise: Annotated[bool, typer.Option(help="Beam search, then noise: words deleted (0.1), replaced by <blank> (0.1), shuffled within 3 positions.")] = False,
    tag: Annotated[bool, typer.Option(help="Mark the synthetic pairs bt: so their sources start with <BT> (tagged back-translation).")] = True,
    weight: Annotated[float, typer.Option(help="The synthetic corpus' weight in --exp's data.train (binarize's upsampling factor).")] = 1.0,
    checkpoint: Checkpoint = None,
    chunk_lines: Annotated[Optional[int], typer.Option(help="Lines translated and saved together (default 2000): a killed run resumes at the first unsaved chunk, with the size it started with.")] = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Back-translate target-language text into synthetic pairs for the experiment's training data."""
    from mt.backtranslate import backtranslate as run
    from mt.errors import ConfigError
    from mt.experiment import Experiment
    from mt.hardware import set_threads
    from mt.translate import Sampling

    set_threads(threads)
    sampling = Sampling(temperature, top_k, top_p, seed)  # checks the sampling flags, with --sample or not
    if not sample and sampling != Sampling():
        raise ConfigError("--temperature, --top-k, --top-p and --seed go with --sample")
    overrides = {key.removeprefix("decode."): value for key, value in decode.items() if value is not None}
    if sample and {"beam", "alpha", "length_penalty", "stop"} & set(overrides):
        raise ConfigError("--beam, --alpha, --length-penalty and --stop are for beam search; --sample draws")
    manifest = run(Experiment(reverse), Experiment(exp), mono, overrides, sampling if sample else None, noise, tag,
                   weight, chunk_lines, checkpoint, device, precision, quantize)
    log.info(f"back-translated {manifest['lines']:,} lines in {manifest['seconds']:.0f}s; {exp} trains on {manifest['corpus']}")
    print(manifest["corpus"])
