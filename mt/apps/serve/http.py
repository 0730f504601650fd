"""The HTTP side of `mt serve` under the app (mt.apps.serve.app): its access log, the plain routes of
the endpoints that read their own request, and uvicorn run with bounds on connections, a listening
socket bound before the model loads, and a stop that lets the requests in flight finish; and
Python's garbage collector set for a server."""

from __future__ import annotations

import contextlib
import errno
import gc
import inspect
import json
import re
import signal
import socket
import threading
import time

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from mt import log
from mt.errors import MtError


class AccessLog:
    """One log line a request: time, method, path, status, its lines and tokens (request.state, which
    the routes set), milliseconds. Plain ASGI: Starlette's @app.middleware("http") runs every request
    through a task group and a streaming response, a cost each one-sentence request paid."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            state = scope.get("state") or {}
            path = scope["path"] if scope["path"].isprintable() else ascii(scope["path"])
            log.line(
                f"{time.strftime('%H:%M:%S')} {scope['method']} {path} {status} "
                f"{state.get('lines', 0)} lines {state.get('tokens', 0)} tokens "
                f"{(time.perf_counter() - start) * 1000:.0f} ms"
            )


class PlainRoute(APIRoute):
    """A route whose endpoint reads the request itself (`endpoint(request)`) and returns JSON data or a
    Response: FastAPI's dependency solving and response validation, which such an endpoint has no use
    for, are left out (they were a third of the event loop's time on a one-sentence request); the
    route's OpenAPI schema stays as given. Under uvicorn (`uvicorn_config`), `PlainRoutes` calls these
    endpoints itself."""

    def get_route_handler(self):
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            return answer(await endpoint(request))

        return handler


def answer(result) -> Response:
    """A plain endpoint's result as the response it sends: a Response as it is, data as JSON."""
    return result if isinstance(result, Response) else JSONResponse(result)


class PlainRoutes:
    """ASGI in front of the app: a POST to a PlainRoute goes straight to its endpoint, whatever it
    raises answered by the app's own exception handler for it (looked up as Starlette does); anything
    else (other methods, other routes, the lifespan) goes to the app. The stack in between (FastAPI's
    and Starlette's middleware, router and request wrappers) cost the event loop as much as the rest of
    the HTTP path: on blank one-line requests, 0.32 ms of CPU an answer with it, 0.21 without
    (docs/benchmarks.md). A fault answered here is logged once (the handler's traceback), and the
    connection stays open."""

    def __init__(self, app):
        self.app, self.state = app, app.state
        self.endpoints: dict[str, object] = {}
        for route in app.routes:  # the first route of a path, as the router picks it
            if isinstance(route, PlainRoute) and "POST" in route.methods:
                self.endpoints.setdefault(route.path, route.endpoint)

    async def __call__(self, scope, receive, send) -> None:
        endpoint = self.endpoints.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        scope["app"] = self.app  # as Starlette sets it: request.app
        request, started = Request(scope, receive), False

        async def sending(message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await answer(await endpoint(request))(scope, receive, sending)
        except Exception as exc:
            if started:  # too late for another answer: uvicorn closes the connection
                raise
            response = await self._handled(request, exc)
            await response(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception) -> Response:
        """The app's answer to `exc`: its handler for the status of an HTTPException, else for the
        nearest class of `exc`, else for 500; a handler that is not a coroutine runs in a thread."""
        from starlette.concurrency import run_in_threadpool
        from starlette.exceptions import HTTPException

        handlers = self.app.exception_handlers
        handler = handlers.get(exc.status_code) if isinstance(exc, HTTPException) else None
        handler = handler or next((handlers[kind] for kind in type(exc).__mro__ if kind in handlers), None)
        handler = handler or handlers.get(500)
        if handler is None:
            raise exc
        if inspect.iscoroutinefunction(handler):
            return await handler(request, exc)
        return await run_in_threadpool(handler, request, exc)


class HeadAsGet:
    """HEAD answered as GET without the body, as LibreTranslate (Flask) answers it on every GET route:
    uptime checks and load balancers probe with HEAD. A route that takes no GET still says so (405)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


class MergedSlashes:
    """A path's repeated slashes read as one, as Flask (LibreTranslate) reads them: a client given
    `http://host:8000/` that joins "/translate" to it asks for `//translate` (was 404)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and "//" in path:
            merged = re.sub("/{2,}", "/", path)
            scope = {**scope, "path": merged, "raw_path": merged.encode("latin-1", "replace")}
        await self.app(scope, receive, send)


def cors(app):
    """Cross-origin requests allowed as LibreTranslate allows them (any origin, GET and POST, its
    headers; a preflight answered before the routes): its JavaScript client runs in a web page."""
    from starlette.middleware.cors import CORSMiddleware

    return CORSMiddleware(
        app,
        allow_origins=["*"],
        allow_methods=["GET", "POST"],
        allow_headers=["Authorization", "Content-Type", "X-API-Key"],  # mt's key header too (docs/serving.md)
        max_age=20 * 24 * 3600,
    )


def asgi(app):
    """What a server runs for an app of `build_app`: its plain routes called directly (`PlainRoutes`),
    a path's repeated slashes as one (`MergedSlashes`), HEAD as GET (`HeadAsGet`), cross-origin requests allowed (`cors`) and every request logged
    (`AccessLog`)."""
    return AccessLog(cors(HeadAsGet(MergedSlashes(PlainRoutes(app)))))


GRACE = 30  # seconds uvicorn lets the requests in flight finish after SIGTERM or Ctrl-C


def uvicorn_server(app):
    """A uvicorn Server for an app of `build_app`. On SIGTERM or Ctrl-C the requests in flight are
    translated for up to GRACE - 2 s; then every one not answered gets 503 with Retry-After, before
    uvicorn cancels what is left at GRACE (its answer would be a plain-text 500)."""
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            out_of_time = asyncio.get_running_loop().call_later(GRACE - 2, app.state.batcher.stop_waiting)
            try:
                await super().shutdown(sockets)
            finally:
                out_of_time.cancel()

    return Server(uvicorn_config(app))


def uvicorn_config(app):
    """uvicorn's settings for an app of `build_app`: its plain routes called directly and every request
    logged (`PlainRoutes`, `AccessLog`), its limits on connections (`guarded_protocol`), and
    a request still in flight GRACE seconds after SIGTERM is cut off, so that no client can hold a stop."""
    import uvicorn

    limits = app.state.limits
    return uvicorn.Config(
        asgi(app),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE,
        http=guarded_protocol(limits.max_connections, limits.read_timeout, url_limit(limits.max_chars)),
    )


MAX_HEAD_BYTES = 16384  # a request's headers, at most (h11's bound, which uvicorn kept before)
MAX_PIPELINED = 16  # requests a connection may queue behind the one being answered
MAX_BODY_SECONDS = 600  # how long a body may take in all, however steadily it arrives


def url_limit(max_chars: int) -> int:
    """The bytes a request's line may take: a body's bound (12 x --max-chars + 64 KiB), since
    LibreTranslate's clients (deep-translator) send every field in the query string, percent-encoded."""
    return max(MAX_HEAD_BYTES, 12 * max_chars + 65536)


def guarded_protocol(max_connections: int, read_timeout: float, max_url_bytes: int = MAX_HEAD_BYTES):
    """uvicorn's httptools protocol (a C parser: h11's, in Python, cost the event loop 0.40 ms a
    request against 0.29, docs/benchmarks.md "Decoding speed"), bounded against clients that
    connect and wait, or send more than a request: past `max_connections` open at once a new one is
    closed as it opens; a client that has not sent a whole head `read_timeout` seconds after
    connecting (or after its last answer), or sends nothing of its body for `read_timeout` seconds
    (or for MAX_BODY_SECONDS in all), is cut off (the app then logs 499); one that stops reading its
    answer (the socket's buffer full) for `read_timeout` seconds is cut off too, its unsent answer
    dropped; a request line over `max_url_bytes`, headers over MAX_HEAD_BYTES and more than
    MAX_PIPELINED requests queued on one connection (httptools parses a whole read: thousands of
    queued requests) get a 400 (JSON, as the app's) and the connection closed, however the bytes
    arrive. uvicorn bounds none of these, joins a URL read by read (time that grows with its square:
    here its pieces are joined once), and its close() waits for a write buffer to empty: abort() is
    what frees the connection."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedProtocol(HttpToolsProtocol):
        read_deadline = write_deadline = None
        head_bytes, in_body = 0, False  # bytes read since the last head ended; between a head and its end
        url_bytes = header_bytes = 0
        url_parts: list[bytes] = []
        refusal: str | None = None  # why the parser was stopped (a callback raised): the 400's message
        heard = body_started = 0.0  # when the body last sent bytes; when it began

        def data_received(self, data: bytes) -> None:
            if not self.in_body:  # a head not yet complete (with whatever follows it in this read)
                self.head_bytes += len(data)
            else:
                self.heard = self.loop.time()
            super().data_received(data)
            too_long = self.head_bytes > max_url_bytes + MAX_HEAD_BYTES  # a head of no line or header yet
            if not self.in_body and too_long and not self.transport.is_closing():
                self.send_400_response(f"request line and headers over {max_url_bytes + MAX_HEAD_BYTES} bytes")

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.url_parts, self.url_bytes, self.header_bytes = [], 0, 0

        def on_url(self, url: bytes) -> None:
            self.url_bytes += len(url)
            if self.url_bytes > max_url_bytes:  # raised through httptools: answered 400 (send_400_response)
                self.refusal = f"the request line is over {max_url_bytes} bytes"
                raise ValueError(self.refusal)
            self.url_parts.append(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self.header_bytes += len(name) + len(value) + 4
            if self.header_bytes > MAX_HEAD_BYTES:
                self.refusal = f"the request's headers are over {MAX_HEAD_BYTES} bytes"
                raise ValueError(self.refusal)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            if len(self.pipeline) >= MAX_PIPELINED:
                self.refusal = f"more than {MAX_PIPELINED} requests pipelined"
                raise ValueError(self.refusal)
            self.url = b"".join(self.url_parts)
            self.head_bytes, self.in_body = 0, True
            self.heard = self.body_started = self.loop.time()
            super().on_headers_complete()

        def send_400_response(self, msg: str) -> None:
            """uvicorn's 400 for HTTP that does not parse, or passes a bound above, as the app's errors
            are: one JSON object (LibreTranslate's clients read its `error`)."""
            body = json.dumps({"error": self.refusal or msg.rstrip(".")}).encode()
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body)]
            self.transport.write(b"".join([*head, b"connection: close\r\n\r\n", body]))
            self.transport.close()

        def on_message_complete(self) -> None:
            self.in_body = False
            super().on_message_complete()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.abort()
                return
            self._arm("read_deadline", self._read_deadline_passed)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm("read_deadline", self._read_deadline_passed)

        def pause_writing(self) -> None:  # the client is not taking the answer as fast as it is written
            super().pause_writing()
            self._arm("write_deadline", self.transport.abort)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel("write_deadline")

        def connection_lost(self, exc) -> None:
            self._cancel("read_deadline")
            self._cancel("write_deadline")
            super().connection_lost(exc)

        def _arm(self, name: str, callback) -> None:
            self._cancel(name)
            setattr(self, name, self.loop.call_later(read_timeout, callback))

        def _cancel(self, name: str) -> None:
            if getattr(self, name) is not None:
                getattr(self, name).cancel()
                setattr(self, name, None)

        def _read_deadline_passed(self) -> None:
            if self.in_body:  # a body is timed by its silences: a slow upload that keeps coming goes on
                now = self.loop.time()
                until = min(self.heard + read_timeout, self.body_started + max(MAX_BODY_SECONDS, read_timeout))
                if now < until:
                    self.read_deadline = self.loop.call_later(until - now, self._read_deadline_passed)
                    return
            if self.cycle is None or self.cycle.response_complete or self.cycle.more_body:  # not while answering
                self.transport.abort()

    return GuardedProtocol


COLLECTOR_THRESHOLDS = (50_000, 20, 20)  # Python's default: (700, 10, 10)


def tune_collector() -> None:
    """Python's cyclic garbage collector set for a server, once the model and the app are loaded:
    what exists by then moves out of its passes (`gc.freeze`: the model's, the libraries' and the
    app's objects, which live as long as the process), and a young-generation pass waits for 50,000
    net new objects instead of 700. A request makes thousands of short-lived objects, nearly all
    freed as soon as they are dropped; with the defaults the collector ran often, on the event loop,
    and its full passes walked the whole heap (docs/benchmarks.md: 1.06x the sentences served)."""
    gc.collect()  # first: what is garbage already is freed, not kept frozen for the process's life
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def allow_descriptors(count: int) -> None:
    """Raise this process's limit on open files to `count` where the hard limit allows (many
    systems start servers at 1,024), so that --max-connections is what bounds the connections."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        wanted = count if hard == resource.RLIM_INFINITY else min(count, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a taken port is one line naming the flags (port 0:
    a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        # a port in use: another port; an address not this machine's, or no address at all: another host
        hint = "choose another --port" if exc.errno == errno.EADDRINUSE else "give an address of this machine as --host"
        raise MtError(f"--host {host} --port {port}: {exc.strerror or exc}; {hint}") from None
    return sock


@contextlib.contextmanager
def signals_end_quietly():
    """uvicorn stops on SIGINT/SIGTERM, lets the requests in flight finish, then raises the signal
    again: ignored here, so a graceful stop exits 0 (a second Ctrl-C still forces the stop)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
