"""Searches in processes of their own (decode.parallel: processes): each process loads the model once
and searches whole batches on its share of the threads, as CTranslate2's inter_threads does.

Threads (`mt.search.parallel`) share one interpreter lock, and a small model's search is mostly the
Python between its short operations: two threads on two cores buy 1.06-1.16x, where two processes
of one thread each buy about 1.3x (docs/benchmarks.md, "Decoding speed"). A process costs its start
(importing torch, loading the checkpoint: about 2 s, the processes starting together) and a copy of
the model, so it pays on files, not on a line at a time: the processes start on the first search that
asks for them and serve every later one until the Translator is closed or the program ends.

Each batch goes to whichever process is free, as source ids with its resolved options, and comes back
as the search's hypotheses; a batch's translations are those of the same batch searched in this
process. A process that dies (killed, out of memory) fails the search with one line, not a hang; and
the processes end when the process that started them does, however it ends.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
import time
from typing import Any, Callable, Iterator

from mt.errors import MtError

START_SECONDS = 600  # the longest a process may take to load the model before it is given up on
STOP_SECONDS = 5.0  # how long `close` waits for the processes in all before it terminates them
PARENT_CHECK_SECONDS = 1.0  # how often an idle search process looks whether the process that started it lives


def _serve(load: Callable, load_args: dict[str, Any], threads: int, tasks, results) -> None:
    """A search process: load the Translator, then search each batch it is given until told to stop."""
    import torch

    from mt.hardware import set_threads

    set_threads(threads)
    expected = load_args.pop("expected_stats", None)
    try:
        translator = load(**load_args)
        if expected is not None and getattr(translator, "checkpoint_stats", expected) != expected:
            raise RuntimeError(  # training wrote it again: these would be other weights than the caller's
                f"{', '.join(map(str, translator.checkpoint_paths))}: saved again since the caller loaded it"
            )
    except BaseException as exc:
        results.put((None, None, f"loading the model failed: {type(exc).__name__}: {exc}"))
        return
    parent = multiprocessing.parent_process()
    with torch.inference_mode():
        while True:
            try:
                task = tasks.get(timeout=PARENT_CHECK_SECONDS)
            except queue.Empty:  # a parent killed (SIGKILL, SIGTERM) never says stop: its end is the sign
                if parent is not None and not parent.is_alive():
                    return
                continue
            if task is None:
                return
            key, sources, options, *rest = task  # rest: the shortlist vocabulary, where given
            try:
                vocab = rest[0] if rest else None
                found = translator.search_batch(translator.pad_sources(sources), options, vocab=vocab)
                results.put((key, found, None))
            except BaseException as exc:  # the caller raises it; this process goes on
                results.put((key, None, f"{type(exc).__name__}: {exc}"))


@contextlib.contextmanager
def _interrupts_to_this_process() -> Iterator[None]:
    """Processes started inside ignore SIGINT: Ctrl-C at a terminal reaches every process of its group,
    and a search process importing torch printed a traceback of its own for it. An ignored signal stays
    ignored through exec, so the children never see it; this process handles it (its search processes
    stop with it: `close`, or as daemons at its exit). Python sets signals from the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


class SearchProcesses:
    """`count` search processes over the model `load(**load_args)` gives, `threads` torch threads each."""

    def __init__(self, load: Callable, load_args: dict[str, Any], count: int, threads: int):
        context = multiprocessing.get_context("spawn")  # never fork a process that runs OpenMP's threads
        self.tasks, self.results = context.Queue(), context.Queue()
        self.count = count
        self.calls = 0  # `map`'s calls so far: each answer names its call, and an earlier one's is dropped
        # One call at a time: two threads' calls would each drop the other's answers as an earlier
        # call's, and both wait for ever. A second thread's call waits for the first to be read.
        self._lock = threading.Lock()
        self.processes = [
            context.Process(
                target=_serve, args=(load, load_args, threads, self.tasks, self.results), daemon=True, name="mt-search"
            )
            for _ in range(count)
        ]
        with _interrupts_to_this_process():
            for process in self.processes:
                process.start()

    def map(self, batches: list[tuple[Any, ...]]) -> Iterator[list]:
        """Each batch's hypotheses (`Translator.search_batch`), in order, the batches searched side by
        side: (source ids, resolved options), or with a third, the shortlist vocabulary of the group
        a batch is part of. Calls from several threads take turns."""
        with self._lock:
            self.calls += 1
            call = self.calls
            for index, batch in enumerate(batches):
                self.tasks.put(((call, index), *batch))
            done: dict[int, list] = {}
            answered = 0
            try:
                for index in range(len(batches)):
                    while index not in done:
                        key, found, error = self._next()
                        # An earlier call that failed or was left unread still had answers coming: not this one's
                        if key is not None and key[0] != call:
                            continue
                        if error is not None:
                            raise MtError(f"a search process failed: {error}")
                        done[key[1]] = found
                    answered += 1
                    yield done.pop(index)
            finally:
                if answered < len(batches):  # given up, or failed: what is still queued is this call's alone
                    self._drop_queued()

    def _next(self) -> tuple[Any, Any, str | None]:
        """The next answer of any process; MtError once one has died, instead of waiting for ever."""
        while True:
            try:
                return self.results.get(timeout=1.0)
            except queue.Empty:
                if not self.processes:  # closed meanwhile (`close`): no answer will come
                    raise MtError("the search processes were stopped (the Translator was closed)") from None
                dead = [p for p in self.processes if not p.is_alive()]
                if dead:
                    self.close()
                    raise MtError(
                        f"a search process stopped (exit code {dead[0].exitcode}); "
                        "decode.parallel: threads searches in this process"
                    ) from None

    def _drop_queued(self) -> None:
        """The batches no process has taken yet (best effort: the queue's feeder may still hold some)."""
        try:
            while True:
                self.tasks.get_nowait()
        except (queue.Empty, OSError, ValueError):
            pass

    def close_when_idle(self) -> None:
        """`close` once a call of another thread has had its answers (it failed, "the Translator was
        closed", when a thread asked for another count of processes meanwhile)."""
        with self._lock:
            self.close()

    def close(self) -> None:
        """Stop the processes: the batches still queued are dropped (a call given up, Ctrl-C), each
        finishes the one in hand; any still running after STOP_SECONDS in all is terminated."""
        self._drop_queued()
        for _ in self.processes:
            try:
                self.tasks.put(None)
            except (OSError, ValueError):
                break
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.terminate()
        self.processes = []
