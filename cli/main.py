"""The `mt` command: one short function per subcommand that parses flags, calls `mt`, renders.

Results go to stdout; status, progress and errors to stderr. Exit codes: 0 ok, 1 a failure the
input caused, 2 bad flags or config.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mt import log
from mt.errors import ConfigError, MtError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Machine translation with the Transformer (Vaswani et al., 2017): "
    "train-tokenizer -> binarize -> train -> translate / evaluate, all in one experiment directory.",
)

_debug = False

def _examples(*commands: str) -> str:
    """A command's epilog: the commands of README.md's usage, one paragraph each (typer's rich help
    keeps paragraphs apart, so a long command wraps within its own)."""
    return "\n\n".join(["Examples:" if len(commands) > 1 else "Example:", *(f"  {c}" for c in commands)])


def _exp_dir(value):
    """--exp: an experiment directory, or where the first step makes one; never a plain file."""
    for path in value if isinstance(value, list) else [value]:
        if path is not None and path.is_file():
            raise ConfigError(f"--exp {path}: is a file, not an experiment directory")
    return value


Exp = Annotated[Path, typer.Option("--exp", "-e", help="Experiment directory (created by the first step).", callback=_exp_dir)]
Recipe = Annotated[Optional[Path], typer.Option(help="Recipe (YAML) to start a new experiment from.")]
Sets = Annotated[Optional[list[str]], typer.Option("--set", help="Override any config field: section.field=value.")]
Threads = Annotated[Optional[int], typer.Option(help="CPU threads for torch (default: torch's choice).")]
Device = Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")]


@app.callback()
def _global(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No status lines or progress bars.")] = False,
    debug: Annotated[bool, typer.Option(help="Show the traceback of an error.")] = False,
) -> None:
    global _debug
    log.quiet = quiet
    _debug = debug


# -- config plumbing ----------------------------------------------------------------------------
def _config(exp_dir: Path, recipe: Path | None, overrides: dict[str, Any], sets: list[str] | None,
            preset: str | None = None, persist: bool = True, existing: bool = False):
    """The experiment and its resolved config: saved config (or recipe/defaults) + recipe + flags.

    Precedence, lowest first: saved config, recipe, --preset, the named flags, --set. With
    `existing` the experiment must already exist (translate, evaluate): nothing is created.
    """
    from mt import config as cfglib
    from mt.experiment import Experiment

    exp = Experiment(exp_dir)
    if existing:
        exp.load_config()  # a one-line error when there is no experiment here
    origins: dict[str, str] = {}
    if preset is not None:
        if preset not in cfglib.MODEL_PRESETS:
            raise ConfigError(f"--preset {preset!r}: known presets are {', '.join(cfglib.MODEL_PRESETS)}")
        preset_fields = {f"model.{k}": v for k, v in cfglib.MODEL_PRESETS[preset].items()}
        origins.update({key: f"--preset {preset}" for key in preset_fields})
        overrides = {**preset_fields, **{k: v for k, v in overrides.items() if v is not None}}
    sets_fields = cfglib.parse_sets(sets)
    origins.update({key: "--set" for key in sets_fields})
    overrides = {**overrides, **sets_fields}
    return exp, exp.resolve_config(overrides, persist=persist, recipe=recipe, origins=origins)


def _threads(threads: int | None) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)


def _warn_if_slow(precision: str | None, device: str) -> None:
    """One warning line where --precision asks for a half precision that this CPU runs ~10x or more
    slower than fp32 (no bf16/fp16 hardware: mt.runtime.too_slow times a short matmul)."""
    if precision in ("bf16", "fp16") and device == "cpu":
        from mt.runtime import too_slow

        reason = too_slow(precision)
        if reason:
            log.warn(f"--precision {precision}: {reason} (a short matmul timed here); --precision fp32 will be faster")


def _data_overrides(**flags) -> dict[str, Any]:
    return {f"data.{name}": value for name, value in flags.items() if value is not None}


# -- subcommands --------------------------------------------------------------------------------
@app.command("train-tokenizer", epilog=_examples(
    "mt train-tokenizer --exp exp/de-en --train-prefix corpus/train --valid-prefix corpus/valid "
    "--test-prefix corpus/test --src-lang de --tgt-lang en --vocab-size 8000",
    "mt train-tokenizer --exp exp/en-de --hf-dataset bentrevett/multi30k --src-lang en --tgt-lang de"))
def train_tokenizer_cmd(
    exp: Exp,
    recipe: Recipe = None,
    src_lang: Annotated[Optional[str], typer.Option(help="Source language code, e.g. de.")] = None,
    tgt_lang: Annotated[Optional[str], typer.Option(help="Target language code, e.g. en.")] = None,
    train_src: Annotated[Optional[str], typer.Option(help="Training source text (.gz ok).")] = None,
    train_tgt: Annotated[Optional[str], typer.Option(help="Training target text, aligned by line.")] = None,
    valid_src: Annotated[Optional[str], typer.Option()] = None,
    valid_tgt: Annotated[Optional[str], typer.Option()] = None,
    test_src: Annotated[Optional[str], typer.Option()] = None,
    test_tgt: Annotated[Optional[str], typer.Option()] = None,
    train_prefix: Annotated[Optional[str], typer.Option(help="fairseq style: PREFIX.SRC_LANG + PREFIX.TGT_LANG.")] = None,
    valid_prefix: Annotated[Optional[str], typer.Option()] = None,
    test_prefix: Annotated[Optional[str], typer.Option()] = None,
    hf_dataset: Annotated[Optional[str], typer.Option(help="Hugging Face dataset name, e.g. bentrevett/multi30k.")] = None,
    hf_config: Annotated[Optional[str], typer.Option(help="Dataset config, e.g. de-en.")] = None,
    ding: Annotated[bool, typer.Option(help="Use the Ding dictionary (Debian trans-de-en).")] = False,
    train_source: Annotated[Optional[list[str]], typer.Option(help="Training corpus, repeatable: files:PREFIX, tsv:FILE, jsonl:FILE, hf:NAME[:CONFIG] or ding, each with an optional *WEIGHT.")] = None,
    vocab_size: Annotated[Optional[int], typer.Option(help="SentencePiece vocabulary size.")] = None,
    model_type: Annotated[Optional[str], typer.Option(help="unigram or bpe.")] = None,
    separate_vocab: Annotated[bool, typer.Option(help="One vocabulary per side instead of a joint one.")] = False,
    sets: Sets = None,
) -> None:
    """Train the SentencePiece model on the training corpus (joint source+target by default)."""
    from mt.tokenizer import train_tokenizer

    paths = dict(train_src=train_src, train_tgt=train_tgt, valid_src=valid_src, valid_tgt=valid_tgt,
                 test_src=test_src, test_tgt=test_tgt, train_prefix=train_prefix,
                 valid_prefix=valid_prefix, test_prefix=test_prefix)
    paths = {k: str(Path(v).resolve()) for k, v in paths.items() if v is not None}
    overrides = _data_overrides(src_lang=src_lang, tgt_lang=tgt_lang, hf_name=hf_dataset, hf_config=hf_config, **paths)
    if paths:
        overrides["data.source"] = "files"
    if hf_dataset:
        overrides["data.source"] = "hf"
    if ding:
        overrides["data.source"] = "ding"
    if train_source:
        from mt.config import absolute_source

        overrides["data.train_sources"] = [absolute_source(spec) for spec in train_source]
    overrides.update({"tokenizer.vocab_size": vocab_size, "tokenizer.model_type": model_type})
    if separate_vocab:
        overrides["tokenizer.joint"] = False
    experiment, cfg = _config(exp, recipe, overrides, sets)
    with experiment.undo_if_new_fails():
        summary = train_tokenizer(experiment, cfg)
    sizes = ", ".join(f"{side} {size:,}" for side, size in summary["vocab_size"].items())
    log.info(f"tokenizer written to {experiment.tokenizer_dir}: vocabulary {sizes}; "
             f"{summary['sentences']['src']:,} training pairs; {summary['seconds']:.1f}s")


@app.command(epilog=_examples("mt binarize --exp exp/de-en", "mt binarize --exp exp/de-en --workers 4 --train-segmentations 8"))
def binarize(exp: Exp, recipe: Recipe = None, max_len: Annotated[Optional[int], typer.Option(help="Drop pairs longer than this many tokens on a side.")] = None, sets: Sets = None,
             workers: Annotated[int, typer.Option(help="Processes that encode in parallel.")] = 2,
             train_segmentations: Annotated[Optional[int], typer.Option(help="Write each training pair N times: its best segmentation and N-1 sampled (subword regularization; tokenizer.sampling_alpha).")] = None) -> None:
    """Encode train/valid/test into memory-mapped token-id arrays; prints what was kept and dropped."""
    from mt.binarize import binarize as run_binarize

    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected at least 1")
    experiment, cfg = _config(exp, recipe, {"data.max_len": max_len, "tokenizer.train_segmentations": train_segmentations}, sets)
    with experiment.undo_if_new_fails():
        stats = run_binarize(experiment, cfg, workers=workers)
    _print_data_table(stats)


@app.command(epilog=_examples(
    "mt train --exp exp/de-en --preset small --max-time 2h",
    "mt train --exp exp/ft --preset small --init-from exp/pretrain --max-steps 2000 --lr 1e-4"))
def train(
    exp: Exp,
    recipe: Recipe = None,
    preset: Annotated[Optional[str], typer.Option(help="Model preset: base, big (the paper), small, tiny.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Tokens per batch (and process).")] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many updates.")] = None,
    max_time: Annotated[Optional[str], typer.Option(help="Stop after this much training time (90s, 12m, 2h) in all runs.")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="Peak learning rate (default: the paper's d^-0.5 * warmup^-0.5).")] = None,
    warmup_steps: Annotated[Optional[int], typer.Option(help="Linear warmup steps.")] = None,
    update_freq: Annotated[Optional[int], typer.Option(help="Batches per update: K times the batch size, same memory.")] = None,
    clip_norm: Annotated[Optional[float], typer.Option(help="Clip the gradient norm to this (0 = off, as the paper).")] = None,
    keep_last: Annotated[Optional[int], typer.Option(help="Periodic step_N.pt checkpoints to keep (0 = all).")] = None,
    precision: Annotated[Optional[str], typer.Option(help="fp32, bf16, fp16 (with a dynamic loss scale) or auto (the fastest of the three here, timed at the start).")] = None,
    compile: Annotated[Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile the forward pass and loss: slower first steps, then faster ones.")] = None,
    seed: Annotated[Optional[int], typer.Option()] = None,
    init_from: Annotated[Optional[str], typer.Option(help="Start from the weights of this experiment (its best checkpoint) or checkpoint file; same tokenizer and model.")] = None,
    nproc: Annotated[Optional[int], typer.Option(help="Train in N processes on this machine (DDP via torchrun): one per GPU, or gloo on the CPU.")] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
) -> None:
    """Train the Transformer; resumes from the experiment's last checkpoint if there is one."""
    overrides = {"train.max_tokens": max_tokens, "train.max_steps": max_steps, "train.max_time": max_time,
                 "train.lr_peak": lr, "train.warmup_steps": warmup_steps, "train.update_freq": update_freq,
                 "train.clip_norm": clip_norm, "train.keep_last": keep_last, "train.precision": precision,
                 "train.compile": compile, "train.seed": seed}
    if nproc is not None and nproc < 1:
        raise ConfigError(f"--nproc {nproc}: expected at least 1")
    torchrun = int(os.environ.get("WORLD_SIZE", "1")) > 1  # this is one of torchrun's processes
    if nproc and nproc > 1 and torchrun:
        raise ConfigError("--nproc: this process was started by torchrun already; drop --nproc")
    if os.environ.get("RANK", "0") == "0":  # one voice under torchrun
        _warn_if_slow(precision, device)
    if nproc and nproc > 1:
        _launch_train(exp, recipe, overrides, sets, preset, nproc, init_from, threads, device)
        return
    group = None
    if torchrun:  # join the other processes
        from mt import distributed

        group = distributed.setup(device)
    try:
        summary = _train_here(exp, recipe, overrides, sets, preset, init_from, threads, device, group)
    finally:
        if group is not None:
            distributed.shutdown(group)
    if summary["stopped_by"] not in ("SIGINT", "SIGTERM", "signal"):  # train() said what a signal did
        log.info(
            f"stopped at step {summary['steps']} ({summary['stopped_by']}) after {summary['seconds']:.0f}s"
            + (f"; valid ppl {summary['valid_ppl']:.2f}" if "valid_ppl" in summary else "")
            + (f"; {summary['skipped']} updates skipped (non-finite)" if summary["skipped"] else "")
        )
    if torchrun:
        # Leave without the interpreter's teardown: destroying the process group's communication
        # threads there sometimes aborts a worker ("terminate called without an active exception").
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _train_here(exp, recipe, overrides, sets, preset, init_from, threads, device, group) -> dict:
    """This process's part: all of training, or one rank of torchrun's (rank 0 resolves the config)."""
    from mt.experiment import Experiment

    if group is None or group.is_main:
        _refuse_if_training(exp)
        experiment, cfg = _config(exp, recipe, overrides, sets, preset=preset)
    if group is not None:
        group.barrier()  # the other ranks read the config rank 0 has written
        if not group.is_main:
            log.quiet = True  # one voice: rank 0's
            experiment = Experiment(exp)
            cfg = experiment.load_config()
    from mt.train import train as run_train  # torch: imported after the flags are checked

    _threads(threads)
    with experiment.undo_if_new_fails():
        return run_train(experiment, cfg, device=device, init_from=init_from, group=group)


def _refuse_if_training(exp: Path) -> None:
    """A one-line error, before the config takes this run's flags, if another trainer holds the lock
    (train() takes the lock itself; this only spares the config and the workers a doomed start)."""
    from mt.experiment import Experiment

    if exp.is_dir():
        with Experiment(exp).training_lock():
            pass


def _launch_train(exp, recipe, overrides, sets, preset, nproc, init_from, threads, device) -> None:
    """`mt train --nproc N`: resolve and save the config here, then start N workers that read it."""
    from mt.distributed import launch

    _refuse_if_training(exp)
    experiment, _ = _config(exp, recipe, overrides, sets, preset=preset)
    args = ["train", "--exp", str(exp), "--device", device]
    args += ["--init-from", init_from] if init_from else []
    args += ["--threads", str(threads)] if threads else []
    args = (["-q"] if log.quiet else []) + (["--debug"] if _debug else []) + args
    signal_name = launch(nproc, args)
    if signal_name:
        log.info(f"{signal_name}: the training processes saved {experiment.checkpoint_path('last')}; "
                 f"run `mt train --exp {exp} --nproc {nproc}` again to resume")


@app.command(epilog=_examples("mt average --exp exp/de-en --last 5", "mt evaluate --exp exp/de-en --checkpoint average"))
def average(
    exp: Exp,
    last: Annotated[int, typer.Option(help="Average the last N periodic checkpoints (step_N.pt).")] = 5,
    output: Annotated[str, typer.Option(help="Name of the result under checkpoints/ (use it with --checkpoint).")] = "average",
) -> None:
    """Average the parameters of the last N periodic checkpoints into checkpoints/average.pt (Sec. 6.1)."""
    from mt.checkpoint import average_last
    from mt.experiment import Experiment

    path, used = average_last(Experiment(exp), last, output)
    log.info(f"averaged {', '.join(p.stem for p in used)} into {path}")


def _decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, max_tokens, stop=None) -> dict[str, Any]:
    return {"decode.beam": beam, "decode.alpha": alpha, "decode.length_penalty": length_penalty, "decode.stop": stop,
            "decode.max_len_a": max_len_a, "decode.max_len_b": max_len_b, "decode.max_tokens": max_tokens}


Beam = Annotated[Optional[int], typer.Option(help="Beam size (1 = greedy); default 4 as the paper.")]
Alpha = Annotated[Optional[float], typer.Option(help="Length penalty alpha; default 0.6 as the paper.")]
Penalty = Annotated[Optional[str], typer.Option(help="gnmt ((5+|Y|)/6)^alpha, length |Y|^alpha, or none.")]
Stop = Annotated[Optional[str], typer.Option(help="When beam search stops: exact (no live hypothesis can still win; default) or early (once beam hypotheses have finished, as fairseq and CTranslate2).")]
MaxLenA = Annotated[Optional[float], typer.Option(help="Max output length = a * source length + b.")]
MaxLenB = Annotated[Optional[int], typer.Option()]
DecodeTokens = Annotated[Optional[int], typer.Option("--batch-tokens", help="Source tokens per decoding batch.")]
Checkpoint = Annotated[Optional[str], typer.Option(help="best, last, average, step_N or a .pt file.")]


Checkpoints = Annotated[Optional[list[str]], typer.Option("--checkpoint", help="best, last, average, step_N or a .pt file; several = an ensemble.")]
Precision = Annotated[str, typer.Option(help="fp32, bf16 (CPU with AMX, GPU) or fp16 (GPU).")]
Quantize = Annotated[Optional[str], typer.Option(help="int8: dynamic int8 quantization of the linear layers (CPU).")]


@app.command(epilog=_examples('echo "Ein Satz." | mt translate --exp exp/de-en',
                              "mt translate --exp exp/de-en --input news.de --output news.en --beam 5 --checkpoint average"))
def translate(
    exp: Exp,
    input: Annotated[Optional[Path], typer.Option("--input", "-i", help="Read this file instead of stdin.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write this file instead of stdout.")] = None,
    force: Annotated[bool, typer.Option(help="Replace --output if it exists.")] = False,
    buffer: Annotated[int, typer.Option(help="Lines translated together; 1 translates each line as it arrives.")] = 256,
    checkpoint: Checkpoints = None,
    beam: Beam = None,
    alpha: Alpha = None,
    length_penalty: Penalty = None,
    stop: Stop = None,
    max_len_a: MaxLenA = None,
    max_len_b: MaxLenB = None,
    batch_tokens: DecodeTokens = None,
    nbest: Annotated[int, typer.Option(help="Write the K best: LINE<TAB>SCORE<TAB>TRANSLATION per line, K lines per input.")] = 0,
    scores: Annotated[bool, typer.Option(help="Write SCORE<TAB>TRANSLATION.")] = False,
    sample: Annotated[bool, typer.Option(help="Sample translations instead of searching (back-translation).")] = False,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    top_k: Annotated[int, typer.Option(help="Sample among the k most probable tokens (0 = all).")] = 0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling: the smallest set of tokens with this much probability.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 1,
    alignments: Annotated[bool, typer.Option(help="Append <TAB>ALIGNMENT to each output line: Pharaoh i-j pairs over whitespace-separated words (source word i, output word j, from 0), each output word aligned where its subwords attend most (head-averaged cross-attention).")] = False,
    alignment_layer: Annotated[Optional[int], typer.Option(help="Decoder layer (1 = first) for --alignments; default the last.")] = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads for torch.")] = 2,
    device: Device = "cpu",
) -> None:
    """Translate lines from stdin (or --input) to stdout (or --output), one output line per input line."""
    if alignment_layer is not None and not alignments:
        raise ConfigError("--alignment-layer goes with --alignments")
    if buffer < 1:
        raise ConfigError(f"--buffer {buffer}: must be at least 1")
    if nbest < 0 or (nbest and sample):
        raise ConfigError("--nbest must be positive and cannot be combined with --sample")
    if nbest and beam is not None and nbest > beam:
        raise ConfigError(f"--nbest {nbest}: must be at most --beam ({beam}): the n best come from the beam")
    # Written so that NaN fails too; the decode.* flags are checked with the config (mt.config.validate).
    if not temperature > 0:
        raise ConfigError(f"--temperature {temperature}: must be above 0")
    if top_k < 0:
        raise ConfigError(f"--top-k {top_k}: must be 0 (all tokens) or more")
    if not 0 < top_p <= 1:
        raise ConfigError(f"--top-p {top_p}: must be in (0, 1]")
    if output is not None and output.exists() and not force:
        raise MtError(f"{output}: exists; choose another --output or add --force")
    decode = _decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, batch_tokens, stop)
    experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
    if nbest > cfg.decode.beam:  # --beam not given: n-best lists come from a beam at least that wide
        cfg.decode.beam = nbest
    from mt.experiment import atomic_path
    from mt.translate import Sampling, Translator

    sampling = Sampling(temperature, top_k, top_p, seed) if sample else None
    source = _open_input(input)
    _threads(threads)
    translator = Translator(experiment, cfg, checkpoint, device, precision, quantize)
    _warn_if_slow(None if quantize else precision, device)  # (int8 takes the place of --precision)
    options = dict(nbest=nbest, scores=scores, sampling=sampling)
    if alignments:
        from mt.attention import check_layer

        options["alignment_layer"] = check_layer(translator.model, alignment_layer, "--alignment-layer")
    if output is None:
        def write(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        translator.stream(source, write, buffer, **options)
        return
    with atomic_path(output) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        translator.stream(source, lambda line: handle.write(line + "\n"), buffer, **options)


def _open_input(path: Path | None):
    """Lines of a file or of stdin, read as they arrive; invalid UTF-8 is an error naming the line."""
    if path is not None and not path.is_file():
        raise MtError(f"{path}: no such input file" + (" (it is a directory)" if path.is_dir() else ""))
    stream = open(path, "rb") if path is not None else sys.stdin.buffer
    name = str(path) if path is not None else "<stdin>"

    def lines():
        with stream:
            for number, raw in enumerate(iter(stream.readline, b""), start=1):
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise MtError(f"{name}:{number}: not valid UTF-8") from None
    return lines()


@app.command(epilog=_examples("mt evaluate --exp exp/de-en", "mt evaluate --hyp out.en --ref test.en --json"))
def evaluate(
    exp: Annotated[Optional[Path], typer.Option("--exp", "-e", help="Experiment to translate and score.", callback=_exp_dir)] = None,
    split: Annotated[str, typer.Option(help="test, valid or train.")] = "test",
    hyp: Annotated[Optional[Path], typer.Option(help="Score this file instead of translating (needs --ref).")] = None,
    ref: Annotated[Optional[Path], typer.Option(help="Reference translations, aligned with --hyp.")] = None,
    checkpoint: Checkpoints = None,
    beam: Beam = None,
    alpha: Alpha = None,
    length_penalty: Penalty = None,
    stop: Stop = None,
    max_len_a: MaxLenA = None,
    max_len_b: MaxLenB = None,
    batch_tokens: DecodeTokens = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the scores as one JSON object.")] = False,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads for torch.")] = 2,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    device: Device = "cpu",
) -> None:
    """BLEU and chrF (sacrebleu, detokenized) of an experiment's split, or of --hyp against --ref."""
    import json

    from mt import evaluate as ev

    if hyp is not None or ref is not None:
        if hyp is None or ref is None:
            raise ConfigError("--hyp and --ref go together")
        scores = ev.score(ev.read_lines(hyp), ev.read_lines(ref))
    else:
        if exp is None:
            raise ConfigError("give --exp (translate and score a split) or --hyp and --ref")
        if split not in ("train", "valid", "test"):
            raise ConfigError(f"--split {split!r}: expected train, valid or test")
        decode = _decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, batch_tokens, stop)
        experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
        _threads(threads)
        # (int8 takes the place of --precision; fp16 on the CPU is refused when the model loads)
        _warn_if_slow(None if quantize or precision == "fp16" else precision, device)
        scores = ev.evaluate_split(experiment, cfg, split, checkpoint, device, precision, quantize)
    if json_out:
        print(json.dumps(scores))
    else:
        print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}")
        print(scores["bleu_signature"])
        print(scores["chrf_signature"])


@app.command(epilog=_examples("mt run recipes/multi30k_en_de.yaml",
                              "mt run recipes/multi30k_en_de.yaml --exp exp/seed2 --set train.seed=2"))
def run(
    recipe: Annotated[Path, typer.Argument(help="Recipe file (YAML).")],
    exp: Annotated[Optional[Path], typer.Option("--exp", "-e", help="Experiment directory (default: the recipe's exp).", callback=_exp_dir)] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
) -> None:
    """Run a recipe's steps in order into its experiment, skipping steps already done."""
    from mt import config as cfglib
    from mt.run import run_recipe

    _threads(threads)
    run_recipe(recipe, exp, cfglib.parse_sets(sets), device=device, print_result=print, print_data=_print_data_table)


@app.command(epilog=_examples("mt info --exp exp/de-en", "mt info --exp exp/de-en --json"))
def info(
    exp: Exp,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """What the experiment holds: config, data, checkpoints, scores."""
    import json

    from mt.experiment import Experiment
    from mt.info import experiment_info

    summary = experiment_info(Experiment(exp))
    if json_out:
        print(json.dumps(summary, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, rows in summary.items():
        if not rows:
            continue
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("key", style="bold")
        table.add_column("value")
        for key, value in rows.items():
            table.add_row(str(key), str(value))
        console.print(table)


@app.command(epilog=_examples('mt attention --exp exp/en-de "A man in a blue shirt is riding a bike down the street."',
                              'mt attention --exp exp/en-de "Two dogs play in the snow." --format json --layer 1'))
def attention(
    exp: Exp,
    sentence: Annotated[str, typer.Argument(help="The source sentence to translate and look inside.")],
    output_dir: Annotated[Optional[Path], typer.Option(help="Where the files go (default: EXP/attention/).")] = None,
    layer: Annotated[Optional[int], typer.Option(help="Decoder layer (1 = first) whose heads and alignment are drawn; default the last.")] = None,
    encoder: Annotated[bool, typer.Option(help="Also draw the encoder self-attention of each layer.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="png: heatmaps; json: the raw weights (attention.json, cross_attention by layer, head, output token, source token); both.")] = "png",
    target: Annotated[Optional[str], typer.Option(help="Look at this translation (forced decoding) instead of the model's own.")] = None,
    force: Annotated[bool, typer.Option(help="Replace files already in --output-dir.")] = False,
    checkpoint: Checkpoint = None,
    beam: Beam = None,
    alpha: Alpha = None,
    length_penalty: Penalty = None,
    stop: Stop = None,
    max_len_a: MaxLenA = None,
    max_len_b: MaxLenB = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads for torch.")] = 2,
    device: Device = "cpu",
) -> None:
    """Translate one sentence and draw its attention: cross-attention (source x output tokens) per layer, per head, alignment."""
    decode = _decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, None, stop)
    experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
    from mt import attention as attn
    from mt.translate import Translator

    if fmt not in attn.FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(attn.FORMATS)}")
    _threads(threads)
    translator = Translator(experiment, cfg, checkpoint, device)
    index = attn.check_layer(translator.model, layer, "--layer")
    out_dir = output_dir if output_dir is not None else experiment.root / attn.ATTENTION_DIR
    maps, files = attn.attention(translator, sentence, out_dir, index, encoder, fmt, target, force)
    print(maps.translation)
    log.info(f"wrote {', '.join(path.name for path in files)} to {out_dir}")


@app.command(epilog=_examples("mt plot --exp exp/en-de", "mt plot --exp exp/en-de --exp exp/en-de-big -o compare.png"))
def plot(
    exp: Annotated[list[Path], typer.Option("--exp", "-e", help="Experiment directory; repeat to overlay several.", callback=_exp_dir)],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="PNG to write (default: curves.png in the first experiment).")] = None,
    force: Annotated[bool, typer.Option(help="Replace --output if it exists.")] = False,
) -> None:
    """Training and validation loss, perplexity, BLEU and learning rate against steps and wall time, as one PNG."""
    from mt.experiment import Experiment
    from mt.plot import plot as run_plot

    print(run_plot([Experiment(path) for path in exp], output, force))


@app.command(epilog=_examples("mt report --exp exp/en-de", "mt report --exp exp/en-de --samples 20 -o report.html"))
def report(
    exp: Exp,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="HTML file to write (default: EXP/report.html).")] = None,
    force: Annotated[bool, typer.Option(help="Replace --output if it exists.")] = False,
    samples: Annotated[int, typer.Option(help="Sample translations shown per split.")] = 10,
    sentence: Annotated[Optional[str], typer.Option(help="Sentence for the attention example (default: the first test sentence).")] = None,
    checkpoint: Checkpoint = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads for torch.")] = 2,
) -> None:
    """One self-contained HTML page: config, data, curves, scores, sample translations, an attention example."""
    from mt.experiment import Experiment
    from mt.report import report as run_report

    _threads(threads)
    print(run_report(Experiment(exp), output, force, samples, sentence, checkpoint))


def _count(n: int) -> str:
    """Exact below 100,000, then rounded (128k, 4.5M): keeps the data table within 80 columns."""
    if n < 100_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1e3:.0f}k"
    return f"{n / 1e6:.1f}M" if n < 1_000_000_000 else f"{n / 1e9:.1f}B"


def _print_data_table(stats: dict) -> None:
    """Pairs kept and dropped per split, tokens and mean lengths: fits 80 columns (WMT sizes too)."""
    from rich import box
    from rich.table import Table

    from mt.experiment import kept_text

    table = Table(title="binarized data: pairs kept, dropped (empty, too long), tokens, mean length",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("split", "pairs", "kept", "empty", "too long", "tokens src/tgt", "len src/tgt"):
        table.add_column(column, justify="left" if column == "split" else "right", no_wrap=True)
    for split, s in stats.get("splits", stats).items():
        if not isinstance(s, dict) or "kept" not in s:
            continue
        table.add_row(split, f"{s['pairs_in']:,}", kept_text(s), f"{s['dropped']['empty']:,}",
                      f"{s['dropped']['too_long']:,}", f"{_count(s['src_tokens'])}/{_count(s['tgt_tokens'])}",
                      f"{s['mean_src_len']:.1f}/{s['mean_tgt_len']:.1f}")
    log.console.print(table)


def entry_point() -> None:
    """`mt` and `python -m mt`: with tcmalloc where installed (the CPU training step does not slow as the
    heap ages; mt/runtime.py), then `main`. Callers inside a process of their own call `main`."""
    from mt.runtime import use_tcmalloc

    use_tcmalloc()
    main()


def main() -> None:
    """Console entry point: errors become one line on stderr and an exit code (1 input, 2 flags/config)."""
    from rich.markup import escape

    try:  # recent typer vendors click as typer._click; older typer uses click itself
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors

    def fail(message: str, code: int) -> None:
        log.console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        sys.exit(code)

    try:
        code = app(standalone_mode=False)
    except MtError as exc:
        if _debug or os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        fail(str(exc), exc.exit_code)
    except click_errors.NoArgsIsHelpError:
        sys.exit(2)  # typer has printed the help
    except click_errors.ClickException as exc:  # bad flags: click's message, on one line
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        fail(" ".join(exc.format_message().split()) + hint, exc.exit_code)
    except typer.Abort:
        log.console.print("aborted")
        sys.exit(1)
    except KeyboardInterrupt:
        log.console.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:  # `mt translate | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:  # disk full, permissions: not a bug in mt
        if _debug or os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc} (--debug shows where)", 1)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    entry_point()
