"""The `mt` command: one short function per subcommand that parses flags, calls `mt`, renders.

Results go to stdout; status, progress and errors to stderr. Exit codes: 0 ok, 1 a failure the
input caused, 2 bad flags or config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli import distill as distill_cli
from cli import export as export_cli
from cli import render
from cli import serve as serve_cli
from cli.options import (
    Alpha,
    Beam,
    Checkpoint,
    Checkpoints,
    DecodeTokens,
    Device,
    Exp,
    Force,
    MaxLenA,
    MaxLenB,
    Penalty,
    Precision,
    Quantize,
    Recipe,
    Sets,
    Stop,
    Threads,
    decode_overrides,
    examples,
    exp_dir,
)
from mt import log
from mt.config.sources import GRAMMAR
from mt.errors import ConfigError, MtError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: it wraps long help at 80 columns where rich's tables cut it
    context_settings={"max_content_width": 120},
    help="Machine translation with the Transformer (Vaswani et al., 2017): "
    "train-tokenizer -> binarize -> train -> translate / evaluate, all in one experiment directory.",
)

_debug = False


def _print_version(asked: bool) -> None:
    """--version: mt's and the versions a bug report needs, on stdout."""
    if asked:
        from importlib.metadata import version

        import torch

        print(f"mt {version('mt')} (torch {torch.__version__}, sentencepiece {version('sentencepiece')}, "
              f"sacrebleu {version('sacrebleu')})")
        raise typer.Exit()


@app.callback()
def _global(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No status lines or progress bars.")] = False,
    debug: Annotated[bool, typer.Option(help="Show the traceback of an error.")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the versions of mt and torch, and exit.",
                                          callback=_print_version, is_eager=True)] = False,
) -> None:
    global _debug
    log.quiet = quiet
    _debug = debug


# -- config plumbing ----------------------------------------------------------------------------
def _config(exp_dir: Path, recipe: Path | None, overrides: dict[str, Any], sets: list[str] | None,
            preset: str | None = None, persist: bool = True, existing: bool = False):
    """The experiment and its resolved config (see `mt.experiment_config`), and with `existing` False
    the change this command made to it."""
    from mt.experiment_config import open_experiment, read_experiment

    if existing:
        return read_experiment(exp_dir, overrides)
    return open_experiment(exp_dir, recipe, overrides, sets, preset, persist)


# -- subcommands --------------------------------------------------------------------------------
@app.command("train-tokenizer", epilog=examples(
    "mt train-tokenizer --exp exp/de-en --train files:corpus/train --valid files:corpus/valid "
    "--test files:corpus/test --src-lang de --tgt-lang en --vocab-size 8000",
    "mt train-tokenizer --exp exp/en-de --train hf:wmt14:de-en --train 'tsv:back.tsv.gz*0.5' "
    "--valid hf:wmt14:de-en --test hf:wmt14:de-en --src-lang en --tgt-lang de"))
def train_tokenizer_cmd(
    exp: Exp,
    recipe: Recipe = None,
    src_lang: Annotated[Optional[str], typer.Option(help="Source language code, e.g. de.")] = None,
    tgt_lang: Annotated[Optional[str], typer.Option(help="Target language code, e.g. en.")] = None,
    train: Annotated[Optional[list[str]], typer.Option(help=f"A training corpus, repeatable: {GRAMMAR}.")] = None,
    valid: Annotated[Optional[list[str]], typer.Option(help="A validation corpus, repeatable (same forms, no weight).")] = None,
    test: Annotated[Optional[list[str]], typer.Option(help="A test corpus, repeatable (same forms, no weight).")] = None,
    vocab_size: Annotated[Optional[int], typer.Option(help="SentencePiece vocabulary size.")] = None,
    model_type: Annotated[Optional[str], typer.Option(help="unigram or bpe.")] = None,
    separate_vocab: Annotated[bool, typer.Option(help="One vocabulary per side instead of a joint one.")] = False,
    sets: Sets = None,
) -> None:
    """Train the SentencePiece model on the training corpus (joint source+target by default)."""
    from mt.data.train_tokenizer import train_tokenizer

    overrides: dict[str, Any] = {"data.src_lang": src_lang, "data.tgt_lang": tgt_lang}
    for split, specs in (("train", train), ("valid", valid), ("test", test)):
        if specs:
            overrides[f"data.{split}"] = specs  # made absolute as they are resolved
    overrides.update({"tokenizer.vocab_size": vocab_size, "tokenizer.model_type": model_type})
    if separate_vocab:
        overrides["tokenizer.joint"] = False
    experiment, cfg, change = _config(exp, recipe, overrides, sets)
    with change.undo_if_fails():
        summary = train_tokenizer(experiment, cfg)
    sizes = ", ".join(f"{side} {size:,}" for side, size in summary["vocab_size"].items())
    log.info(f"tokenizer written to {experiment.tokenizer_dir}: vocabulary {sizes}; "
             f"{summary['sentences']['src']:,} training pairs; {summary['seconds']:.1f}s")


@app.command(epilog=examples("mt binarize --exp exp/de-en", "mt binarize --exp exp/de-en --workers 4 --train-segmentations 8"))
def binarize(exp: Exp, recipe: Recipe = None, max_len: Annotated[Optional[int], typer.Option(help="Drop pairs longer than this many tokens on a side.")] = None, sets: Sets = None,
             workers: Annotated[int, typer.Option(help="Processes that encode in parallel.")] = 2,
             train_segmentations: Annotated[Optional[int], typer.Option(help="Write each training pair N times: its best segmentation and N-1 sampled (subword regularization; tokenizer.sampling_alpha).")] = None) -> None:
    """Encode train/valid/test into memory-mapped token-id arrays; prints what was kept and dropped."""
    from mt.data.binarize import binarize as run_binarize

    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected at least 1")
    experiment, cfg, change = _config(exp, recipe, {"data.max_len": max_len, "tokenizer.train_segmentations": train_segmentations}, sets)
    with change.undo_if_fails():
        stats = run_binarize(experiment, cfg, workers=workers)
    render.print_data_table(stats)


@app.command(epilog=examples(
    "mt train --exp exp/de-en --preset small --max-time 2h",
    "mt train --exp exp/ft --preset small --init-from exp/pretrain --max-steps 2000 --lr 1e-4"))
def train(
    exp: Exp,
    recipe: Recipe = None,
    preset: Annotated[Optional[str], typer.Option(help="Model preset: base, big (the paper), small, tiny; student, student-tiny (deep encoder, shallow decoder: mt distill).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Tokens per batch (and process).")] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many updates.")] = None,
    max_time: Annotated[Optional[str], typer.Option(help="Stop after this much training time (90s, 12m, 2h) in all runs; 0 = no limit.")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="Peak learning rate (default: the paper's d^-0.5 * warmup^-0.5).")] = None,
    warmup_steps: Annotated[Optional[int], typer.Option(help="Linear warmup steps.")] = None,
    update_freq: Annotated[Optional[int], typer.Option(help="Batches per update: K times the batch size, same memory.")] = None,
    clip_norm: Annotated[Optional[float], typer.Option(help="Clip the gradient norm to this (0 = off, as the paper).")] = None,
    keep_last: Annotated[Optional[int], typer.Option(help="Periodic step_N.pt checkpoints to keep (0 = all).")] = None,
    precision: Annotated[Optional[str], typer.Option(help="fp32, bf16, fp16 (with a dynamic loss scale) or auto (the fastest of the three here, timed at the start).")] = None,
    compile: Annotated[Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile the forward pass and loss: for GPUs; on the CPU 0.86-0.89x after a minute of compiling (docs/training.md).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the initial weights, dropout and batch order; fixed once the first checkpoint is saved.")] = None,
    init_from: Annotated[Optional[str], typer.Option(help="Start from the weights of this experiment (its best checkpoint) or checkpoint file; same tokenizer and model.")] = None,
    nproc: Annotated[Optional[int], typer.Option(help="Train in N processes on this machine (DDP via torchrun): one per GPU, or gloo on the CPU.")] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
) -> None:
    """Train the Transformer; resumes from the experiment's last checkpoint if there is one."""
    from mt.training.launch import train_processes

    overrides = {"train.max_tokens": max_tokens, "train.max_steps": max_steps, "train.max_time": max_time,
                 "train.lr_peak": lr, "train.warmup_steps": warmup_steps, "train.update_freq": update_freq,
                 "train.clip_norm": clip_norm, "train.keep_last": keep_last, "train.precision": precision,
                 "train.compile": compile, "train.seed": seed}
    train_processes(exp, lambda: _config(exp, recipe, overrides, sets, preset=preset), nproc, init_from, threads,
                    device, precision, _debug)


@app.command(epilog=examples("mt average --exp exp/de-en --last 5", "mt evaluate --exp exp/de-en --checkpoint average"))
def average(
    exp: Exp,
    last: Annotated[int, typer.Option(help="Average the last N periodic checkpoints (step_N.pt).")] = 5,
    output: Annotated[str, typer.Option(help="Name of the result under checkpoints/ (use it with --checkpoint).")] = "average",
) -> None:
    """Average the parameters of the last N periodic checkpoints into checkpoints/average.pt (Sec. 6.1)."""
    from mt.experiment import Experiment
    from mt.training.average import average_last

    path, used = average_last(Experiment(exp), last, output)
    log.info(f"averaged {', '.join(p.stem for p in used)} into {path}")


app.command("export", epilog=export_cli.EPILOG)(export_cli.export)  # its flags live in cli/export.py
app.command("distill", epilog=distill_cli.EPILOG)(distill_cli.distill)  # and these in cli/distill.py


@app.command(epilog=examples('echo "Ein Satz." | mt translate --exp exp/de-en',
                              "mt translate --exp exp/de-en --input news.de --output news.en --beam 5 --checkpoint average"))
def translate(
    exp: Exp,
    input: Annotated[Optional[Path], typer.Option("--input", "-i", help="Read this file instead of stdin.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write this file instead of stdout.")] = None,
    force: Force = False,
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
    constraints: Annotated[bool, typer.Option(help="Each input line is SOURCE<TAB>PHRASE<TAB>...: every translation contains each target phrase (lexically constrained beam search).")] = False,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate lines from stdin (or --input) to stdout (or --output), one output line per input line.

    Input is raw text, one sentence per line: mt tokenizes and detokenizes."""
    from mt.alignment import check_layer
    from mt.hardware import set_threads, warn_if_slow
    from mt.translate import InferenceOptions, Sampling, Translator, input_lines

    _check_translate_flags(alignments, alignment_layer, buffer, nbest, sample, beam)
    if constraints and sample:
        raise ConfigError("--constraints needs beam search; it cannot be combined with --sample")
    sampling = Sampling(temperature, top_k, top_p, seed)  # checks the sampling flags, with --sample or not
    if not sample and sampling != Sampling():
        raise ConfigError("--temperature, --top-k, --top-p and --seed go with --sample")
    if sample and (beam is not None or alpha is not None):
        raise ConfigError("--beam and --alpha are for beam search; --sample draws one translation per line")
    if output is not None and output.exists() and not force:
        raise MtError(f"{output}: exists; choose another --output or add --force")
    decode = decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, batch_tokens, stop)
    experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
    source = input_lines(input)
    set_threads(threads)
    translator = Translator.load(experiment, cfg, InferenceOptions(checkpoint, device, precision, quantize))
    warn_if_slow(None if quantize else precision, device)  # (int8 takes the place of --precision)
    options = dict(nbest=nbest, scores=scores, sampling=sampling if sample else None, constraints=constraints)
    if alignments:
        options["alignment_layer"] = check_layer(translator.model, alignment_layer, "--alignment-layer")
    render.write_translations(translator, source, output, buffer, **options)


def _check_translate_flags(alignments, alignment_layer, buffer, nbest, sample, beam) -> None:
    """Flags of `mt translate` that go together, or not; the decode.* ones are checked with the config."""
    if alignment_layer is not None and not alignments:
        raise ConfigError("--alignment-layer goes with --alignments")
    if buffer < 1:
        raise ConfigError(f"--buffer {buffer}: must be at least 1")
    if nbest < 0 or (nbest and sample):
        raise ConfigError("--nbest must be positive and cannot be combined with --sample")
    if nbest and beam is not None and nbest > beam:
        raise ConfigError(f"--nbest {nbest}: must be at most --beam ({beam}): the n best come from the beam")


@app.command(epilog=examples("mt evaluate --exp exp/de-en", "mt evaluate --hyp out.en --ref test.en --json"))
def evaluate(
    exp: Annotated[Optional[Path], typer.Option("--exp", "-e", help="Experiment to translate and score.", callback=exp_dir)] = None,
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
    tokenized: Annotated[bool, typer.Option(help="BLEU on Moses-tokenized text (sacremoses), as the Multi30k papers "
                                                 "report it, instead of sacreBLEU; its own signature.")] = False,
    lowercase: Annotated[bool, typer.Option(help="With --tokenized: case-insensitive.")] = False,
    lang: Annotated[Optional[str], typer.Option(help="With --tokenized --hyp: the target language (Moses' rules).")] = None,
    threads: Threads = 2,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    device: Device = "cpu",
) -> None:
    """BLEU and chrF (sacrebleu, detokenized) of an experiment's split, or of --hyp against --ref."""
    from mt import evaluate as ev

    if (lowercase or lang) and not tokenized:
        raise ConfigError(f"{'--lowercase' if lowercase else '--lang'} goes with --tokenized (sacreBLEU is scored as it comes)")
    if hyp is not None or ref is not None:
        if hyp is None or ref is None:
            raise ConfigError("--hyp and --ref go together")
        if tokenized and not lang:
            raise ConfigError("--tokenized with --hyp needs --lang, the target language (for Moses' tokenization rules)")
        if exp is not None:
            raise ConfigError("--exp translates a split; --hyp and --ref score two files as they are: give one or the other")
        hyps, refs = ev.read_lines(hyp), ev.read_lines(ref)
        if len(hyps) != len(refs):
            raise MtError(f"--hyp {hyp} has {len(hyps)} lines but --ref {ref} has {len(refs)}: they must pair up line by line")
        scores = ev.score_tokenized(hyps, refs, lang, lowercase) if tokenized else ev.score(hyps, refs)
    else:
        if exp is None:
            raise ConfigError("give --exp (translate and score a split) or --hyp and --ref")
        if split not in ("train", "valid", "test"):
            raise ConfigError(f"--split {split!r}: expected train, valid or test")
        decode = decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, batch_tokens, stop)
        experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
        from mt.hardware import set_threads, warn_if_slow
        from mt.translate import InferenceOptions

        set_threads(threads)
        # (int8 takes the place of --precision; fp16 on the CPU is refused when the model loads)
        warn_if_slow(None if quantize or precision == "fp16" else precision, device)
        scores = ev.evaluate_split(experiment, cfg, split, InferenceOptions(checkpoint, device, precision, quantize),
                                   tokenized=tokenized, lowercase=lowercase)
    render.print_scores(scores, json_out)


@app.command(epilog=examples("mt run recipes/multi30k_en_de.yaml",
                              "mt run recipes/multi30k_en_de.yaml --exp exp/seed2 --set train.seed=2",
                              "mt run recipes/multi30k_en_de.yaml --dry-run"))
def run(
    recipe: Annotated[Path, typer.Argument(help="Recipe file (YAML).")],
    exp: Annotated[Optional[Path], typer.Option("--exp", "-e", help="Experiment directory (default: the recipe's exp).", callback=exp_dir)] = None,
    sets: Sets = None,
    threads: Threads = None,
    device: Device = "cpu",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved config (stdout) and which steps are done, write nothing.")] = False,
) -> None:
    """Run a recipe's steps in order into its experiment, skipping steps already done."""
    from mt.config.resolve import parse_sets
    from mt.hardware import set_threads
    from mt.run import run_recipe

    set_threads(threads)
    run_recipe(recipe, exp, parse_sets(sets), device=device, print_result=print, print_data=render.print_data_table,
               dry_run=dry_run)


@app.command(epilog=examples("mt info --exp exp/de-en", "mt info --exp exp/de-en --json"))
def info(
    exp: Exp,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: the full config, data statistics, checkpoint sizes, training progress and the saved scores, as numbers.")] = False,
) -> None:
    """What the experiment holds: config, data, checkpoints, scores."""
    from mt.experiment import Experiment
    from mt.report.info import experiment_info, experiment_record

    if json_out:
        print(json.dumps(experiment_record(Experiment(exp))))
    else:
        render.print_sections(experiment_info(Experiment(exp)))


@app.command(epilog=examples('mt attention --exp exp/en-de "A man in a blue shirt is riding a bike down the street."',
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
    threads: Threads = 2,
    device: Device = "cpu",
) -> None:
    """Translate one sentence and draw its attention: cross-attention (source x output tokens) per layer, per head, alignment."""
    decode = decode_overrides(beam, alpha, length_penalty, max_len_a, max_len_b, None, stop)
    experiment, cfg = _config(exp, None, decode, None, persist=False, existing=True)
    from mt.alignment import check_layer
    from mt.hardware import set_threads
    from mt.report import attention_maps as attn
    from mt.translate import InferenceOptions, Translator

    if fmt not in attn.FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(attn.FORMATS)}")
    set_threads(threads)
    translator = Translator.load(experiment, cfg, InferenceOptions(checkpoint, device))
    index = check_layer(translator.model, layer, "--layer")
    out_dir = output_dir if output_dir is not None else experiment.attention_dir
    maps, files = attn.attention(translator, sentence, out_dir, index, encoder, fmt, target, force)
    print(maps.translation)
    log.info(f"wrote {', '.join(path.name for path in files)} to {out_dir}")


@app.command(epilog=examples("mt plot --exp exp/en-de", "mt plot --exp exp/en-de --exp exp/en-de-big -o compare.png"))
def plot(
    exp: Annotated[list[Path], typer.Option("--exp", "-e", help="Experiment directory; repeat to overlay several.", callback=exp_dir)],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="PNG to write (default: curves.png in the first experiment).")] = None,
    force: Force = False,
) -> None:
    """Training and validation loss, perplexity, BLEU and learning rate against steps and wall time, as one PNG."""
    from mt.experiment import Experiment
    from mt.report.plot import plot as run_plot

    print(run_plot([Experiment(path) for path in exp], output, force))


@app.command(epilog=examples("mt report --exp exp/en-de", "mt report --exp exp/en-de --samples 20 -o report.html"))
def report(
    exp: Exp,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="HTML file to write (default: EXP/report.html).")] = None,
    force: Force = False,
    samples: Annotated[int, typer.Option(help="Sample translations shown per split.")] = 10,
    sentence: Annotated[Optional[str], typer.Option(help="Sentence for the attention example (default: the first test sentence).")] = None,
    checkpoint: Checkpoint = None,
    threads: Threads = 2,
) -> None:
    """One self-contained HTML page: config, data, curves, scores, sample translations, an attention example."""
    from mt.experiment import Experiment
    from mt.hardware import set_threads
    from mt.report.page import report as run_report

    set_threads(threads)
    print(run_report(Experiment(exp), output, force, samples, sentence, checkpoint))


app.command("serve", epilog=serve_cli.EXAMPLES)(serve_cli.serve)  # its flags live in cli/serve.py


def entry_point() -> None:
    """`mt` and `python -m mt`: with tcmalloc where installed (the CPU training step does not slow as the
    heap ages; mt/hardware.py), then `main`. Callers inside a process of their own call `main`."""
    from mt.allocator import use_tcmalloc

    use_tcmalloc()
    main()


def main() -> None:
    """Console entry point: errors become one line on stderr and an exit code (1 input, 2 flags/config)."""
    from cli.errors import run

    run(app, lambda: _debug)


if __name__ == "__main__":
    entry_point()
