"""Documents through `mt serve` against the same documents translated in-process: is the file route's
way (the format module in a worker thread, its sentences through the server's batcher in chunks, the
upload, the kept file and its download) as fast as `mt translate --input FILE`?

    python -m bench.serve_files --exp EXP --data data/multi30k [--src en --tgt de] [--formats txt html]
                                [--sentences 1000] [--repeats 3] [--threads 2] [--out FILE]

Each format's document is bench.documents' (the first --sentences test2016 sentences, in paragraphs
of 3; built here again: a benchmark imports only bench.common). Three ways, interleaved (plain, in-process, served, plain, ...), medians of --repeats after
one untimed round:
- plain: the sentences as lines through mt.text.translate (what `mt translate` does with a text file);
- in-process: the document through mt.documents with the translator called directly
  (`mt translate --input FILE`);
- served: POST /translate_file to `mt serve` on a loopback port (another process, --threads as here)
  and GET of the translatedFileUrl, timed from the upload's first byte to the download's last.
The served file must be byte for byte the in-process one. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import html
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Server, read_split, report


def txt_document(sentences: list[str]) -> bytes:
    """bench.documents' .txt: one sentence a line, a blank line between paragraphs of 3."""
    return "\n\n".join("\n".join(sentences[i : i + 3]) for i in range(0, len(sentences), 3)).encode() + b"\n"


def html_document(sentences: list[str]) -> bytes:
    """bench.documents' page: a <p> a paragraph of 3, its second word bold, its last sentence a link."""
    body = []
    for k in range(0, len(sentences), 3):
        first, *rest = sentences[k : k + 3]
        words = [html.escape(w) for w in first.split()]
        if len(words) > 2:
            words[1] = f"<b>{words[1]}</b>"
        parts = [" ".join(words)] + [html.escape(s) for s in rest[:-1]]
        if rest:
            parts.append(f'<a href="/p/{k // 3}">{html.escape(rest[-1])}</a>')
        body.append(f"<p>{' '.join(parts)}</p>")
    page = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>test2016</title></head>\n<body>\n'
    return (page + "\n".join(body) + "\n</body></html>\n").encode()


CASES = {"txt": txt_document, "html": html_document}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True, help="a trained experiment (only read)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--formats", nargs="*", default=list(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()

    import httpx

    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.documents.formats import FORMATS, DocumentOptions
    from mt.documents.translate import translate_content
    from mt.documents.units import TranslatorUnits
    from mt.experiment.config import read_experiment
    from mt.hardware import cpu_name, set_threads
    from mt.text.translate import translate

    set_threads(args.threads)
    exp, cfg = read_experiment(Path(args.exp))
    translator = Translator.load(exp, cfg)
    src = read_split(args.data, "test_2016_flickr", args.src)[: args.sentences]
    units = TranslatorUnits(translator, DecodeOptions())
    options = DocumentOptions(args.tgt)
    translate(translator, src[:16])  # warm-up

    serve = argparse.Namespace(exp=args.exp, threads=args.threads, precision="fp32", checkpoint=None, quantize=None,
                               start_seconds=120, serve_arg=["--max-file-bytes", "100000000",
                                                             "--max-file-chars", "100000000"])
    with tempfile.TemporaryDirectory() as scratch:
        server = Server(serve, Path(scratch) / "serve.log")
        try:
            client = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=600)
            rows = []
            for name in args.formats:
                document = CASES[name](src)
                filename = f"test2016.{FORMATS[name].extensions[0].lstrip('.')}"
                times: dict[str, list[float]] = {"plain": [], "in-process": [], "served": []}
                local = served = b""
                for _ in range(args.repeats + 1):  # the first, untimed: each way's warm-up
                    start = time.perf_counter()
                    translate(translator, src)
                    times["plain"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    local = translate_content(document, FORMATS[name], units, options)
                    times["in-process"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    answer = client.post("/translate_file", data={"source": args.src, "target": args.tgt},
                                         files={"file": (filename, document)})
                    answer.raise_for_status()
                    served = client.get(answer.json()["translatedFileUrl"]).content
                    times["served"].append(time.perf_counter() - start)
                times = {way: seconds[1:] for way, seconds in times.items()}
                speed = {way: len(src) / statistics.median(seconds) for way, seconds in times.items()}
                rows.append({
                    "format": name,
                    "bytes": len(document),
                    "same_bytes": served == local,
                    "plain_sent_per_s": round(speed["plain"], 1),
                    "in_process_sent_per_s": round(speed["in-process"], 1),
                    "served_sent_per_s": round(speed["served"], 1),
                    "served_vs_in_process": round(speed["served"] / speed["in-process"], 2),
                    "served_vs_plain": round(speed["served"] / speed["plain"], 2),
                    "runs_s": {way: [round(s, 2) for s in seconds] for way, seconds in times.items()},
                })
            rss = server.rss_mb()
        finally:
            server.stop()

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"documents through mt serve: {len(src)} test2016 sentences, {args.src}->{args.tgt}, "
                        f"{cpu_name()}, {args.threads} threads")
    for column in ("format", "same bytes", "plain sent/s", "in-process sent/s", "served sent/s", "served/in-process",
                   "served/plain"):
        table.add_column(column, justify="left" if column == "format" else "right")
    for r in rows:
        table.add_row(r["format"], "yes" if r["same_bytes"] else "NO", f"{r['plain_sent_per_s']:.1f}",
                      f"{r['in_process_sent_per_s']:.1f}", f"{r['served_sent_per_s']:.1f}",
                      f"{r['served_vs_in_process']:.2f}x", f"{r['served_vs_plain']:.2f}x")
    Console(stderr=True).print(table)
    result = {"exp": args.exp, "cpu": cpu_name(), "threads": args.threads, "sentences": len(src),
              "server_rss_mb": round(rss, 1), "rows": rows}
    report(result, args.out)


if __name__ == "__main__":
    main()
