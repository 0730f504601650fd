"""The page `mt serve` gives at GET /, in a real headless Chromium (playwright) against a real server.

A tiny trained experiment (conftest's trained_experiment) is served by `python -m mt serve` on a
loopback port it chooses (helpers.serve_process). The page must show what POST /v1/translate returns for the typed lines (the
translation and its n-best list, in order), draw the cross-attention of a clicked sentence as a
grid of output tokens x source tokens with the weights POST /v1/attention returns, follow the
layer and head choice, and show the server's errors. Debian's chromium is the browser
(`apt-get install chromium`; playwright's own download cannot work offline); without it, or
without playwright, the tests skip with a plain reason, which fails under CI=true (conftest).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import serve_process

import mt

LINES = ["Der hund läuft im park.", "Eine kleine katze sitzt auf dem haus."]
NBEST = 3  # the page's default number of alternatives


def alpha(css_color: str) -> float:
    """The alpha of a computed CSS colour: "rgba(36, 87, 197, 0.42)" or "rgb(36, 87, 197)" (opaque)."""
    numbers = re.findall(r"[\d.]+", css_color)
    return float(numbers[3]) if len(numbers) == 4 else 1.0


def request(url: str, body: dict | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET, or of a POST of `body` as JSON."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def post(url: str, body: dict) -> dict:
    status, data = request(url, body)
    assert status == 200, f"{url}: {status} {data[:500]!r}"
    return json.loads(data)


@pytest.fixture(scope="module")
def server(trained_experiment, tmp_path_factory):
    """The base URL of `mt serve` over the tiny experiment; its log is shown if it fails to start."""
    yield from serving(trained_experiment, tmp_path_factory)


@pytest.fixture(scope="module")
def keyed_server(trained_experiment, tmp_path_factory):
    """The same, with --api-key s3cret."""
    yield from serving(trained_experiment, tmp_path_factory, "--api-key", "s3cret")


def serving(trained_experiment, tmp_path_factory, *flags: str):
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    process, url = serve_process(trained_experiment.root.parent, log_path, "--exp", str(trained_experiment.root),
                                 *flags)
    if url is None:
        pytest.fail(f"mt serve exited with {process.returncode}:\n{log_path.read_text()}")
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed: apt-get install chromium (Debian's; CI installs it)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=["--disable-dev-shm-usage"])  # a container's /dev/shm is small
        yield chromium
        chromium.close()


@contextlib.contextmanager
def opened(browser, url: str, width: int = 1100):
    """The page at `url` in a fresh browser context `width` pixels wide, closed after the block."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)  # a translation on a busy 2-core machine
        page.goto(url + "/")
        yield page
    finally:
        context.close()


@pytest.fixture
def page(browser, server):
    with opened(browser, server) as page:
        yield page


@pytest.mark.slow
def test_the_page_is_the_packaged_file(server):
    status, body = request(server + "/")
    assert status == 200
    assert body == (Path(mt.__file__).parent / "apps" / "serve" / "page.html").read_bytes()
    # Its addresses are relative: served by a proxy under /mt/, "/v1/translate" went to another site
    assert not re.findall(rb"""(?:fetch|post)\(["'`]/""", body)
    # Its own script and style only, no framing by another site (the key field): none of these was sent
    with urllib.request.urlopen(server + "/", timeout=60) as response:
        policy = response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]{44}';", policy), policy


@pytest.mark.slow
def test_page_shows_the_translations_and_draws_the_attention_of_a_clicked_sentence(page, server):
    expected = post(server + "/v1/translate", {"text": LINES, "nbest": NBEST})["translations"]
    page.fill("#source", "\n".join(LINES) + "\n\n")  # blank lines are not sent
    page.click("#translate")
    results = page.locator("[data-testid=result]")
    results.first.wait_for()
    assert results.count() == len(LINES)
    for k, (line, hyp) in enumerate(zip(LINES, expected)):
        result = results.nth(k)
        assert result.locator("[data-testid=result-source]").inner_text() == line
        assert result.locator("[data-testid=translation]").inner_text() == hyp["text"]
        alternatives = result.locator("[data-testid=nbest] li")
        assert alternatives.count() == len(hyp["nbest"]) - 1
        for n, alternative in enumerate(hyp["nbest"][1:]):
            assert alternatives.nth(n).inner_text().startswith(alternative["text"])
    assert page.locator("#error").inner_text() == ""

    # the attention of the translation shown (the page sends it: asked again, the model might differ)
    asked = []
    page.on("request", lambda r: asked.append(json.loads(r.post_data)) if r.url.endswith("/v1/attention") else None)
    maps = post(server + "/v1/attention", {"text": LINES[1], "translation": expected[1]["text"]})
    assert maps["translation"] == expected[1]["text"]
    results.nth(1).locator("[data-testid=result-source]").click()
    heatmap = page.locator("[data-testid=heatmap]")
    heatmap.locator("tbody tr").first.wait_for()
    rows, cols = len(maps["tgt_tokens"]), len(maps["src_tokens"])
    assert heatmap.locator("tbody tr").count() == rows
    assert page.evaluate("() => document.activeElement.id") == "attention-title"  # focused: it was out of view
    assert page.evaluate("() => document.getElementById('source').getAttribute('aria-describedby')") == "hint"
    assert heatmap.locator("tbody td").count() == rows * cols
    assert heatmap.locator("thead th").all_inner_texts() == maps["src_tokens"]
    assert heatmap.locator("tbody th").all_inner_texts() == maps["tgt_tokens"]
    assert asked[-1]["text"] == LINES[1] and asked[-1]["translation"] == expected[1]["text"]
    # each cell's weight as text a screen reader reads (it was a background colour and a title)
    said = heatmap.locator("tbody td").all_text_contents()
    assert all(re.fullmatch(r"\d\.\d\d(, aligned)?", text) for text in said), said[:5]
    assert sum(text.endswith(", aligned") for text in said) == heatmap.locator("tbody td.aligned").count() > 0
    assert heatmap.locator("td.aligned").count() == len(maps["alignment"])
    assert maps["alignment_words"] in page.locator("[data-testid=alignment]").inner_text()

    def drawn() -> list[float]:
        """The weight each cell says (its title), row by row, checked against its paint (the background's alpha)."""
        cells = heatmap.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => [td.title, getComputedStyle(td).backgroundColor]))")
        weights = [[float(title.rsplit(": ", 1)[1]) for title, _ in row] for row in cells]
        painted = [alpha(color) for row in cells for _, color in row]
        assert painted == pytest.approx(sum(weights, []), abs=0.01)
        assert max(painted) > 0.1, "a blank heatmap"
        return sum(weights, [])

    layer = maps["alignment_layer"] - 1  # shown first: the alignment's layer, mean of heads
    heads = maps["cross_attention"][layer]
    mean = [sum(h[t][s] for h in heads) / len(heads) for t in range(rows) for s in range(cols)]
    assert drawn() == pytest.approx(mean, abs=1e-3)
    page.select_option("[data-testid=head]", "1")  # the second head
    assert drawn() == pytest.approx(sum(heads[1], []), abs=1e-3)
    page.select_option("[data-testid=layer]", "0")  # the first layer, still the second head
    assert drawn() == pytest.approx(sum(maps["cross_attention"][0][1], []), abs=1e-3)


def test_page_shows_the_servers_errors(page, server):
    page.click("#translate")  # nothing typed: said on the page, nothing sent
    assert page.locator("[data-testid=result]").count() == 0
    assert "Type or paste" in page.locator("[data-testid=error]").inner_text()

    page.fill("#source", LINES[0])
    page.fill("#nbest", "9")  # more alternatives than the server's --max-beam (8)
    status, body = request(server + "/v1/translate", {"text": [LINES[0]], "nbest": 9})
    assert status == 422
    page.click("#translate")
    page.locator("[data-testid=error]", has_text=json.loads(body)["error"]).wait_for()
    assert page.locator("[data-testid=result]").count() == 0

    page.fill("#nbest", str(NBEST))
    page.fill("#beam", "1")  # fewer than the 3 alternatives asked: the beam's width is what it can give
    page.click("#translate")
    page.locator("[data-testid=result]").first.wait_for()
    assert page.locator("[data-testid=error]").inner_text() == ""
    assert page.locator("[data-testid=nbest]").count() == 0

    page.fill("#beam", "")  # the server's beam
    page.click("#translate")
    # The answer drawn (the button is disabled until then): the results above are the last request's,
    # and a sentence of the earlier results clicked meanwhile would have its answer dropped, as it should.
    page.locator("#translate:enabled").wait_for()
    assert page.locator("[data-testid=error]").inner_text() == ""
    page.route("**/v1/attention", lambda route: route.abort())  # the server gone
    page.locator("[data-testid=result-source]").first.click()
    page.locator("[data-testid=error]", has_text="no answer from the server").wait_for()


def test_page_translates_a_chosen_or_dropped_file_and_offers_it_for_download(page, server, tmp_path):
    text = "\n".join(LINES) + "\n"
    translations = [post(server + "/translate", {"q": line, "source": "de", "target": "en"})["translatedText"]
                    for line in LINES]
    expected = "".join(f"{line}\n" for line in translations)  # a .txt file of short lines: line by line
    page.locator("[data-testid=formats]", has_text=".txt").wait_for()
    assert ".txt" in page.locator("[data-testid=file]").get_attribute("accept").split(",")  # /frontend/settings
    link = page.locator("[data-testid=download]")

    def downloaded(name: str) -> str:
        page.locator("[data-testid=download]", has_text=name).wait_for()
        with page.expect_download() as info:
            link.click()
        assert info.value.suggested_filename == name
        return Path(info.value.path()).read_text(encoding="utf-8")

    path = tmp_path / "Hunde und Katzen.txt"
    path.write_text(text, encoding="utf-8")
    assert page.locator("[data-testid=key]").is_hidden()  # a server without a key asks for none
    page.set_input_files("[data-testid=file]", str(path))
    assert downloaded("Hunde und Katzen.txt") == expected
    # The link is on the page's own origin (behind a proxy the server's idea of its host can be wrong),
    # and the input is emptied, so that choosing the same file again (the key typed, say) sends it again.
    assert link.get_attribute("href").startswith("download_file/")  # relative: a proxy's /prefix/ kept
    assert page.evaluate("document.getElementById('file').value") == ""
    dropped = page.evaluate_handle("""(text) => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([text], "katzen.txt", {type: "text/plain"}));
        return transfer;
    }""", LINES[1])
    page.dispatch_event("[data-testid=drop]", "drop", {"dataTransfer": dropped})
    assert downloaded("katzen.txt") == translations[1]
    assert page.locator("[data-testid=error]").inner_text() == ""

    page.set_input_files("[data-testid=file]", files=[{"name": "bild.png", "mimeType": "image/png",
                                                       "buffer": b"\x89PNG\r\n\x1a\n"}])
    page.locator("[data-testid=file-error]", has_text="bild.png: Invalid request: file format not supported").wait_for()
    assert page.locator("[data-testid=error]").inner_text() == ""  # beside the file box, not at the top
    assert link.is_hidden()


@pytest.mark.slow
def test_page_shows_only_answers_to_what_was_asked_last(page, server):
    """A second Ctrl+Enter while a translation runs is not sent (its older answer replaced the
    newer one), an attention answer that arrives after another click is not drawn, and an
    attention error hides the map of the sentence before. Requests are held, then let go, by the
    test: no timing decides the order."""
    held = []

    def until(condition) -> None:
        for _ in range(600):
            if condition():
                return
            page.wait_for_timeout(50)
        raise AssertionError("the page did not send what it should have")

    page.route("**/v1/translate", lambda route: held.append(route))
    page.fill("#source", LINES[0])
    page.click("#translate")
    until(lambda: len(held) == 1)
    page.fill("#source", LINES[1])
    page.press("#source", "Control+Enter")  # while the first is still unanswered
    page.wait_for_timeout(500)
    assert len(held) == 1
    assert "still translating" in page.locator("#status").inner_text()  # said (was ignored unsaid)
    held.pop().continue_()
    page.locator("[data-testid=result]").first.wait_for()
    assert page.locator("[data-testid=result-source]").all_inner_texts() == [LINES[0]]
    page.unroute("**/v1/translate")

    page.fill("#source", "\n".join(LINES))
    page.click("#translate")
    page.locator("[data-testid=result]").nth(1).wait_for()
    page.route("**/v1/attention", lambda route: held.append(route))
    sources = page.locator("[data-testid=result-source]")
    sources.nth(0).click()
    until(lambda: len(held) == 1)
    sources.nth(1).click()
    until(lambda: len(held) == 2)
    first, second = held
    second.continue_()
    page.locator("[data-testid=heatmap] tbody tr").first.wait_for()
    first.continue_()  # the older answer, last: not drawn over the second sentence's
    page.wait_for_timeout(1000)
    assert LINES[1] in page.locator("#attention-pair").inner_text()
    page.unroute("**/v1/attention")

    # A busy server's 503 with Retry-After is sent again when it says (the user had to, by hand)
    busy = []

    def once_busy(route):
        busy.append(1)
        if len(busy) == 1:
            route.fulfill(status=503, headers={"Retry-After": "1"}, content_type="application/json",
                          body=json.dumps({"error": "the server is busy"}))
        else:
            route.continue_()

    page.route("**/v1/translate", once_busy)
    page.fill("#source", "Ein Hund.")
    page.click("#translate")
    page.locator("#status", has_text="trying again").wait_for()
    page.locator("[data-testid=result-source]", has_text="Ein Hund.").wait_for()
    assert len(busy) == 2 and page.locator("[data-testid=error]").inner_text() == ""
    page.unroute("**/v1/translate")
    page.fill("#source", "\n".join(LINES))
    page.click("#translate")
    page.locator("[data-testid=result]").nth(1).wait_for()

    page.route("**/v1/attention", lambda route: route.fulfill(status=413, content_type="application/json",
                                                               body=json.dumps({"error": "text: too long"})))
    sources.nth(0).click()
    page.locator("[data-testid=error]", has_text="too long").wait_for()
    assert page.locator("[data-testid=attention]").is_hidden()


@pytest.mark.slow
def test_page_keeps_long_words_and_right_to_left_text_in_their_boxes(browser, server):
    with opened(browser, server, width=375) as page:
        long_word = "https://example.org/" + "a" * 120
        page.fill("#source", f"{long_word}\nשלום עולם (test) 123.")
        page.click("#translate")
        page.locator("[data-testid=result]").nth(1).wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= 375  # no sideways scrolling
        assert page.locator("[data-testid=result-source]").nth(1).get_attribute("dir") == "auto"
        assert page.locator("[data-testid=translation]").first.get_attribute("lang") == "en"  # the target


@pytest.mark.slow
def test_page_asks_for_the_key_of_a_server_that_wants_one(browser, keyed_server):
    with opened(browser, keyed_server) as page:
        page.locator("[data-testid=key]").wait_for()  # asked at once: /frontend/settings says keyRequired
        page.fill("#source", LINES[0])
        page.click("#translate")
        page.locator("[data-testid=error]", has_text="API key").wait_for()
        page.fill("[data-testid=key]", "s3cret")
        page.click("#translate")
        page.locator("[data-testid=result]").first.wait_for()
        assert page.locator("[data-testid=error]").inner_text() == ""
        page.locator("[data-testid=result-source]").first.click()  # /v1/attention takes the key too
        page.locator("[data-testid=heatmap] tbody tr").first.wait_for()
        # A key pasted with spaces works for files too (was 403 there), sent as a header as well
        sent = []
        page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "translate_file" in r.url else None)
        page.fill("[data-testid=key]", " s3cret ")
        page.set_input_files("[data-testid=file]", files=[{"name": "a.txt", "mimeType": "text/plain",
                                                           "buffer": (LINES[0] + "\n").encode()}])
        page.locator("[data-testid=download]").wait_for()
        assert page.locator("[data-testid=error]").inner_text() == "" and sent == ["Bearer s3cret"]
        page.fill("[data-testid=key]", "schlüssel€")  # beyond Latin-1: said so (was "is mt serve running?")
        page.click("#translate")
        page.locator("[data-testid=error]", has_text="cannot carry").wait_for()
        # Right-to-left targets run right to left; the others by their text
        assert page.evaluate("() => [direction('ar'), direction('he-IL'), direction('de')]") == ["rtl", "rtl", "auto"]


@pytest.fixture(scope="module")
def multi_target_server(tmp_path_factory):
    """`mt serve` over a tiny model trained a few steps on en-de and en-fr: its output is noise, but the
    server is real, and it writes two languages."""
    from helpers import one_thread, toy_multiway

    from mt.data.binarize import binarize
    from mt.data.train_tokenizer import train_tokenizer
    from mt.experiment.config import open_experiment
    from mt.training.loop import train

    root = tmp_path_factory.mktemp("multi-target")
    for split, n in (("train", 120), ("valid", 8), ("test", 8)):
        for lang, lines in toy_multiway(n, seed=len(split)).items():
            (root / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    exp, cfg, _ = open_experiment(root / "exp", flags={
        "data.directions": ["en-de", "en-fr"], "data.train": [f"files:{root / 'train'}"],
        "data.valid": [f"files:{root / 'valid'}"], "data.test": [f"files:{root / 'test'}"],
        "tokenizer.vocab_size": 80, "tokenizer.byte_fallback": False, "model.enc_layers": 1, "model.dec_layers": 1,
        "model.d_model": 32, "model.d_ff": 64, "model.n_heads": 2, "train.max_steps": 4, "train.max_tokens": 300,
        "decode.max_len_b": 5})
    with one_thread():
        train_tokenizer(exp, cfg)
        binarize(exp, cfg)
        train(exp, cfg)
    yield from serving(exp, tmp_path_factory)


@pytest.mark.slow
def test_page_asks_a_model_of_several_targets_for_the_one_chosen(browser, multi_target_server):
    """Was: no target was sent for typed text, and such a model answered every Translate with "give the
    target language"."""
    sent = []
    with opened(browser, multi_target_server) as page:
        page.on("request", lambda r: sent.append(json.loads(r.post_data)) if r.url.endswith("/v1/translate") else None)
        page.locator("[data-testid=target]").wait_for()
        page.select_option("[data-testid=target]", "fr")
        page.fill("#source", "a dog runs")
        page.click("#translate")
        page.locator("[data-testid=translation]").first.wait_for()
        assert page.locator("[data-testid=error]").inner_text() == ""
        assert sent[-1]["target"] == "fr"
        expected = post(multi_target_server + "/v1/translate", {"text": ["a dog runs"], "target": "fr", "nbest": NBEST})
        assert page.locator("[data-testid=translation]").first.inner_text() == expected["translations"][0]["text"]
        assert page.locator("[data-testid=translation]").first.get_attribute("lang") == "fr"
        # Another target chosen since: the sentence's attention is still of its French translation
        attention = []
        page.on("request", lambda r: attention.append(json.loads(r.post_data)) if r.url.endswith("/v1/attention") else None)
        page.select_option("[data-testid=target]", "de")
        page.locator("[data-testid=result-source]").first.click()
        page.locator("[data-testid=heatmap] tbody tr").first.wait_for()
        assert attention[-1]["target"] == "fr"


@pytest.mark.slow
def test_page_clears_a_dropped_attentions_status_and_keeps_dropped_files_and_focus_in_view(page, server):
    """An attention answer dropped because the text was emptied left "reading the attention…" for ever;
    a file dropped beside the box replaced the page; the file box showed no keyboard focus."""
    held = []
    page.fill("#source", LINES[0])
    page.click("#translate")
    page.locator("[data-testid=result]").first.wait_for()
    page.route("**/v1/attention", lambda route: held.append(route))
    page.locator("[data-testid=result-source]").first.click()
    for _ in range(600):
        if held:
            break
        page.wait_for_timeout(50)
    page.fill("#source", "")
    page.click("#translate")  # refused: nothing to translate, and the attention asked is dropped
    held.pop().continue_()
    page.wait_for_function("() => document.getElementById('status').textContent === ''")  # a function: CSP allows no eval
    assert page.evaluate("""() => {
        const drop = new DragEvent("drop", {bubbles: true, cancelable: true});
        document.body.dispatchEvent(drop);
        return drop.defaultPrevented;
    }""")
    # Dragged text, though, drops into the text box as browsers do (every drop was cancelled)
    assert page.evaluate("""() => {
        const data = new DataTransfer();
        data.setData("text/plain", "Ein Hund.");
        const drop = new DragEvent("drop", {bubbles: true, cancelable: true, dataTransfer: data});
        document.getElementById("source").dispatchEvent(drop);
        return drop.defaultPrevented;
    }""") is False
    page.focus("#file")
    assert page.evaluate("getComputedStyle(document.getElementById('drop')).outlineStyle") != "none"


@pytest.mark.slow
def test_page_asks_no_more_alternatives_than_the_server_gives(browser, trained_experiment, tmp_path_factory):
    """With --max-beam 2 the page's default of 3 alternatives was refused at every Translate."""
    for url in serving(trained_experiment, tmp_path_factory, "--max-beam", "2", "--max-lines", "2",
                       "--max-file-bytes", "100"):
        with opened(browser, url) as page:
            page.wait_for_function("() => document.getElementById('nbest').value === '2'")
            page.fill("#source", LINES[0])
            page.click("#translate")
            page.locator("[data-testid=result]").first.wait_for()
            assert page.locator("[data-testid=error]").inner_text() == ""
            # The text against the server's limits as it is typed (they were known only once refused)
            assert page.locator("[data-testid=count]").inner_text() == f"{len(LINES[0])} / 20,000 characters, 1 / 2 lines"
            page.fill("#source", "\n".join([LINES[0]] * 3))
            assert page.locator("[data-testid=count]").inner_text().endswith("3 / 2 lines: more than the server takes")
            # counted as sent: lines trimmed, blank ones left out (their spaces were counted against the limit)
            page.fill("#source", f"   {LINES[0]}   \n\n  \n")
            assert page.locator("[data-testid=count]").inner_text() == f"{len(LINES[0])} / 20,000 characters, 1 / 2 lines"
            page.set_input_files("[data-testid=file]", files=[{"name": "small.txt", "mimeType": "text/plain",
                                                               "buffer": b"Ein Hund.\n"}])
            page.locator("[data-testid=download]", has_text="small.txt").wait_for()
            sent = []
            page.on("request", lambda r: sent.append(r.url) if "translate_file" in r.url else None)
            page.set_input_files("[data-testid=file]", files=[{"name": "big.txt", "mimeType": "text/plain",
                                                               "buffer": b"Ein Hund.\n" * 20}])
            page.locator("[data-testid=file-error]", has_text="200 bytes, more than the server takes (100)").wait_for()
            assert sent == []  # refused before it was sent
            assert page.locator("[data-testid=download]").is_visible()  # the earlier file's link stays (it was hidden)


@pytest.mark.slow
def test_page_says_when_a_translated_file_is_no_longer_kept(browser, trained_experiment, tmp_path_factory, tmp_path):
    """Past --file-ttl the link was a failed download with no word of why."""
    path = tmp_path / "kurz.txt"
    path.write_text(LINES[0] + "\n", encoding="utf-8")
    for url in serving(trained_experiment, tmp_path_factory, "--file-ttl", "1"):
        with opened(browser, url) as page:
            page.locator("[data-testid=formats]", has_text=".txt").wait_for()
            page.set_input_files("[data-testid=file]", str(path))
            page.locator("[data-testid=download]", has_text="kurz.txt").wait_for()
            page.wait_for_timeout(2500)  # past the server's 1 s
            page.locator("[data-testid=download]").click()
            page.locator("[data-testid=file-error]", has_text="no longer keeps this translation").wait_for()
            assert page.locator("[data-testid=download]").is_hidden()

