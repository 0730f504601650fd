"""The `mt` command: the typer app, its global flags, and one subcommand per module of cli/.

Each subcommand parses its flags, calls the library (mt), and renders the result. Results go to
stdout; status, progress and errors to stderr. Exit codes: 0 ok, 1 a failure the input caused,
2 bad flags or config, 130 interrupted (cli/errors.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from mt import log

from . import (
    attention,
    average,
    backtranslate,
    binarize,
    distill,
    evaluate,
    export,
    info,
    plot,
    report,
    run,
    serve,
    shortlist,
    train,
    train_tokenizer,
    translate,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: it wraps long help at 80 columns where rich's tables cut it
    context_settings={"max_content_width": 120, "help_option_names": ["-h", "--help"]},
    help="Machine translation with the Transformer (Vaswani et al., 2017): "
    "train-tokenizer -> binarize -> train -> translate / evaluate, all in one experiment directory.",
)

# In the order `mt --help` lists them: the pipeline, then what goes around it.
for name, module, function in [
    ("train-tokenizer", train_tokenizer, train_tokenizer.train_tokenizer),
    ("binarize", binarize, binarize.binarize),
    ("train", train, train.train),
    ("average", average, average.average),
    ("shortlist", shortlist, shortlist.shortlist),
    ("export", export, export.export),
    ("distill", distill, distill.distill),
    ("backtranslate", backtranslate, backtranslate.backtranslate),
    ("translate", translate, translate.translate),
    ("evaluate", evaluate, evaluate.evaluate),
    ("run", run, run.run),
    ("info", info, info.info),
    ("attention", attention, attention.attention),
    ("plot", plot, plot.plot),
    ("report", report, report.report),
    ("serve", serve, serve.serve),
]:
    app.command(name, epilog=module.EXAMPLES)(function)


def _print_version(asked: bool) -> None:
    """--version: mt's and the versions a bug report needs, on stdout."""
    if asked:
        from importlib.metadata import version

        import torch

        from mt import __version__  # not version('mt'): right in a checkout that was never installed

        print(
            f"mt {__version__} (torch {torch.__version__}, sentencepiece {version('sentencepiece')}, "
            f"sacrebleu {version('sacrebleu')})"
        )
        raise typer.Exit()


@app.callback()
def _global(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No status lines or progress bars.")] = False,
    debug: Annotated[bool, typer.Option(help="Show the traceback of an error.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the versions of mt and torch, and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    log.quiet, log.debug = quiet, debug


def entry_point() -> None:
    """`mt` and `python -m mt`: with tcmalloc where installed (the CPU training step does not slow as the
    heap ages; mt/allocator.py), then `main`. Callers inside a process of their own call `main`."""
    from mt.allocator import use_tcmalloc

    use_tcmalloc()
    main()


def main() -> None:
    """Console entry point: errors become one line on stderr and an exit code (1 input, 2 flags/config)."""
    from .errors import run as run_app

    run_app(app, lambda: log.debug)


if __name__ == "__main__":
    entry_point()
