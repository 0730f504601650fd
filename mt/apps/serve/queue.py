"""One queue and one worker: the sentences of concurrent requests translated in shared batches (`mt serve`).

Requests put their sentences (source ids, already cut to the model's positions: `Translator.encode_lines`)
into one bounded queue and wait on a future. One worker thread owns the Translator, so the model is
never touched from two threads at once. It takes the oldest sentence and waits up to `max_wait_ms`
for more that share its decoding options (or until `max_batch_tokens` source tokens of them are
waiting); not given, WAIT_MS where one worker searches, and not at all for CTranslate2's
side-by-side workers: a free one starts at once on what waits, and the next batch forms while it
runs (waiting cost one client a third of its throughput, docs/serving.md#measured). Then, with `batching="continuous"`, they start a continuous beam search
(`mt.search.continuous`): before each of its steps, sentences that arrived meanwhile with the same
options join it while their source tokens fit in `max_batch_tokens`, and each sentence goes back to
its request the step it finishes, so a batch never waits for its longest sentence. With "static"
(the default, and for ensembles, alignments and calls), the batch is translated as `mt translate`
translates, sorted by length and cut by padded size (`mt.data.batching.length_groups`), and answered when
all of it is done. On a 2-core CPU static was measured faster (docs/serving.md#measured): a decoder
step's cost there grows with its rows, so fuller steps buy nothing while joining costs copies.
Batches that CTranslate2 decodes (mt.decoding.engine) are handed to it from helper threads, as many
at once as it has side-by-side workers: a batch beside another is not re-balanced across the workers
(a batch cut in equal halves ends with its slower half, held up whenever the event loop takes that
half's core: docs/benchmarks.md, "Decoding speed"), a batch alone is; other work waits for them to finish.
Hands each request its own results, in its own order. Neither changes a translation: a sentence's
output does not depend on what it is searched with.
The worker should be the one thread that runs torch ops in parallel (`mt.apps.serve.app.serve` keeps the HTTP
thread at one torch thread): two OpenMP teams on two cores make every op of the search wait longer.

A full queue refuses a request at once (`QueueFull`: the server answers 503 with Retry-After). A batch
that fails answers each of its requests with the exception and the worker goes on with the next;
`close` lets the worker finish what is queued, then stops it. Should the worker thread itself die
(torch refusing its thread count, a BaseException out of a search), nothing would ever answer the
waiting futures: so the sentences it held and those queued fail at once with `WorkerFailed`, and so
does every later `submit` or `call`; `failure` says why.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

from mt import log
from mt.decoding.options import DecodeOptions

BATCHING = ("static", "continuous")
WAIT_MS = 10.0  # how long an idle worker waits for company, where max_wait_ms is not given (module docstring)


class QueueFull(Exception):
    """The queue cannot take a request's sentences now: the caller should retry later."""


class Closed(Exception):
    """The batcher is shutting down and takes no more work."""


class WorkerFailed(Exception):
    """The worker thread has died: no work will be done until the batcher (the server) is started anew."""


class _Request:
    """One caller's future and the results gathered for it so far."""

    def __init__(self, size: int):
        self.future: Future = Future()
        self.results: list[Any] = [None] * size
        self.remaining = size
        # A request's sentences may be in two batches that helper threads search side by side, and
        # `remaining -= 1` is a read and a write: two at once could both miss the last one.
        self._lock = threading.Lock()

    def deliver(self, index: int, value: Any) -> None:
        """One sentence's result; the future gets them all once the last has come."""
        self.results[index] = value
        with self._lock:
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            self.settle(self.results)

    def settle(self, value: Any) -> None:
        self._set(self.future.set_result, value)

    def fail(self, exc: BaseException) -> None:
        self._set(self.future.set_exception, exc)

    def _set(self, setter, value) -> None:
        try:  # the caller may have given up (a client that left cancels its future)
            setter(value)
        except InvalidStateError:
            pass


@dataclass
class _Entry:
    """A queued sentence of a request (or a call to run on the worker, `Batcher.call`)."""

    request: _Request
    index: int
    ids: list[int]
    options: DecodeOptions | None  # resolved (`DecodeOptions.resolved`): equal options, one batch
    arrived: float
    call: Callable | None = None

    @property
    def tokens(self) -> int:
        return len(self.ids) + 1  # with EOS, as the search sees it


class Batcher:
    """The queue and its worker thread over one Translator (module docstring); `start` before use."""

    def __init__(
        self,
        translator,
        max_batch_tokens: int = 4000,
        max_wait_ms: float | None = None,
        max_queue: int = 1024,
        threads: int | None = None,
        batching: str = "static",
    ):
        if batching not in BATCHING:
            raise ValueError(f"batching {batching!r}: expected {' or '.join(BATCHING)}")
        self.translator = translator
        self.batching = batching
        self.max_batch_tokens = max_batch_tokens
        # Given, the wait of every batch; else WAIT_MS for one worker, none for side-by-side workers.
        self.max_wait = (WAIT_MS if max_wait_ms is None else max_wait_ms) / 1000.0
        self.beside_wait = 0.0 if max_wait_ms is None else max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.threads = threads
        self.batches = 0  # batches (static) or searches (continuous) run, for /health
        self.widest = 0  # the most sentences searched together, for /health
        self.sentences = 0  # sentences searched, for /health: sentences / batches is the mean batch
        self.busy_seconds = 0.0  # the worker's time in searches and calls, for /health: its load
        self.failure: str | None = None  # why the worker thread died, once it has: for /health and every request
        self._queue: deque[_Entry] = deque()
        self.taken: list[_Entry] = []  # what the worker took from the queue for the work in hand
        # One lock, two conditions: the worker waits for work (`_cond`, notified by each request) or for a
        # helper to be free (`_freed`); one condition for both woke the waiting worker at every request
        # while CTranslate2's workers were all busy, for nothing, and took the event loop's time to do it.
        lock = threading.RLock()
        self._cond, self._freed = threading.Condition(lock), threading.Condition(lock)
        self._closing = False
        self.most_beside = 0  # the most batches CTranslate2 decoded at once, for /health
        self._beside = 0  # batches CTranslate2 is decoding on helper threads now
        self._busy_since = 0.0  # when the first of them started
        self._helpers: ThreadPoolExecutor | None = None
        self._thread = threading.Thread(target=self._work, name="mt-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, encoded: list[list[int]], options: DecodeOptions) -> Future:
        """Queue one request's sentences (`encode_lines` ids); its future gets, for each sentence in
        order, the hypotheses `Translator.search_encoded` gives. Raises QueueFull or Closed."""
        options = options.resolved(self.translator.decode_cfg)  # what it leaves unset: the experiment's
        request = _Request(len(encoded))
        if not encoded:
            request.future.set_result([])
            return request.future
        now = time.monotonic()
        self._put([_Entry(request, i, ids, options, now) for i, ids in enumerate(encoded)])
        return request.future

    def call(self, fn: Callable[[Any], Any]) -> Future:
        """Run fn(translator) on the worker, between batches, with the default decoding options (the
        attention of one sentence, say); its future gets what fn returns. Raises QueueFull or Closed."""
        request = _Request(1)
        self._put([_Entry(request, 0, [], None, time.monotonic(), call=fn)])
        return request.future

    def queued(self) -> int:
        """Sentences waiting now."""
        with self._cond:
            return len(self._queue)

    def stop_waiting(self) -> None:
        """Take no more work, and answer every request not yet answered with Closed now (a stopping
        server's 503 with Retry-After: it is out of time); a search under way ends unheard."""
        with self._cond:
            self._closing = True
            waiting, self._queue = [*self.taken, *self._queue], deque()
            self._cond.notify_all()
        for entry in waiting:
            entry.request.fail(Closed("the server is shutting down"))

    def close(self, timeout: float | None = None) -> None:
        """Take no more work; let the worker finish what is queued, and wait for it (up to `timeout` s)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _put(self, entries: list[_Entry]) -> None:
        with self._cond:
            if self.failure is not None:
                raise WorkerFailed(self.failure)
            if self._closing:
                raise Closed("the server is shutting down")
            # A request larger than the whole queue goes in when the queue is empty, or it never could.
            if self._queue and len(self._queue) + len(entries) > self.max_queue:
                self._drop_abandoned()  # clients gone while the worker was busy hold no place
                if self._queue and len(self._queue) + len(entries) > self.max_queue:
                    raise QueueFull(f"{len(self._queue)} sentences are waiting (--max-queue {self.max_queue})")
            self._queue.extend(entries)
            self._cond.notify()  # the worker, if it waits for work: nothing else waits on this

    # -- the worker thread ----------------------------------------------------------------------
    def _work(self) -> None:
        """The worker thread: the loop, and if anything ends it but `close`, every request failed at once."""
        try:
            self._loop()
        except BaseException as exc:  # the thread ends here either way; its callers must hear of it
            self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        """The worker has died: what it held and what waits get WorkerFailed now, later work at `_put`."""
        from rich.markup import escape

        message = " ".join(f"the translation worker stopped: {type(exc).__name__}: {exc}".split())  # one line
        with self._cond:  # first: nothing below may keep a request waiting
            self.failure = message
            orphans, self.taken, self._queue = [*self.taken, *self._queue], [], deque()
        for entry in orphans:  # each its own exception: each request raises it in its own task
            entry.request.fail(WorkerFailed(message))
        try:  # stderr may be gone (a closed pipe under a supervisor): the requests have their answer already
            log.console.print(
                f"[red]error:[/red] {escape(message)}; every request now fails (503) until mt serve "
                "is restarted (MT_DEBUG=1 shows where)",
                soft_wrap=True,
            )
            if os.environ.get("MT_DEBUG"):
                traceback.print_exception(exc)
        except Exception:
            pass

    def _loop(self) -> None:
        import torch

        from mt.hardware import set_threads

        set_threads(self.threads)  # in this thread too: OpenMP's thread count is per thread
        try:
            with torch.inference_mode():
                while True:
                    if self._beside:  # a free helper first: the next batch holds what arrives meanwhile
                        self._wait_beside(self.translator.engine.inter - 1)
                    if (batch := self._next_batch()) is None:
                        break
                    if (workers := self._engine_workers(batch[0])) > 1:
                        self._start_beside(batch, workers)
                        continue
                    self._wait_beside(0)
                    start = time.perf_counter()
                    if self._continuous(batch[0]):
                        self._run_continuous(batch)
                    else:
                        self._run(batch)
                    self.busy_seconds += time.perf_counter() - start
                    with self._cond:  # nothing runs beside: all taken (joiners too) is answered
                        self.taken = []
        finally:
            if self._helpers is not None:
                self._helpers.shutdown(wait=True)

    def _next_batch(self) -> list[_Entry] | None:
        """The next batch: the oldest entry and the others with its options, once enough tokens wait or
        its wait is over; None once closed with nothing left."""
        with self._cond:
            while True:  # again if what it waited with is gone (answered by stop_waiting or a failure)
                self._drop_abandoned()
                if not self._queue:
                    if self._closing:
                        return None
                    self._cond.wait()
                    continue
                first = self._queue[0]
                if first.call is not None:
                    self.taken.append(self._queue.popleft())
                    return self.taken[-1:]
                wait = self.beside_wait if self._engine_workers(first) > 1 else self.max_wait
                deadline = first.arrived + wait
                while not self._closing and self._waiting_tokens(first.options) < self.max_batch_tokens:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if batch := self._take(first.options):
                    return batch

    def _drop_abandoned(self) -> None:
        """Sentences of requests already answered (a failed batch, a client gone) need no search."""
        if any(entry.request.future.done() for entry in self._queue):
            self._queue = deque(entry for entry in self._queue if not entry.request.future.done())

    def _waiting_tokens(self, options: DecodeOptions) -> int:
        return sum(entry.tokens for entry in self._queue if entry.call is None and _same(entry.options, options))

    def _take(self, options: DecodeOptions, budget: int | None = None) -> list[_Entry]:
        """Entries with `options`, oldest first, up to `budget` (max_batch_tokens) source tokens, at
        least one unless a budget is given; the rest stay. With a budget (sentences joining a running
        search), one that does not fit and has waited max_wait stops the newer ones behind it, so that
        a long sentence is not passed over for ever by short ones: the search empties until it fits."""
        batch, rest, tokens = [], deque(), 0
        limit = self.max_batch_tokens if budget is None else budget
        now, blocked = time.monotonic(), False
        for entry in self._queue:
            same = entry.call is None and _same(entry.options, options)
            fits = (not batch and budget is None) or tokens + entry.tokens <= limit
            if same and fits and not blocked:
                batch.append(entry)
                tokens += entry.tokens
            else:
                blocked = blocked or (same and budget is not None and now - entry.arrived >= self.max_wait)
                rest.append(entry)
        self._queue = rest
        self.taken.extend(batch)
        return batch

    def _engine_workers(self, first: _Entry) -> int:
        """CTranslate2's side-by-side workers when it decodes this batch (module docstring), else 0."""
        from mt.decoding.engine import decodes

        engine = self.translator.engine
        if first.call is not None or engine is None or not decodes(self.translator, first.options):
            return 0
        return engine.inter

    def _start_beside(self, batch: list[_Entry], workers: int) -> None:
        """Hand `batch` to a helper thread of `workers`; the loop has waited for one to be free
        (`_loop`), and forms the next batch meanwhile, so it holds what arrived while the others ran."""
        if self._helpers is None:
            import torch

            # One torch thread each: CTranslate2 searches on threads of its own, and what torch runs here
            # (the alignment pass) runs beside the other helpers and the batcher's own threads; with an
            # OpenMP team each, libgomp counts more threads than cores and stops spinning between ops
            # (html through the server 1.35x faster at 1 and 8 clients on 2 cores; a lone batch of many
            # sentences on many cores aligns on one thread too). torch.get_num_threads() reports 1 from
            # then on in every thread (the count it reports is the last set anywhere; OpenMP's team is
            # per thread): the engine keeps the threads it was loaded for (mt.decoding.engine.load), and
            # mt's own search on the batcher's thread runs its batches as one worker on its own team.
            self._helpers = ThreadPoolExecutor(workers, "mt-engine", initializer=torch.set_num_threads, initargs=(1,))
        with self._cond:
            alone = self._beside == 0
            if alone:
                self._busy_since = time.perf_counter()
            self._beside += 1
            self.most_beside = max(self.most_beside, self._beside)
        try:
            started = self._helpers.submit(self._run_beside, batch, alone)
        except BaseException as exc:  # a broken pool (a helper's initializer failed): no helper will run it
            self._end_beside(batch, exc)
            return
        started.add_done_callback(lambda future: self._never_ran(batch, future))

    def _never_ran(self, batch: list[_Entry], future: Future) -> None:
        """A pool that breaks before a helper takes the batch fails its future instead of running it (a
        batch that ran has ended already: `_run_beside` raises nothing): it must end all the same, or
        the worker would wait for a free helper for ever."""
        failure = None if future.cancelled() else future.exception()
        if failure is not None:
            self._end_beside(batch, failure)

    def _run_beside(self, batch: list[_Entry], alone: bool) -> None:
        try:  # alone, its runs share CTranslate2's workers out; beside another, that one has a worker
            self._run(batch, split=alone)
        except BaseException as exc:  # as the worker's own death: every request hears of it
            self._end_beside(batch, exc)
        else:
            self._end_beside(batch)

    def _end_beside(self, batch: list[_Entry], failure: BaseException | None = None) -> None:
        """A batch a helper had is over: answered, or (`failure`) every request fails at once."""
        try:
            if failure is not None:
                self._fail_all(failure)
        finally:
            self._done(batch)
            with self._cond:
                self._beside -= 1
                if self._beside == 0:
                    self.busy_seconds += time.perf_counter() - self._busy_since
                self._freed.notify()

    def _wait_beside(self, most: int) -> None:
        """Until at most `most` batches are being decoded on helper threads."""
        with self._cond:
            while self._beside > most:
                self._freed.wait()

    def _done(self, batch: list[_Entry]) -> None:
        """The work of `batch` has answered all it took."""
        finished = {id(entry) for entry in batch}
        with self._cond:
            self.taken = [entry for entry in self.taken if id(entry) not in finished]

    def _continuous(self, first: _Entry) -> bool:
        from mt.decoding.engine import decodes
        from mt.model.transformer import Transformer

        # Beam 1 is greedy search, static: its score is the log-probability, as `mt translate` defines
        # it, where a continuous beam of one would divide by the length penalty.
        return (
            self.batching == "continuous"
            and first.call is None
            and first.options.alignment_layer is None
            and first.options.beam > 1
            and not first.options.no_repeat_ngram  # the repetition guard: static batches (mt.search.beam)
            and not first.options.shortlist  # a shortlist's candidates are a batch's: static batches
            and not decodes(self.translator, first.options)  # CTranslate2 decodes static batches
            and isinstance(self.translator.model, Transformer)
        )

    def _run_continuous(self, batch: list[_Entry]) -> None:
        """Search `batch` and whatever joins it (module docstring) until none is left; a failure goes to
        the requests of the sentences in the search, never further."""
        from mt.search.continuous import ContinuousBeamSearch

        options, translator = batch[0].options, self.translator
        search, joining = None, batch  # being added: answered with the error too if adding them fails
        try:
            search = ContinuousBeamSearch(
                translator.model,
                max(options.beam, options.nbest),
                options.alpha,
                options.length_penalty,
                options.max_len_a,
                options.max_len_b,
                options.nbest,
                options.stop,
            )
            search.add(translator.pad_sources([entry.ids for entry in batch]), batch)
            self.batches += 1
            self.sentences += len(batch)
            while search.active:
                self.widest = max(self.widest, search.active)
                search.remove(lambda entry: entry.request.future.done())  # their clients left, or failed
                finished = search.step()
                for entry, hyps in finished:
                    texts = translator.tgt_tok.decode([h.tokens for h in hyps])
                    entry.request.deliver(entry.index, [(text, h.score) for text, h in zip(texts, hyps)])
                if finished:  # answered requests leave `taken`: under steady traffic the search never empties
                    with self._cond:
                        self.taken = [entry for entry in self.taken if not entry.request.future.done()]
                joining = self._joining(options, sum(search.source_tokens))
                if joining:
                    search.add(translator.pad_sources([entry.ids for entry in joining]), joining)
                    self.sentences += len(joining)
        except Exception as exc:  # a request must never stop the worker: its callers get the error
            # Every sentence taken for this search: those still in it, those joining, and those it had
            # finished but not yet delivered (a failure inside a step, after they left its keys).
            # Nothing runs beside a continuous search, so `taken` is its batch and its joiners; a
            # request already answered ignores the failure.
            with self._cond:
                taken = [*self.taken, *joining]
            for entry in taken:
                entry.request.fail(exc)
            _warn_failed(f"a search of {len(batch)} sentences", exc)

    def _joining(self, options: DecodeOptions, tokens: int) -> list[_Entry]:
        """Waiting sentences with `options` that fit beside `tokens` source tokens in the search, unless
        the oldest waiting one needs other options and has waited its max_wait: then none, so that the
        search empties and the worker turns to it."""
        with self._cond:
            self._drop_abandoned()
            if not self._queue:
                return []
            first = self._queue[0]
            if (
                first.call is not None or not _same(first.options, options)
            ) and time.monotonic() - first.arrived >= self.max_wait:
                return []
            return self._take(options, self.max_batch_tokens - tokens)

    def _run(self, batch: list[_Entry], split: bool = True) -> None:
        """Translate one batch (or run one call); any failure goes to its requests, never further.
        `split` False: CTranslate2 does not re-balance it across its workers (another batch has one)."""
        try:
            if batch[0].call is not None:
                batch[0].request.settle(batch[0].call(self.translator))
                return
            with self._cond:  # helper threads count too
                self.widest = max(self.widest, len(batch))
                self.sentences += len(batch)
            # Searched in batches of the server's size, whatever the experiment's decode.max_tokens.
            options = replace(batch[0].options, max_tokens=self.max_batch_tokens)
            found = self.translator.search_encoded([entry.ids for entry in batch], options, split=split)
        except Exception as exc:  # a request must never stop the worker: its callers get the error
            for entry in batch:
                entry.request.fail(exc)
            _warn_failed(f"a batch of {len(batch)} sentences", exc)
            return
        finally:
            with self._cond:
                self.batches += 1
        for entry, hyps in zip(batch, found):
            entry.request.deliver(entry.index, hyps)


def _same(a: DecodeOptions | None, b: DecodeOptions | None) -> bool:
    """Whether two entries decode alike: the same object, as most are (the server makes each set of
    options once), or equal options (a dataclass's == compares every field)."""
    return a is b or a == b


def _warn_failed(what: str, exc: BaseException) -> None:
    """One warning line for a failed batch, its requests already answered: the exception's text is not
    rich markup (a path in brackets would raise), and a closed stderr must not stop the worker."""

    try:
        log.warn(" ".join(f"{what} failed: {type(exc).__name__}: {exc}".split()))
    except BaseException:  # noqa: BLE001 - rich's broken-pipe handling raises SystemExit
        pass
