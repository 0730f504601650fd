"""`mt evaluate`: BLEU and chrF of an experiment's split (translated here), or of two files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.decoding.options import DecodeOptions
from mt.errors import ConfigError, MtError

from . import render
from .options import (
    Checkpoints,
    Device,
    Precision,
    Quantize,
    Threads,
    decode_flags,
    examples,
    exp_dir,
    given_once,
    single,
)

EXAMPLES = examples("mt evaluate --exp exp/de-en", "mt evaluate --hyp out.en --ref test.en --json")


@decode_flags()
def evaluate(
    decode: DecodeOptions,
    exp: Annotated[
        Optional[Path], typer.Option("--exp", "-e", help="Experiment to translate and score.", callback=exp_dir)
    ] = None,
    split: Annotated[str, typer.Option(help="test, valid or train.")] = "test",
    hyps: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--hyp",
            metavar="PATH",
            callback=given_once,
            help="Score this file instead of translating (needs --ref; - is stdin).",
        ),
    ] = None,
    ref: Annotated[
        Optional[list[Path]],
        typer.Option(
            metavar="FILE",
            help="Reference translations, aligned with --hyp; several --ref: references of the same lines.",
        ),
    ] = None,
    checkpoint: Checkpoints = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the scores as one JSON object.")] = False,
    tokenized: Annotated[
        bool,
        typer.Option(
            help="BLEU on Moses-tokenized text (sacremoses), as the Multi30k papers "
            "report it, instead of sacreBLEU; its own signature."
        ),
    ] = False,
    lowercase: Annotated[bool, typer.Option(help="With --tokenized: case-insensitive.")] = False,
    lang: Annotated[
        Optional[str],
        typer.Option(
            help="With --hyp: the target language, for BLEU's tokenizer (sacreBLEU's zh, ja, ko; Moses' rules "
            "with --tokenized)."
        ),
    ] = None,
    threads: Threads = 2,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    device: Device = "cpu",
) -> None:
    """BLEU and chrF (sacrebleu, detokenized) of an experiment's split, or of --hyp against --ref."""
    hyp = single(hyps)
    if lowercase and not tokenized:
        raise ConfigError("--lowercase goes with --tokenized (sacreBLEU is scored as it comes)")
    if hyp is not None or ref is not None:
        # What translating a split takes means nothing to two files: said, not ignored
        given = [
            flag
            for flag, is_set in (
                ("--checkpoint", checkpoint is not None),
                ("--split", split != "test"),
                ("--quantize", quantize is not None),
                ("--precision", precision != "fp32"),
                ("--threads", threads != 2),
                ("--device", device != "cpu"),
                ("a search flag", decode != DecodeOptions()),
            )
            if is_set
        ]
        if given:
            raise ConfigError(f"{given[0]} is for translating a split (--exp); --hyp and --ref are scored as they are")
        scores = _score_files(hyp, ref, exp, tokenized, lang, lowercase)
    else:
        if exp is None:
            raise ConfigError("give --exp (translate and score a split) or --hyp and --ref")
        if split not in ("train", "valid", "test"):
            raise ConfigError(f"--split {split!r}: expected train, valid or test")
        from mt.experiment.config import read_experiment
        from mt.hardware import set_threads

        if lang is not None:
            raise ConfigError("--lang goes with --hyp; a split is scored in its experiment's target languages")
        experiment, cfg = read_experiment(exp)  # before torch's import: a mistyped --exp is answered at once
        if tokenized:  # refused before the split is translated, not after (mt.metrics.score_tokenized)
            from mt.metrics import UNSPACED, sacrebleu_code

            unspaced = [tgt for _, tgt in cfg.data.pairs() if sacrebleu_code(tgt) in UNSPACED]
            if unspaced:
                raise ConfigError(
                    f"--tokenized into {unspaced[0]}: Moses' tokenizer does not cut a text written without spaces; "
                    "sacreBLEU's score, without --tokenized, tokenizes it"
                )
        if not any(cfg.data.sources(split, pair) for pair in cfg.data.pairs()):  # before the model loads
            raise ConfigError(f"data.{split} is empty: this experiment has no {split} split to translate and score")
        from mt.apps.evaluate import evaluate_split
        from mt.decoding.translator import Translator

        set_threads(threads)
        translator = Translator.load(experiment, cfg, checkpoint, device, precision, quantize)
        scores = evaluate_split(
            experiment, cfg, split, translator, tokenized=tokenized, lowercase=lowercase, options=decode
        )
    render.print_scores(scores, json_out)


def _score_files(
    hyp: Path | None, ref: list[Path] | None, exp: Path | None, tokenized: bool, lang: str | None, lowercase: bool
) -> dict:
    """--hyp against --ref, as they are (no torch needed)."""
    from mt.data.text_files import read_lines
    from mt.metrics import score, score_tokenized

    if hyp is None or not ref:
        raise ConfigError("--hyp and --ref go together")
    if tokenized and not lang:
        raise ConfigError("--tokenized with --hyp needs --lang, the target language (for Moses' tokenization rules)")
    if exp is not None:
        raise ConfigError(
            "--exp translates a split; --hyp and --ref score two files as they are: give one or the other"
        )
    if [str(path) for path in (hyp, *ref)].count("-") > 1:
        raise ConfigError("--hyp - and --ref -: only one of them can be stdin")
    # "-" is stdin, as for `mt translate --input -`: `mt translate ... | mt evaluate --hyp - --ref REF`
    hyps, *streams = (read_lines("/dev/stdin" if str(path) == "-" else path) for path in (hyp, *ref))
    for path, refs in zip(ref, streams):
        if len(hyps) != len(refs):
            raise MtError(
                f"--hyp {hyp} has {len(hyps)} lines but --ref {path} has {len(refs)}: they must pair up line by line"
            )
    first, more = streams[0], streams[1:]
    return score_tokenized(hyps, first, lang, lowercase, more) if tokenized else score(hyps, first, lang, more)
