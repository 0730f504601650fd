"""`mt serve`: dynamic batching, LibreTranslate's /translate, mt's /v1 routes, limits, the key, shutdown.

Real servers on free loopback ports over conftest's tiny trained experiment: uvicorn in a thread of
this process (where a test reaches into the batcher: a gate or a failure around the model's
`decode`, our own code), and `python -m mt serve` in a process of its own for the
command line and a graceful stop. Every answer is checked against `Translator` on the same lines.
The batcher's own behaviour (one batch for what waits together, sentences joining a running search,
options kept apart, the token budget, failures, draining) is tested on it directly, without HTTP,
with both kinds of batching.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers import LINES, Hook, Served, balanced, call, load, markup_tags, ok, serve_process

from mt.apps.serve.app import Limits, build_app
from mt.apps.serve.http import bind
from mt.apps.serve.queue import Batcher, QueueFull, WorkerFailed
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.text.markup_translate import translate as markup_translate
from mt.text.translate import translate as translate_text

pytestmark = pytest.mark.usefixtures("single_thread")  # the reference translations, here, on one thread

LONG_LINE = "der " * 1200  # past the model's 1023 source positions
DEFAULTS = DecodeOptions(beam=4, alpha=0.6, length_penalty="gnmt")  # the experiment's decode.* (conftest)


def greedy_translator(translator: Translator) -> Translator:
    """The same model and tokenizers, searching greedily (beam 1)."""
    return Translator(translator.model, translator.src_tok, translator.tgt_tok,
                      dataclasses.replace(translator.decode_cfg, beam=1))


def flat(nested) -> list[float]:
    return [x for item in nested for x in flat(item)] if isinstance(nested, list) else [nested]


@pytest.fixture(scope="module")
def reference(trained_experiment) -> Translator:
    """What the server's answers must equal: the same translator, called directly."""
    return load(trained_experiment)


@pytest.fixture(scope="module")
def server(trained_experiment):
    limits = Limits(max_wait_ms=50, max_lines=20, max_chars=6000, max_beam=5)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        yield served


class WorkerKiller(BaseException):
    """What a batch's handler lets through (it catches Exception): it ends the worker thread itself, as
    torch refusing the worker's thread count did (`mt serve --threads -1`)."""


BOTH = pytest.mark.parametrize("batching", ["continuous", "static"])


# -- the batcher --------------------------------------------------------------------------------
@BOTH
def test_what_waits_together_is_translated_together_and_each_request_gets_its_own(trained_experiment, reference,
                                                                                 batching):
    translator = load(trained_experiment)
    batcher = Batcher(translator, max_batch_tokens=10_000, max_wait_ms=0, batching=batching)
    requests = [LINES[0:3], LINES[3:4], LINES[4:9]]
    futures = [batcher.submit(translator.encode_lines(lines)[1], DEFAULTS) for lines in requests]
    batcher.start()  # everything is queued before the worker looks
    batcher.close(60)
    for lines, future in zip(requests, futures):
        assert [hyps[0][0] for hyps in future.result()] == reference.translate(lines)
    assert batcher.batches == 1 and batcher.widest == 9 and batcher.sentences == 9 and batcher.busy_seconds > 0


def test_a_sentence_that_comes_during_a_search_joins_it_and_leaves_when_it_is_done(trained_experiment, reference):
    translator = load(trained_experiment)
    translator.decode_cfg.max_len_b = 40  # room for the long sentence to go on after the short one ends
    long_line = " ".join(LINES[:8])
    hook = Hook(translator)
    batcher = Batcher(translator, max_wait_ms=0, batching="continuous")
    answered = []
    batcher.start()
    try:
        hook.gate.clear()
        long = batcher.submit(translator.encode_lines([long_line])[1], DEFAULTS)
        assert hook.entered.wait(60)  # the worker is inside the long sentence's first step
        short = batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS)
        for name, future in (("long", long), ("short", short)):
            future.add_done_callback(lambda _, name=name: answered.append(name))
        hook.gate.set()
        assert [h[0][0] for h in short.result(60) + long.result(60)] == \
            [h[0][0] for h in reference.search(LINES[:1]) + reference.search([long_line])]
    finally:
        hook.gate.set()
        batcher.close(30)
    tokens = {name: len(reference.tgt_tok.encode([future.result()[0][0][0]])[0]) + 1  # steps, with EOS
              for name, future in (("long", long), ("short", short))}
    assert tokens["short"] + 1 < tokens["long"]  # joining at the second step, it ends first
    assert answered == ["short", "long"] and batcher.batches == 1 and batcher.widest == 2


def test_a_continuous_search_lets_go_of_the_requests_it_answered(trained_experiment):
    """Sentences answered while a continuous search goes on stayed in the batcher's `taken` (their
    requests, translations and futures) until the search emptied, which steady traffic never lets
    it: memory without bound. Here three short requests end while a long one is still searched."""
    translator = load(trained_experiment)
    translator.decode_cfg.max_len_b = 40  # room for the long sentence to go on after the short ones end
    decode, reached, release = translator.model.decode, threading.Event(), threading.Event()

    def pausing(tgt_ids, *args, **kwargs):
        if tgt_ids.size(0) == DEFAULTS.beam:  # the long sentence's beams alone: the short ones are done
            reached.set()
            assert release.wait(60)
        return decode(tgt_ids, *args, **kwargs)

    translator.model.decode = pausing
    batcher = Batcher(translator, max_wait_ms=0, batching="continuous")
    long = batcher.submit(translator.encode_lines([" ".join(LINES[:8])])[1], DEFAULTS)
    shorts = [batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS) for _ in range(3)]
    batcher.start()
    try:
        assert reached.wait(60) and all(future.done() for future in shorts) and not long.done()
        assert [entry.request.future for entry in batcher.taken] == [long]  # was: all four
    finally:
        release.set()
        batcher.close(30)
    assert long.result(30) and batcher.batches == 1


@BOTH
def test_other_options_and_the_token_budget_make_other_batches(trained_experiment, reference, batching):
    translator = load(trained_experiment)
    ids = translator.encode_lines(LINES[:1])[1][0]
    batcher = Batcher(translator, max_batch_tokens=2 * (len(ids) + 1), max_wait_ms=0, batching=batching)
    plain = batcher.submit([ids] * 4, DEFAULTS)  # two batches of two by the budget
    greedy = batcher.submit([ids] * 2, dataclasses.replace(DEFAULTS, beam=1))  # one of its own: other options
    batcher.start()
    batcher.close(60)
    assert [h[0][0] for h in plain.result()] == reference.translate(LINES[:1]) * 4
    assert [h[0][0] for h in greedy.result()] == greedy_translator(reference).translate(LINES[:1]) * 2
    # static: two batches of two, then the greedy one; continuous: the last two join the first search
    # as soon as the first two have left it, then the greedy search; never more than two at once
    assert batcher.batches == (3 if batching == "static" else 2) and batcher.widest == 2


def test_requests_with_the_shortlist_are_searched_in_static_batches_over_its_candidates(trained_experiment):
    """Continuous batching changes a search's sentences from step to step, and a shortlist's candidates
    are a batch's: with decode.shortlist the batcher searches static batches, each with its candidates."""
    from mt.data.shortlist import build_table
    from mt.decoding.shortlist import Shortlist

    translator = load(trained_experiment)
    vocab = translator.tgt_tok.vocab_size
    translator.shortlist = Shortlist(build_table(trained_experiment, 1, 0, translator.src_tok.vocab_size, vocab), vocab)
    translator.decode_cfg.shortlist = True
    lines = LINES[:6]
    expected = [hyps[0][0] for hyps in translator.search(lines)]
    assert expected != [hyps[0][0] for hyps in translator.search(lines, DecodeOptions(shortlist=False))]
    batcher = Batcher(translator, max_batch_tokens=10_000, max_wait_ms=0, batching="continuous")
    futures = [batcher.submit(translator.encode_lines(lines[i : i + 3])[1], DecodeOptions()) for i in (0, 3)]
    batcher.start()
    batcher.close(60)
    assert [hyps[0][0] for future in futures for hyps in future.result()] == expected
    assert batcher.batches == 1 and batcher.sentences == 6


@BOTH
def test_a_failing_batch_answers_its_requests_and_the_worker_goes_on(trained_experiment, reference, batching):
    translator = load(trained_experiment)
    hook = Hook(translator)
    batcher = Batcher(translator, max_wait_ms=0, max_queue=2, batching=batching)
    batcher.start()
    try:
        hook.fail = True
        with pytest.raises(RuntimeError, match="injected failure"):
            batcher.submit(translator.encode_lines(LINES[:2])[1], DEFAULTS).result(60)
        hook.gate.clear()
        hook.entered.clear()
        held = batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS)
        assert hook.entered.wait(60)
        queued = batcher.submit(translator.encode_lines(LINES[1:3])[1], DEFAULTS)
        with pytest.raises(QueueFull):
            batcher.submit(translator.encode_lines(LINES[3:4])[1], DEFAULTS)
        hook.gate.set()
        assert [h[0][0] for h in held.result(60) + queued.result(60)] == reference.translate(LINES[:3])
    finally:
        hook.gate.set()
        batcher.close(30)


@BOTH
def test_a_failure_after_a_sentence_finished_answers_it_too_and_a_bracketed_message_is_logged(
    trained_experiment, reference, batching, capsys
):
    """The search fails while it hands back a finished sentence (here its detokenizing raises, with a
    path in brackets that rich would read as markup): that sentence's request and the others of the
    batch get the error, none is left waiting, and the worker goes on."""
    translator = load(trained_experiment)
    decode = translator.tgt_tok.decode
    calls = []

    def failing_once(ids):
        calls.append(len(ids))
        if len(calls) == 1:
            raise RuntimeError("cannot read [/tmp/x]")
        return decode(ids)

    translator.tgt_tok.decode = failing_once
    batcher = Batcher(translator, max_wait_ms=50, batching=batching)
    futures = [batcher.submit(translator.encode_lines([line])[1], DEFAULTS) for line in (LINES[0], LINES[5] * 3)]
    batcher.start()
    try:
        for future in futures:
            with pytest.raises(RuntimeError, match=r"cannot read \[/tmp/x\]"):
                future.result(30)
        after = batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS).result(60)
        assert [after[0][0][0]] == reference.translate(LINES[:1])  # the worker goes on
    finally:
        batcher.close(30)
    assert "cannot read [/tmp/x]" in capsys.readouterr().err


def test_sentences_of_clients_that_left_hold_no_place_in_a_full_queue(trained_experiment, reference):
    translator = load(trained_experiment)
    hook = Hook(translator)
    batcher = Batcher(translator, max_wait_ms=0, max_queue=2, batching="static")
    batcher.start()
    try:
        hook.gate.clear()
        held = batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS)
        assert hook.entered.wait(60)  # the worker is busy: what comes now waits in the queue
        gone = batcher.submit(translator.encode_lines(LINES[1:3])[1], DEFAULTS)
        assert gone.cancel()  # its client left (the server cancels the future), the queue still full
        later = batcher.submit(translator.encode_lines(LINES[3:5])[1], DEFAULTS)  # was QueueFull
        hook.gate.set()
        assert [h[0][0] for h in held.result(60) + later.result(60)] == reference.translate([LINES[0], *LINES[3:5]])
    finally:
        hook.gate.set()
        batcher.close(30)


@BOTH
def test_a_worker_that_dies_fails_what_it_held_what_waits_and_what_comes_later(trained_experiment, batching):
    translator = load(trained_experiment)
    hook = Hook(translator)
    batcher = Batcher(translator, max_wait_ms=0, batching=batching)
    batcher.start()
    try:
        hook.gate.clear()
        held = batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS)
        assert hook.entered.wait(60)  # the worker is inside its search, past the queue
        waiting = [batcher.submit(translator.encode_lines(LINES[1:3])[1], DEFAULTS),
                   batcher.submit(translator.encode_lines(LINES[3:4])[1], dataclasses.replace(DEFAULTS, beam=1)),
                   batcher.call(lambda tr: "never")]
        hook.fail = WorkerKiller("injected death")
        hook.gate.set()
        for future in [held, *waiting]:
            with pytest.raises(WorkerFailed, match="^the translation worker stopped: WorkerKiller: injected death$"):
                future.result(30)
        with pytest.raises(WorkerFailed, match="injected death"):
            batcher.submit(translator.encode_lines(LINES[:1])[1], DEFAULTS)
        with pytest.raises(WorkerFailed, match="injected death"):
            batcher.call(lambda tr: "never")
        assert batcher.failure.endswith("WorkerKiller: injected death") and batcher.queued() == 0
    finally:
        hook.gate.set()
        batcher.close(30)


@BOTH
def test_close_finishes_what_is_queued(trained_experiment, reference, batching):
    translator = load(trained_experiment)
    batcher = Batcher(translator, max_wait_ms=10_000, batching=batching)  # would wait 10 s for company, not on close
    future = batcher.submit(translator.encode_lines(LINES[:2])[1], DEFAULTS)
    start = time.monotonic()
    batcher.start()
    batcher.close(60)
    assert future.done() and [h[0][0] for h in future.result()] == reference.translate(LINES[:2])
    assert time.monotonic() - start < 8


# -- LibreTranslate's /translate ----------------------------------------------------------------
def test_concurrent_requests_get_exactly_what_the_translator_gives(server, reference):
    requests = [LINES[i % 20: i % 20 + 1 + i % 4] for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda lines: ok(f"{server.url}/translate", {"q": lines, "source": "de", "target": "en"}),
                                requests))
        native = list(pool.map(lambda lines: ok(f"{server.url}/v1/translate", {"text": lines}), requests))
    for lines, answer, v1 in zip(requests, answers, native):
        assert answer == {"translatedText": reference.translate(lines)}
        assert [t["text"] for t in v1["translations"]] == reference.translate(lines)
    assert ok(f"{server.url}/health")["batches"] < 32  # some requests shared a batch


def test_libretranslate_shapes_json_and_forms(server, reference):
    url, (one, two) = f"{server.url}/translate", reference.translate(LINES[:2])
    assert ok(url, {"q": LINES[0], "source": "de", "target": "en"}) == {"translatedText": one}
    assert ok(url, {"q": LINES[:2], "source": "de", "target": "en", "format": "text"}) == {"translatedText": [one, two]}
    assert ok(url, form={"q": LINES[0], "source": "de", "target": "en"}) == {"translatedText": one}
    assert ok(url, form={"q": LINES[:2], "source": "de", "target": "en"}) == {"translatedText": [one, two]}
    boundary = "mt-test-boundary"
    parts = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
                    for name, value in (("q", LINES[0]), ("source", "de"), ("target", "en")))
    multipart = ok(url, raw=f"{parts}--{boundary}--\r\n".encode(),
                   headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert multipart == {"translatedText": one}
    two_lines = ok(url, {"q": f"{LINES[0]}\n{LINES[1]}", "source": "de", "target": "en"})
    assert two_lines == {"translatedText": f"{one}\n{two}"}  # each line translated on its own
    # a line of only spaces or tabs between them comes back as it is (it came back empty)
    spaced = ok(url, {"q": f"{LINES[0]}\n\t \n{LINES[1]}", "source": "de", "target": "en"})
    assert spaced == {"translatedText": f"{one}\n\t \n{two}"}


def distinct_others(hyps: list[tuple], count: int) -> list[str]:
    """The other translations of an n-best list, best first, each text once, the best's left out."""
    return list(dict.fromkeys(h[0] for h in hyps[1:] if h[0] not in (hyps[0][0], "")))[:count]


def test_an_empty_hypothesis_is_no_alternative():
    """Was: a hypothesis that ended at its first step came back as an alternative, "" (LibreTranslate
    leaves empty ones out)."""
    from mt.apps.serve.service import distinct_alternatives

    assert distinct_alternatives([("Hallo.", -1.0), ("", -2.0), ("Hallo !", -3.0), ("Hallo.", -4.0)], 3) == ["Hallo !"]


def test_libretranslate_limits_count_lines_with_text_and_forms_line_breaks_as_the_page_means_them(server, reference):
    """Was: blank lines and an html fragment's line breaks (spaces, in html) counted against --max-lines
    (20 here): a pretty-printed list was refused; and a form's CRLF line breaks (every browser's, so
    LibreTranslate's own page's) counted twice against --max-chars and came back as CRLF."""
    url = f"{server.url}/translate"
    spaced = "\n\n".join(LINES[:12])  # 12 lines of text, 11 blank
    assert ok(url, {"q": spaced, "source": "de", "target": "en"})["translatedText"] == \
        "\n\n".join(reference.translate(LINES[:12]))
    listed = "<ul>\n" + "".join(f"<li>{line}</li>\n" for line in LINES[:3] * 8) + "</ul>"  # 26 lines
    assert ok(url, {"q": listed, "source": "de", "target": "en", "format": "html"})["translatedText"].count("<li>") == 24
    form = ok(url, form={"q": "\r\n".join(LINES[:2]), "source": "de", "target": "en"})["translatedText"]
    assert form == ok(url, {"q": "\n".join(LINES[:2]), "source": "de", "target": "en"})["translatedText"]
    assert "\r" not in form


def test_libretranslate_alternatives_and_auto_source(server, reference):
    url = f"{server.url}/translate"
    best = reference.search(LINES[:2], DecodeOptions(nbest=3))
    assert all(distinct_others(hyps, 2) for hyps in best)  # what this test is about: there are some
    single = ok(url, {"q": LINES[0], "source": "auto", "target": "en", "alternatives": 2})
    assert single["translatedText"] == best[0][0][0]
    assert single["detectedLanguage"] == {"confidence": 100, "language": "de"}
    assert single["alternatives"] == distinct_others(best[0], 2)
    listed = ok(url, form={"q": LINES[:2], "source": "auto", "target": "en", "alternatives": "2"})
    assert listed["translatedText"] == [best[0][0][0], best[1][0][0]]
    assert listed["alternatives"] == [distinct_others(hyps, 2) for hyps in best]
    assert listed["detectedLanguage"] == [{"confidence": 100, "language": "de"}] * 2
    assert "alternatives" not in ok(url, {"q": LINES[0], "source": "de", "target": "en"})
    # a short text in the target already comes back as it is (it was "translated" from German)
    same = ok(url, {"q": "The weather is nice today.", "source": "auto", "target": "en"})
    assert same["translatedText"] == "The weather is nice today." and same["detectedLanguage"]["language"] == "en"
    # one line between line breaks has its alternatives, the breaks around each (it had none)
    around = ok(url, {"q": f"\n{LINES[0]}\n", "source": "de", "target": "en", "alternatives": 2})
    assert around["translatedText"] == f"\n{best[0][0][0]}\n"
    assert around["alternatives"] == [f"\n{other}\n" for other in distinct_others(best[0], 2)]


def test_libretranslate_alternatives_never_cut_a_long_text(server, reference):
    """With alternatives a text is one search (no sentences), cut at the model's positions: its end was
    lost, unsaid. Such a text is translated in pieces, as without alternatives, and gets none."""
    url = f"{server.url}/translate"
    plain = ok(url, {"q": LONG_LINE, "source": "de", "target": "en"})["translatedText"]
    asked = ok(url, {"q": [LONG_LINE, LINES[0]], "source": "de", "target": "en", "alternatives": 2})
    assert asked["translatedText"][0] == plain and asked["alternatives"][0] == []
    assert asked["alternatives"][1] == distinct_others(reference.search(LINES[:1], DecodeOptions(nbest=3))[0], 2) != []


def test_libretranslate_requests_as_its_clients_send_them(server):
    """As LibreTranslate (Flask) takes them: cross-origin requests and their preflight (its JavaScript
    client in a web page), HEAD on a GET route, a JSON body with a byte-order mark, in UTF-16 too, and
    a negative number of alternatives (none). Each was refused (405, 400)."""
    import urllib.request

    preflight = urllib.request.Request(f"{server.url}/translate", method="OPTIONS", headers={
        "Origin": "http://example.org", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    with urllib.request.urlopen(preflight, timeout=30) as answer:
        assert answer.status == 200 and answer.headers["Access-Control-Allow-Origin"] == "*"
        assert "POST" in answer.headers["Access-Control-Allow-Methods"]
    status, headers, _ = call(f"{server.url}/languages", headers={"Origin": "http://example.org"})
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"
    status, headers, _ = call(f"{server.url}/languages")  # a server-side client: no CORS, a cache told why
    assert status == 200 and "Access-Control-Allow-Origin" not in headers and headers["Vary"] == "Origin"
    with urllib.request.urlopen(urllib.request.Request(f"{server.url}/health", method="HEAD"), timeout=30) as answer:
        assert answer.status == 200 and answer.read() == b""
    body = json.dumps({"q": LINES[0], "source": "de", "target": "en"})
    expected = ok(f"{server.url}/translate", json.loads(body))
    for data in (b"\xef\xbb\xbf" + body.encode(), body.encode("utf-16")):
        assert ok(f"{server.url}/translate", raw=data, headers={"Content-Type": "application/json"}) == expected
    assert ok(f"{server.url}/translate", {**json.loads(body), "alternatives": -1}) == expected
    # A client given the server's address with a slash at its end joins "/translate": "//translate" (was 404)
    assert ok(f"{server.url}//translate", json.loads(body)) == expected
    assert call(f"{server.url}//v1///translate", {"text": LINES[0]})[0] == 200


def test_web_and_mail_addresses_come_back_as_they_were_in_text_html_and_v1(server, reference):
    """A URL or an e-mail address in the text was read by the model as words and came back as words
    ("https://example.com/docs/getting_started" as "Tomeeee..."); now kept, placed by the alignment."""
    from mt.text.markup_translate import text_search
    from mt.text.translate import translate as translate_text

    text = [f"{LINES[0].rstrip('.')} https://example.com/docs/getting_started?a=1&b=2 .",
            f"support@example.com {LINES[1]}", LINES[2]]
    for body in ({"q": text, "source": "de", "target": "en"},
                 {"q": [t.replace("&", "&amp;") for t in text], "source": "de", "target": "en", "format": "html"}):
        out = ok(f"{server.url}/translate", body)["translatedText"]
        assert "https://example.com/docs/getting_started?a=1" in out[0] and "support@example.com" in out[1], out
        assert out[2] == translate_text(reference, [LINES[2]])[0]
    v1 = [t["text"] for t in ok(f"{server.url}/v1/translate", {"text": text})["translations"]]
    assert v1 == [hyps[0][0] for hyps in text_search(reference, text)]  # as `mt translate` gives them
    assert "https://example.com/docs/getting_started?a=1&b=2" in v1[0]
    # the page asks for 3 alternatives: each keeps the address (was: one translation, or with --nbest in
    # `mt translate`, the addresses read by the model as words)
    page = ok(f"{server.url}/v1/translate", {"text": text, "nbest": 3})["translations"]
    assert [t["text"] for t in page] == v1 and [len(t["nbest"]) for t in page] == [3, 3, 3]
    assert all("https://example.com/docs/getting_started?a=1&b=2" in h["text"] for h in page[0]["nbest"])
    assert all(h["text"].startswith("support@example.com") for h in page[1]["nbest"])
    listed = text_search(reference, text[:2], DecodeOptions(nbest=3, sentences=False))
    assert [[(h["text"], pytest.approx(h["score"], abs=1e-4)) for h in t["nbest"]] for t in page[:2]] == listed
    # a row of columns: each its own text, the address kept in its cell (a tab is a space to markup)
    row = f"{LINES[0]}\t{LINES[1].rstrip('.')} https://x.org/row ."
    out = ok(f"{server.url}/translate", {"q": row, "source": "de", "target": "en"})["translatedText"]
    assert out.count("\t") == 1 and "https://x.org/row" in out.split("\t")[1]
    assert [h[0][0] for h in text_search(reference, [row])] == [out]
    # what markup would change beyond the address (a lone CR, a control character) stays plain text's
    odd = [f"{LINES[0]}\r{LINES[1]} https://x.org", f"{LINES[0]} \x07 https://x.org"]
    assert [hyps[0][0].count("\r") for hyps in text_search(reference, odd)] == [1, 0]


def test_libretranslate_format_html_places_the_tags_as_mt_text_markup(server, reference):
    q = [f'<p>{LINES[0]} <b class="x">{LINES[1]}</b><!-- c --></p>', f"{LINES[2]}<br>{LINES[3]}", LINES[4],
         "<p><!-- no text --><br></p>"]
    answer = ok(f"{server.url}/translate", {"q": q, "source": "de", "target": "en", "format": "html"})
    options = DecodeOptions(src_lang="de", tgt_lang="en")
    assert answer == {"translatedText": markup_translate(reference, q, "html", options)}
    for source, out in zip(q, answer["translatedText"]):
        assert balanced(out) and markup_tags(out) == markup_tags(source), out
    assert answer["translatedText"][2] == translate_text(reference, [LINES[4]], options)[0]  # no tags: plain text's
    assert answer["translatedText"][3] == q[3]
    one = ok(f"{server.url}/translate", form={"q": q[1], "source": "de", "target": "en", "format": "html",
                                             "alternatives": "2"})
    assert one == {"translatedText": answer["translatedText"][1], "alternatives": []}
    # source auto: a fragment's language is its text's, not its tags' and URLs' (was: 400, English)
    tagged = ('<p class="product-description highlighted" data-tracking-id="summer-sale-banner"><a href='
              f'"https://example.com/products/shopping-cart/checkout">{LINES[1]}</a></p>')
    auto = ok(f"{server.url}/translate", {"q": tagged, "source": "auto", "target": "en", "format": "html"})
    assert auto["detectedLanguage"]["language"] == "de"


@pytest.mark.parametrize("body, message", [
    ({"source": "de", "target": "en"}, "Invalid request: missing q parameter"),
    ({"q": "Hallo.", "target": "en"}, "Invalid request: missing source parameter"),
    ({"q": "Hallo.", "source": "de", "target": "fr"}, "fr is not supported"),
    ({"q": "Hallo.", "source": "fr", "target": "en"}, "fr is not supported"),
    ({"q": "Hallo.", "source": "de", "target": "en", "format": "markdown"}, "markdown format is not supported"),
    ({"q": "Hallo. " * 1000, "source": "de", "target": "en"}, "Invalid request: request (7000) exceeds text limit (6000)"),
    ({"q": ["Hallo."] * 21, "source": "de", "target": "en"}, "exceeds text limit (20)"),
    ({"q": "Hallo.", "source": "de", "target": "en", "api_key": ["k"]}, "api_key: expected a string"),
    ({"q": ["Hallo.", "<html"], "source": "de", "target": "en", "format": "html"}, "not an HTML document"),
    ({"q": "<b>" * 300 + "Hallo.", "source": "de", "target": "en", "format": "html"}, "HTML parsing loses text"),
])
def test_libretranslate_refusals_are_400_with_an_error(server, body, message):
    status, _, data = call(f"{server.url}/translate", body)
    assert status == 400 and list(data) == ["error"] and message in data["error"], data


@pytest.mark.parametrize("method, path, status, words", [
    ("GET", "/nothing", 404, "/nothing: no such route"),
    ("POST", "/v2/translate", 404, "/v2/translate: no such route"),
    ("POST", "/health", 405, "POST /health: this route takes GET"),
    ("GET", "/v1/translate", 405, "GET /v1/translate: this route takes POST"),
])
def test_unknown_routes_and_wrong_methods_are_errors_like_the_others(server, method, path, status, words):
    got, headers, data = call(f"{server.url}{path}", {"text": "Hallo."} if method == "POST" else None)
    assert got == status and list(data) == ["error"] and data["error"].startswith(words), data
    assert "\n" not in data["error"]
    if status == 405:
        assert words.split()[-1] in headers["Allow"]


def test_languages_health_and_the_page(server):
    assert ok(f"{server.url}/languages") == [{"code": "de", "name": "German", "targets": ["en"]},
                                             {"code": "en", "name": "English", "targets": []}]
    health = ok(f"{server.url}/health")
    assert health["status"] == "ok" and health["source"] == "de" and health["queued"] == 0
    with urllib.request.urlopen(f"{server.url}/", timeout=30) as response:
        assert response.status == 200 and b"<html" in response.read().lower()


# -- mt's /v1 -----------------------------------------------------------------------------------
def test_v1_options_beam_nbest_scores_and_alignments(server, reference):
    url, lines = f"{server.url}/v1/translate", [LINES[0], "", LINES[1]]
    greedy = greedy_translator(reference)
    assert [t["text"] for t in ok(url, {"text": lines, "beam": 1})["translations"]] == greedy.translate(lines)
    answer = ok(url, {"text": lines, "nbest": 3, "alignments": True})
    expected = reference.search(lines, DecodeOptions(nbest=3, alignment_layer=len(reference.model.decoder) - 1))
    assert answer["warnings"] == []
    for got, hyps in zip(answer["translations"], expected):
        assert (got["text"], got["alignment"]) == (hyps[0][0], hyps[0][2])
        assert [(h["text"], h["alignment"]) for h in got["nbest"]] == [(h[0], h[2]) for h in hyps]
        assert [h["score"] for h in got["nbest"]] == pytest.approx([h[1] for h in hyps], abs=1e-5)
    assert answer["translations"][1] == {"text": "", "score": 0.0, "alignment": "",
                                         "nbest": [{"text": "", "score": 0.0, "alignment": ""}]}
    single = ok(url, {"text": LINES[0], "alpha": 1.0, "length_penalty": "length"})
    assert list(single["translations"][0]) == ["text", "score"]
    assert ok(url, {"text": LINES[0], "alpha": 1, "length_penalty": "length"}) == single  # alpha: any number
    # codes as /translate reads them (`DE` was refused here: "no <2EN>")
    assert ok(url, {"text": lines, "beam": 1, "source": "DE", "target": "EN"}) == ok(url, {"text": lines, "beam": 1})


def test_v1_nbest_of_a_line_of_sentences_is_its_sentences_best_joined(server, reference):
    """The page asks for alternatives: a pasted paragraph was one segment to a model of sentences."""
    paragraph = f"{LINES[0].rstrip('.')}. {LINES[1].rstrip('.')}."
    answer = ok(f"{server.url}/v1/translate", {"text": [paragraph, LINES[2]], "nbest": 3})
    joined, single = answer["translations"]
    assert joined["text"] == translate_text(reference, [paragraph])[0]  # sentence by sentence, as nbest 1
    assert [h["text"] for h in joined["nbest"]] == [joined["text"]]
    assert [h["text"] for h in single["nbest"]] == [h[0] for h in reference.search([LINES[2]], DecodeOptions(nbest=3))[0]]


def test_v1_attention_is_the_json_of_mt_attention(server, reference):
    from mt.apps.report.attention_maps import attention_maps

    answer = ok(f"{server.url}/v1/attention", {"text": LINES[0]})
    expected = {**attention_maps(reference, LINES[0]).to_json(), "warnings": []}
    weights = [(answer.pop("cross_attention"), expected.pop("cross_attention"))]
    assert answer == expected and answer["alignment_layer"] == 2
    assert flat(weights[0][0]) == pytest.approx(flat(weights[0][1]), abs=2e-5)
    layers = weights[0][0]
    assert len(layers) == 2 and len(layers[0][0]) == len(answer["tgt_tokens"])
    assert len(layers[0][0][0]) == len(answer["src_tokens"])
    first = ok(f"{server.url}/v1/attention", {"text": LINES[0], "layer": 1, "encoder": True})
    assert first["alignment_layer"] == 1 and "encoder_self_attention" in first
    # a translation given (the page's, made sentence by sentence): its attention, as `mt attention --target`
    forced = ok(f"{server.url}/v1/attention", {"text": LINES[0], "translation": "A man walks."})
    assert forced == {**attention_maps(reference, LINES[0], "A man walks.").to_json(), "warnings": []} | {
        "cross_attention": forced["cross_attention"]} and forced["translation"] == "A man walks."
    for given, status, needle in (("", 422, "translation: expected one line"), ("a\nb", 422, "translation"),
                                  (3, 422, "translation"), ("x" * 201, 413, "translation: 201 characters")):
        answer_status, _, data = call(f"{server.url}/v1/attention", {"text": LINES[0], "translation": given})
        assert answer_status == status and needle in data["error"], data


@pytest.mark.parametrize("body, status, field", [
    ({"text": ["Hallo."] * 21}, 413, "text: 21 lines, more than --max-lines 20"),
    ({"text": "Hallo. " * 1000}, 413, "text: 7000 characters, more than --max-chars 6000"),
    ({"text": "Hallo.", "beam": 0}, 422, "beam"),
    ({"text": "Hallo.", "beam": 6}, 422, "beam"),
    ({"text": "Hallo.", "nbest": 99}, 422, "nbest"),  # over --max-beam (nbest over beam gives beam: the schema's)
    ({"text": "Hallo.", "alpha": "big"}, 422, "alpha"),
    # strict types: a number as a string is refused, and so is a float where a whole number is expected
    ({"text": "Hallo.", "beam": "4"}, 422, "beam: expected a whole number"),
    ({"text": "Hallo.", "nbest": "2"}, 422, "nbest: expected a whole number"),
    ({"text": "Hallo.", "beam": 4.5}, 422, "beam: expected a whole number"),
    ({"text": "Hallo.", "nbest": 2.5}, 422, "nbest: expected a whole number"),
    ({"text": "Hallo.", "beam": True}, 422, "beam: expected a whole number"),
    ({"text": "Hallo.", "alpha": "0.5"}, 422, "alpha: expected a number"),
    ({"text": "Hallo.", "source": 3}, 422, "source: expected"),
    ({"text": "Hallo.", "length_penalty": "gnm"}, 422, "length_penalty"),
    ({"text": "Hallo.", "alignments": "yes"}, 422, "alignments"),
    ({"text": 3}, 422, "text"),
    ({"text": []}, 422, "text"),
    ({"text": "Zwei\nZeilen."}, 422, "text: a line break"),  # a string: "text" (was "text[0]")
    ({"text": ["Eins.", "Zwei\nZeilen."]}, 422, "text[1]: a line break"),
    ({"text": "Hallo.", "colour": "red"}, 422, "colour"),
    ({"text": "Hallo.", "target": "fr"}, 400, "target"),
])
def test_v1_refusals_name_the_field(server, body, status, field):
    got, _, data = call(f"{server.url}/v1/translate", body)
    assert got == status and list(data) == ["error"] and data["error"].startswith(field), data
    assert "\n" not in data["error"]


def test_requests_alike_share_their_options_but_a_value_python_finds_equal_is_read_as_itself(server, reference):
    """The server makes each set of request options once (Service.options) and keeps it: true, equal to
    1 in Python, is still refused as a beam after beam 1 was accepted, and 1 as `alignments` after true;
    a list is refused each time (no dict can hold it)."""
    url = f"{server.url}/v1/translate"
    greedy = greedy_translator(reference).translate([LINES[0]])
    for _ in range(2):
        assert [t["text"] for t in ok(url, {"text": LINES[0], "beam": 1})["translations"]] == greedy
        assert call(url, {"text": LINES[0], "beam": True})[0] == 422
        assert len(ok(url, {"text": LINES[0], "beam": 2, "nbest": 2})["translations"][0]["nbest"]) == 2
        assert "alignment" in ok(url, {"text": LINES[0], "alignments": True})["translations"][0]
        status, _, data = call(url, {"text": LINES[0], "alignments": 1})
        assert status == 422 and data["error"].startswith("alignments")
        status, _, data = call(url, {"text": LINES[0], "beam": [1]})
        assert status == 422 and data["error"].startswith("beam: expected a whole number")


def test_a_field_sent_as_null_is_refused_even_after_requests_that_left_it_out(server):
    """Service.options keys a missing field apart from one sent as null: left out, a field takes the
    server's default; null is refused (422), however many requests without it came first."""
    url = f"{server.url}/v1/translate"
    for name in ("alpha", "length_penalty", "alignments"):
        assert ok(url, {"text": LINES[0]})["translations"][0]["text"]
        status, _, data = call(url, {"text": LINES[0], name: None})
        assert status == 422 and data["error"].startswith(name), (name, status, data)


def test_v1_bad_json_utf8_and_attention_fields(server):
    status, _, data = call(f"{server.url}/v1/translate", raw=b'{"text": "Hallo."', headers={"Content-Type": "application/json"})
    assert status == 422 and data["error"].startswith("invalid JSON")
    status, _, data = call(f"{server.url}/v1/translate", raw=b'{"text": "Hallo \xff."}', headers={"Content-Type": "application/json"})
    assert status == 400 and "UTF-8" in data["error"]
    status, _, data = call(f"{server.url}/translate", raw=b"q=Hallo%FF&source=de&target=en",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "UTF-8" in data["error"]
    status, _, data = call(f"{server.url}/v1/attention", {"text": "Hallo.", "layer": 3})
    assert status == 422 and data["error"].startswith("layer 3")
    status, _, data = call(f"{server.url}/v1/attention", {"text": " "})
    assert status == 422 and data["error"].startswith("text")
    for layer in ("1", 1.5):
        status, _, data = call(f"{server.url}/v1/attention", {"text": "Hallo.", "layer": layer})
        assert status == 422 and data["error"].startswith("layer: expected a whole number"), data


def test_a_line_past_the_models_positions_is_cut_with_a_warning(server, reference):
    # With alignments a text is one segment (mt.text: no sentences, no pieces): the model's positions cut it.
    answer = ok(f"{server.url}/v1/translate", {"text": [LINES[0], LONG_LINE], "alignments": True})
    assert len(answer["warnings"]) == 1
    assert re.fullmatch(r"input line 2: \d+ tokens, cut to 1023", answer["warnings"][0]), answer["warnings"]
    assert answer["translations"][0]["text"] == reference.translate([LINES[0]])[0]


def test_text_in_a_script_the_model_cannot_read_is_copied_with_a_warning(server, reference):
    """As `mt translate` warns: the Chinese came back untranslated, "warnings": []."""
    chinese = "我们今天去北京看长城，然后回家吃饭。"
    answer = ok(f"{server.url}/v1/translate", {"text": [LINES[0], f"{LINES[1]} {chinese}"]})
    assert answer["translations"][1]["text"].endswith(chinese)
    assert answer["warnings"] == [f"input line 2: {len(chinese)} characters in a script the model cannot read "
                                  "(not in its vocabulary) copied untranslated"]
    # beside a line with an address (searched apart from the others), the line's own number
    answer = ok(f"{server.url}/v1/translate", {"text": ["Siehe https://example.org/a jetzt.", f"{LINES[1]} {chinese}"]})
    assert answer["warnings"] == [f"input line 2: {len(chinese)} characters in a script the model cannot read "
                                  "(not in its vocabulary) copied untranslated"]


def test_each_text_is_translated_sentence_by_sentence(server, reference):
    one, two, three = reference.translate(LINES[:3])
    paragraph = f"{LINES[0]} {LINES[1]}\n\n{LINES[2]}"
    expected = f"{one} {two}\n\n{three}"
    assert ok(f"{server.url}/translate", {"q": paragraph, "source": "de", "target": "en"}) == {"translatedText": expected}
    answer = ok(f"{server.url}/v1/translate", {"text": [f"{LINES[0]}  {LINES[1]}", LINES[0]]})  # one line per item
    assert [t["text"] for t in answer["translations"]] == [f"{one}  {two}", one]


# -- the key, a full queue, a failing batch -----------------------------------------------------
def test_an_api_key_is_asked_for_on_both_routes(trained_experiment):
    """No key on LibreTranslate's routes is its 400 in its words (was 403 with mt's words appended,
    which Dialect, matching them, took for an unknown error); another key is 403 everywhere."""
    app = build_app(load(trained_experiment), api_key="s3cret", threads=1)
    with Served(app) as served:
        body = {"q": "Hallo.", "source": "de", "target": "en"}
        for route in ("translate", "detect"):
            status, _, data = call(f"{served.url}/{route}", body)
            assert (status, data) == (400, {"error": "Please contact the server operator to get an API key"})
        status, _, data = call(f"{served.url}/translate", {**body, "api_key": "wrong"})
        assert (status, data) == (403, {"error": "Invalid API key"})
        assert call(f"{served.url}/translate", {**body, "api_key": "s3cret"})[0] == 200
        assert call(f"{served.url}/translate", form={**body, "api_key": "s3cret"})[0] == 200
        v1 = f"{served.url}/v1/translate"
        assert call(v1, {"text": "Hallo."})[0] == 403
        assert call(v1, {"text": "Hallo."}, headers={"Authorization": "Bearer wrong"})[0] == 403
        assert call(v1, {"text": "Hallo."}, headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert call(v1, {"text": "Hallo."}, headers={"X-API-Key": "s3cret"})[0] == 200
        assert call(f"{served.url}/v1/attention", {"text": "Hallo."})[0] == 403
        assert call(f"{served.url}/languages")[0] == 200 and call(f"{served.url}/health")[0] == 200


def test_a_full_queue_is_503_with_retry_after_and_a_failed_batch_500(trained_experiment, reference):
    translator = load(trained_experiment)
    hook = Hook(translator)
    with Served(build_app(translator, Limits(max_wait_ms=0, max_queue=1), threads=1)) as served:
        url, batcher = f"{served.url}/v1/translate", served.app.state.batcher
        hook.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            try:
                held = pool.submit(ok, url, {"text": LINES[0]})
                assert hook.entered.wait(60)  # the worker is inside the first request's batch
                queued = pool.submit(ok, url, {"text": LINES[1]})
                deadline = time.monotonic() + 30
                while batcher.queued() < 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
                status, headers, data = call(url, {"text": LINES[2]})
                assert status == 503 and headers["Retry-After"] == "1" and "busy" in data["error"]
                status, headers, data = call(f"{served.url}/translate", {"q": LINES[2], "source": "de", "target": "en"})
                assert status == 503 and headers["Retry-After"] == "1"
            finally:
                hook.gate.set()
            answers = [held.result(60), queued.result(60)]
        assert [a["translations"][0]["text"] for a in answers] == reference.translate(LINES[:2])
        hook.fail = True
        status, _, data = call(url, {"text": LINES[0]})
        assert status == 500 and data == {"error": "Cannot translate text: RuntimeError: injected failure"}
        assert ok(url, {"text": LINES[0]})["translations"][0]["text"] == reference.translate(LINES[:1])[0]


def test_a_request_of_more_sentences_than_the_queue_holds_goes_in_in_parts(trained_experiment, reference):
    """Was: refused (413; 400 on /translate), and before that admitted only into an empty queue (a 503
    that no retry ends under load): a pasted document, deep-translator's translate_file, of more lines
    than a quarter of the queue. Now its parts go through the queue one after the other."""
    from mt.text.translate import translate as translate_text

    with Served(build_app(load(trained_experiment), Limits(max_wait_ms=0, max_queue=4), threads=1)) as served:
        text = " ".join(LINES[:5])  # five sentences in one line: parts of one sentence
        (expected,) = translate_text(reference, [text])
        answer = ok(f"{served.url}/translate", {"q": text, "source": "de", "target": "en"})
        assert answer["translatedText"] == expected
        assert ok(f"{served.url}/v1/translate", {"text": text})["translations"][0]["text"] == expected
        lines = "\n".join(LINES[:7])
        assert ok(f"{served.url}/translate", {"q": lines, "source": "de", "target": "en"})["translatedText"] == (
            "\n".join(translate_text(reference, LINES[:7]))
        )


def test_libretranslate_fields_from_a_query_and_a_form_and_odd_formats(server):
    """q in the query and in a form: the query's, a string answered with a string (was a list of both);
    a format that is no string is refused (was text); a form without its boundary names what is wrong;
    a preflight may ask for X-API-Key, the key header mt documents (was a plain-text 400)."""
    import urllib.request

    url = f"{server.url}/translate"
    one = ok(f"{url}?q={quote(LINES[0])}", form={"q": LINES[1], "source": "de", "target": "en"})
    assert one == ok(url, {"q": LINES[0], "source": "de", "target": "en"})
    for fmt in ({}, [], 0, False):
        status, _, data = call(url, {"q": LINES[0], "source": "de", "target": "en", "format": fmt})
        assert status == 400 and "format is not supported" in data["error"], (fmt, data)
    status, _, data = call(url, raw=b"q=x", headers={"Content-Type": "multipart/form-data"})
    assert status == 400 and data["error"].startswith("the multipart form is not valid: "), data
    preflight = urllib.request.Request(url, method="OPTIONS", headers={
        "Origin": "http://example.org", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-api-key"})
    with urllib.request.urlopen(preflight, timeout=30) as answer:
        assert answer.status == 200 and "x-api-key" in answer.headers["Access-Control-Allow-Headers"].lower()


def test_a_dead_worker_fails_waiting_and_later_requests_at_once_and_health_says_503(trained_experiment):
    translator = load(trained_experiment)
    hook = Hook(translator)
    with Served(build_app(translator, Limits(max_wait_ms=0), threads=1)) as served:
        url, batcher = f"{served.url}/v1/translate", served.app.state.batcher
        hook.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            try:
                held = pool.submit(call, url, {"text": LINES[0]}, timeout=10)
                assert hook.entered.wait(60)  # the worker is inside the search that will kill it
                waiting = pool.submit(call, url, {"text": LINES[1]}, timeout=10)
                deadline = time.monotonic() + 30
                while batcher.queued() < 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
                hook.fail = WorkerKiller("injected death")
            finally:
                hook.gate.set()
            answers = [held.result(30), waiting.result(30)]
        answers += [call(url, {"text": LINES[2]}, timeout=10),
                    call(f"{served.url}/translate", {"q": LINES[2], "source": "de", "target": "en"}, timeout=10),
                    call(f"{served.url}/v1/attention", {"text": LINES[2]}, timeout=10)]
        for status, headers, data in answers:  # no Retry-After: retrying will not help
            assert status == 503 and "Retry-After" not in headers and list(data) == ["error"], data
            assert "the translation worker stopped: WorkerKiller: injected death" in data["error"], data
        status, _, data = call(f"{served.url}/health", timeout=10)
        assert status == 503 and list(data) == ["error"] and "WorkerKiller: injected death" in data["error"]
    assert not served.thread.is_alive()  # and it stops when told to (what SIGTERM does)


# -- the command line ---------------------------------------------------------------------------
def test_flags_out_of_range_and_a_taken_port_are_one_line_errors():
    with pytest.raises(ConfigError, match="--max-queue 0: must be at least 1"):
        Limits(max_queue=0)
    with pytest.raises(ConfigError, match="^--max-tokens 0: must be at least 1"):  # its flag (was --max-batch-tokens)
        Limits(max_batch_tokens=0)
    with pytest.raises(ConfigError, match="--max-wait-ms -1"):
        Limits(max_wait_ms=-1)
    taken = bind("127.0.0.1", 0)
    taken.listen()
    try:
        with pytest.raises(MtError, match=f"--port {taken.getsockname()[1]}: .*choose another --port"):
            bind("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
    for host in ("999.1.1.1",):  # no address at all (was: "choose another --port")
        with pytest.raises(MtError, match=f"--host {host} --port 0: .*give an address of this machine as --host"):
            bind(host, 0)


@pytest.mark.slow
def test_mt_serve_logs_each_request_and_sigterm_lets_the_request_in_flight_finish(trained_experiment, reference,
                                                                                    tmp_path):
    log_path = tmp_path / "serve.log"
    # A request waits up to --max-wait-ms for company: long enough to be in flight at SIGTERM.
    process, url = serve_process(trained_experiment.root.parent, log_path, "--exp", str(trained_experiment.root),
                                 "--threads", "1", "--max-wait-ms", "3000")
    try:
        assert process.poll() is None, log_path.read_text()
        deadline = time.monotonic() + 120
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(call, f"{url}/v1/translate", {"text": LINES[:2]})
            while call(f"{url}/health")[2]["queued"] < 2:
                assert not in_flight.done() and time.monotonic() < deadline
                time.sleep(0.02)
            process.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            with pytest.raises(OSError):  # no new connections once stopping
                call(f"{url}/health")
            status, _, data = in_flight.result(60)
        assert process.wait(60) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    stock = Translator.load(trained_experiment, trained_experiment.load_config())
    assert status == 200 and [t["text"] for t in data["translations"]] == stock.translate(LINES[:2])
    log_text = log_path.read_text()
    # The start line names the pairs, the experiment and the address (the helper found `url` in the log:
    # its being there proves nothing; its place in the start line does).
    assert re.search(rf"mt serve de -> en: {re.escape(str(trained_experiment.root))} \(.*\) on {re.escape(url)} ",
                     log_text), log_text
    assert "POST /v1/translate 200 2 lines" in log_text and "GET /health 200" in log_text, log_text


@pytest.mark.slow
def test_mt_serve_parallel_processes_answers_as_one_process_and_stops_them(trained_experiment, tmp_path):
    log_path = tmp_path / "serve.log"
    # The search processes start before the server answers.
    process, url = serve_process(trained_experiment.root.parent, log_path, "--exp", str(trained_experiment.root),
                                 "--threads", "2", "--parallel", "processes")
    try:
        assert process.poll() is None, log_path.read_text()
        children = [int(p) for p in (Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split())]
        # The two search processes (spawned), beside multiprocessing's resource tracker, which ends on its own.
        children = [pid for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(children) == 2, children
        status, _, data = call(f"{url}/v1/translate", {"text": LINES[:9]})
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    stock = Translator.load(trained_experiment, trained_experiment.load_config())
    assert status == 200 and [t["text"] for t in data["translations"]] == stock.translate(LINES[:9])
    deadline = time.monotonic() + 10
    while [pid for pid in children if Path(f"/proc/{pid}").exists()] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()], "search processes left behind"


def test_mt_serve_searches_in_processes_where_the_experiment_says_so(trained_experiment, tmp_path):
    """Without --parallel, the experiment's decode.parallel (was: threads, whatever it said)."""
    import shutil

    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, exp.root)
    cfg = exp.load_config()
    cfg.decode.parallel = "processes"
    write_text_atomic(exp.config_path, save_yaml(cfg))
    process, url = serve_process(trained_experiment.root.parent, tmp_path / "serve.log", "--exp", str(exp.root),
                                 "--threads", "2")
    try:
        children = [int(p) for p in (Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split())]
        children = [pid for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(children) == 2, children
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_the_server_moves_what_it_loaded_out_of_the_collectors_passes_and_collects_less_often():
    """mt.apps.serve.http.tune_collector, as `mt serve` calls it once loaded (in a process of its own:
    the collector's settings are the process's): the objects that exist are frozen, later ones are not,
    and the young generation waits for COLLECTOR_THRESHOLDS[0] new objects; cyclic garbage is still
    collected."""
    import subprocess
    import sys

    code = (
        "import gc, json\n"
        "from mt.apps.serve.http import COLLECTOR_THRESHOLDS, tune_collector\n"
        "before = gc.get_freeze_count()\n"
        "tune_collector()\n"
        "frozen = gc.get_freeze_count()\n"
        "class Node: pass\n"
        "a, b = Node(), Node(); a.other, b.other = b, a; del a, b\n"
        "found = gc.collect()\n"
        "print(json.dumps([before, frozen, list(gc.get_threshold()), list(COLLECTOR_THRESHOLDS), found]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, cwd=root)
    before, frozen, threshold, wanted, found = json.loads(out.stdout)
    assert before == 0 and frozen > 1000 and threshold == wanted and wanted[0] > 700
    assert found >= 2  # the two objects of the cycle, made after the freeze


@pytest.mark.slow
def test_mt_serve_takes_the_search_flags_the_ctranslate2_engine_needs(trained_experiment, tmp_path):
    """`--engine ctranslate2` on an experiment of the default gnmt penalty could not start: its refusal
    named --length-penalty, a flag mt serve did not have. The server's search takes translate's flags."""
    pytest.importorskip("ctranslate2")
    log_path = tmp_path / "serve.log"
    process, url = serve_process(trained_experiment.root.parent, log_path, "--exp", str(trained_experiment.root),
                                 "--threads", "1", "--engine", "ctranslate2", "--length-penalty", "length",
                                 "--beam", "3")
    try:
        status, _, data = call(f"{url}/v1/translate", {"text": LINES[:2]})
        assert status == 200, data
        assert ok(f"{url}/health")["engine"].startswith("ctranslate2")
        stock = Translator.load(trained_experiment, trained_experiment.load_config())
        options = DecodeOptions(beam=3, length_penalty="length")
        assert [t["text"] for t in data["translations"]] == [h[0][0] for h in stock.search(LINES[:2], options)]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
