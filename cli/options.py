"""The options several `mt` subcommands share, declared once, and each command's help examples."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from mt.errors import ConfigError


def examples(*commands: str) -> str:
    """A command's epilog: the commands of README.md's usage, one paragraph each, each marked (\\b) so
    that click's help prints it on one line as written, to be copied whole."""
    return "\n\n".join(["Examples:" if len(commands) > 1 else "Example:", *(f"\b\n  {c}" for c in commands)])


def exp_dir(value):
    """--exp: an experiment directory, or where the first step makes one; never a plain file."""
    for path in value if isinstance(value, list) else [value]:
        if path is not None and path.is_file():
            raise ConfigError(f"--exp {path}: is a file, not an experiment directory")
    return value


def device_name(value: str | None) -> str | None:
    """--device: checked at parse time (`mt.hardware.checked_device`)."""
    from mt.hardware import checked_device

    return None if value is None else checked_device(value)


# -- the experiment and its config --------------------------------------------------------------
Exp = Annotated[
    Path, typer.Option("--exp", "-e", help="Experiment directory (created by the first step).", callback=exp_dir)
]
Recipe = Annotated[Optional[Path], typer.Option(help="Recipe (YAML) to start a new experiment from.")]
Sets = Annotated[
    Optional[list[str]],
    typer.Option("--set", metavar="FIELD=VALUE", help="Override any config field: section.field=value."),
]

# -- runtime knobs ------------------------------------------------------------------------------
# Each command keeps its default: none (torch's choice) for train and run, 2 where one model decodes.
Threads = Annotated[Optional[int], typer.Option(min=1, max=1024, metavar="N", help="CPU threads for torch.")]
Device = Annotated[str, typer.Option(help="cpu, cuda or cuda:N.", callback=device_name)]
Precision = Annotated[str, typer.Option(help="fp32, bf16 (CPU with AMX, GPU) or fp16 (GPU).")]
Quantize = Annotated[Optional[str], typer.Option(help="int8: dynamic int8 quantization of the linear layers (CPU).")]
Force = Annotated[bool, typer.Option(help="Replace --output if it exists.")]

# Sampling instead of search (mt translate, mt backtranslate): `sampling_of` turns them into one object.
Sample = Annotated[
    bool, typer.Option(help="Sample translations instead of searching (back-translation: Edunov et al., 2018).")
]
Temperature = Annotated[float, typer.Option(help="Sampling temperature.")]
TopK = Annotated[int, typer.Option(help="Sample among the k most probable tokens (0 = all).")]
TopP = Annotated[float, typer.Option(help="Nucleus sampling: the smallest set of tokens with this much probability.")]
Seed = Annotated[int, typer.Option(help="Sampling seed.")]
# Chunked translation that survives a kill (mt distill, mt backtranslate: mt.apps.chunked).
ChunkLines = Annotated[
    Optional[int],
    typer.Option(
        help="Lines translated and saved together (default 2000): a killed run resumes at the first unsaved chunk, with the size it started with."
    ),
]


def sampling_of(sample: bool, temperature: float, top_k: int, top_p: float, seed: int):
    """The sampling flags as mt.decoding.options.Sampling (checked, with --sample or not), or None without --sample."""
    from mt.decoding.options import Sampling

    sampling = Sampling(temperature, top_k, top_p, seed)
    if not sample and sampling != Sampling():
        raise ConfigError("--temperature, --top-k, --top-p and --seed go with --sample")
    return sampling if sample else None


# -- decoding (decode.* for this call only: mt.decoding.options.DecodeOptions) -------------------
Beam = Annotated[Optional[int], typer.Option(help="Beam size (1 = greedy); default: the experiment's decode.beam.")]
Alpha = Annotated[Optional[float], typer.Option(help="Length penalty alpha; default: the experiment's decode.alpha.")]
Penalty = Annotated[Optional[str], typer.Option(help="gnmt ((5+|Y|)/6)^alpha, length |Y|^alpha, or none.")]
Stop = Annotated[
    Optional[str],
    typer.Option(
        help="When beam search stops: early (once beam hypotheses have finished, as fairseq and CTranslate2; default) or exact (only when no live hypothesis can still win: slower)."
    ),
]
MaxLenA = Annotated[
    Optional[float], typer.Option(help="Max output length = a * source length + b tokens, </s> included.")
]
MaxLenB = Annotated[Optional[int], typer.Option(help="The b of --max-len-a: tokens added to a * source length.")]
NoRepeat = Annotated[
    Optional[int],
    typer.Option(
        metavar="N",
        help="The repetition guard: never repeat an N-gram of the translation (as fairseq's and CTranslate2's no_repeat_ngram_size; decode.no_repeat_ngram; 0 = off).",
    ),
]
DecodeTokens = Annotated[
    Optional[int],
    typer.Option(
        "--max-tokens",
        help="Source tokens per decoding batch (decode.max_tokens), as train's --max-tokens is per training batch.",
    ),
]
Workers = Annotated[
    Optional[int],
    typer.Option(
        min=0,
        metavar="N",
        help="Batches searched side by side on the CPU, each on a share of --threads (decode.workers; 0 = one per thread, up to 4).",
    ),
]
ParallelKind = Annotated[
    Optional[str],
    typer.Option(
        "--parallel",
        metavar="threads|processes",
        help="How --workers search side by side: threads in this process, or processes of one model each (faster on files, about 2 s to start; decode.parallel).",
    ),
]
Shortlist = Annotated[
    Optional[bool],
    typer.Option(
        "--shortlist/--no-shortlist",
        help="Score only the lexical shortlist's candidates (EXP/shortlist, `mt shortlist`): faster, approximate; default: the experiment's decode.shortlist.",
    ),
]
EngineKind = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        metavar="mt|ctranslate2|auto",
        help="What decodes: mt's search; ctranslate2, the same weights in CTranslate2 (built once into EXP/engines/, faster on a CPU; refuses what it cannot decode as mt would); auto, CTranslate2 where it can (decode.engine).",
    ),
]


def _one_checkpoint(value: Optional[list[str]]) -> Optional[list[str]]:
    """--checkpoint of a command that reads one model: given twice, click kept the last without a word
    (`mt export --checkpoint a --checkpoint b` exported b, where translate would have made an ensemble)."""
    if value and len(value) > 1:
        raise typer.BadParameter(
            f"given {len(value)} times ({', '.join(value)}): this command reads one checkpoint "
            "(several, an ensemble, are for translate, evaluate and serve)"
        )
    return value


Checkpoint = Annotated[  # a list of at most one: `one` gives it; see _one_checkpoint
    Optional[list[str]],
    typer.Option(
        "--checkpoint",
        metavar="NAME",
        callback=_one_checkpoint,
        help="best, last, average, ema (train.ema_decay), step_N or a .pt file; default: the experiment's decode.checkpoint.",
    ),
]


def given_once(ctx: typer.Context, param: typer.CallbackParam, value: Optional[list]) -> Optional[list]:
    """A file flag given twice is refused: click kept the last without a word (`mt translate -i a -i b`
    translated b alone, a's lines lost; `mt evaluate --hyp a --hyp b` scored b alone)."""
    if value and len(value) > 1:
        raise typer.BadParameter(f"given {len(value)} times ({', '.join(map(str, value))}): give one")
    return value


def single(value: Optional[list[Path]]) -> Optional[Path]:
    """The path a `given_once` option holds, None if not given."""
    return value[0] if value else None


def one(checkpoint: Optional[list[str]]) -> Optional[str]:
    """The name a Checkpoint option holds, None if not given."""
    return checkpoint[0] if checkpoint else None


Checkpoints = Annotated[
    Optional[list[str]],
    typer.Option(
        "--checkpoint",
        metavar="NAME",
        help="best, last, average, ema (train.ema_decay), step_N or a .pt file; several = an ensemble; default: the experiment's decode.checkpoint.",
    ),
]

# The decoding flags, in the order --help lists them, and the DecodeOptions field each sets.
DECODE_FLAGS = {
    "beam": (Beam, "beam"),
    "alpha": (Alpha, "alpha"),
    "length_penalty": (Penalty, "length_penalty"),
    "stop": (Stop, "stop"),
    "max_len_a": (MaxLenA, "max_len_a"),
    "max_len_b": (MaxLenB, "max_len_b"),
    "no_repeat_ngram": (NoRepeat, "no_repeat_ngram"),
    "batch_tokens": (DecodeTokens, "max_tokens"),
    "workers": (Workers, "workers"),
    "parallel": (ParallelKind, "parallel"),
    "shortlist": (Shortlist, "shortlist"),
    "engine": (EngineKind, "engine"),
}


def decode_flags(*, batch_tokens: bool = True) -> Callable:
    """Give a command the decoding flags (DECODE_FLAGS; without --max-tokens, --workers, --parallel and
    --engine where one sentence is translated by mt's own search, whose attention it reads). The command
    takes them as one parameter, `decode`: a DecodeOptions, checked, with None where a flag is not given
    (the experiment's own value)."""
    one_sentence = ("batch_tokens", "workers", "parallel", "engine")
    names = [name for name in DECODE_FLAGS if batch_tokens or name not in one_sentence]

    def wrap(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "decode"]
        flags = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=DECODE_FLAGS[name][0], default=None)
            for name in names
        ]

        @functools.wraps(command)
        def with_flags(**kwargs: Any) -> Any:
            from mt.decoding.options import DecodeOptions

            decode = DecodeOptions(**{DECODE_FLAGS[name][1]: kwargs.pop(name) for name in names})
            return command(**kwargs, decode=decode)

        # typer reads the parameters from the signature: the command's own, then the decoding flags.
        with_flags.__signature__ = signature.replace(parameters=[*own, *flags])  # type: ignore[attr-defined]
        return with_flags

    return wrap
