"""`mt train-tokenizer`: the experiment's SentencePiece model(s), and the experiment itself on first use."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from mt import log
from mt.config.sources import GRAMMAR

from .options import Exp, Recipe, Sets, examples

EXAMPLES = examples(
    "mt train-tokenizer --exp exp/de-en --train files:corpus/train --valid files:corpus/valid "
    "--test files:corpus/test --src-lang de --tgt-lang en --vocab-size 8000",
    "mt train-tokenizer --exp exp/en-de --train hf:wmt14:de-en --train 'tsv:back.tsv.gz*0.5' "
    "--valid hf:wmt14:de-en --test hf:wmt14:de-en --src-lang en --tgt-lang de",
)


def train_tokenizer(
    exp: Exp,
    recipe: Recipe = None,
    src_lang: Annotated[Optional[str], typer.Option(help="Source language code, e.g. de.")] = None,
    tgt_lang: Annotated[Optional[str], typer.Option(help="Target language code, e.g. en.")] = None,
    train: Annotated[
        Optional[list[str]], typer.Option(metavar="SPEC", help=f"A training corpus, repeatable: {GRAMMAR}.")
    ] = None,
    valid: Annotated[
        Optional[list[str]],
        typer.Option(metavar="SPEC", help="A validation corpus, repeatable (same forms, no weight)."),
    ] = None,
    test: Annotated[
        Optional[list[str]], typer.Option(metavar="SPEC", help="A test corpus, repeatable (same forms, no weight).")
    ] = None,
    vocab_size: Annotated[Optional[int], typer.Option(help="SentencePiece vocabulary size.")] = None,
    model_type: Annotated[Optional[str], typer.Option(help="unigram or bpe.")] = None,
    separate_vocab: Annotated[
        Optional[bool],
        typer.Option(
            help="One vocabulary per side instead of a joint one (tokenizer.joint: false; default: the config's)."
        ),
    ] = None,
    sets: Sets = None,
) -> None:
    """Train the SentencePiece model on the training corpus (joint source+target by default)."""
    from mt.data.train_tokenizer import train_tokenizer as run
    from mt.experiment.config import open_experiment

    flags: dict[str, Any] = {"data.src_lang": src_lang, "data.tgt_lang": tgt_lang}
    for split, specs in (("train", train), ("valid", valid), ("test", test)):
        if specs:
            flags[f"data.{split}"] = specs  # made absolute as they are resolved
    flags.update({"tokenizer.vocab_size": vocab_size, "tokenizer.model_type": model_type})
    if separate_vocab is not None:
        flags["tokenizer.joint"] = not separate_vocab
    experiment, cfg, change = open_experiment(exp, recipe, flags, sets)
    with change.undo_if_fails():
        summary = run(experiment, cfg)
    if "casing" in summary:  # a tokenizer trained before the casing tables: they alone were written (said)
        return
    sizes = ", ".join(f"{side} {size:,}" for side, size in summary["vocab_size"].items())
    trained_on = "sentences" if "languages" in summary else "training pairs"  # a multilingual sample: sentences
    log.info(
        f"tokenizer written to {experiment.tokenizer_dir}: vocabulary {sizes}; "
        f"{summary['sentences']['src']:,} {trained_on}; {summary['seconds']:.1f}s"
    )
