"""How `mt` ends: its exit code, and every failure as one `error:` line on stderr.

Exit codes like ruff's: 0 ok, 1 a failure the input caused, 2 bad flags or config; 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM), 141 the reader of stdout gone (SIGPIPE's, as `yes | head` ends `yes`). The traceback is printed only with --debug (or MT_DEBUG set).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator

import typer

from mt import log
from mt.errors import MtError

GLOBAL_FLAGS = ("-q", "--quiet", "--debug", "--no-debug")  # mt's own flags, taken after the subcommand too
INTERRUPTED = 130  # the shell's codes for SIGINT and SIGTERM
TERMINATED = 143
READER_GONE = 141  # SIGPIPE's: what a Unix tool whose stdout closed ends with


class Terminated(BaseException):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt: what is being written
    is cleaned up on the way out (an atomic file's temporary), where the signal's default would
    kill the process at once. Training and `mt serve` install handlers of their own while they run."""


class ReaderGone(BaseException):
    """stdout's reader left (`mt translate | head`): raised where results are written, past click, which
    ends an EPIPE it sees with 1, the code of a failure the input caused."""


@contextmanager
def reader_gone() -> Iterator[None]:
    """Around a write of results to stdout: its reader gone is ReaderGone (click would end it with 1)."""
    try:
        yield
    except BrokenPipeError:
        raise ReaderGone from None


def _terminated(signum, frame) -> None:
    raise Terminated


def global_flags_first(args: list[str]) -> list[str]:
    """The arguments with mt's global flags moved before the subcommand, so that `mt info --debug`
    means `mt --debug info` (no subcommand has a flag of these names); nothing after `--` moves."""
    end = args.index("--") if "--" in args else len(args)
    flags = [arg for arg in args[:end] if arg in GLOBAL_FLAGS]
    return flags + [arg for arg in args[:end] if arg not in GLOBAL_FLAGS] + args[end:]


def run(app: typer.Typer, debug: Callable[[], bool]) -> None:
    """Run the typer `app` on sys.argv: errors become one line on stderr and an exit code (sys.exit);
    `debug` says (once the flags are parsed) whether to print the traceback too."""
    from rich.markup import escape

    try:  # recent typer vendors click as typer._click; older typer uses click itself
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors  # type: ignore[no-redef]

    def fail(message: str, code: int) -> None:
        log.console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        sys.exit(code)

    signal.signal(signal.SIGTERM, _terminated)
    # A parent may start mt with SIGINT or SIGTERM blocked (its mask is inherited: a thread of a test
    # runner, of a pool's resource tracker): Ctrl-C then stayed pending, and mt ran to its end as if
    # nothing had been asked. Ignored signals (a background job's) stay ignored.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    # Results are UTF-8 whatever the locale, as --output files are (a latin-1 locale made a traceback of
    # the first character it lacks); messages keep the terminal's encoding, escaping what it lacks.
    for stream, options in ((sys.stdout, {"encoding": "utf-8"}), (sys.stderr, {"errors": "backslashreplace"})):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(**options)
    try:
        code = app(args=global_flags_first(sys.argv[1:]), standalone_mode=False)
    except MtError as exc:
        if debug() or os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        fail(str(exc), exc.exit_code)
    except click_errors.NoArgsIsHelpError as exc:  # bare `mt`, or a group without its command: the help
        exc.show()
        sys.exit(2)
    except click_errors.ClickException as exc:  # bad flags: click's message, on one line
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        fail(" ".join(exc.format_message().split()) + hint, exc.exit_code)
    except typer.Abort:
        log.console.print("aborted")
        sys.exit(1)
    except KeyboardInterrupt:  # outside a command (typer makes one inside a command exit code 130)
        code = INTERRUPTED
    except Terminated:
        log.console.print("terminated")
        sys.exit(TERMINATED)
    except (BrokenPipeError, ReaderGone):  # `mt translate | head`: the reader left; stop quietly, as `yes | head` stops
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(READER_GONE)  # (1 said the input was at fault)
    except ModuleNotFoundError as exc:  # an optional library a feature's own check missed: one line all the same
        if debug() or os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        fail(
            f"this needs the Python package that provides {exc.name!r}, which is not installed: pip install "
            "it, or the mt extra that lists it (pyproject.toml) (--debug shows where)",
            1,
        )
    except OSError as exc:  # disk full, permissions: not a bug in mt
        if debug() or os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc} (--debug shows where)", 1)
    if code == INTERRUPTED:
        log.console.print("interrupted")
    if isinstance(code, int) and code:
        sys.exit(code)
