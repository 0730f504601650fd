"""Serving: `mt serve` under 1, 8 and 64 concurrent clients and at a fixed arrival rate, beside batch translation.

    python -m bench.serve --exp experiments/multi30k_en_de [--clients 1,8,64] [--requests 400]
        [--max-seconds 60] [--rate R] [--open-seconds 30] [--seconds N] [--sentences N] [--threads 2]
        [--precision fp32 | --quantize int8] [--batching continuous,static] [--serve-arg=--max-wait-ms=5 ...]

Inputs: a trained experiment and its test split (raw source lines, read through its config: for
Multi30k test2016, 1000 sentences). First `mt translate`'s path, Translator.translate over all the
sentences at once, timed after a warm-up (a whole pass), before the server starts, after each round
of the closed loop (the servers idle) and after they stopped: the batch throughput is the median of
these runs, as a serving figure is the median of its rounds, over the same stretch of a shared
machine's time (all runs are printed); and the same in consecutive calls of as many
lines as the largest --clients level (in test order, unsorted across calls): the most that many
one-sentence clients can give the server's batches, so the ceiling of its closed loop; and the
server's batcher (mt.apps.serve.queue) over the same Translator with no HTTP at all, as many client
threads in this process each submitting its next sentence as its last comes back: what the server's
worker gives that many clients, the HTTP path aside. Then `python -m mt serve` starts on
a free loopback port (a subprocess, its log in a temporary file) and light clients in this process
(asyncio, raw HTTP/1.1 over one keep-alive connection each; they share the cores with the server)
send one sentence per request to POST /v1/translate, cycling through the sentences:
- closed loop: for each --clients level, that many clients each send a request as soon as its
  previous answer came; a level stops after --requests answers or --max-seconds;
- open loop: requests arrive at --rate per second (default half the batch throughput) for
  --open-seconds, whatever the answers; latency counts from the planned arrival, so a queue that
  builds up shows (no coordinated omission); at most --max-pending in flight, the rest are errors;
- soak (--seconds N): the largest --clients level for N seconds, the server's RSS read every
  --rss-every seconds; flat RSS means no leak.
With several --batching modes (`mt serve --batching`), a server of each runs at once and each load
level runs on each in turn, so the modes are compared side by side; the open loop and the soak run
on the first. With --old CHECKOUT, a server of that checkout of mt (the first mode) runs beside them
the same way: a change measured against the code before it. --rounds N runs each closed-loop level N
times on each server in turn and keeps each server's median run (by sent/s; the HTTP-only level runs
once). The JSON's keys are the first mode's; the others' closed-loop keys end in _MODE (_old for the
old checkout).
The batch run and the server load the same checkpoint in the same mode (--checkpoint, --precision,
--quantize) and decode with the experiment's decode.* options. Errors are answers other than 200
and failed connections. Each closed-loop row also profiles the server's worker from its /health
counters: the share of the level it spent searching, the mean sentences a batch, and its rate while
searching (served rate = busy share x search rate), and the server's CPU (all its threads, from
/proc/PID/stat): cores in use and CPU milliseconds an answer, and its main thread's alone (the event
loop: HTTP, sentences, tokenizing), beside the cores the load generator (this process) used
meanwhile: on a small machine the two share the cores. With --http-only, a last level of the largest
--clients sends blank lines (answered at once, nothing searched), on each server: the CPU the HTTP
path alone costs an answer, which a batch run never pays. RSS is VmRSS of the server process
(/proc/PID/status). Prints a table, then one JSON line. Nothing leaves the loopback interface.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Connection, Server, closed_loop, send, summary, test_lines
from mt.hardware import cpu_name as cpu_model

REPO = Path(__file__).resolve().parents[1]


async def open_loop(port: int, lines: list[str], rate: float, seconds: float, timeout: float, max_pending: int) -> dict:
    """Requests at `rate` per second for `seconds`, each on an idle connection (or a new one)."""
    latencies, errors, pending, idle = [], 0, set(), []
    start = time.perf_counter()

    async def one(line: str, planned: float) -> None:
        nonlocal errors
        connection = idle.pop() if idle else Connection(port)
        if await send(connection, line, timeout):
            latencies.append(time.perf_counter() - planned)  # from the planned arrival
        else:
            errors += 1
        idle.append(connection)

    for n in range(int(rate * seconds)):
        planned = start + n / rate
        await asyncio.sleep(max(0.0, planned - time.perf_counter()))
        if len(pending) >= max_pending:
            errors += 1
            continue
        task = asyncio.create_task(one(lines[n % len(lines)], planned))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.wait(pending)
    for connection in idle:
        connection.close()
    return {**summary(latencies, errors, time.perf_counter() - start), "rate": rate}


def server_label(mode: str) -> str:
    """A server's name in the table: its batching mode, or the old checkout's."""
    return "the old checkout" if mode == "old" else f"{mode} batching"


def closed_level(server, lines: list[str], clients: int, requests: int, args) -> dict:
    """One closed-loop level against `server`, with its CPU: the server's cores in use on average and
    CPU milliseconds an answer (all its threads, and its event loop's alone), the load generator's
    (this process's) cores, and the server's RSS."""
    cpu, loop, mine = server.cpu_seconds(), server.cpu_seconds(loop=True), time.process_time()
    level = asyncio.run(closed_loop(server.port, lines, clients, requests, args.max_seconds, args.timeout))
    used, seconds = server.cpu_seconds() - cpu, level["seconds"]
    per_answer = 1000 / level["answers"] if level["answers"] else 0.0
    level.update(server_cores=used / seconds if seconds else 0.0,
                 cpu_ms_per_answer=used * per_answer,
                 loop_ms_per_answer=(server.cpu_seconds(loop=True) - loop) * per_answer,
                 client_cores=(time.process_time() - mine) / seconds if seconds else 0.0, rss_mb=server.rss_mb())
    return level


def worker_profile(before: dict, after: dict, seconds: float) -> dict:
    """Where a level's time went in the server: the share of it the worker spent searching (`busy`),
    the sentences a batch held on average, and the worker's rate while busy. The served rate is
    busy x search rate: a low `busy` means the worker waited on HTTP and the clients, a search rate
    below the batch run's means smaller, less efficient batches (or cores shared with the clients)."""
    batches = after["batches"] - before["batches"]
    sentences = after["sentences"] - before["sentences"]
    busy = after["busy_seconds"] - before["busy_seconds"]
    return {"busy": busy / seconds if seconds else 0.0, "mean_batch": sentences / batches if batches else 0.0,
            "search_sent_per_s": sentences / busy if busy else 0.0}


# -- batch translation, as `mt translate` does it -------------------------------------------------------
class BatchRun:
    """The experiment's Translator in this process, as `mt translate` loads it; `time` translates all
    the lines at once and returns sentences/s."""

    def __init__(self, args, lines: list[str]):
        import torch

        from mt.decoding.translator import Translator
        from mt.experiment.paths import Experiment

        torch.set_num_threads(args.threads)
        exp = Experiment(args.exp)
        cfg = exp.load_config()
        self.translator = Translator.load(exp, cfg, args.checkpoint or None, "cpu", args.precision, args.quantize)
        self.lines = lines
        self.translator.translate(lines)  # warm-up, a whole pass: first-call allocations, every batch shape's kernels
        decode = cfg.decode
        self.decoding = (f"beam {decode.beam}, alpha {decode.alpha}, {decode.length_penalty} penalty, stop {decode.stop}, "
                         f"{args.quantize or args.precision}, checkpoint {args.checkpoint or decode.checkpoint}")

    def batcher(self, clients: int, requests: int) -> dict:
        """`mt serve`'s batcher over this Translator, with no HTTP: `clients` threads in this process,
        each submitting its next sentence (already encoded) as its last comes back, for `requests`
        answers. The most the server's worker can give that many one-sentence clients."""
        import threading

        import torch

        from mt.apps.serve.queue import Batcher
        from mt.decoding.options import DecodeOptions

        _, encoded, _ = self.translator.encode_lines(self.lines)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the server's HTTP thread
        batcher = Batcher(self.translator, threads=threads)
        batcher.start()
        answered, lock = [0], threading.Lock()

        def client(k: int) -> None:
            while True:
                with lock:
                    if answered[0] >= requests:
                        return
                    answered[0] += 1
                batcher.submit([encoded[k % len(encoded)]], DecodeOptions()).result()
                k += clients

        workers = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - start
        batcher.close()
        torch.set_num_threads(threads)
        return {"sent_per_s": requests / seconds, "mean_batch": batcher.sentences / max(batcher.batches, 1),
                "search_sent_per_s": batcher.sentences / batcher.busy_seconds if batcher.busy_seconds else 0.0}

    def time(self, chunk: int = 0) -> float:
        """Sentences/s over all the lines at once, or (chunk > 0) in consecutive calls of `chunk` lines:
        the largest batches that `chunk` clients with one sentence each can give the server."""
        start = time.perf_counter()
        for i in range(0, len(self.lines), chunk or len(self.lines)):
            self.translator.translate(self.lines[i:i + (chunk or len(self.lines))])
        return len(self.lines) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "multi30k_en_de"))
    parser.add_argument("--checkpoint", default=None, help="Default: the config's decode.checkpoint.")
    parser.add_argument("--precision", default="fp32", help="fp32 or bf16, of the batch run and of the server.")
    parser.add_argument("--quantize", default=None, help="int8: instead of --precision, in both.")
    parser.add_argument("--clients", default="1,8,64", help="Concurrency levels of the closed loop.")
    parser.add_argument("--requests", type=int, default=400, help="Answers per closed-loop level, at most.")
    parser.add_argument("--max-seconds", type=float, default=60, help="Seconds per closed-loop level, at most.")
    parser.add_argument("--rate", type=float, default=None, help="Open-loop arrivals per second (default: half "
                        "the batch throughput; 0: no open loop).")
    parser.add_argument("--open-seconds", type=float, default=30)
    parser.add_argument("--max-pending", type=int, default=256, help="Open-loop requests in flight, at most.")
    parser.add_argument("--seconds", type=float, default=0, help="Soak for this long at the largest --clients level.")
    parser.add_argument("--rss-every", type=float, default=5)
    parser.add_argument("--sentences", type=int, default=0, help="The first N test sentences (default: all).")
    parser.add_argument("--threads", type=int, default=2, help="torch threads, of the batch run and of the server.")
    parser.add_argument("--timeout", type=float, default=120, help="Seconds a request may take before it is an error.")
    parser.add_argument("--start-seconds", type=float, default=180, help="Seconds the server may take to start.")
    parser.add_argument("--batching", default="static", help="`mt serve --batching` modes, comma-separated: "
                        "a server each, compared level by level (the first takes the open loop and the soak).")
    parser.add_argument("--http-only", action="store_true", help="Also a level of blank lines at the largest "
                        "--clients: what the HTTP path alone costs an answer.")
    parser.add_argument("--serve-arg", action="append", default=[], help="Passed on to `mt serve` (repeatable).")
    parser.add_argument("--old", default=None, help="A checkout of mt whose `mt serve` runs each closed-loop "
                        "level beside this one's.")
    parser.add_argument("--rounds", type=int, default=1, help="Each closed-loop level this many times on each "
                        "server in turn; the median run is kept (of an even number, the slower middle one).")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    args.exp = str(Path(args.exp).resolve())  # the old checkout's server runs from its own directory
    if args.checkpoint and Path(args.checkpoint).exists():
        args.checkpoint = str(Path(args.checkpoint).resolve())
    levels = [int(c) for c in args.clients.split(",")]
    modes = args.batching.split(",")
    if args.old:
        modes.append("old")  # the old checkout's server, in the first batching mode

    from mt.allocator import allocator_name, use_tcmalloc

    use_tcmalloc()  # as `mt` does (and so the server, which inherits the preload)
    lines = test_lines(args.exp, args.sentences)
    print(f"inputs: {args.exp}, {len(lines)} test sentences; {args.threads} threads; {cpu_model()}", file=sys.stderr)
    batch = BatchRun(args, lines)
    batch_runs = [batch.time()]
    print(f"batch: {batch_runs[0]:.1f} sent/s ({batch.decoding})", file=sys.stderr)
    chunk = max(levels)
    chunk_runs = [batch.time(chunk)]
    print(f"batch in calls of {chunk} lines: {chunk_runs[0]:.1f} sent/s", file=sys.stderr)
    in_process = batch.batcher(chunk, args.requests)
    print(f"the batcher alone, {chunk} client threads: {in_process['sent_per_s']:.1f} sent/s", file=sys.stderr)
    rate = batch_runs[0] / 2 if args.rate is None else args.rate

    with tempfile.TemporaryDirectory() as tmp:
        servers = {mode: Server(args, Path(tmp) / f"serve-{mode}.log", mode) for mode in modes if mode != "old"}
        if args.old:
            servers["old"] = Server(args, Path(tmp) / "serve-old.log", modes[0], Path(args.old).resolve())
        server = servers[modes[0]]
        try:
            rss_start = server.rss_mb()
            rss_samples = [(0.0, rss_start)]
            for each in servers.values():  # warm-up
                asyncio.run(closed_loop(each.port, lines, min(4, max(levels)), 8, 60, args.timeout))
            closed, soak, opened = {}, None, None
            others: dict[str, dict[int, dict]] = {mode: {} for mode in modes[1:]}
            for clients in levels:
                runs: dict[str, list[dict]] = {mode: [] for mode in servers}
                for _ in range(args.rounds):
                    for mode, each in servers.items():
                        before = each.worker()
                        r = closed_level(each, lines, clients, args.requests, args)
                        r.update(worker_profile(before, each.worker(), r["seconds"]))
                        runs[mode].append(r)
                        print(f"{mode}, {clients} client{'s' if clients > 1 else ''}: {r['sent_per_s']:.1f} sent/s, "
                              f"p50 {r['p50_ms']:.0f} ms", file=sys.stderr)
                    # The batch figures between the rounds too (the servers idle), so that the ratio is of
                    # medians over the same stretch of the machine's time, as the rounds'.
                    batch_runs.append(batch.time())
                    chunk_runs.append(batch.time(chunk))
                for mode, each_runs in runs.items():
                    median = sorted(each_runs, key=lambda r: r["sent_per_s"])[(len(each_runs) - 1) // 2]
                    median["runs_sent_per_s"] = [round(r["sent_per_s"], 2) for r in each_runs]
                    (closed if mode == modes[0] else others[mode])[clients] = median
            http_only, http_others = None, {}
            if args.http_only:
                http_only = closed_level(server, [" "], max(levels), args.requests * 4, args)
                for mode in modes[1:]:
                    http_others[mode] = closed_level(servers[mode], [" "], max(levels), args.requests * 4, args)
            if rate > 0:
                opened = asyncio.run(open_loop(server.port, lines, rate, args.open_seconds, args.timeout,
                                               args.max_pending))
                opened["rss_mb"] = server.rss_mb()
            if args.seconds > 0:
                soak_start = time.perf_counter()

                async def sample() -> None:
                    while True:
                        await asyncio.sleep(args.rss_every)
                        rss_samples.append((time.perf_counter() - soak_start, server.rss_mb()))

                soak = asyncio.run(closed_loop(server.port, lines, max(levels), 10**12, args.seconds,
                                               args.timeout, sample))
            rss_end = server.rss_mb()
            rss_samples.append((float("inf"), rss_end))
            server_mode = server.health
        finally:
            for each in servers.values():
                each.stop()
    batch_runs.append(batch.time())
    chunk_runs.append(batch.time(chunk))
    batch_per_s, chunk_per_s = statistics.median(batch_runs), statistics.median(chunk_runs)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"mt serve, {args.exp}: {len(lines)} test sentences, one a request; {args.threads} threads")
    for column in ("load", "sent/s", "p50 ms", "p95 ms", "p99 ms", "answers", "errors", "server RSS MB",
                   "worker busy", "sent/search", "search sent/s", "server cores", "CPU ms/answer", "loop ms/answer", "client cores"):
        table.add_column(column, justify="left" if column == "load" else "right")

    def row(name: str, r: dict) -> None:
        profile = [f"{r['busy']:.0%}", f"{r['mean_batch']:.1f}", f"{r['search_sent_per_s']:.1f}"] if "busy" in r \
            else ["-"] * 3
        profile += [f"{r['server_cores']:.2f}", f"{r['cpu_ms_per_answer']:.2f}", f"{r['loop_ms_per_answer']:.2f}"] \
            if "server_cores" in r else ["-"] * 3
        profile += [f"{r['client_cores']:.2f}"] if "client_cores" in r else ["-"]
        table.add_row(name, f"{r['sent_per_s']:.1f}", f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}", f"{r['p99_ms']:.0f}",
                      str(r["answers"]), str(r["errors"]), f"{r['rss_mb']:.0f}", *profile)

    table.add_row(f"mt translate (batch, median of runs {', '.join(f'{r:.1f}' for r in batch_runs)})", f"{batch_per_s:.1f}",
                  "-", "-", "-", str(len(lines)), "-", "-", "-", "-", "-", "-", "-", "-", "-")
    table.add_row(f"mt translate, {chunk} lines a call (median of runs {', '.join(f'{r:.1f}' for r in chunk_runs)})",
                  f"{chunk_per_s:.1f}", "-", "-", "-", str(len(lines)), "-", "-", "-", f"{chunk}", "-", "-", "-", "-", "-")
    table.add_row(f"the batcher alone, {chunk} client threads (no HTTP)", f"{in_process['sent_per_s']:.1f}", "-", "-",
                  "-", str(args.requests), "-", "-", "-", f"{in_process['mean_batch']:.1f}",
                  f"{in_process['search_sent_per_s']:.1f}", "-", "-", "-", "-")
    for clients, r in closed.items():
        for mode in modes:
            row(f"{clients} client{'s' if clients > 1 else ''}" + (f", {server_label(mode)}" if len(modes) > 1 else "")
                + (f" (median of {args.rounds})" if args.rounds > 1 else ""),
                r if mode == modes[0] else others[mode][clients])
    if http_only:
        row(f"{max(levels)} clients, blank lines (HTTP only)", http_only)
    for mode, r in http_others.items():
        row(f"{max(levels)} clients, blank lines (HTTP only), {server_label(mode)}", r)
    if opened:
        row(f"open loop, {opened['rate']:.1f}/s", opened)
    if soak:
        soak["rss_mb"] = rss_end
        row(f"soak, {max(levels)} clients, {args.seconds:.0f} s", soak)
    Console(width=200).print(table)
    print(f"{cpu_model()}; decoding: {batch.decoding}; server RSS MB: start {rss_start:.0f}, end {rss_end:.0f}"
          + (f"; soak samples {' '.join(f'{mb:.0f}' for _, mb in rss_samples[1:-1])}" if soak else ""))

    result = {
        "cpu": f"{cpu_model()}, {os.cpu_count()} cores",
        "date": datetime.date.today().isoformat(),
        "threads": args.threads,
        "allocator": allocator_name(),
        "sentences": len(lines),
        "decoding": batch.decoding,
        "batching": modes[0],
        "server_health": server_mode,  # what GET /health said at the start
        "sent_per_s_batch": round(batch_per_s, 2),
        "sent_per_s_batch_runs": [round(r, 2) for r in batch_runs],  # before the server, after it
        f"sent_per_s_batch_{chunk}": round(chunk_per_s, 2),  # the best batches `chunk` one-line clients allow
        f"sent_per_s_batch_{chunk}_runs": [round(r, 2) for r in chunk_runs],
        f"sent_per_s_batcher_{chunk}": round(in_process["sent_per_s"], 2),  # the server's worker, no HTTP
        **{f"sent_per_s_serve_{c}": round(r["sent_per_s"], 2) for c, r in closed.items()},
        **({f"sent_per_s_serve_{c}_runs": r["runs_sent_per_s"] for c, r in closed.items()} if args.rounds > 1 else {}),
        **{f"{q}_ms_{c}": round(r[f"{q}_ms"], 1) for c, r in closed.items() for q in ("p50", "p95", "p99")},
        **{f"{key}_{c}": round(r[key], 3) for c, r in closed.items() for key in ("busy", "mean_batch", "search_sent_per_s")},
        **{f"{key}_{c}": round(r[key], 3) for c, r in closed.items()
           for key in ("server_cores", "cpu_ms_per_answer", "loop_ms_per_answer", "client_cores")},
        **({f"{key}_http_only": round(http_only[key], 3)
            for key in ("sent_per_s", "server_cores", "cpu_ms_per_answer", "loop_ms_per_answer", "client_cores")}
           if http_only else {}),
        **{f"{key}_http_only_{mode}": round(r[key], 3) for mode, r in http_others.items()
           for key in ("sent_per_s", "server_cores", "cpu_ms_per_answer", "loop_ms_per_answer", "client_cores")},
        **{f"sent_per_s_serve_{c}_{mode}": round(r["sent_per_s"], 2) for mode in modes[1:]
           for c, r in others[mode].items()},
        **{f"{q}_ms_{c}_{mode}": round(r[f"{q}_ms"], 1) for mode in modes[1:] for c, r in others[mode].items()
           for q in ("p50", "p99")},
        **{f"{key}_{c}_{mode}": round(r[key], 3) for mode in modes[1:] for c, r in others[mode].items()
           for key in ("busy", "mean_batch", "search_sent_per_s", "server_cores", "cpu_ms_per_answer",
                       "loop_ms_per_answer", "client_cores")},
        **({f"sent_per_s_serve_{c}_{mode}_runs": r["runs_sent_per_s"] for mode in modes[1:]
            for c, r in others[mode].items()} if args.rounds > 1 else {}),
        **({"open_rate": round(opened["rate"], 2), "sent_per_s_open": round(opened["sent_per_s"], 2),
            **{f"{q}_ms_open": round(opened[f"{q}_ms"], 1) for q in ("p50", "p95", "p99")}} if opened else {}),
        **({"soak_seconds": args.seconds, "sent_per_s_soak": round(soak["sent_per_s"], 2),
            "rss_mb_soak": [round(mb, 1) for _, mb in rss_samples[1:-1]]} if soak else {}),
        "errors": sum(r["errors"] for r in [*closed.values(), *filter(None, [opened, soak]),
                                            *(r for mode in modes[1:] for r in others[mode].values())]),
        "rss_mb_start": round(rss_start, 1),
        "rss_mb_end": round(rss_end, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
