"""Documents through `mt serve`: LibreTranslate's POST /translate_file and GET /download_file/NAME, and
the formats GET /frontend/settings lists (`mt.apps.serve.app` wires them to HTTP).

An upload is read and checked by `mt.apps.serve.uploads` (its size, its format, its content). Its
format's module (`mt.documents`, any format registered in `FORMATS` whose library is installed) then
runs in a worker thread of this module's pool (--max-file-jobs threads; one more upload is refused
with 503 at once), never on the event loop; the units it asks are translated by `BatcherUnits`, in
that thread as far as sentences and markup go, their sentences searched by the server's one batcher
beside every other request's. The translation is kept in a private temporary directory for
--file-ttl seconds, at most --max-files at once (the oldest goes first), and all are removed when the
server stops. A client that leaves before its answer ends its document's work at its next batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import mimetypes
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from fastapi import Request
from fastapi.responses import StreamingResponse

from mt import log
from mt.apps.serve.languages import name_of
from mt.apps.serve.queue import QueueFull
from mt.apps.serve.requests import ApiError, check_key, field_key, header_key, key_matches
from mt.apps.serve.service import PART, PATIENCE, Service, disconnected, refusal
from mt.apps.serve.uploads import FORM_ROOM, MIN_PARTS, Upload, check_content, extensions, read_upload, url_name
from mt.decoding.options import DecodeOptions
from mt.documents.encoding import BOMS
from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.translate import translate_content
from mt.text.markup import Format, MarkupError, language_text
from mt.text.markup_translate import aligned, finish, plan
from mt.text.translate import join, pieces, target_language

MEDIA_TYPES = {  # where the system's mime.types has none, or another
    ".txt": "text/plain",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".srt": "application/x-subrip",
    ".vtt": "text/vtt",
    ".po": "text/x-gettext-translation",
    ".xlf": "application/xliff+xml",
    ".xliff": "application/xliff+xml",
    ".md": "text/markdown",
}
SAMPLE = 2000  # characters of a document that `source: auto` identifies, from its longest units
POLL = 0.1  # seconds between a worker thread's looks at whether its document was abandoned


@dataclass
class Kept:
    """A translated file kept for download: where it is, the name it is downloaded as, its media type
    and when it expires (time.monotonic)."""

    path: Path
    name: str
    media_type: str
    expires: float


class Results:
    """Translated files kept for `ttl` seconds in a private temporary directory, at most `most` at once
    (the oldest removed first), all removed at `close`. Called from the event loop and worker threads."""

    def __init__(self, ttl: float, most: int):
        self.ttl, self.most = ttl, most
        self.root = Path(tempfile.mkdtemp(prefix="mt-serve-files-"))  # mode 0700: this user's only
        self.kept: OrderedDict[str, Kept] = OrderedDict()  # by key, oldest first
        self.lock = threading.Lock()

    def put(self, name: str, data: bytes) -> str:
        """Keep `data`, downloaded as `name`; its key ("UUID.NAME", LibreTranslate's)."""
        key = f"{uuid.uuid4()}.{url_name(name)}"
        path = self.root / key
        path.write_bytes(data)
        with self.lock:
            self._sweep()
            while len(self.kept) >= self.most:
                self._drop(next(iter(self.kept)))
            self.kept[key] = Kept(path, name, media_type(name, data), time.monotonic() + self.ttl)
        return key

    def open(self, key: str) -> tuple[Kept, BinaryIO] | None:
        """The kept file of `key`, opened (it can then be read whole even if it expires meanwhile), or None."""
        with self.lock:
            self._sweep()
            kept = self.kept.get(key)
            return None if kept is None else (kept, kept.path.open("rb"))

    def sweep(self) -> None:
        with self.lock:
            self._sweep()

    def _sweep(self) -> None:
        now = time.monotonic()
        for key in [key for key, kept in self.kept.items() if kept.expires <= now]:
            self._drop(key)

    def _drop(self, key: str) -> None:
        self.kept.pop(key).path.unlink(missing_ok=True)

    def close(self) -> None:
        with self.lock:
            self.kept.clear()
            shutil.rmtree(self.root, ignore_errors=True)


def media_type(name: str, data: bytes) -> str:
    """The download's Content-Type: the extension's, with the charset of text that is UTF-8 (or
    UTF-16 or UTF-32 by its byte-order mark); text in a legacy encoding gets none (its reader guesses,
    as from a file), never utf-8."""
    suffix = Path(name).suffix.lower()
    kind = MEDIA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind.endswith("+xml"):
        marked = next((codec for bom, codec in BOMS if data.startswith(bom)), None)
        if marked is not None:
            kind += f"; charset={marked.split('-le')[0].split('-be')[0]}"
        else:
            try:
                data.decode("utf-8")
                kind += "; charset=utf-8"
            except UnicodeDecodeError:
                pass
    return kind


def disposition(name: str) -> str:
    """Content-Disposition for a download named `name`: an ASCII name for old clients, and the name
    itself (RFC 6266's filename*) for the others."""
    from urllib.parse import quote

    return f"attachment; filename=\"{url_name(name)}\"; filename*=UTF-8''{quote(name, safe='')}"


class Abandoned(Exception):
    """The document's request is gone (its client left, or the server is stopping): stop its work."""


class CountingUnits:
    """`Units` that translate nothing (each text comes back as it is) and count the characters asked:
    a document's budget, checked before any of it is searched. A request gone (`abandoned`) stops it at
    its next call."""

    def __init__(self, keep: bool = False, abandoned: threading.Event | None = None) -> None:
        self.chars, self.keep, self.abandoned = 0, keep, abandoned
        self.texts: list[str] = []  # with `keep` (`source: auto`), each unit's text

    def __call__(self, texts: list[str], fmt: Format = "text") -> list[str]:
        if self.abandoned is not None and self.abandoned.is_set():
            raise Abandoned
        found = [language_text(text, fmt) for text in texts if text.strip()]
        self.chars += sum(len(text) for text in found)  # (chars_to_translate's count)
        if self.keep:
            self.texts += [" ".join(text.split()) for text in found]
        return list(texts)

    def sample(self) -> str:
        """Up to SAMPLE characters of the document's longest units: its body, not the short attribute
        values, headers and titles a format may ask first."""
        picked, size = [], 0
        for text in sorted(self.texts, key=len, reverse=True):
            if size >= SAMPLE:
                break
            picked.append(text)
            size += len(text) + 1
        return " ".join(picked)[:SAMPLE]


def chars_to_translate(texts: list[str], fmt: Format) -> int:
    """The characters of `texts` that are text: a markup unit's (a page's inline styles and scripts,
    a .docx paragraph's markers are not translated), as --max-file-chars counts them."""
    return sum(len(language_text(text, fmt)) for text in texts if text.strip())


class InTarget(Exception):
    """`source: auto` found the document in its target language: it comes back as it is, as a text in
    its target does from /translate (LibreTranslate's identity translation)."""


class BatcherUnits:
    """`mt.documents.units.Units` for a format module running in a worker thread: each call's texts cut
    into sentences (or planned as markup) here, their sentences searched by the server's batcher in
    chunks of PART (at most a quarter of --max-queue), two in flight (so that one document neither
    fills the queue nor waits between chunks); a chunk that finds the queue full waits for room, up to
    PATIENCE seconds, as the other requests are refused at once. Within the file's budget of
    `max_chars` characters (413 before any is searched past it).
    With `identify` (`source: auto`), `identify_document` judges the document before it is searched
    (400 for a language the model cannot read). Blank texts come back as they are."""

    def __init__(self, service: Service, options: DecodeOptions, tag: int | None, max_chars: int, identify: bool):
        self.service, self.options, self.tag, self.max_chars = service, options, tag, max_chars
        self.identify, self.spent = identify, 0
        self.abandoned = threading.Event()
        self.sentences = self.tokens = 0  # searched for this document, for the request's log line

    def __call__(self, texts: list[str], fmt: Format = "text") -> list[str]:
        translator = self.service.translator
        todo = [i for i, text in enumerate(texts) if text.strip()]
        asked = [texts[i] for i in todo]
        self.spent += chars_to_translate(asked, fmt)
        if self.spent > self.max_chars:
            raise ApiError(
                413, f"file: {self.spent} characters to translate, more than --max-file-chars {self.max_chars}"
            )
        if fmt == "text":
            lines, plans, kept = pieces(translator, asked, self.options)  # kept: unreadable, copied
            target = target_language(translator, self.options)
            found = join(asked, plans, self.search(lines, self.options), kept, self.options, target)
        else:
            options = aligned(translator, self.options)
            try:
                planned = plan(translator, asked, fmt, options)
            except MarkupError as exc:
                raise DocumentError(str(exc).replace("input line", "unit")) from None
            found = finish(planned, self.search(planned.sources, options))
        out = list(texts)
        for i, hyps in zip(todo, found):
            out[i] = hyps[0][0]
        return out

    def identify_document(self, sample: str) -> None:
        """400 unless the document's sample (`CountingUnits.sample`) is in a language the model reads;
        InTarget where it is in the target already."""
        from mt.text.language import Unidentifiable

        self.identify = False
        if not sample.strip():
            return
        langs = self.service.langs
        try:
            found = langs.identifier.identify(sample, self.options.tgt_lang)
        except Unidentifiable as exc:
            raise ApiError(400, str(exc)) from None
        target = self.options.tgt_lang
        if target is not None and found.is_in(target):
            raise InTarget
        if found.foreign is not None:
            what = f"{found.script} script" if found.script else found.foreign
            raise ApiError(400, f"file: {what} is not supported: {found.message(langs.readable)}")

    def search(self, lines: list[str], options: DecodeOptions) -> list[list[tuple]]:
        """Each line's hypotheses (`Translator.search`'s), through the batcher (class docstring)."""
        todo, encoded, _ = self.service.translator.encode_lines(lines, tag=self.tag)
        options = replace(options, src_lang=None, tgt_lang=None)  # the tag says the direction
        found: list = []
        pending: deque[Future] = deque()
        chunk = max(1, min(PART, self.service.batcher.max_queue // 4))
        try:
            for start in range(0, len(encoded), chunk):
                pending.append(self._submit(encoded[start : start + chunk], options, pending, found))
                if len(pending) > 1:
                    found += self._wait(pending.popleft())
            while pending:
                found += self._wait(pending.popleft())
        finally:
            for future in pending:  # what is left when one failed or the client left: out of the queue
                future.cancel()
        self.sentences += len(encoded)
        self.tokens += sum(len(ids) for ids in encoded)
        empty = ("", 0.0) if options.alignment_layer is None else ("", 0.0, "")
        results = [[empty] for _ in lines]
        for i, hyps in zip(todo, found):
            results[i] = hyps
        return results

    def _submit(self, encoded: list[list[int]], options: DecodeOptions, pending: deque[Future], found: list) -> Future:
        """The chunk in the batcher's queue; while the queue is full, this document's chunk before it is
        waited for first, then room (class docstring)."""
        deadline = time.monotonic() + PATIENCE
        while True:
            if self.abandoned.is_set():
                raise Abandoned()
            try:
                return self.service.batcher.submit(encoded, options)
            except QueueFull as exc:
                if pending:
                    found += self._wait(pending.popleft())
                elif time.monotonic() < deadline:
                    time.sleep(POLL)
                else:
                    raise refusal(exc) from None
            except Exception as exc:
                raise refusal(exc) from None

    def _wait(self, future: Future) -> list:
        while True:
            if self.abandoned.is_set():
                future.cancel()
                raise Abandoned()
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                continue
            except concurrent.futures.CancelledError:
                raise Abandoned() from None
            except Exception as exc:
                raise refusal(exc, answered=True) from None


class Documents:
    """The work of /translate_file, /download_file and /frontend/settings over a `Service` (module
    docstring); `start` and `close` with the server."""

    def __init__(self, service: Service, limits):
        self.service, self.limits = service, limits
        self.results = Results(limits.file_ttl, limits.max_files)
        self.pool = ThreadPoolExecutor(limits.max_file_jobs, thread_name_prefix="mt-documents")
        # On the event loop: no lock. A translation holds one of `jobs`, taken once its upload is read
        # and its key checked; an upload being read holds the bytes it has sent of `receiving[keyed]`
        # (keyed when the server has a key and the request's header gives it), a budget of
        # --max-file-jobs whole uploads. So clients without the key, or slow to send, keep neither
        # documents from being translated nor keyed clients' uploads from being read; and a client that
        # starts uploads and stalls holds only what it sent (counted in uploads, four such shut out everyone).
        self.receiving = {True: 0, False: 0}
        self.budget = limits.max_file_jobs * (limits.max_file_bytes + FORM_ROOM)
        self.jobs = 0
        self.running: set[BatcherUnits] = set()
        self._sweeper: asyncio.Task | None = None

    def start(self) -> None:
        async def sweep() -> None:  # expired files leave the disk even when no one asks for files
            while True:
                await asyncio.sleep(min(self.limits.file_ttl, 60))
                await asyncio.to_thread(self.results.sweep)

        self._sweeper = asyncio.get_running_loop().create_task(sweep())

    def close(self) -> None:
        """Stop: the documents still in work are abandoned, and every kept file is removed."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for units in list(self.running):
            units.abandoned.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.results.close()

    async def translate_file(self, request: Request) -> dict[str, Any]:
        """POST /translate_file, as LibreTranslate answers it: {"translatedFileUrl": URL}."""
        self._check_room()  # before reading: a client is not made to send a file that would be refused
        service = self.service
        keyed = service.api_key is not None and key_matches(service.api_key, header_key(request))
        held = 0

        def hold(size: int) -> None:
            nonlocal held
            if self.receiving[keyed] + size > self.budget:
                raise ApiError(
                    503,
                    f"the server is receiving {self.receiving[keyed]:,} bytes of files, as many as "
                    f"--max-file-jobs x --max-file-bytes; retry in a second",
                    {"Retry-After": "1"},
                )
            self.receiving[keyed] += size
            held += size

        try:
            upload = await read_upload(request, self.limits.max_file_bytes, hold)
        finally:
            self.receiving[keyed] -= held
        check_key(service.api_key, field_key(upload.fields, header_key(request)), libre=True)
        source, target = service.libre_pair(upload.fields, same=True)
        same = source == target  # LibreTranslate's identity: the file as it is
        tag = None if same else service.directions.tag(source, target)  # libre_pair has checked it
        options = DecodeOptions(nbest=1, src_lang=source, tgt_lang=target).resolved(service.defaults)
        self._check_room()
        self.jobs += 1
        job: asyncio.Future | None = None
        try:
            units = BatcherUnits(service, options, tag, self.limits.max_file_chars, identify=source is None)
            job = asyncio.get_running_loop().run_in_executor(self.pool, self._translate, upload, units, target, same)
            key = await self._until_done(request, job, units)
            request.state.lines, request.state.tokens = units.sentences, units.tokens
            return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{key}"}
        finally:
            if job is None or job.done():
                self.jobs -= 1
            else:  # the client left: the slot is free once the thread has stopped
                job.add_done_callback(lambda _: self._job_done())

    def _job_done(self) -> None:
        self.jobs -= 1

    def _check_room(self) -> None:
        if self.jobs >= self.limits.max_file_jobs:
            raise ApiError(
                503,
                f"the server is translating {self.jobs} files (--max-file-jobs); retry in a second",
                {"Retry-After": "1"},
            )

    async def _until_done(self, request: Request, job: asyncio.Future, units: BatcherUnits) -> str:
        """The job's answer; 499 (logged) when the client leaves first, its work then abandoned."""
        self.running.add(units)
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when this task is cancelled (a server stopping)
            gone.cancel()
            self.running.discard(units)
            if not job.done():
                units.abandoned.set()
        if not job.done():
            raise ApiError(499, "the client closed the connection before its answer")
        try:
            return job.result()
        except Abandoned:
            raise ApiError(499, "the client closed the connection before its answer") from None

    def _translate(self, upload: Upload, units: BatcherUnits, target: str, same: bool = False) -> str:
        """In a worker thread: the upload checked, translated by its format's module (as it is when it is
        in the target already: `same`, or found so), and kept; its key."""
        name = upload.name
        try:
            parts = None if same else max(MIN_PARTS, 2 * units.max_chars)  # (one kept as it is: not read)
            check_content(upload.data, upload.fmt, name, self.limits.max_file_bytes, parts)
            if same:  # its source is its target (LibreTranslate's identity): the file as it is
                return self.results.put(name, upload.data)
            # Counted first, nothing searched: a format that asks twice (text, then markup) is refused
            # before its first units are translated, not after. Its warnings (an encoding guessed, a
            # footnote left) are the translation's to say, once.
            counted = CountingUnits(keep=units.identify, abandoned=units.abandoned)
            with log.muted():
                translate_content(upload.data, upload.fmt, counted, DocumentOptions(target))
            if units.abandoned.is_set():  # gone while it was counted: not read a second time
                raise Abandoned
            if counted.chars > units.max_chars:
                raise ApiError(
                    413, f"file: {counted.chars} characters to translate, more than --max-file-chars {units.max_chars}"
                )
            if units.identify:
                units.identify_document(counted.sample())
            translated = translate_content(upload.data, upload.fmt, units, DocumentOptions(target))
        except InTarget:  # found in its target by `source: auto`
            return self.results.put(name, upload.data)
        except (ApiError, Abandoned):
            raise
        except DocumentError as exc:
            raise ApiError(400, one_line(f"file: {name}: {exc}")) from None
        except MemoryError:
            raise
        except Exception as exc:  # the format's library refusing what it cannot read: the file's fault
            log.warn(one_line(f"/translate_file: {name}: {type(exc).__name__}: {exc}"))
            raise ApiError(
                400,
                one_line(f"file: {name}: not a {upload.fmt.name} document it can read ({type(exc).__name__}: {exc})"),
            ) from None
        return self.results.put(name, translated)

    async def download_file(self, filename: str) -> StreamingResponse:
        """GET /download_file/NAME: the translated file, as an attachment named as the upload was."""
        found = self.results.open(filename)
        if found is None:
            shown = filename if filename.isprintable() and len(filename) <= 300 else ascii(filename)[:300]
            raise ApiError(
                404,
                f"{shown}: no such file; a translated file is kept for {self.limits.file_ttl:g} seconds "
                f"(--file-ttl), the latest {self.limits.max_files} (--max-files)",
            )
        kept, handle = found
        size = os.fstat(handle.fileno()).st_size
        # Content-Type as a header: given as media_type, Starlette adds charset=utf-8 to a text type without one
        headers = {
            "Content-Disposition": disposition(kept.name),
            "Content-Length": str(size),
            "Content-Type": kept.media_type,
        }
        return StreamingResponse(read_chunks(handle), headers=headers)

    async def frontend_settings(self) -> dict[str, Any]:
        """GET /frontend/settings, LibreTranslate's: its page's limits, languages and file formats."""
        directions = self.service.directions
        source, target = directions.pairs[0]
        keyed = self.service.api_key is not None
        return {
            "charLimit": self.limits.max_chars,
            "frontendTimeout": 500,
            "apiKeys": keyed,
            "keyRequired": keyed,
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": extensions(),
            "maxBeam": self.limits.max_beam,  # mt's own: its page offers no more alternatives than --max-beam
            "maxLines": self.limits.max_lines,  # mt's own, as its page counts what a request may hold
            "maxFileBytes": self.limits.max_file_bytes,
            "language": {
                "source": {"code": source, "name": name_of(source)},
                "target": {"code": target, "name": name_of(target)},
            },
        }


def read_chunks(handle: BinaryIO, size: int = 1 << 16) -> Iterator[bytes]:
    """An open file's bytes in chunks, closed at the end (starlette reads it in its thread pool)."""
    with handle:
        while chunk := handle.read(size):
            yield chunk


def one_line(message: str) -> str:
    return " ".join(message.split())
