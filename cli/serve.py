"""`mt serve`: the experiment's model behind HTTP (LibreTranslate's API and mt's /v1), until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from mt.decoding.options import DecodeOptions

from .options import Checkpoints, Device, Exp, Precision, Quantize, Threads, decode_flags, examples

EXAMPLES = examples(
    "mt serve --exp exp/de-en",
    "mt serve --exp exp/de-en --host 0.0.0.0 --port 5000 --api-key SECRET --max-tokens 4000",
    "mt serve --exp exp/de-en --quantize int8 --shortlist --engine ctranslate2 --length-penalty length",
)


def _key_given(value: Optional[str]) -> Optional[str]:
    """An empty key (`--api-key "$KEY"` with KEY unset, or MT_API_KEY set to nothing) is refused: taken as
    no key, the server started open without a word."""
    if (value is not None and not value.strip()) or (value is None and os.environ.get("MT_API_KEY") == ""):
        raise typer.BadParameter("empty: give the key, or leave out --api-key and MT_API_KEY to serve without one")
    return value


@decode_flags(batch_tokens=False)  # the server's search; --max-tokens, --parallel and --engine are its own
def serve(
    exp: Exp,
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 for every interface.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, metavar="PORT", help="Port to listen on (0: any free one).")
    ] = 8000,
    checkpoint: Checkpoints = None,
    max_batch_tokens: Annotated[
        int,
        typer.Option(
            "--max-tokens",
            help="Source tokens a decoding batch may hold, from all the requests waiting (as decode.max_tokens).",
        ),
    ] = 2000,
    max_wait_ms: Annotated[
        Optional[float],
        typer.Option(
            help="How long a sentence waits for others to share its batch. Default: 10 for mt's search, "
            "0 for CTranslate2's side-by-side workers (a free one starts at once).",
            show_default=False,
        ),
    ] = None,
    max_queue: Annotated[
        int, typer.Option(help="Sentences that may wait; past that a request gets 503 with Retry-After.")
    ] = 1024,
    max_chars: Annotated[int, typer.Option(help="Characters per request.")] = 20000,
    max_lines: Annotated[int, typer.Option(help="Lines with text per request.")] = 2000,
    max_beam: Annotated[int, typer.Option(help="The widest beam (and longest n-best list) a request may ask for.")] = 8,
    max_attention_tokens: Annotated[
        int,
        typer.Option(
            help="Source tokens of the longest sentence /v1/attention draws (its answer grows with their square)."
        ),
    ] = 200,
    max_connections: Annotated[
        int, typer.Option(help="Connections open at once; one more is closed as it opens.")
    ] = 512,
    read_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds a client has to send a request's head (after connecting or its last answer), and a body may go without a byte, before it is cut off."
        ),
    ] = 30.0,
    max_file_bytes: Annotated[
        int,
        typer.Option(
            help="Bytes of a document uploaded to /translate_file; a larger one is refused (413) as it is read."
        ),
    ] = 10_000_000,
    max_file_chars: Annotated[
        int,
        typer.Option(
            help="Characters a document may ask to translate; more is refused (413) before any is translated."
        ),
    ] = 200_000,
    file_ttl: Annotated[
        float,
        typer.Option(help="Seconds a translated document is kept for download (LibreTranslate keeps them 30 minutes)."),
    ] = 1800.0,
    max_files: Annotated[
        int, typer.Option(help="Translated documents kept at once; past that the oldest is removed.")
    ] = 100,
    max_file_jobs: Annotated[
        int,
        typer.Option(
            help="Documents translated at once (one more is refused: 503 with Retry-After); uploads being read hold at most as many files' bytes."
        ),
    ] = 4,
    batching: Annotated[
        str,
        typer.Option(
            help="continuous: sentences join a running search and leave it as they finish; static: each batch is searched to its end (faster on a CPU, measured)."
        ),
    ] = "static",
    parallel: Annotated[
        Optional[str],
        typer.Option(
            metavar="threads|processes",
            help="processes: static batches are searched by processes of their own, one a thread, each with the model (faster on a CPU, measured); default: the experiment's decode.parallel.",
        ),
    ] = None,
    engine: Annotated[
        Optional[str],
        typer.Option(
            metavar="mt|ctranslate2|auto",
            help="What decodes: mt's search, CTranslate2 over the same weights (faster on a CPU), or auto: CTranslate2 where it can decode a request as mt would; default: the experiment's decode.engine.",
        ),
    ] = None,
    api_key: Annotated[
        Optional[str],
        typer.Option(
            envvar="MT_API_KEY",
            show_envvar=True,
            help="Refuse requests without this key (403): LibreTranslate's api_key field, or the header Authorization: Bearer KEY or X-API-Key.",
            callback=_key_given,
        ),
    ] = None,
    precision: Precision = "fp32",
    quantize: Quantize = None,
    threads: Threads = 2,
    device: Device = "cpu",
    *,
    decode: DecodeOptions,
) -> None:
    """Serve translations over HTTP: LibreTranslate's POST /translate and /translate_file, mt's /v1/translate and /v1/attention, a page at /.

    Then (docs/serving.md):

    \b
      curl -s localhost:8000/translate --data-urlencode 'q=Ein Satz.' -d source=de -d target=en
    """
    from mt.experiment.config import read_experiment

    experiment, cfg = read_experiment(exp)  # before torch's import: a mistyped --exp is answered at once
    for name, value in decode.search_overrides().items():  # the server's search (checked as the flags were read)
        setattr(cfg.decode, name, value)
    from mt.apps.serve.app import Limits
    from mt.apps.serve.app import serve as run_serve

    limits = Limits(
        max_batch_tokens,
        max_wait_ms,
        max_queue,
        max_chars,
        max_lines,
        max_beam,
        batching,
        max_attention_tokens,
        max_connections,
        read_timeout,
        max_file_bytes=max_file_bytes,
        max_file_chars=max_file_chars,
        file_ttl=file_ttl,
        max_files=max_files,
        max_file_jobs=max_file_jobs,
    )
    run_serve(
        experiment,
        cfg,
        host,
        port,
        limits,
        api_key or None,
        threads,
        checkpoint,
        device,
        precision,
        quantize,
        parallel,
        engine,
    )
