"""`mt attention`: one sentence translated and its attention drawn (heatmaps) or written (JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt import log
from mt.decoding.options import DecodeOptions
from mt.errors import ConfigError

from .options import Checkpoint, Device, Exp, Threads, decode_flags, examples, one

EXAMPLES = examples(
    'mt attention --exp exp/en-de "A man in a blue shirt is riding a bike down the street."',
    'mt attention --exp exp/en-de "Two dogs play in the snow." --format json --layer 1',
    'mt attention --exp exp/en-de "Two dogs play in the snow." --json > weights.json',
)


@decode_flags(batch_tokens=False)
def attention(
    exp: Exp,
    sentence: Annotated[str, typer.Argument(help="The source sentence to translate and look inside.")],
    decode: DecodeOptions,
    output: Annotated[
        Optional[Path], typer.Option(help="The directory the files go to (default: EXP/attention/).")
    ] = None,
    layer: Annotated[
        Optional[int],
        typer.Option(help="Decoder layer (1 = first) whose heads and alignment are drawn; default the last."),
    ] = None,
    src_lang: Annotated[
        Optional[str], typer.Option(help="The sentence's language (a multilingual experiment).")
    ] = None,
    tgt_lang: Annotated[
        Optional[str], typer.Option(help="The language to translate into (a multilingual experiment's <2xx> token).")
    ] = None,
    encoder: Annotated[bool, typer.Option(help="Also draw the encoder self-attention of each layer.")] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="png: heatmaps; json: the raw weights (attention.json, cross_attention by layer, head, output token, source token); both.",
        ),
    ] = "png",
    target: Annotated[
        Optional[str], typer.Option(help="Look at this translation (forced decoding) instead of the model's own.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace files already in --output.")] = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the weights (as attention.json holds them) as one JSON object instead of the translation; no files written.",
        ),
    ] = False,
    checkpoint: Checkpoint = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate one sentence and draw its attention: cross-attention (source x output tokens) per layer, per head, alignment."""
    from mt.apps.report import attention_maps as attn
    from mt.decoding.alignment import check_layer
    from mt.decoding.translator import Translator
    from mt.experiment.config import read_experiment
    from mt.hardware import set_threads

    experiment, cfg = read_experiment(exp)
    if fmt not in attn.FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(attn.FORMATS)}")
    if json_out and (output is not None or force or fmt != "png"):  # files' flags: said, not ignored
        given = "--output" if output is not None else "--force" if force else "--format"
        raise ConfigError(f"{given} is for the files mt attention writes; --json prints the weights on stdout")
    if target is not None:  # forced decoding searches nothing: a search flag would be ignored
        from .options import DECODE_FLAGS

        for name, (_, field) in DECODE_FLAGS.items():
            value = getattr(decode, field, None)
            if value is not None:
                flag = f"--{'no-' if value is False else ''}{name.replace('_', '-')}"
                raise ConfigError(f"{flag} is for the model's own translation; --target is forced decoding, no search")
    set_threads(threads)
    translator = Translator.load(experiment, cfg, one(checkpoint), device)
    index = check_layer(translator.model, layer, "--layer")
    out_dir = output if output is not None else experiment.attention_dir
    tag = translator.directions.tag(src_lang, tgt_lang)
    if json_out:
        import json

        maps = attn.attention_maps(translator, sentence, target, index, tag, decode)
        print(json.dumps(maps.to_json(encoder), ensure_ascii=False))
        return
    maps, files = attn.attention(translator, sentence, out_dir, index, encoder, fmt, target, force, tag, decode)
    print(maps.translation)
    log.info(f"wrote {', '.join(path.name for path in files)} to {out_dir}")
