"""`mt serve`: the Translator behind HTTP, speaking LibreTranslate's API, with mt's own under /v1.

Routes (docs/serving.md gives examples with curl):
- POST /translate: LibreTranslate's. JSON, a form (its Python client posts forms) or the query string
  (deep-translator's), as LibreTranslate reads them: {"q": str | [str],
  "source": SRC | "auto", "target": TGT, "format": "text" | "html", "alternatives": N, "api_key": KEY} ->
  {"translatedText": str | [str]} and, as asked, "alternatives" (a list of strings for a string q, a
  list of lists for a list q) and, for source auto, "detectedLanguage" ({"confidence": 0-100, "language":
  SRC}, or a list of them: each text identified among the model's sources; 400 for one it cannot read). Errors as LibreTranslate gives them: {"error": "..."} with 400 (bad request, limits), 403
  (API key), 500, 503 (queue full, with Retry-After).
- GET /languages: [{"code": LANG, "name": ..., "targets": [TGT]}]: every language the model knows, both
  sides of its pairs, each with the targets it reaches (a target it cannot read from: []).
- POST /detect: LibreTranslate's, fields as /translate reads them: {"q": str, "api_key": KEY} ->
  [{"confidence": 0-100, "language": SRC}], the model's source languages likeliest first
  (mt.apps.serve.languages, mt.text.language); all 0 for a language the model cannot read.
- GET /health: {"status": "ok", ...}; 503 with {"error": ...} once the batcher's worker has died.
- POST /v1/translate: {"text": str | [str], "beam", "alpha", "length_penalty", "nbest", "alignments"}
  -> {"translations": [{"text", "score", "nbest": [{"text", "score"}] (nbest > 1), "alignment"
  (alignments)}], "warnings": [...]}, one translation per text item; SCORE as in `mt translate`.
- POST /v1/attention: {"text": str, "translation": str (forced; default the model's), "layer": L, "encoder": bool} -> for one sentence the JSON that
  `mt attention --format json` writes (`AttentionMaps.to_json`): source, translation, src_tokens and
  tgt_tokens (subword pieces, "</s>" last), cross_attention [layer][head][output token][source token],
  alignment_layer (1-based), alignment ([source token, output token] pairs), alignment_words (Pharaoh
  i-j over words), encoder_self_attention (with "encoder"); plus "warnings".
- POST /translate_file: LibreTranslate's, a multipart form: `file` (a document of a format of
  mt.documents, by its extension), `source`, `target`, `api_key` -> {"translatedFileUrl": URL};
  GET /download_file/UUID.NAME: the translated document; GET /frontend/settings: LibreTranslate's page
  settings with the file formats (mt.apps.serve.files; the upload's checks: mt.apps.serve.uploads).
- GET /: the page (mt/apps/serve/page.html).
/v1 answers bad JSON or fields (a wrong type too: "4" or 4.5 for a whole number) with 422 naming the
field, an unknown language pair with 400, a request over --max-chars or --max-lines with 413, invalid
UTF-8 with 400. All errors are {"error": ...}, starlette's own (404: no such route, 405: another
method) too. Every sentence goes through one `mt.apps.serve.queue.Batcher`: one queue, one worker, shared
batches; should the worker die, every request gets 503 at once (never a wait that does not end).
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from rich.markup import escape
from rich.text import Text
from starlette.exceptions import HTTPException

from mt import log
from mt.apps.serve import openapi
from mt.apps.serve.files import Documents
from mt.apps.serve.http import PlainRoute, allow_descriptors, bind, signals_end_quietly, tune_collector, uvicorn_server
from mt.apps.serve.queue import Batcher
from mt.apps.serve.requests import ApiError
from mt.apps.serve.service import Service
from mt.apps.serve.uploads import extensions
from mt.decoding.alignment import check_layer
from mt.errors import ConfigError

PAGE = Path(__file__).with_name("page.html")


@dataclass
class Limits:
    """How the queue batches and what one request may ask (the flags of `mt serve`)."""

    max_batch_tokens: int = 2000  # source tokens (with EOS) per batch, as decode.max_tokens
    # How long the oldest waiting sentence waits for others to share its batch; None: 10 ms for one
    # worker (mt's search), none for CTranslate2's side-by-side workers (mt.apps.serve.queue).
    max_wait_ms: float | None = None
    max_queue: int = 1024  # sentences waiting; a request that does not fit gets 503
    max_chars: int = 20000  # characters per request
    max_lines: int = 2000  # lines with text per request (a pasted document: sent to the batcher in parts)
    max_beam: int = 8
    batching: str = "static"  # mt.apps.serve.queue: each batch searched to its end, or sentences join a running search
    max_attention_tokens: int = 200  # source tokens /v1/attention draws: its answer grows with their square
    max_connections: int = 512  # open at once; one more is closed as it opens (each holds a file descriptor)
    read_timeout: float = 30.0  # seconds to send a request's head (after connecting or an answer); a body's pauses
    max_file_bytes: int = 10_000_000  # an uploaded document's bytes (/translate_file); refused while it is read
    max_file_chars: int = 200_000  # characters a document may ask to translate (about 2,000 sentences)
    file_ttl: float = 1800.0  # seconds a translated document is kept for download, as LibreTranslate keeps them
    max_files: int = 100  # translated documents kept at once; the oldest goes first
    max_file_jobs: int = (
        4  # documents translated at once, and whole files' bytes uploads being read hold (files.Documents)
    )

    def __post_init__(self) -> None:
        from mt.apps.serve.queue import BATCHING

        if self.batching not in BATCHING:
            raise ConfigError(f"--batching {self.batching}: expected {' or '.join(BATCHING)}")
        for name in (
            "max_batch_tokens",
            "max_queue",
            "max_chars",
            "max_lines",
            "max_beam",
            "max_attention_tokens",
            "max_connections",
            "max_file_bytes",
            "max_file_chars",
            "max_files",
            "max_file_jobs",
        ):
            if getattr(self, name) < 1:
                flag = (
                    "--max-tokens" if name == "max_batch_tokens" else f"--{name.replace('_', '-')}"
                )  # its flag's name
                raise ConfigError(f"{flag} {getattr(self, name)}: must be at least 1")
        if self.max_wait_ms is not None and not 0 <= self.max_wait_ms <= 60_000:  # NaN fails too; days: a typo
            raise ConfigError(f"--max-wait-ms {self.max_wait_ms}: must be from 0 to 60000 (a minute)")
        if not 0 < self.read_timeout <= 3600:
            raise ConfigError(f"--read-timeout {self.read_timeout}: must be more than 0 and at most 3600 seconds")
        if not 0 < self.file_ttl <= 7 * 24 * 3600:
            raise ConfigError(f"--file-ttl {self.file_ttl}: must be more than 0 and at most 604800 seconds (a week)")


def build_app(
    translator,
    limits: Limits | None = None,
    api_key: str | None = None,
    threads: int | None = None,
    checkpoint: str = "",
):
    """The FastAPI app over `translator` (module docstring), for the directions it translates; its
    batcher runs while the app does."""
    limits = limits or Limits()
    batcher = Batcher(
        translator, limits.max_batch_tokens, limits.max_wait_ms, limits.max_queue, threads, limits.batching
    )
    service = Service(translator, batcher, limits, api_key, checkpoint)
    documents = Documents(service, limits)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher.start()
        documents.start()
        try:
            yield
        finally:  # uvicorn has let the requests in flight finish
            await asyncio.to_thread(documents.close)  # the kept files are removed
            await asyncio.to_thread(batcher.close)

    app = FastAPI(
        title="mt", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url="/openapi.json"
    )
    app.state.batcher, app.state.limits, app.state.documents = batcher, limits, documents

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse({"error": exc.message}, exc.status, exc.headers)

    @app.exception_handler(HTTPException)
    async def route_error(request: Request, exc: HTTPException):
        """starlette's refusals (no such route, a method the route does not take) in the same shape."""
        return JSONResponse({"error": route_message(request, exc)}, exc.status_code, exc.headers)

    @app.exception_handler(Exception)
    async def server_fault(request: Request, exc: Exception):
        """A fault of the server, never of a request (those are ApiErrors): 500 in the same shape, and
        the traceback in the server's log only."""
        log.console.print(
            f"[red]error:[/red] {request.method} {escape(request.url.path)}: "
            f"{escape(type(exc).__name__)}: {escape(str(exc))}",
            soft_wrap=True,
        )
        traceback.print_exception(exc)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server's log has the details"}, 500)

    _routes(app, service, documents, translator, limits)

    @app.get("/spec", include_in_schema=False)
    async def libre_spec():
        """The API's description where LibreTranslate serves its own, titled as the API it implements:
        clients (Dialect) take a server for a LibreTranslate instance only when /spec says so."""
        schema = dict(app.openapi())
        schema["info"] = {**schema["info"], "title": "LibreTranslate", "x-implementation": f"mt {_version()}"}
        return JSONResponse(schema)

    @app.post("/suggest", include_in_schema=False)
    async def suggest():
        """LibreTranslate's answer where suggestions are off: a server that keeps none (its clients
        raise their "forbidden" error, not a missing route's)."""
        raise ApiError(403, "Suggestions are disabled on this server.")

    @app.get("/", response_class=HTMLResponse)
    async def page():
        if not PAGE.is_file():
            raise ApiError(404, "no page here: the API is at /translate and /v1/translate")
        html = PAGE.read_text(encoding="utf-8")
        return HTMLResponse(html, headers=page_headers(html))

    return app


def page_headers(html: str) -> dict[str, str]:
    """The page's security headers: its own inline script and style only (by their sha256), requests to
    this server only, no framing by another site (the API key field), no type sniffing."""
    import base64
    import hashlib
    import re

    def hashes(tag: str) -> str:
        found = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
        return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(t.encode()).digest()).decode()}'" for t in found)

    policy = (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; connect-src 'self'; "
        "img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    return {"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _routes(app: FastAPI, service: Service, documents: Documents, translator, limits: Limits) -> None:
    """The API's routes, each with its part of the OpenAPI schema (mt.apps.serve.openapi)."""
    layers = check_layer(translator.model, None, "layer") + 1
    directions = translator.directions
    known = directions.readable()  # zero-shot sources too
    sources = known + ["auto"]  # each text identified (mt.apps.serve.languages)
    targets = directions.targets()  # the languages it was trained to write (zero-shot pairs reach them too)
    spec = openapi.routes(
        sources,
        targets,
        limits.max_chars,
        limits.max_lines,
        limits.max_beam,
        limits.max_attention_tokens,
        layers,
        v1_sources=known + ["auto"],
        max_file_bytes=limits.max_file_bytes,
        file_formats=extensions(),
    )  # /v1: auto = identified, each line
    for path, endpoint in (
        ("/translate", service.libre_translate),
        ("/detect", service.detect),
        ("/v1/translate", service.v1_translate),
        ("/v1/attention", service.v1_attention),
        ("/translate_file", documents.translate_file),
    ):
        app.router.add_api_route(path, endpoint, methods=["POST"], route_class_override=PlainRoute, **spec[path])
    app.get("/languages", **spec["/languages"])(service.languages)
    app.get("/health", **spec["/health"])(service.health)
    app.get("/download_file/{filename}", **spec["/download_file/{filename}"])(documents.download_file)
    app.get("/frontend/settings", **spec["/frontend/settings"])(documents.frontend_settings)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mt")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def route_message(request: Request, exc: HTTPException) -> str:
    """The one line for a route that does not exist (404) or does not take the method (405)."""
    path = request.url.path if request.url.path.isprintable() else ascii(request.url.path)
    if exc.status_code == 404:
        return (
            f"{path}: no such route; the API is POST /translate, POST /translate_file, GET /download_file/NAME, "
            "POST /detect, GET /languages, GET /frontend/settings, GET /health, POST /v1/translate, "
            "POST /v1/attention, POST /suggest, GET /spec, GET /openapi.json and the page at /"
        )
    if exc.status_code == 405:
        return f"{request.method} {path}: this route takes {(exc.headers or {}).get('Allow', 'another method')}"
    return " ".join(str(exc.detail).split())


def serve(
    exp,
    cfg,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    api_key: str | None = None,
    threads: int | None = 2,
    checkpoint: str | list[str] | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    quantize: str | None = None,
    parallel: str | None = None,
    engine: str | None = None,
) -> None:
    """`mt serve`: load the model once (`Translator.load`'s checkpoint, device, precision and
    quantize), serve it until SIGTERM or Ctrl-C, then drain and return. `parallel` (decode.parallel;
    None: the experiment's) "processes": the worker's static batches are searched by processes of their
    own (mt.decoding.processes), started here, before the first request. `engine` (decode.engine; None: the experiment's): CTranslate2 is built and loaded here too."""
    import torch

    from mt.config.schema import Engine, Parallel
    from mt.config.values import coerce
    from mt.decoding.engine import engine as decoding_engine
    from mt.decoding.engine import load, unsupported
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.search.parallel import workers_for

    sock = bind(host, port)  # first: a taken port fails before the model loads
    worker_threads = threads or torch.get_num_threads()
    # The batcher's thread alone runs torch ops in parallel. Had this thread an OpenMP team too,
    # libgomp would count more threads than cores and stop spinning between ops: beam search, a few
    # thousand small ops a batch, then ran 1.7-3x slower (measured on a 2-core Xeon, 2026-12-02).
    torch.set_num_threads(1)
    if parallel is not None:
        cfg.decode.parallel = coerce(parallel, Parallel, "--parallel")
    if engine is not None:
        cfg.decode.engine = coerce(engine, Engine, "--engine")
    translator = Translator.load(exp, cfg, checkpoint, device, precision, quantize)
    defaults = DecodeOptions().resolved(cfg.decode)
    decoding_engine(translator, defaults, worker_threads)  # refused or loaded now
    if cfg.decode.engine == "auto" and unsupported(translator, replace(defaults, beam=1)) is None:
        load(translator, cfg.decode.workers, worker_threads, strict=False)  # now, not in a request's batch
    processes_used = not (cfg.decode.engine == "ctranslate2" and translator.engine is not None)
    if cfg.decode.parallel == "processes" and processes_used:  # started now, as the worker will ask for them
        workers = workers_for(0, translator.device, worker_threads)
        translator.search_processes(workers, max(1, worker_threads // workers))
    names = ", ".join(path.name for path in translator.checkpoint_paths)
    limits = limits or Limits()
    app = build_app(translator, limits, api_key, worker_threads, names)
    allow_descriptors(limits.max_connections + 256)  # the model's files, the batcher, logs: room beside them
    tune_collector()  # last: everything loaded so far stays for the process's life
    server = uvicorn_server(app)
    address = f"[{host}]" if ":" in host else host
    mode = quantize or precision
    pairs = ", ".join(f"{src} -> {tgt}" for src, tgt in translator.directions.pairs)
    log.info(
        Text.assemble(
            ("mt serve", "bold"),
            f" {pairs}: {exp.root} ({names}, {mode}, threads {threads or 'torch default'}, {device})"
            f"{', API key required' if api_key else ''} on ",
            (f"http://{address}:{sock.getsockname()[1]}", "bold"),
            "  (Ctrl-C stops)",
        )
    )
    with signals_end_quietly():
        server.run(sockets=[sock])
    translator.close()
    log.info("mt serve: stopped")
