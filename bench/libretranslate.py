"""`mt serve` against LibreTranslate on the same model, each server with the CPU to itself.

    python -m bench.libretranslate --exp EXP --lt-venv VENV [--clients 1,8,64] [--requests 334]
        [--max-seconds 60] [--lt-configs default,inter2] [--mt-modes fp32,int8] [--threads 2] [--out FILE]

Inputs: a trained experiment (nothing is written into it), its test split (Multi30k test2016: 1000
sentences and their references) and a virtual environment with LibreTranslate installed from the
package index (`pip install libretranslate==1.9.6` in its own venv: it pins numpy < 2, Flask 2.2).
In a temporary directory: `mt export --format argos` writes the model's package, which the venv's
Python installs (argostranslate.package.install_from_path) into an Argos home of its own: HOME and
XDG_* point there, ARGOS_PACKAGE_INDEX at an empty local index and the proxies at a closed port, so
LibreTranslate boots offline and nothing is downloaded (docs/exporting.md).

Servers, one at a time (each stopped before the next starts): LibreTranslate for each --lt-configs
entry (`libretranslate --host 127.0.0.1 --port P --load-only SRC,TGT --threads T` with the entry's
ARGOS_* settings, LT_CONFIGS below; the first answer to GET /languages means it is up: on 2 cores,
`inter2` is its best, 17x its defaults, whose one translation at a time on CTranslate2's default
intra threads is slow for a small model), then `python -m mt serve` for
each --mt-modes entry (fp32: the experiment's decode settings; int8: --quantize int8). The same
closed-loop client (bench.common.closed_loop: asyncio, one keep-alive HTTP/1.1 connection a client)
drives each through LibreTranslate's POST /translate {"q", "source", "target", "format"}, at each
--clients level:
- sentences: one test sentence a request (--requests answers a level);
- paragraphs: 3 consecutive test sentences joined with a space a request (--requests / 3 a level);
  LibreTranslate splits them with the package's splitter, mt with its own (mt.text);
- html: one sentence as `<p>SENTENCE</p>` with format html (mt answers 400 today: errors).
Each level goes on where the last stopped in the test split, so that the levels together cover it
(3 levels of 334 sentences: all 1000). A level stops after its requests or --max-seconds.
Per server and load: sentences/s (paragraphs count 3), p50/p99 latency of a request, answers,
errors (anything but 200, and failed connections), peak RSS of the server (VmHWM of the process and
its children, summed; since it started), and BLEU/chrF (sacreBLEU defaults) of the level's answers
against their references (html: the answer's text, tags removed). Then per server and input, BLEU and
chrF of all its answers. With --argos-search, each mt server also answers every test sentence at
the largest level through /v1/translate with Argos's search (beam 4, score / length^0.2): a
like-for-like row for BLEU. Prints tables, then one JSON line (also written to --out's .json).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.common import Server, closed_loop, get, stop_process, tree_peak_mb
from mt.hardware import cpu_name

REPO = Path(__file__).resolve().parents[1]
LT_CONFIGS = {  # LibreTranslate's settings: Argos's environment (argostranslate.settings)
    "default": {},  # one CTranslate2 translation at a time on all the cores
    "intra2": {"ARGOS_INTRA_THREADS": "2"},  # one at a time on 2 threads (0, the default: CTranslate2's 4)
    "intra1": {"ARGOS_INTRA_THREADS": "1"},  # one at a time on 1 thread
    "inter2": {"ARGOS_INTER_THREADS": "2", "ARGOS_INTRA_THREADS": "1"},  # two at once, a core each
    "int8": {"ARGOS_COMPUTE_TYPE": "int8"},
    "int8_inter2": {"ARGOS_COMPUTE_TYPE": "int8", "ARGOS_INTER_THREADS": "2", "ARGOS_INTRA_THREADS": "1"},
}
MT_MODES = {"fp32": ("fp32", None), "int8": ("fp32", "int8"), "bf16": ("bf16", None)}
KINDS = ("sentences", "paragraphs", "html")
PER_REQUEST = {"sentences": 1, "paragraphs": 3, "html": 1, "argos-search": 1}


# -- inputs and answers --------------------------------------------------------------------------------
def inputs(exp_dir: str) -> dict[str, tuple[list[str], list[str]]]:
    """kind -> (request texts, their references)."""
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment

    src, refs = load_split(Experiment(exp_dir).load_config().data.sources("test"))
    pairs = [(s, r) for s, r in zip(src, refs) if s.strip()]
    src, refs = [s for s, _ in pairs], [r for _, r in pairs]
    cut = len(src) - len(src) % 3

    def grouped(lines: list[str]) -> list[str]:
        return [" ".join(lines[i:i + 3]) for i in range(0, cut, 3)]

    return {"sentences": (src, refs), "paragraphs": (grouped(src), grouped(refs)),
            "html": ([f"<p>{html.escape(s, quote=False)}</p>" for s in src], refs), "argos-search": (src, refs)}


def request_of(kind: str, src: str, tgt: str):
    """line -> (path, body) for the closed loop."""
    if kind == "argos-search":
        return lambda line: ("/v1/translate", json.dumps(
            {"text": line, "beam": 4, "alpha": 0.2, "length_penalty": "length"}).encode())
    fmt = "html" if kind == "html" else "text"
    return lambda line: ("/translate", json.dumps({"q": line, "source": src, "target": tgt, "format": fmt}).encode())


def answer_text(kind: str, body: bytes) -> str:
    answer = json.loads(body)
    if kind == "argos-search":
        return answer["translations"][0]["text"]
    text = answer["translatedText"]
    return html.unescape(re.sub(r"<[^>]*>", "", text)).strip() if kind == "html" else text


def quality(kind: str, answers: dict[int, bytes], refs: list[str]) -> dict:
    """BLEU and chrF of the answered requests against their references."""
    from mt.metrics import score

    if not answers:
        return {"bleu": None, "chrf": None, "scored": 0}
    order = sorted(answers)
    scores = score([answer_text(kind, answers[i]) for i in order], [refs[i] for i in order])
    return {"bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2), "scored": len(order)}


# -- the processes ---------------------------------------------------------------------------------------
def offline_home(tmp: Path, args) -> dict[str, str]:
    """Export the model's Argos package and install it into an Argos home under `tmp`; the environment
    LibreTranslate runs in: that home, an empty local package index, proxies at a closed port."""
    home, index = tmp / "home", tmp / "index"
    index.mkdir(parents=True)
    (index / "index.json").write_text("[]")
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, a download fails at once
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
           "ARGOS_PACKAGES_DIR": str(home / ".local/share/argos-translate/packages"),
           "ARGOS_PACKAGE_INDEX": f"file://{index}/", "http_proxy": closed, "https_proxy": closed,
           "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "no_proxy": "127.0.0.1,localhost",
           "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)  # LibreTranslate's venv, not mt's
    export = [sys.executable, "-m", "mt", "export", "--exp", args.exp, "--format", "argos",
              "--output", str(tmp / "argos")] + (["--checkpoint", args.checkpoint] if args.checkpoint else [])
    subprocess.run(export, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    package = next((tmp / "argos").glob(f"translate-{args.src}_{args.tgt}.argosmodel"))
    python = str(Path(args.lt_venv) / "bin" / "python")
    subprocess.run([python, "-c", "import sys, argostranslate.package as p; p.install_from_path(sys.argv[1])",
                    str(package)], check=True, env=env)
    return env


class LibreServer:
    """LibreTranslate from `venv`, on a free loopback port, with the offline environment."""

    def __init__(self, args, env: dict[str, str], config: str, log_path: Path):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        command = [str(Path(args.lt_venv) / "bin" / "libretranslate"), "--host", "127.0.0.1", "--port",
                   str(self.port), "--load-only", f"{args.src},{args.tgt}", "--threads", str(args.lt_threads),
                   "--disable-web-ui"]
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env={**env, **LT_CONFIGS[config]}, cwd=log_path.parent)
        deadline = time.monotonic() + args.start_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"libretranslate exited with {self.process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if asyncio.run(get(self.port, "/languages"))[0] == 200:
                    return
            except (OSError, ValueError, asyncio.TimeoutError):
                pass
            time.sleep(0.5)
        self.stop()
        sys.exit(f"libretranslate did not answer /languages in {args.start_seconds:.0f} s")

    def stop(self) -> None:
        stop_process(self.process)


# -- the loads -------------------------------------------------------------------------------------------
def run_loads(name: str, server, data: dict, kinds: list[str], args) -> tuple[list[dict], dict]:
    """Every kind at every level on one server: rows, and per kind the quality of all its answers."""
    levels = [int(c) for c in args.clients.split(",")]
    port, rows, overall = server.port, [], {}
    for kind, clients in (("sentences", max(levels)), ("paragraphs", 4)):  # warm-up: first calls, the int8 kernels
        asyncio.run(closed_loop(port, data[kind][0], clients, 2 * clients, 120, args.timeout,
                                request=request_of(kind, args.src, args.tgt), offset=len(data[kind][0]) // 2))
    for kind in kinds:
        lines, refs = data[kind]
        requests = len(lines) if kind == "argos-search" else -(-args.requests // PER_REQUEST[kind])
        every, offset = {}, 0
        for clients in levels if kind != "argos-search" else [max(levels)]:
            answers: dict[int, bytes] = {}
            r = asyncio.run(closed_loop(port, lines, clients, requests, args.max_seconds, args.timeout,
                                        request=request_of(kind, args.src, args.tgt), answers=answers,
                                        offset=offset))
            offset += requests
            every.update(answers)
            row = {"server": name, "input": kind, "clients": clients, **r,
                   "sent_per_s": r["sent_per_s"] * PER_REQUEST[kind],
                   "peak_rss_mb": tree_peak_mb(server.process.pid), **quality(kind, answers, refs)}
            rows.append(row)
            print(f"{name}, {kind}, {clients} clients: {row['sent_per_s']:.1f} sent/s, p99 {row['p99_ms']:.0f} ms, "
                  f"{row['errors']} errors, BLEU {row['bleu']}", file=sys.stderr)
        overall[kind] = quality(kind, every, refs)
    return rows, overall


def run_all(args, data: dict) -> tuple[list[dict], dict, list[str]]:
    rows, overall, notes = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = offline_home(tmp, args)
        for config in filter(None, args.lt_configs.split(",")):
            name = f"LibreTranslate {config}"
            server = LibreServer(args, env, config, tmp / f"lt-{config}.log")
            try:
                got, overall[name] = run_loads(name, server, data, list(KINDS), args)
                rows += got
            finally:
                server.stop()
            log = (tmp / f"lt-{config}.log").read_text(errors="replace")
            tries = [line for line in log.splitlines() if re.search(r"[Dd]ownload|127\.0\.0\.1:9\b", line)]
            notes.append(f"{name}: {len(tries)} log lines about downloads" + (f" ({tries[0][:120]})" if tries else ""))
        for mode in filter(None, args.mt_modes.split(",")):
            precision, quantize = MT_MODES[mode]
            ns = SimpleNamespace(exp=args.exp, threads=args.threads, precision=precision, quantize=quantize,
                                 checkpoint=args.checkpoint, serve_arg=[], start_seconds=args.start_seconds)
            name = f"mt serve {mode}"
            server = Server(ns, tmp / f"mt-{mode}.log")
            try:
                kinds = [*KINDS, "argos-search"] if args.argos_search else list(KINDS)
                got, overall[name] = run_loads(name, server, data, kinds, args)
                rows += got
            finally:
                server.stop()
    return rows, overall, notes


# -- the report ------------------------------------------------------------------------------------------
def print_tables(args, rows: list[dict], overall: dict, notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    table = Table(title=f"{args.exp}: POST /translate, closed loop; {args.threads} threads, {cpu_name()}")
    for column in ("server", "input", "clients", "sent/s", "p50 ms", "p99 ms", "answers", "errors",
                   "peak RSS MB", "BLEU", "chrF"):
        table.add_column(column, justify="left" if column in ("server", "input") else "right")
    for r in rows:
        table.add_row(r["server"], r["input"], str(r["clients"]), f"{r['sent_per_s']:.1f}", f"{r['p50_ms']:.0f}",
                      f"{r['p99_ms']:.0f}", str(r["answers"]), str(r["errors"]), f"{r['peak_rss_mb']:.0f}",
                      "-" if r["bleu"] is None else f"{r['bleu']:.2f}", "-" if r["chrf"] is None else f"{r['chrf']:.2f}")
    console.print(table)
    totals = Table(title="All the answers of a server to an input (every level together)")
    for column in ("server", "input", "scored", "BLEU", "chrF"):
        totals.add_column(column, justify="left" if column in ("server", "input") else "right")
    for name, kinds in overall.items():
        for kind, q in kinds.items():
            totals.add_row(name, kind, str(q["scored"]), "-" if q["bleu"] is None else f"{q['bleu']:.2f}",
                           "-" if q["chrf"] is None else f"{q['chrf']:.2f}")
    console.print(totals)
    for note in notes:
        print(note)


def result_json(args, rows: list[dict], overall: dict, started: float) -> dict:
    def key(r: dict) -> str:
        return f"{r['server'].replace(' ', '_')}|{r['input']}|{r['clients']}"

    return {
        "cpu": f"{cpu_name()}, {os.cpu_count()} cores", "date": datetime.date.today().isoformat(),
        "exp": args.exp, "threads": args.threads, "lt_threads": args.lt_threads, "requests": args.requests,
        "max_seconds": args.max_seconds, "seconds": round(time.perf_counter() - started, 1),
        "rows": {key(r): {"sent_per_s": round(r["sent_per_s"], 2), "p50_ms": round(r["p50_ms"], 1),
                          "p99_ms": round(r["p99_ms"], 1), "answers": r["answers"], "errors": r["errors"],
                          "peak_rss_mb": round(r["peak_rss_mb"], 1), "bleu": r["bleu"], "chrf": r["chrf"]}
                 for r in rows},
        "quality": overall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True, help="A trained experiment (read only).")
    parser.add_argument("--lt-venv", required=True, help="A virtual environment with libretranslate installed.")
    parser.add_argument("--checkpoint", default=None, help="Default: the config's decode.checkpoint.")
    parser.add_argument("--clients", default="1,8,64", help="Concurrency levels of the closed loop.")
    parser.add_argument("--requests", type=int, default=334, help="Sentences a level (paragraphs: a third).")
    parser.add_argument("--max-seconds", type=float, default=60, help="Seconds a level, at most.")
    parser.add_argument("--lt-configs", default="default", help=f"LibreTranslate runs, of {', '.join(LT_CONFIGS)}.")
    parser.add_argument("--lt-threads", type=int, default=4, help="libretranslate --threads (its default 4).")
    parser.add_argument("--mt-modes", default="fp32,int8", help=f"mt serve runs, of {', '.join(MT_MODES)}.")
    parser.add_argument("--argos-search", action=argparse.BooleanOptionalAction, default=True,
                        help="Also mt with Argos's search (beam 4, length^0.2) on /v1/translate.")
    parser.add_argument("--threads", type=int, default=2, help="mt serve --threads.")
    parser.add_argument("--timeout", type=float, default=120, help="Seconds a request may take.")
    parser.add_argument("--start-seconds", type=float, default=300, help="Seconds a server may take to start.")
    parser.add_argument("--out", default=None, help="Also write the JSON here.")
    args = parser.parse_args()

    from mt.experiment.paths import Experiment

    cfg = Experiment(args.exp).load_config()
    args.src, args.tgt = cfg.data.src_lang, cfg.data.tgt_lang
    started = time.perf_counter()
    data = inputs(args.exp)
    print(f"inputs: {args.exp}, {len(data['sentences'][0])} test sentences; {cpu_name()}", file=sys.stderr)
    rows, overall, notes = run_all(args, data)
    print_tables(args, rows, overall, notes)
    result = result_json(args, rows, overall, started)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
