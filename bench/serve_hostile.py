"""Serving under attack: `mt serve` with 64 ordinary clients, first alone, then beside clients that send
what once crashed or stalled it.

    python -m bench.serve_hostile --exp EXP [--clients 64] [--seconds 600] [--hostile 8] [--quantize int8]

One `python -m mt serve` on a loopback port (bench/common.py's Server). Phase 1: --clients clients in a
closed loop, one test sentence a request to POST /v1/translate, for --seconds. Phase 2: the same,
and beside them --hostile clients, each sending one hostile request every --hostile-every seconds,
in turn: a chunked body past the limit that never ends, a 400-digit negative alpha, a 5000-digit
number, JSON nested 5000 deep, an unpaired surrogate (on /v1/translate, /v1/attention and
/translate), an attention request over the token cap, one at the cap with the encoder's weights
(the heaviest answer allowed), a LibreTranslate text with U+2028 and CRLF breaks, and a client that
leaves before its answer. Each hostile kind has the answers it must get (a 4xx in the documented
{"error": ...} shape, or 200 where the request is allowed); anything else is a failure. The server's
RSS is read every --rss-every seconds. The verdict: 0 errors for the ordinary clients, the hostile
ones all answered as documented, RSS flat (the last minute's median within 10% of the first's), the
ordinary p99 of phase 2 within 1.5x of phase 1's. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]


def hostile_requests(lines: list[str]) -> list[tuple[str, str, bytes, dict, set[int]]]:
    """(name, path, body, extra headers, the statuses it may get) of each hostile kind."""
    sentence = lines[0]
    json_type = {"Content-Type": "application/json"}
    return [
        ("alpha of 400 digits", "/v1/translate", b'{"text": "x", "alpha": -' + b"9" * 400 + b"}", json_type, {422}),
        ("a 5000-digit number", "/v1/translate", b'{"text": "x", "beam": ' + b"9" * 5000 + b"}", json_type, {422}),
        ("JSON nested 5000 deep", "/v1/translate", b"[" * 5000, json_type, {422}),
        ("an unpaired surrogate", "/v1/translate", b'{"text": "Hallo \\ud800"}', json_type, {422}),
        ("a surrogate, attention", "/v1/attention", b'{"text": "Hallo \\ud800"}', json_type, {422}),
        ("a surrogate, LibreTranslate", "/translate", b'{"q": "x\\udfff", "source": "auto", "target": "de"}',
         json_type, {400}),
        ("attention over the cap", "/v1/attention", json.dumps({"text": " ".join(lines[:40])}).encode(), json_type, {413}),
        ("attention at the cap, encoder", "/v1/attention",
         json.dumps({"text": sentence[:190], "encoder": True}).encode(), json_type, {200, 413}),
        ("LibreTranslate's odd breaks", "/translate",
         json.dumps({"q": f"{sentence}\u2028{sentence}\r\n{sentence}\n", "source": "auto", "target": "de"}).encode(),
         json_type, {200, 400}),
    ]


async def chunked_past_the_limit(port: int) -> int:
    """A chunked body that passes the limit and never ends: the status the server answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        for _ in range(40):  # 2.6 MB: past the limit, whatever --max-chars is
            writer.write(chunk)
            await writer.drain()
        return int((await asyncio.wait_for(reader.readline(), 30)).split()[1])
    except (ConnectionError, asyncio.IncompleteReadError):
        return 413 if reader.at_eof() else 0
    finally:
        writer.close()


async def leaves_early(port: int, line: str) -> int:
    """A request whose client closes the connection at once; 499 stands for 'nothing to check'."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"text": [line] * 8, "beam": 5}).encode()
    writer.write(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    writer.close()
    return 499


async def hostile_client(port: int, lines: list[str], every: float, stop_at: float, results: dict) -> None:
    from bench.common import Connection

    kinds = hostile_requests(lines)
    turn = 0
    connection = Connection(port)
    while time.perf_counter() < stop_at:
        turn += 1
        slot = turn % (len(kinds) + 2)
        try:
            if slot == len(kinds):
                name, status, allowed = "chunked past the limit", await chunked_past_the_limit(port), {413}
            elif slot == len(kinds) + 1:
                name, status, allowed = "a client that leaves", await leaves_early(port, lines[turn % len(lines)]), {499}
            else:
                name, path, body, headers, allowed = kinds[slot]
                status, data = await asyncio.wait_for(_post(connection, path, body, headers), 120)
                if status != 200 and set(json.loads(data)) != {"error"}:
                    status = -status  # the wrong shape
        except (OSError, asyncio.TimeoutError, ValueError):
            connection.close()
            name, status, allowed = kinds[slot][0] if slot < len(kinds) else "connection", 0, set()
        entry = results.setdefault(name, {"sent": 0, "as_documented": 0, "statuses": {}})
        entry["sent"] += 1
        entry["as_documented"] += status in allowed
        entry["statuses"][str(status)] = entry["statuses"].get(str(status), 0) + 1
        await asyncio.sleep(every)
    connection.close()


async def _post(connection, path: str, body: bytes, headers: dict) -> tuple[int, bytes]:
    """bench/common.py's Connection with other content types (it sends JSON's)."""
    return await connection.request("POST", path, body)


async def phase(port: int, lines: list[str], clients: int, seconds: float, hostile: int, every: float,
                rss, rss_every: float) -> tuple[dict, dict, list[float]]:
    from bench.common import closed_loop

    results: dict = {}
    samples: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def sample() -> None:
        while True:
            samples.append(rss())
            await asyncio.sleep(rss_every)

    hostiles = [asyncio.create_task(hostile_client(port, lines, every, stop_at, results)) for _ in range(hostile)]
    normal = await closed_loop(port, lines, clients, 10**12, seconds, 120, sample)
    await asyncio.gather(*hostiles)
    return normal, results, samples


def flat(samples: list[float], window: int) -> tuple[float, float, bool]:
    first, last = statistics.median(samples[:window]), statistics.median(samples[-window:])
    return first, last, last <= first * 1.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--quantize", default=None)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=600, help="Length of each phase.")
    parser.add_argument("--hostile", type=int, default=8, help="Hostile clients in phase 2.")
    parser.add_argument("--hostile-every", type=float, default=0.05, help="Seconds between a hostile client's requests.")
    parser.add_argument("--rss-every", type=float, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--start-seconds", type=float, default=180)
    parser.add_argument("--serve-arg", action="append", default=[])
    args = parser.parse_args()

    from bench.common import Server, test_lines
    from mt.allocator import use_tcmalloc

    use_tcmalloc()
    lines = test_lines(args.exp, 0)
    window = max(1, int(60 / args.rss_every))
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(argparse.Namespace(**vars(args), batching="static"), Path(tmp) / "serve.log")
        try:
            asyncio.run(phase(server.port, lines, 4, 5, 0, 1, server.rss_mb, 1))  # warm-up
            alone, _, rss_alone = asyncio.run(phase(server.port, lines, args.clients, args.seconds, 0,
                                                    args.hostile_every, server.rss_mb, args.rss_every))
            mixed, hostile, rss_mixed = asyncio.run(phase(server.port, lines, args.clients, args.seconds, args.hostile,
                                                          args.hostile_every, server.rss_mb, args.rss_every))
        finally:
            server.stop()
    rss_first, rss_last, rss_flat = flat(rss_alone + rss_mixed, window)
    ratio = mixed["p99_ms"] / alone["p99_ms"]
    undocumented = {name: r for name, r in hostile.items() if r["as_documented"] < r["sent"]}

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"mt serve under attack: {args.clients} clients, {args.seconds:.0f} s a phase; {cpu_model()}")
    for column in ("load", "answers", "errors", "sent/s", "p50 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "load" else "right")
    for name, r in (("ordinary clients alone", alone), (f"ordinary, beside {args.hostile} hostile", mixed)):
        table.add_row(name, str(r["answers"]), str(r["errors"]), f"{r['sent_per_s']:.1f}", f"{r['p50_ms']:.0f}",
                      f"{r['p99_ms']:.0f}")
    for name, r in sorted(hostile.items()):
        table.add_row(f"  hostile: {name}", str(r["sent"]), str(r["sent"] - r["as_documented"]), "", "",
                      " ".join(f"{s}x{n}" for s, n in sorted(r["statuses"].items())))
    Console(width=150).print(table)
    verdict = alone["errors"] == 0 and mixed["errors"] == 0 and not undocumented and rss_flat and ratio <= 1.5
    print(f"RSS {rss_first:.0f} MB (first minute) -> {rss_last:.0f} MB (last minute); p99 beside hostile "
          f"clients {ratio:.2f}x alone; {'PASS' if verdict else 'FAIL'}")
    print(json.dumps({
        "what": "bench/serve_hostile.py", "cpu": f"{cpu_model()}, {os.cpu_count()} cores",
        "date": datetime.date.today().isoformat(), "exp": args.exp, "clients": args.clients,
        "seconds_per_phase": args.seconds, "hostile_clients": args.hostile, "hostile_every_s": args.hostile_every,
        "alone": alone, "mixed": mixed, "p99_ratio": round(ratio, 3), "hostile": hostile,
        "rss_mb": [round(mb, 1) for mb in rss_alone + rss_mixed], "rss_flat": rss_flat, "pass": verdict}))


if __name__ == "__main__":
    main()
