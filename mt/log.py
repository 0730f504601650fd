"""Status output: everything here goes to stderr, so stdout carries results only."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

console = Console(stderr=True, highlight=False, emoji=False)  # ":x:" in a message is text, not an emoji
quiet = False  # set by the CLI's --quiet
debug = False  # set by the CLI's --debug: an error shows its traceback
_muted: ContextVar[bool] = ContextVar("mt_warnings_muted", default=False)  # per thread: `muted`


def info(message: str | Text) -> None:
    """One status line on stderr (silenced by --quiet). A string is plain text: it quotes paths and
    users' text, whose brackets rich would read as markup ("exp[v2]" lost its "[v2]"); styles come
    as a rich Text (`heading`)."""
    if not quiet:
        console.print(message, soft_wrap=True, markup=False)


def heading(title: str, rest: str = "") -> None:
    """A status line whose `title` is in bold (a step of `mt run`), then `rest` as plain text."""
    info(Text.assemble((title, "bold"), rest))


def line(text: str) -> None:
    """One plain line on stderr, no markup (silenced by --quiet): `mt serve`'s access log, where
    rich's print per request cost more than the request's own work on the event loop."""
    if not quiet:
        console.file.write(text + "\n")


def warn(message: str) -> None:
    """One warning line on stderr, its message as plain text: it quotes users' text and paths, whose
    brackets rich would read as markup (`[/b]` raised, `[music]` vanished)."""
    if not _muted.get():
        console.print(Text.assemble(("warning:", "yellow"), " ", message), soft_wrap=True)


@contextmanager
def muted() -> Iterator[None]:
    """This thread's warnings left unsaid: a pass over a document that the next pass repeats, warnings
    and all (`mt serve` counts a file's characters before it translates it); other threads still warn."""
    token = _muted.set(True)
    try:
        yield
    finally:
        _muted.reset(token)


def progress_enabled() -> bool:
    """Live bars only for a person watching: not with --quiet, not when stderr is a file or pipe."""
    return not quiet and sys.stderr.isatty()


def make_progress(*extra_columns) -> Progress:
    """A rich progress bar with ETA on stderr; disabled (no output) unless progress_enabled()."""
    return Progress(
        TextColumn("{task.description}", markup=False, style="bold"),  # (a split's name is the user's)
        BarColumn(),
        MofNCompleteColumn(),
        *extra_columns,
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not progress_enabled(),
        transient=False,
    )
