"""What more than one bench script uses: one module, so that a script imports mt and this, never
another script. Run the scripts from the repository's root as modules (`python -m bench.translate`).

- training steps: `measure` (steps of several precisions, interleaved) and `model_flops_per_token`
  (the 6N rule's parameters), for bench/throughput.py and bench/model_speed.py;
- decoding side by side: `run_interleaved`, each mode in its own process (mt's modes, CTranslate2's,
  transformers' and ONNX Runtime's), for bench/translate.py and bench/distill.py;
- serving: `Server` (`python -m mt serve` on a loopback port), `Connection` (a raw HTTP/1.1 client),
  `closed_loop` and `test_lines`, for bench/serve.py, bench/serve_hostile.py and bench/libretranslate.py;
- Argos Translate in a process of its own: `sealed_argos_env`, for bench/argos_parity.py and bench/markup.py.

Nothing from mt is imported at the top: a spawned decoding worker of a mode "M@old" (bench/translate.py
--old) puts the other checkout first on its path before it imports mt.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# -- training steps -----------------------------------------------------------------------------------

def median_ms(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median milliseconds of `repeats` calls of `fn`, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def model_flops_per_token(model) -> tuple[int, int]:
    """(encoder matmul params, decoder matmul params incl. output projection) for the 6N rule."""
    encoder = sum(p.numel() for layer in model.encoder for p in layer.parameters())
    decoder = sum(p.numel() for layer in model.decoder for p in layer.parameters())
    return encoder, decoder + model.output.weight.numel()


def measure(trainer, precisions: list[str], steps: int, warmup: int = 2) -> dict[str, dict]:
    """Warm-up steps per precision, then `steps` steps of each, interleaved step by step (which goes
    first alternating) so that all precisions see the same machine load and the same batches (each step's are drawn once and
    given to every precision: a batch's rows, lengths and padding move a step's time); seconds of
    every step and the tokens. Each step is an update as the training loop makes it (`Trainer.update`:
    nothing read back from the device)."""
    measured = {p: {"warmup_seconds": [], "seconds": [], "tgt": 0, "src": 0} for p in precisions}

    def drawn() -> list:
        return [trainer.stream.next_batch() for _ in range(trainer.update_freq)]

    warmups = [drawn() for _ in range(warmup)]
    for precision in precisions:  # first-call allocations, kernel selection (or compilation)
        trainer.precision = precision
        for batches in warmups:
            start = time.perf_counter()
            trainer.update(batches)
            measured[precision]["warmup_seconds"].append(time.perf_counter() - start)
    for step in range(steps):
        batches = drawn()
        # each precision first on every other batch: the first to see a batch pays for its shapes
        for precision in precisions if step % 2 == 0 else precisions[::-1]:
            trainer.precision = precision
            start = time.perf_counter()
            stats = trainer.update(batches)
            measured[precision]["seconds"].append(time.perf_counter() - start)
            measured[precision]["tgt"] += stats["tgt_tokens"]
            measured[precision]["src"] += stats["src_tokens"]
    return measured


# -- decoding side by side ---------------------------------------------------------------------------
MT_MODES = {"fp32": ("fp32", None), "int8": ("fp32", "int8"), "bf16": ("bf16", None),
            "constrained": ("fp32", None),  # fp32 with one constraint per sentence (not a default mode)
            # one batch at a time on all the threads (decode.workers 1), where the modes above search
            # one batch per thread side by side (decode.workers 0, the default)
            "fp32_1w": ("fp32", None), "int8_1w": ("fp32", "int8"), "bf16_1w": ("bf16", None),
            # one batch per search process of one thread (decode.parallel: processes), as ct2_M_inter
            "fp32_proc": ("fp32", None), "int8_proc": ("fp32", "int8"), "bf16_proc": ("bf16", None),
            # with the experiment's lexical shortlist (--shortlist; `mt shortlist` builds it first)
            "fp32_sl": ("fp32", None), "int8_sl": ("fp32", "int8"), "bf16_sl": ("bf16", None),
            # both: mt's fastest path on a CPU
            "fp32_sl_proc": ("fp32", None), "int8_sl_proc": ("fp32", "int8"), "bf16_sl_proc": ("bf16", None),
            # decode.engine ctranslate2: mt translating through the CTranslate2 model it builds in the
            # experiment (mt.decoding.engine), with the shortlist as its vmap in M_sl_engine
            "fp32_engine": ("fp32", None), "int8_engine": ("fp32", "int8"),
            "fp32_sl_engine": ("fp32", None), "int8_sl_engine": ("fp32", "int8")}
# ct2_M: one batch at a time on all the threads (intra_threads); ct2_M_inter: one batch per thread
# side by side (inter_threads), as mt's default.
# ct2_M_vmap: with the export's vmap.txt (the experiment's shortlist), translate_batch(use_vmap=True).
CT2_MODES = {"ct2_fp32": "float32", "ct2_int8": "int8", "ct2_fp32_inter": "float32", "ct2_int8_inter": "int8",
             "ct2_fp32_vmap": "float32", "ct2_int8_vmap": "int8", "ct2_fp32_inter_vmap": "float32",
             "ct2_int8_inter_vmap": "int8"}
HF_MODES = ("hf_fp32", "ort_fp32")  # transformers' generate(), and Optimum's ONNX Runtime model


def reference_constraint(reference: str) -> str:
    """The constraint a sentence gets in the `constrained` mode: its reference's longest word
    (punctuation stripped; the first of equals), a stand-in for a term a glossary would fix."""
    words = [w.strip(".,;:!?\"'()") for w in reference.split()]
    return max(words, key=len, default="")


def _mt_decoder(exp, cfg, mode: str, refs: list[str]):
    try:
        from mt.decoding.options import DecodeOptions
        from mt.decoding.translator import Translator
    except ImportError:  # an --old checkout from before mt/decoding/, whose module was mt/translate.py
        old = importlib.import_module("mt" + ".translate")
        DecodeOptions, Translator = old.DecodeOptions, old.Translator

    precision, quantize = MT_MODES[mode]
    translator = Translator.load(exp, cfg, cfg.decode.checkpoint, "cpu", precision, quantize)
    if mode.endswith("_1w"):
        translator.decode_cfg.workers = 1
    if "_proc" in mode:  # the processes start on the warm-up call, before timing; RSS counts theirs too
        translator.decode_cfg.parallel = "processes"
    if "_sl" in mode:
        translator.decode_cfg.shortlist = True
    # M_engine through CTranslate2; every other mode mt's own search, whatever EXP's decode.engine says
    if hasattr(translator.decode_cfg, "engine"):
        translator.decode_cfg.engine = "ctranslate2" if mode.endswith("_engine") else "mt"
    elif mode.endswith("_engine"):  # an --old checkout from before the engine
        raise SystemExit(f"{mode}: this checkout of mt has no decode.engine")
    if mode != "constrained":
        return translator.translate, translator.tgt_tok
    phrases = [[reference_constraint(ref)] for ref in refs]

    def translate(lines: list[str]) -> list[str]:  # the test split's first len(lines) sentences
        constrained = ["\t".join([line, *phrases[i]]) for i, line in enumerate(lines)]  # SOURCE<TAB>PHRASE
        return [hyps[0][0] for hyps in translator.search(constrained, DecodeOptions(constraints=True))]

    return translate, translator.tgt_tok


def _ct2_decoder(exp, cfg, mode: str, model_dir: str, threads: int, max_tokens: int | None):
    import ctranslate2


    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    inter = threads if "_inter" in mode else 1
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=CT2_MODES[mode],
                                        intra_threads=threads // inter, inter_threads=inter)
    piece_ids = {p: i for i, p in enumerate(tgt_tok.pieces(list(range(tgt_tok.vocab_size))))}
    decode = cfg.decode
    positions = cfg.model.max_positions

    def translate(lines: list[str]) -> list[str]:
        pieces = [src_tok.pieces(ids) for ids in src_tok.encode(lines)]
        # One absolute limit per call: the longest sentence's own a * length + b (shorter ones end long before).
        limit = int(decode.max_len_a * (max((len(p) for p in pieces), default=0) + 1) + decode.max_len_b)
        results = translator.translate_batch(
            pieces, beam_size=decode.beam, length_penalty=decode.alpha, return_end_token=False,
            min_decoding_length=0, max_decoding_length=min(limit, positions), max_input_length=positions,
            max_batch_size=max_tokens or decode.max_tokens, batch_type="tokens", use_vmap=mode.endswith("_vmap"))
        return tgt_tok.decode([[piece_ids[p] for p in r.hypotheses[0]] for r in results])

    return translate, tgt_tok


def _budget_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches whose padded size (rows x longest) stays within
    `budget` tokens, as mt batches its sources (decode.max_tokens)."""
    batches: list[list[int]] = [[]]
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batches[-1] and (len(batches[-1]) + 1) * lengths[i] > budget:
            batches.append([])
        batches[-1].append(i)
    return [batch for batch in batches if batch]


def _hf_decoder(exp, cfg, mode: str, model_dirs: dict[str, str], threads: int):
    """transformers' generate() (hf_fp32) or ONNX Runtime's (ort_fp32) on the Hugging Face export."""
    import torch
    import transformers

    if mode == "ort_fp32":
        import onnxruntime
        from optimum.onnxruntime import ORTModelForSeq2SeqLM

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        model = ORTModelForSeq2SeqLM.from_pretrained(model_dirs["onnx"], session_options=options)
    else:
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dirs["hf"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dirs["hf"])
    decode = cfg.decode

    def translate(lines: list[str]) -> list[str]:
        ids = tokenizer(lines, truncation=True)["input_ids"]
        out = [""] * len(lines)
        for rows in _budget_batches([len(row) for row in ids], decode.max_tokens):
            batch = tokenizer.pad({"input_ids": [ids[i] for i in rows]}, return_tensors="pt")
            longest = batch["input_ids"].size(1) - 1  # source tokens, </s> not counted: mt's limit
            limit = min(int(decode.max_len_a * longest + decode.max_len_b), cfg.model.max_positions - 1)
            with torch.inference_mode():
                generated = model.generate(**batch, num_beams=decode.beam, length_penalty=decode.alpha,
                                           early_stopping=True, max_new_tokens=limit)
            for i, text in zip(rows, tokenizer.batch_decode(generated, skip_special_tokens=True)):
                out[i] = text.strip()
        return out

    return translate, exp.load_tokenizers(cfg.tokenizer.joint)[1]


def stamp() -> dict[str, str]:
    """The CPU and the date, for a bench script's JSON line."""
    from mt.hardware import cpu_name

    return {"cpu": cpu_name(), "date": time.strftime("%Y-%m-%d", time.gmtime())}


def tree_peak_mb(pid: int) -> float:
    """VmHWM (peak RSS) of `pid` and its descendants, summed, in MB."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    family, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in family} - family
        family |= more
        grew = bool(more)
    total = 0.0
    for member in family:
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM), plus that of every process it has
    started that still runs (search processes, each with a model of its own: left out, the mode of
    processes looked smaller than the one of threads). getrusage's maxrss carries over the parent's
    peak into a spawned child, which made every worker of a parent that trained a model look alike."""
    return tree_peak_mb(os.getpid()) or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker(exp_dir: str, mode: str, args: dict, model_dirs: dict[str, str], commands, results) -> None:
    """Load one mode, warm it up, then time one pass over the test split per 'go' on `commands`.
    A mode "M@old" is mode M of the checkout --old names: its `mt` is imported instead of this one's."""
    if mode.endswith("@old"):
        sys.path.insert(0, args["old"])
        mode = mode[:-len("@old")]
    mode, _, size = mode.partition("@b")  # a CTranslate2 mode at a batch size of its own (bench.translate)
    if size:
        args = {**args, "ct2_max_tokens": int(size)}
    import torch

    from mt.data.corpus import load_split
    from mt.metrics import score

    try:
        from mt.experiment.paths import Experiment
    except ImportError:  # an --old checkout from before mt/experiment/ (a module then)
        Experiment = importlib.import_module("mt.experiment").Experiment

    torch.set_num_threads(args["threads"])
    exp = Experiment(exp_dir)
    cfg = exp.load_config()
    cfg.decode.checkpoint = args["checkpoint"]
    cfg.decode.beam, cfg.decode.alpha, cfg.decode.length_penalty = args["beam"], args["alpha"], "length"
    src, refs = load_split(cfg.data.sources("test"))
    if mode in CT2_MODES:
        translate, tgt_tok = _ct2_decoder(exp, cfg, mode, model_dirs["ct2"], args["threads"], args.get("ct2_max_tokens"))
    elif mode in HF_MODES:
        translate, tgt_tok = _hf_decoder(exp, cfg, mode, model_dirs, args["threads"])
    else:
        translate, tgt_tok = _mt_decoder(exp, cfg, mode, refs)
    translate(src)  # warm-up, a whole pass: first-call allocations and kernels for every batch shape
    results.put("ready")
    seconds, hyps = [], []
    while commands.get() == "go":
        start = time.perf_counter()
        hyps = translate(src)
        seconds.append(time.perf_counter() - start)
        results.put(seconds[-1])
    scores = score(hyps, refs)
    # How often the reference's longest word is in the output (the constraint, in the constrained mode).
    has_word = sum(reference_constraint(ref) in hyp for hyp, ref in zip(hyps, refs)) / max(len(refs), 1)
    results.put({
        "reference_word_in_output": has_word,
        "seconds": seconds, "sentences": len(src), "out_tokens": sum(len(ids) for ids in tgt_tok.encode(hyps)),
        "bleu": scores["bleu"], "chrf": scores["chrf"], "signature": scores["bleu_signature"],
        "peak_rss_mb": peak_rss_mb(),
    })


def run_interleaved(rows: dict[str, tuple[str, str, dict]], repeats: int, model_dirs: dict[str, str]) -> dict[str, dict]:
    """rows: name -> (experiment, mode, settings). Every row in its own process, loaded first; then
    run r of each row in turn, r = 1..repeats, so that the machine's drift touches every row alike."""
    ctx = multiprocessing.get_context("spawn")
    workers = {}
    for name, (exp_dir, mode, settings) in rows.items():
        commands, results = ctx.Queue(), ctx.Queue()
        process = ctx.Process(target=_worker, args=(exp_dir, mode, settings, model_dirs, commands, results))
        process.start()
        if results.get() != "ready":
            raise SystemExit(f"{name}: the worker did not start")
        workers[name] = (process, commands, results)
    names = list(workers)
    for run in range(repeats):  # each run starts with the next row: none is always first (or last)
        for name in names[run % len(names):] + names[: run % len(names)]:
            _, commands, results = workers[name]
            commands.put("go")
            print(f"run {run + 1}/{repeats} {name}: {results.get():.2f} s", file=sys.stderr)
    out = {}
    for name, (process, commands, results) in workers.items():
        commands.put("stop")
        result = results.get()
        process.join()
        median = statistics.median(result["seconds"])
        out[name] = {**result, "median_seconds": median, "sent_per_s": result["sentences"] / median,
                     "tokens_per_s": result["out_tokens"] / median}
    return out


# -- serving ------------------------------------------------------------------------------------------
def stop_process(process: subprocess.Popen) -> None:
    """Ask a server to stop (SIGTERM), and kill it if it has not within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered) / 100) - 1))]


# -- the server -------------------------------------------------------------------------------------
# `python -m mt` from another checkout: its mt/ is found first (the working directory), but mt.cli is
# installed from this checkout's cli/ (pyproject's package-dir, an editable install's finder), so the
# old mt would run this checkout's command line. This runs the checkout's own cli/ as mt.cli.
CHECKOUT_MAIN = """\
import importlib.util, runpy, sys
root = sys.argv.pop(1)
class OwnCli:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "mt.cli":
            return None
        return importlib.util.spec_from_file_location(
            name, f"{root}/cli/__init__.py", submodule_search_locations=[f"{root}/cli"])
sys.meta_path.insert(0, OwnCli)  # mt itself comes from the working directory, the checkout
sys.argv[0] = "mt"
runpy.run_module("mt", run_name="__main__", alter_sys=True)
"""


class Server:
    """`python -m mt serve` on a free loopback port, started and stopped by this process (this
    checkout's mt, or `checkout`'s)."""

    def __init__(self, args, log_path: Path, batching: str = "static", checkout: Path = REPO):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        python = [sys.executable, "-m", "mt"] if checkout == REPO else [sys.executable, "-c", CHECKOUT_MAIN, str(checkout)]
        command = [*python, "serve", "--exp", args.exp, "--host", "127.0.0.1",
                   "--port", str(self.port), "--threads", str(args.threads), "--precision", args.precision,
                   "--batching", batching, *args.serve_arg]
        if args.checkpoint:
            command += ["--checkpoint", args.checkpoint]
        if args.quantize:
            command += ["--quantize", args.quantize]
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=checkout)
        self.health = self._wait(args.start_seconds)

    def _wait(self, seconds: float) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"mt serve exited with {self.process.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                status, body = asyncio.run(get(self.port, "/health"))
                if status == 200:
                    return json.loads(body or b"{}")
            except (OSError, ValueError):
                pass
            time.sleep(0.25)
        self.stop()
        sys.exit(f"mt serve did not answer /health in {seconds:.0f} s:\n{self.log_path.read_text()[-3000:]}")

    def worker(self) -> dict:
        """The worker's counters now (GET /health): batches, sentences, busy_seconds."""
        status, body = asyncio.run(get(self.port, "/health"))
        health = json.loads(body) if status == 200 else {}
        return {key: health.get(key, 0) for key in ("batches", "sentences", "busy_seconds")}

    def rss_mb(self) -> float:
        return rss_mb(self.process.pid)  # `mt` may re-exec itself with tcmalloc: the same pid

    def cpu_seconds(self, loop: bool = False) -> float:
        """The server's CPU time so far, all its threads (user + system, /proc/PID/stat), or with
        `loop` its main thread's alone: the event loop's (/proc/PID/task/PID/stat)."""
        path = f"/proc/{self.process.pid}/task/{self.process.pid}/stat" if loop else f"/proc/{self.process.pid}/stat"
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        stop_process(self.process)


# -- a raw HTTP/1.1 client ----------------------------------------------------------------------------
class Connection:
    """One keep-alive connection to 127.0.0.1:port; reconnects after the server closed it."""

    KEEP_ALIVE = 4.0  # seconds idle before a new connection: uvicorn closes idle ones after 5

    def __init__(self, port: int):
        self.port, self.reader, self.writer, self.used = port, None, None, 0.0

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is not None and time.monotonic() - self.used > self.KEEP_ALIVE:
            self.close()  # the server may be closing it now: a request sent then would fail, as a client's would
        self.used = time.monotonic()
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        try:
            self.writer.write(head + body)
            await self.writer.drain()
            status_line = await self.reader.readline()
            if not status_line:
                raise ConnectionError("the server closed the connection")
            headers = {}
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            if headers.get("transfer-encoding") == "chunked":
                data = b""
                while size := int((await self.reader.readline()).strip() or b"0", 16):
                    data += await self.reader.readexactly(size + 2)
                    data = data[:-2]
                await self.reader.readline()
            else:
                data = await self.reader.readexactly(int(headers.get("content-length", 0)))
            if headers.get("connection") == "close":
                self.close()
            self.used = time.monotonic()
            return int(status_line.split()[1]), data
        except (OSError, asyncio.IncompleteReadError, ValueError):
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def get(port: int, path: str) -> tuple[int, bytes]:
    connection = Connection(port)
    try:
        return await asyncio.wait_for(connection.request("GET", path), 5)
    finally:
        connection.close()


def translate_body(line: str) -> bytes:
    return json.dumps({"text": line}).encode()


async def post(connection: Connection, path: str, body: bytes, timeout: float) -> bytes | None:
    """POST `body` to `path`; the answer's body for a 200 answer, else None."""
    try:
        status, data = await asyncio.wait_for(connection.request("POST", path, body), timeout)
        return data if status == 200 else None
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
        connection.close()
        return None


async def send(connection: Connection, line: str, timeout: float) -> bool:
    """POST one sentence to /v1/translate; True for a 200 answer."""
    return await post(connection, "/v1/translate", translate_body(line), timeout) is not None


# -- the loads ----------------------------------------------------------------------------------------
async def closed_loop(port: int, lines: list[str], clients: int, requests: int, seconds: float,
                      timeout: float, sample=None, request=None, answers: dict | None = None,
                      offset: int = 0) -> dict:
    """`clients` clients, each sending its next sentence when the last answer came, until `requests`
    answers or `seconds`; `sample` (a coroutine function) runs beside them, for the soak's RSS.
    Request n sends line (offset + n) % len(lines): by default {"text": line} to /v1/translate, or
    what `request(line)` gives, a (path, body) pair; `answers`, when given, gets each 200 answer's body
    under its line's index."""
    latencies, errors, counter = [], 0, iter(range(10**12))
    request = request or (lambda line: ("/v1/translate", translate_body(line)))
    start = time.perf_counter()
    stop_at = start + seconds

    async def client() -> None:
        nonlocal errors
        connection = Connection(port)
        while time.perf_counter() < stop_at and (n := next(counter)) < requests:
            index = (offset + n) % len(lines)
            sent = time.perf_counter()
            if (data := await post(connection, *request(lines[index]), timeout)) is not None:
                latencies.append(time.perf_counter() - sent)
                if answers is not None:
                    answers[index] = data
            else:
                errors += 1
        connection.close()

    tasks = [asyncio.create_task(client()) for _ in range(clients)]
    if sample is not None:
        sampler = asyncio.create_task(sample())
    await asyncio.gather(*tasks)
    if sample is not None:
        sampler.cancel()
    return summary(latencies, errors, time.perf_counter() - start)


def summary(latencies: list[float], errors: int, seconds: float) -> dict:
    ms = [s * 1000 for s in latencies]
    return {"answers": len(ms), "errors": errors, "seconds": seconds, "sent_per_s": len(ms) / seconds,
            "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "p99_ms": percentile(ms, 99)}


def read_split(data: Path, split: str, lang: str) -> list[str]:
    """One language's lines of a split as prepared corpora hold them (DATA/SPLIT.LANG, one sentence a line)."""
    return (data / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()


def report(result: dict, out: Path | None) -> None:
    """A bench's JSON object: written to `out` too when given (indented), then printed as the last line."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, ensure_ascii=False))


def test_lines(exp_dir: str, limit: int) -> list[str]:
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment

    src, _ = load_split(Experiment(exp_dir).load_config().data.sources("test"))
    lines = [line for line in src if line.strip()]
    return lines[:limit] if limit else lines


# -- Argos Translate -----------------------------------------------------------------------------------
CLOSED = "http://127.0.0.1:9/"  # the discard port: nothing listens there


def sealed_argos_env(home: Path, beam: int, threads: int = 1) -> dict[str, str]:
    """The environment of a process that runs Argos Translate on the CPU with an Argos home of its own
    under `home` (HOME, XDG_*, the packages directory) and its package index and MiniSBD's download
    address at a closed loopback port, so that a download fails instead of passing unnoticed; beam
    `beam`, one translation at a time on `threads` threads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOS_", "XDG_", "MINISBD_"))}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        ARGOS_PACKAGES_DIR=str(home / "packages"),
        ARGOS_PACKAGE_INDEX=CLOSED,
        MINISBD_REPO_URL=CLOSED,
        ARGOS_DEVICE_TYPE="cpu",
        ARGOS_BEAM_SIZE=str(beam),
        ARGOS_INTRA_THREADS=str(threads),
        ARGOS_INTER_THREADS="1",
        OMP_NUM_THREADS=str(threads),
    )
    return env
