"""`mt serve` against requests that tried to crash or stall it: each case was reproduced against the
server as it was, and each test here failed there. Real servers on loopback ports (uvicorn in a
thread, as tests/system/test_serve.py), raw sockets where a client misbehaves at the HTTP level.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time

import pytest
from fastapi.responses import JSONResponse
from helpers import LINES, Hook, Served, call, load, ok, raw_http
from starlette.exceptions import HTTPException

from mt.apps.serve.app import Limits, build_app
from mt.apps.serve.http import PlainRoute
from mt.apps.serve.queue import Batcher
from mt.apps.serve.requests import ApiError
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.text.translate import translate

pytestmark = pytest.mark.usefixtures("single_thread")

LIMITS = Limits(max_wait_ms=20, max_lines=20, max_chars=2000, max_beam=5, max_attention_tokens=12)
BODY_LIMIT = 12 * LIMITS.max_chars + 65536


@pytest.fixture(scope="module")
def server(trained_experiment):
    with Served(build_app(load(trained_experiment), LIMITS, threads=1)) as served:
        yield served


# -- 1. a chunked body is read up to the limit, not whole ----------------------------------------
@pytest.mark.parametrize("route", ["/v1/translate", "/translate", "/v1/attention"])
def test_a_chunked_body_past_the_limit_is_refused_before_it_ends(server, route):
    chunk = b"x" * 65536
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (BODY_LIMIT // len(chunk) + 2)  # past the limit, never ended
    head = f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    started = time.monotonic()
    status, data = raw_http(server.url, head, parts)
    assert status == 413 and list(data) == ["error"] and str(BODY_LIMIT) in data["error"]
    assert time.monotonic() - started < 15


# -- 2. malformed requests get a 4xx, never a 500 ------------------------------------------------
MALFORMED = [
    ("/v1/translate", b'{"text": "Hallo.", "alpha": -' + b"9" * 400 + b"}", 422, "alpha"),
    ("/v1/translate", b'{"text": "Hallo.", "beam": ' + b"9" * 5000 + b"}", 422, "invalid JSON"),
    ("/v1/translate", b"[" * 5000, 422, "invalid JSON"),
    ("/v1/translate", b'{"text": "Hallo \\ud800"}', 422, "text"),
    ("/v1/translate", b'{"text": ["Gut.", "Hallo \\udfff."]}', 422, "text[1]"),
    ("/v1/attention", b'{"text": "Hallo \\ud800"}', 422, "text"),
    ("/translate", b'{"q": "Hallo \\ud800", "source": "de", "target": "en"}', 400, "q"),
    ("/translate", b'{"q": "Hallo", "source": "\\ud800", "target": "en"}', 400, "\\ud800"),
    ("/translate", b'{"q": "Hallo", "source": "de", "target": "en", "alternatives": "2.5"}', 400, "alternatives"),
    ("/translate", b'{"q": "Hallo", "source": "de", "target": ["en"]}', 400, "target"),
    ("/translate", b'{"q": "Hallo", "source": {"a": 1}, "target": "en"}', 400, "source"),
    ("/translate", b'{"q": "Hallo", "source": "de", "target": "' + b"x" * 1000 + b'"}', 400, "target"),
    ("/translate", b'{"q": "Hallo", "source": "d\\ne", "target": "en"}', 400, "source"),  # one line, no break in it
    ("/translate", b'{"q": "Hallo", "source": "de", "target": "en", "format": "' + b"x" * 9000 + b'"}', 400, "format"),
    ("/v1/translate", b'{"text": "Hallo.", "alpha": 50, "length_penalty": "length"}', 422, "from 0 to 10,"),
    ("/v1/translate", b'{"text": "Hallo.", "alpha": 999999, "nbest": 2}', 422, "alpha"),
    ("/v1/translate", b'{"text": "Hallo.", "source": ""}', 422, "source: expected a language code"),
    ("/v1/attention", b'{"text": "Hallo.", "layer": 0}', 422, "1 or more"),
    ("/translate", b"[" * 5000, 400, "invalid JSON"),
]


@pytest.mark.parametrize("route, body, status, needle", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_requests_get_a_4xx_in_the_documented_shape(server, route, body, status, needle):
    got, _, data = call(f"{server.url}{route}", raw=body, headers={"Content-Type": "application/json"})
    assert got == status and list(data) == ["error"] and needle in data["error"], data
    assert "\n" not in data["error"] and len(data["error"]) < 300  # what the client sent is quoted, cut short


def test_an_api_key_that_is_not_text_is_refused_with_403(trained_experiment):
    with Served(build_app(load(trained_experiment), LIMITS, api_key="s3cret", threads=1)) as served:
        body = b'{"q": "Hallo", "source": "de", "target": "en", "api_key": "s3\\ud800"}'
        got, _, data = call(f"{served.url}/translate", raw=body, headers={"Content-Type": "application/json"})
        assert got == 403 and data == {"error": "Invalid API key"}


def test_a_fault_of_the_server_is_500_in_the_same_shape_with_the_traceback_in_its_log_only(trained_experiment, capfd):
    app = build_app(load(trained_experiment), LIMITS, threads=1)

    @app.get("/fault")
    async def fault():
        raise ZeroDivisionError("a bug")

    class Unsendable(JSONResponse):
        async def __call__(self, scope, receive, send):
            raise ZeroDivisionError("a bug while answering")

    class Teapot(Exception):
        pass

    def teapot(request, exc):  # a handler that is not a coroutine, as Starlette allows
        return JSONResponse({"error": "a teapot"}, 418)

    async def plain_fault(request):  # a route called past FastAPI's stack (mt.apps.serve.http.PlainRoutes)
        asked = (await request.json()).get("fault")
        if asked == "refuse":
            raise ApiError(418, "refused")
        if asked == "unsendable":
            return Unsendable({})
        if asked == "teapot":
            raise Teapot()
        if asked == "conflict":
            raise HTTPException(409, "a conflict")
        raise ZeroDivisionError("a bug")

    app.add_exception_handler(Teapot, teapot)
    app.add_exception_handler(409, lambda request, exc: JSONResponse({"error": "by status"}, 409))
    app.router.add_api_route("/v1/fault", plain_fault, methods=["POST"], route_class_override=PlainRoute)
    with Served(app) as served:
        answers = [call(f"{served.url}/fault"), call(f"{served.url}/v1/fault", {"fault": "bug"}),
                   call(f"{served.url}/v1/fault", {"fault": "refuse"}), call(f"{served.url}/v1/fault"),
                   *(call(f"{served.url}/v1/fault", {"fault": f}) for f in ("unsendable", "teapot", "conflict"))]
    internal = {"error": "internal error (ZeroDivisionError); the server's log has the details"}
    assert [(got, data) for got, _, data in answers] == [
        (500, internal), (500, internal), (418, {"error": "refused"}),
        (405, {"error": "GET /v1/fault: this route takes POST"}),
        (500, internal), (418, {"error": "a teapot"}), (409, {"error": "by status"})]
    err = capfd.readouterr().err
    assert "error: POST /v1/fault: ZeroDivisionError: a bug\nTraceback" in err and "error: GET /fault: Zero" in err
    assert "a bug while answering" in err
    assert err.count("POST /v1/fault 500") == 2 and "POST /v1/fault 418" in err  # one access-log line each


def test_the_library_refuses_text_that_is_not_unicode_in_one_line(trained_experiment):
    from mt.errors import MtError

    with pytest.raises(MtError, match=r"^line 2: not valid Unicode \(an unpaired surrogate at character 7\)$"):  # 1-based, as the corpus readers count
        load(trained_experiment).translate(["Hallo.", "Hallo \ud800."])


# -- 3. /v1/attention is capped, and serialised on the worker -----------------------------------
def test_attention_past_its_token_limit_is_refused_and_within_it_answered(server):
    long = " ".join(LINES[:4])
    got, _, data = call(f"{server.url}/v1/attention", {"text": long, "encoder": True})
    assert got == 413 and "--max-attention-tokens" in data["error"] and "at most 12 characters and tokens" in data["error"]
    answer = ok(f"{server.url}/v1/attention", {"text": "Der Hund.", "encoder": True})
    assert answer["translation"] is not None and answer["encoder_self_attention"]


# -- 4. the character limit is the contract, whatever the encoding --------------------------------
def test_the_character_limit_holds_for_text_that_takes_many_bytes(trained_experiment):
    limits = Limits(max_wait_ms=0, max_chars=20_000, max_lines=4)
    translator = load(trained_experiment)
    with Served(build_app(translator, limits, threads=1)) as served:
        cjk = "中" * 17_000  # 153,000 bytes as a form: %E4%B8%AD each
        assert ok(f"{served.url}/translate", form={"q": cjk, "source": "de", "target": "en"})["translatedText"] is not None
        emoji = json.dumps({"text": "😀" * 15_000})  # ensure_ascii: 12 bytes each, 180,000 in all
        status, _, data = call(f"{served.url}/v1/translate", raw=emoji.encode(), headers={"Content-Type": "application/json"})
        assert status == 200, data
        status, _, data = call(f"{served.url}/v1/translate", {"text": "a" * 20_001})
        assert status == 413 and "20001 characters" in data["error"]


# -- 5. a long sentence is not passed over for ever by short ones --------------------------------
def test_a_long_sentence_joins_a_continuous_search_under_steady_short_traffic(trained_experiment):
    translator = load(trained_experiment)
    short = translator.encode_lines(LINES[:1])[1][0]
    long = translator.encode_lines([" ".join(LINES[:5])])[1][0]
    budget = len(long) + len(short) // 2  # the long one fits only once the search is (nearly) empty
    batcher = Batcher(translator, max_batch_tokens=budget, max_wait_ms=20, batching="continuous")
    options = DecodeOptions(beam=2, alpha=0.6, length_penalty="gnmt")
    stop, shorts = threading.Event(), []

    def steady() -> None:  # one short sentence every 2 ms: the search never empties by itself
        while not stop.is_set() and len(shorts) < 30_000:
            shorts.append(batcher.submit([short], options))
            time.sleep(0.002)

    batcher.start()
    feeder = threading.Thread(target=steady)
    feeder.start()
    try:
        time.sleep(0.2)
        waiting = batcher.submit([long], options)
        assert waiting.result(timeout=10) is not None
        assert not stop.is_set() and feeder.is_alive(), "answered only once the short traffic had ended"
    finally:
        stop.set()
        feeder.join()
        batcher.close(60)


# -- 6. one definition of the score in every batching mode --------------------------------------
@pytest.mark.parametrize("stop", ["early", "exact"])
def test_beam_one_scores_the_same_in_both_batching_modes(trained_experiment, stop):
    results = {}
    for batching in ("static", "continuous"):
        translator = load(trained_experiment)
        translator.decode_cfg.stop = stop
        batcher = Batcher(translator, max_wait_ms=0, batching=batching)
        future = batcher.submit(translator.encode_lines(LINES[:6])[1], DecodeOptions(beam=1).resolved(translator.decode_cfg))
        batcher.start()
        batcher.close(60)
        results[batching] = future.result()
    greedy = load(trained_experiment).search(LINES[:6], DecodeOptions(beam=1))  # mt translate --beam 1: log-prob
    assert results["static"] == results["continuous"] == greedy


# -- 7. text comes back with its own line breaks ------------------------------------------------
def test_libretranslate_splits_where_mt_translate_does_and_keeps_each_break(server, trained_experiment):
    text = f"{LINES[0]}\u2028{LINES[1]}\r\n{LINES[2]}\x0c{LINES[3]}\n\n{LINES[4]}\n"
    answer = ok(f"{server.url}/translate", {"q": text, "source": "de", "target": "en"})["translatedText"]
    lines = [f"{LINES[0]}\u2028{LINES[1]}", f"{LINES[2]}\x0c{LINES[3]}", "", LINES[4], ""]
    # mt translate's lines, each sentence by sentence (mt.text): "\u2028" and "\x0c" stay between two sentences.
    one, two, three, four, five = translate(load(trained_experiment), lines)
    assert answer == f"{one}\r\n{two}\n{three}\n{four}\n{five}"
    assert "\u2028" in one and "\x0c" in two
    assert answer.endswith("\n") and answer.count("\r\n") == 1


# -- 8. a client that left is dropped from the running search -----------------------------------
def test_a_continuous_search_drops_the_sentences_of_a_request_whose_client_left(trained_experiment):
    translator = load(trained_experiment)
    hook = Hook(translator)
    limits = Limits(max_wait_ms=0, batching="continuous")
    app = build_app(translator, limits, threads=1)
    batcher = app.state.batcher
    with Served(app) as served:
        hook.gate.clear()
        host, port = served.url.removeprefix("http://").split(":")
        body = json.dumps({"text": LINES[:3], "beam": 3}).encode()
        client = socket.create_connection((host, int(port)))
        client.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert hook.entered.wait(60)  # the worker is inside the search of the three sentences
        request = batcher.taken[0].request
        client.close()  # the client leaves
        deadline = time.monotonic() + 20
        while not request.future.cancelled():
            assert time.monotonic() < deadline, "the request was not called off"
            time.sleep(0.01)
        rows = []
        hook.decode = _recording(hook.decode, rows)
        hook.gate.set()
        deadline = time.monotonic() + 20
        while batcher.taken and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rows == [9]  # the step in flight ends (3 sentences x beam 3); no other step runs with their rows
        assert ok(f"{served.url}/v1/translate", {"text": LINES[0]})["translations"][0]["text"] is not None


def _recording(decode, rows: list[int]):
    def record(tgt_ids, *args, **kwargs):
        rows.append(tgt_ids.size(0))
        return decode(tgt_ids, *args, **kwargs)
    return record


def test_continuous_search_remove_leaves_the_others_as_they_would_be(trained_experiment):
    from mt.search.continuous import ContinuousBeamSearch

    translator: Translator = load(trained_experiment)
    sources = translator.encode_lines(LINES[:4])[1]
    expected = {}
    search = ContinuousBeamSearch(translator.model, 3, 0.6, "gnmt", 0.0, 16, 1)
    search.add(translator.pad_sources(sources), list(range(4)))
    while search.active:
        expected.update({key: hyps for key, hyps in search.step()})
    search = ContinuousBeamSearch(translator.model, 3, 0.6, "gnmt", 0.0, 16, 1)
    search.add(translator.pad_sources(sources), list(range(4)))
    got = dict(search.step())
    assert search.remove(lambda key: key in (1, 2)) == 2 and search.active == 2 - len(got)
    while search.active:
        got.update(dict(search.step()))
    assert set(got) <= {0, 3}
    for key, hyps in got.items():  # the same translations; scores to float rounding (fewer rows, other kernels)
        assert [h.tokens for h in hyps] == [h.tokens for h in expected[key]]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in expected[key]], abs=1e-5)


# -- 9. a form's repeated q is read in linear time -----------------------------------------------
def test_a_form_of_many_q_fields_is_refused_at_once(server):
    body = b"source=de&target=en" + b"&q" * ((BODY_LIMIT - 100) // 2)  # 44,000 q's: 1.4 s when each copied the list
    started = time.monotonic()
    got, _, data = call(f"{server.url}/translate", raw=body,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert got == 400 and "exceeds text limit" in data["error"] and time.monotonic() - started < 1.0
    got, _, data = call(f"{server.url}/translate", raw=b"source=de&target=en&q=Hallo.&alternatives=%2B2",
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert got == 200 and len(data["alternatives"]) <= 2, data  # "+2" is a number, as Python's int() reads it
    got, _, data = call(f"{server.url}/translate", raw=b"source=de&target=en&q=Hallo.&alternatives=" + b"9" * 30,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert got == 200 and len(data["alternatives"]) <= LIMITS.max_beam - 1  # more than any limit: capped, as in JSON


# -- 10. a client that stalls or leaves mid-request ----------------------------------------------
def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (anything it sends first is read past)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except (socket.timeout, TimeoutError):
        return False
    except ConnectionResetError:
        pass
    return True


def test_a_client_that_stalls_in_its_headers_or_body_is_cut_off(trained_experiment, capfd):
    limits = Limits(max_wait_ms=0, read_timeout=1.0)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        host, port = served.url.removeprefix("http://").split(":")
        stalled_head = socket.create_connection((host, int(port)))
        stalled_head.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\n")  # never ends its headers
        stalled_body = socket.create_connection((host, int(port)))
        stalled_body.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"text\"")
        assert _closed_within(stalled_head, 10) and _closed_within(stalled_body, 10)
        assert ok(f"{served.url}/v1/translate", {"text": LINES[0]})["translations"][0]["text"] is not None
    err = capfd.readouterr().err
    assert "POST /v1/translate 499" in err and "Traceback" not in err


def test_a_body_that_keeps_coming_is_read_past_the_read_timeout(trained_experiment):
    """Was: --read-timeout was a deadline on the whole body, so an upload slower than the timeout
    allowed (10 MB in 30 s: 2.7 Mbit/s) was cut off, steady as it came; now its silences are timed."""
    limits = Limits(max_wait_ms=0, read_timeout=1.0)
    body = json.dumps({"text": LINES[0]}).encode()
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        host, port = served.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body))
            pieces = [body[i : i + max(1, len(body) // 6)] for i in range(0, len(body), max(1, len(body) // 6))]
            for piece in pieces:  # about 2.5 s in all, never 1 s without a byte
                time.sleep(0.35)
                sock.sendall(piece)
            sock.settimeout(30)
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"translations"' in answer


def test_a_long_query_string_is_read_however_its_bytes_arrive(server):
    """Was: a request line past 16 KiB passed when it came in one read and was 400 when it came in
    several (as over a network): deep-translator sends `q` in the query string, so a text of a few
    thousand Cyrillic characters (or 1,400 of 4 bytes), well within --max-chars, failed. Now the line may take what a body
    may (12 x --max-chars + 64 KiB), counted the same however it is split; past it, a JSON 400."""
    from urllib.parse import quote

    text = ("𠀋" * 20 + "。") * 70  # 1,470 characters (--max-chars 2000 here): 17,430 bytes percent-encoded
    head = f"POST /translate?q={quote(text)}&source=de&target=en HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    assert len(head) > 16384
    host, port = server.url.removeprefix("http://").split(":")
    for size in (len(head), 1400):
        with socket.create_connection((host, int(port))) as sock:
            data = head.encode()
            for i in range(0, len(data), size):
                sock.sendall(data[i : i + size])
                time.sleep(0.002)
            sock.settimeout(30)
            answer = b""
            while not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 "), (size, answer[:300])
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["translatedText"].startswith("𠀋")  # copied
    over = f"GET /health?q={'x' * BODY_LIMIT} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answer = _received_until_closed(server.url, over, piece=1400)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert "request line" in json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]


def test_a_client_that_leaves_mid_body_is_logged_as_499_without_a_traceback(server, capfd):
    host, port = server.url.removeprefix("http://").split(":")
    for route in ("/v1/translate", "/translate"):
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n12345678".encode())
            time.sleep(0.2)
    deadline = time.monotonic() + 10
    err = ""
    while err.count(" 499 ") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert "POST /v1/translate 499" in err and "POST /translate 499" in err
    assert "Traceback" not in err and "error:" not in err


def test_connections_past_the_limit_are_closed_as_they_open(trained_experiment):
    limits = Limits(max_wait_ms=0, max_connections=3)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        host, port = served.url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port))) for _ in range(3)]
        extra = socket.create_connection((host, int(port)))
        assert _closed_within(extra, 10)
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 10
        while True:  # the server sees the idle ones close, and takes new connections again
            try:
                assert ok(f"{served.url}/health")["status"] == "ok"
                break
            except (OSError, AssertionError):
                assert time.monotonic() < deadline
                time.sleep(0.05)


@pytest.mark.parametrize("change, needle", [({"max_wait_ms": math.inf}, "--max-wait-ms"),
                                            ({"read_timeout": 0}, "--read-timeout"),
                                            ({"max_connections": 0}, "--max-connections"),
                                            ({"max_file_bytes": 0}, "--max-file-bytes"),
                                            ({"max_file_jobs": 0}, "--max-file-jobs"),
                                            ({"file_ttl": math.nan}, "--file-ttl")])
def test_server_limits_out_of_range_are_one_line(change, needle):
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match=needle):
        Limits(**change)


def test_nbest_over_beam_gives_what_the_beam_holds(server):
    """A schema-valid request (the schema cannot say nbest <= beam) is answered, not refused."""
    answer = ok(f"{server.url}/v1/translate", {"text": LINES[0], "beam": 2, "nbest": 3})
    assert len(answer["translations"][0]["nbest"]) == 2


def test_a_client_that_never_reads_its_answers_is_cut_off(trained_experiment):
    """Was: held its connection (and the unsent answers' memory) for ever, past the read deadline:
    asyncio's close() waits for the write buffer to empty, which never happens."""
    limits = Limits(max_wait_ms=0, read_timeout=1.0)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        host, port = served.url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.settimeout(5)
        try:  # pipelined requests whose answers are never read: megabytes of them wait to be written
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 300_000)
        except OSError:
            pass  # the server stopped reading (its writes are paused), or cut the connection already
        deadline = time.monotonic() + 30
        while served.server.server_state.connections and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not served.server.server_state.connections, "the connection of a client that never reads stays"
        sock.close()


def test_requests_a_stopping_server_has_no_time_left_for_get_503_with_retry_after(trained_experiment):
    """What uvicorn would cancel at the end of the grace (a plain-text 500, and a worker that went on
    translating for clients already gone) is answered first, by Batcher.stop_waiting."""
    from concurrent.futures import ThreadPoolExecutor

    app = build_app(load(trained_experiment), Limits(max_wait_ms=3000), threads=1)  # requests wait in the queue
    with Served(app) as served, ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(call, f"{served.url}/v1/translate", {"text": LINES[:2]})
        deadline = time.monotonic() + 30
        while app.state.batcher.queued() < 2:
            assert not waiting.done() and time.monotonic() < deadline
            time.sleep(0.02)
        app.state.batcher.stop_waiting()  # as the server does GRACE - 2 s after SIGTERM
        status, headers, data = waiting.result(30)
    assert status == 503 and headers.get("Retry-After") == "1" and "shutting down" in data["error"]


def _answers_then_closed(url: str, data: bytes, seconds: float = 10) -> list[int]:
    """Send `data` on a socket of its own; the statuses of the answers read until the server closes it
    (within `seconds`: else the test fails)."""
    received = _received_until_closed(url, data, seconds)
    return [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", received)]  # answers follow bodies directly


def _received_until_closed(url: str, data: bytes, seconds: float = 10, piece: int | None = None) -> bytes:
    """Send `data` on a socket of its own (in reads of `piece` bytes, as over a network, where given);
    what the server answers until it closes the socket (within `seconds`)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        step = piece or len(data) or 1
        for start in range(0, len(data), step):
            try:
                sock.sendall(data[start : start + step])
            except (BrokenPipeError, ConnectionResetError):
                break  # refused while it was still sending: what a limit should do
        sock.settimeout(seconds)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


@pytest.mark.parametrize("head", [
    "GET /health?q=" + "x" * 300_000 + " HTTP/1.1\r\nHost: x\r\n\r\n",  # a URL joined read by read
    "GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + "y" * 300_000 + "\r\n\r\n",
    "GET /health HTTP/1.1\r\nHost: x\r\n" + "X-Many: z\r\n" * 30_000 + "\r\n",
])
def test_a_head_past_its_bound_gets_400_and_its_connection_closed(server, head):
    """Was (under httptools' parser): no bound at all; a long URL, joined read by read, held the event loop."""
    from mt.apps.serve.http import MAX_HEAD_BYTES

    assert len(head) > 10 * MAX_HEAD_BYTES
    start = time.monotonic()
    assert _answers_then_closed(server.url, head.encode()) == [400]
    assert time.monotonic() - start < 5
    assert ok(f"{server.url}/health")["status"] == "ok"
    assert ok(f"{server.url}/health", headers={"X-Fits": "f" * (MAX_HEAD_BYTES // 2)})["status"] == "ok"


def test_pipelined_requests_past_the_bound_get_400_and_their_connection_closed(server):
    """Was (under httptools' parser): one read of pipelined requests queued thousands of them; now
    answers for the first of them, then 400 and the connection closed."""
    from mt.apps.serve.http import MAX_PIPELINED

    statuses = _answers_then_closed(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 20_000)
    assert statuses[-1] == 400 and statuses[:-1] == [200] * (len(statuses) - 1), statuses[:5]
    assert len(statuses) <= MAX_PIPELINED + 2
    few = _answers_then_closed(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 4
                               + b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert few == [200] * 5  # a few pipelined requests are answered, in order
