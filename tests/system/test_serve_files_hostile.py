"""`mt serve`'s /translate_file against hostile uploads: bodies past --max-file-bytes (declared, or
chunked without end), extensions it does not translate, content that is not what its extension says
(a .docx that is no zip, a zip bomb, XML that is not well-formed or declares entities, binary data
named .txt), files that ask to translate more than --max-file-chars, malformed forms, more uploads at
once than --max-file-jobs, clients that leave, and the retention of the results (--file-ttl,
--max-files, the directory removed at shutdown). Every refusal is a 4xx (or 503 for busy) in
LibreTranslate's shape, one line naming the field `file`; none reaches the model. Real servers on
loopback ports; .docx and .xlf are mt's formats once registered, else a small format of the test's
(helpers/formats.py) stands in for them.
"""

from __future__ import annotations

import io
import socket
import threading
import time
import zipfile

import httpx
import pytest
from helpers import LINES, Hook, Served, call, load, raw_http, stand_in

from mt.apps.serve.app import Limits, build_app
from mt.apps.serve.queue import QueueFull

pytestmark = pytest.mark.usefixtures("single_thread")

LIMITS = Limits(max_wait_ms=0, max_file_bytes=20_000, max_file_chars=3000)
FORM = {"source": "de", "target": "en"}


@pytest.fixture(scope="module")
def server(trained_experiment):
    with Served(build_app(load(trained_experiment), LIMITS, threads=1)) as served:
        yield served


def upload(url: str, name: str, data: bytes, form: dict = FORM, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/translate_file", data=form, files={"file": (name, data)}, timeout=60, **kwargs)


def refused(answer: httpx.Response, status: int, *needles: str) -> str:
    """The one-line error of a refusal with `status`, holding each needle."""
    assert answer.status_code == status, (answer.status_code, answer.text)
    error = answer.json()["error"]
    assert list(answer.json()) == ["error"] and "\n" not in error and len(error) < 400, error
    for needle in needles:
        assert needle in error, error
    return error


def searched(served) -> int:
    return call(f"{served.url}/health")[2]["sentences"]


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return out.getvalue()


# -- size ------------------------------------------------------------------------------------------
def test_a_file_past_the_byte_limit_is_refused_as_it_is_read(server):
    refused(upload(server.url, "big.txt", b"Der Hund. " * 2001), 413, "file: 20010 bytes", "--max-file-bytes")
    head = ("POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            "Content-Length: 1000000000\r\n\r\n")
    status, data = raw_http(server.url, head, [])  # refused on its headers, before any of the body
    assert status == 413 and "--max-file-bytes" in data["error"]
    chunk = b"x" * 65536
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 4  # past the limit and its room for fields, never ended
    head = ("POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            "Transfer-Encoding: chunked\r\n\r\n")
    started = time.monotonic()
    status, data = raw_http(server.url, head, parts)
    assert status == 413 and data["error"] == "file: more than 20000 bytes (--max-file-bytes)"
    assert time.monotonic() - started < 15


def test_a_file_asking_more_than_the_character_limit_is_refused_before_any_is_searched(server):
    before = searched(server)
    cues = "\n".join("a" for _ in range(3001)).encode()  # a huge count of tiny units, within the byte limit
    refused(upload(server.url, "cues.txt", cues), 413, "file: 3001 characters to translate", "--max-file-chars 3000")
    refused(upload(server.url, "long.txt", (LINES[0] + "\n").encode() * 200), 413, "--max-file-chars")
    # Markdown asks twice (its plain paragraphs, then those with markup): the first ask alone is within
    # the limit, both are not; nothing is searched either way.
    markdown = ("Der Hund läuft im Park.\n\n" * 80 + "Der **Hund** läuft im Park.\n\n" * 60).encode()
    refused(upload(server.url, "page.md", markdown), 413, "--max-file-chars 3000")
    assert searched(server) == before


def test_a_pages_styles_and_scripts_are_not_counted_as_characters_to_translate(server):
    """Was: the page's markup was counted: 11 characters of text under a large inline style were 413."""
    style = "<style>" + "".join(f".rule-{i} {{ color: red; }}\n" for i in range(200)) + "</style>"
    page = f"<!DOCTYPE html>\n<html><head>{style}</head><body><p>{LINES[0]}</p></body></html>\n".encode()
    assert len(page) > 3000 and len(page) < 20_000  # over --max-file-chars in bytes, within --max-file-bytes
    answer = upload(server.url, "page.html", page)
    assert answer.status_code == 200, answer.text


# -- format and content ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["report.pdf", "noextension", "script.txt.exe", ".txt", "a.docx.zip"])
def test_an_extension_the_server_does_not_translate_is_refused_naming_the_ones_it_does(server, name):
    refused(upload(server.url, name, b"Der Hund."), 400, "Invalid request: file format not supported", ".txt")


def test_content_that_is_not_what_its_extension_says_is_refused(server):
    before = searched(server)
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    refused(upload(server.url, "picture.txt", png), 400, "file: picture.txt: ")  # no encoding reads it
    refused(upload(server.url, "nul.txt", "Der Hund.\0".encode("utf-16")), 400, "file: nul.txt: binary data")
    refused(upload(server.url, "archive.txt", zipped({"a.txt": b"Der Hund."})), 400, "file: archive.txt: ")
    with stand_in(".docx"):
        refused(upload(server.url, "letter.docx", b"Der Hund. " * 10), 400, "file: letter.docx: not a zip archive")
        refused(upload(server.url, "cut.docx", zipped({"a.txt": b"Der Hund. " * 50})[:-30]), 400, "file: cut.docx:")
    assert searched(server) == before


def test_zip_bombs_are_refused_from_the_zip_directory_before_anything_is_unzipped(server):
    with stand_in(".docx"):
        bomb = zipped({"word/document.xml": b"\0" * 1_000_000})  # 1 MB of zeros: about 1 kB zipped
        assert len(bomb) < 20_000
        refused(upload(server.url, "bomb.docx", bomb), 400, "file: bomb.docx: unzips to 1000000 bytes, more than 200000")
        dense = zipped({"word/document.xml": b"\0" * 150_000})  # within 10x the byte limit, but 100:1 and more
        refused(upload(server.url, "dense.docx", dense), 400, "more than 100 times its size (a zip bomb?)")
        answer = upload(server.url, "fine.docx", zipped({"word/document.xml": bytes(range(256)) * 8}))
        assert answer.status_code == 200 or "unzips" not in answer.json()["error"]  # mt's docx: not a Word file


def test_xml_that_is_not_well_formed_or_declares_entities_is_refused(server):
    laughs = (b'<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
              + b"".join(b'<!ENTITY %s "&%s;&%s;&%s;&%s;&%s;&%s;&%s;&%s;&%s;&%s;">' % ((b"bcdefghij"[i:i + 1],)
                         + (b"abcdefghi"[i:i + 1],) * 10) for i in range(9))
              + b']>\n<xliff><source>&j;</source></xliff>')
    with stand_in(".xlf"):
        refused(upload(server.url, "broken.xlf", b'<?xml version="1.0"?>\n<xliff>\n<source>Der Hund.</xliff>'), 400,
                "file: broken.xlf: not well-formed XML: mismatched tag at line 3")
        refused(upload(server.url, "laughs.xlf", laughs), 400, "file: laughs.xlf: declares the XML entity 'a'")


# -- the form ---------------------------------------------------------------------------------------
def test_malformed_forms_are_400_naming_what_is_wrong(server):
    url = f"{server.url}/translate_file"
    refused(httpx.post(url, json={"file": "Der Hund.", **FORM}), 400, "multipart/form-data")
    refused(httpx.post(url, data=FORM, files={"other": ("a.txt", b"Der Hund.")}), 400, "missing file parameter")
    refused(httpx.post(url, data={**FORM, "file": "Der Hund."}, files={"x": ("a.txt", b"x")}), 400, "file must be a file")
    refused(httpx.post(url, data=FORM, files=[("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))]), 400,
            "the multipart form is not valid")
    refused(httpx.post(url, data=FORM, files={"file": ("", b"Der Hund.")}), 400, "Invalid request:")
    broken = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nDer Hund."  # no end
    refused(httpx.post(url, content=broken, headers={"Content-Type": "multipart/form-data; boundary=b"}), 400)
    refused(httpx.get(url), 405, "GET /translate_file: this route takes POST")


def test_a_name_with_folders_is_only_its_own_name_and_downloads_are_only_the_servers(server):
    answer = upload(server.url, "../../etc/passwd.txt", LINES[0].encode())
    url = answer.json()["translatedFileUrl"]
    assert url.endswith(".passwd.txt") and "/download_file/" in url
    assert 'filename="passwd.txt"' in httpx.get(url).headers["content-disposition"]
    for path in ("nothing.txt", "%2E%2E", "%00", url.rsplit("/", 1)[1] + "x", url.rsplit("/", 1)[1][:36]):
        refused(httpx.get(f"{server.url}/download_file/{path}"), 404, "no such file", "--file-ttl")
    refused(httpx.get(f"{server.url}/download_file/..%2F..%2Fetc%2Fpasswd"), 404, "no such route")


# -- retention, work in progress, shutdown ------------------------------------------------------------
def test_results_expire_the_oldest_go_first_and_all_are_removed_at_shutdown(trained_experiment):
    limits = Limits(max_wait_ms=0, file_ttl=1.0, max_files=2)
    app = build_app(load(trained_experiment), limits, threads=1)
    with Served(app) as served:
        urls = [upload(served.url, f"{i}.txt", LINES[i].encode()).json()["translatedFileUrl"] for i in range(3)]
        refused(httpx.get(urls[0]), 404, "no such file", "1 seconds (--file-ttl), the latest 2 (--max-files)")
        assert [httpx.get(url).status_code for url in urls[1:]] == [200, 200]
        kept = app.state.documents.results.root
        assert len(list(kept.iterdir())) == 2
        time.sleep(1.2)
        refused(httpx.get(urls[1]), 404, "no such file")
        assert list(kept.iterdir()) == []
        upload(served.url, "3.txt", LINES[3].encode())
        assert kept.stat().st_mode & 0o077 == 0  # the server's user's only
    assert not kept.exists()


def test_uploads_past_the_job_limit_are_503_and_a_client_that_leaves_frees_its_slot(trained_experiment, capfd):
    limits = Limits(max_wait_ms=0, max_file_jobs=1)
    translator = load(trained_experiment)
    hook = Hook(translator)
    with Served(build_app(translator, limits, threads=1)) as served:
        hook.gate.clear()  # the worker holds in its next search
        first: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: first.append(upload(served.url, "a.txt", LINES[0].encode())))
        thread.start()
        assert hook.entered.wait(30)
        busy = upload(served.url, "b.txt", LINES[1].encode())
        refused(busy, 503, "--max-file-jobs")
        assert busy.headers["retry-after"] == "1"
        hook.gate.set()
        thread.join(30)
        assert first[0].status_code == 200
        # A client that leaves while its document is searched: its work ends, and the slot is free again.
        hook.gate.clear()
        hook.entered.clear()
        host, port = served.url.removeprefix("http://").split(":")
        body = (b"--b\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nde\r\n"
                b"--b\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nen\r\n"
                b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.txt\"\r\n\r\n"
                + "\n".join(LINES[:8]).encode() + b"\r\n--b--\r\n")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                         b"boundary=b\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            assert hook.entered.wait(30)
        hook.gate.set()
        deadline = time.monotonic() + 20
        while (answer := upload(served.url, "d.txt", LINES[2].encode())).status_code == 503:
            assert time.monotonic() < deadline, "the slot of the client that left was never freed"
            time.sleep(0.1)
        assert answer.status_code == 200
    assert "POST /translate_file 499" in capfd.readouterr().err


def test_a_document_whose_client_left_stops_while_it_is_counted():
    """A client that left while its document was counted (a page of a million empty tags: a minute, with
    little text) held its slot until the count and the translation had both read the whole file."""
    from mt.apps.serve.files import Abandoned, CountingUnits
    from mt.documents.formats import FORMATS, DocumentOptions
    from mt.documents.translate import translate_content

    gone = threading.Event()
    counted = CountingUnits(abandoned=gone)
    page = b"<p>Ein Hund.</p>" + b"<p>Eine Katze.</p>"
    translate_content(page, FORMATS["html"], counted, DocumentOptions("en"))
    assert counted.chars >= len("Ein Hund.Eine Katze.")
    gone.set()
    with pytest.raises(Abandoned):
        translate_content(page, FORMATS["html"], counted, DocumentOptions("en"))


def test_uploads_still_arriving_hold_only_the_bytes_they_sent_and_keep_no_keyed_client_out(trained_experiment):
    # One job at once, a key. A client without it starts an upload and stops sending: it holds what it
    # sent of the bytes uploads may hold (--max-file-jobs whole files), never the translation slot, nor
    # a keyed client's budget. Counted in uploads, four such stalled clients shut out everyone.
    limits = Limits(max_wait_ms=0, max_file_jobs=1, max_file_bytes=4096)
    app = build_app(load(trained_experiment), limits, api_key="K", threads=1)
    budget = app.state.documents.budget
    with Served(app) as served:
        host, port = served.url.removeprefix("http://").split(":")
        head = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.txt\"\r\n\r\n"
        start = (b"POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                 b"boundary=b\r\nContent-Length: %d\r\n\r\n" % budget + head)
        with socket.create_connection((host, int(port))) as small:
            small.sendall(start + b"Hallo")
            deadline = time.monotonic() + 10
            while app.state.documents.receiving[False] < 1:
                assert time.monotonic() < deadline, "the slow upload was never being read"
                time.sleep(0.05)
            in_field = upload(served.url, "d.txt", LINES[3].encode(), form={**FORM, "api_key": "K"})
            assert in_field.status_code == 200, in_field.text  # room beside a stalled upload of a few bytes
            with socket.create_connection((host, int(port))) as large:
                large.sendall(start + b"x" * (budget - 2 * len(head) - 5 - 100))  # the budget all but filled
                while app.state.documents.receiving[False] < budget - 100:
                    assert time.monotonic() < deadline, "the large upload was never being read"
                    time.sleep(0.05)
                keyless = upload(served.url, "b.txt", LINES[1].encode(), headers={"X-API-Key": "wrong"})
                refused(keyless, 503, "receiving", "--max-file-jobs x --max-file-bytes")
                keyed = upload(served.url, "c.txt", LINES[2].encode(), headers={"Authorization": "Bearer K"})
                assert keyed.status_code == 200, keyed.text
                assert httpx.get(keyed.json()["translatedFileUrl"]).status_code == 200
        deadline = time.monotonic() + 10
        while app.state.documents.receiving[False]:  # what the clients that left held is given back
            assert time.monotonic() < deadline, app.state.documents.receiving
            time.sleep(0.05)
        assert app.state.documents.jobs == 0


def test_a_document_waits_for_room_in_a_full_queue_where_a_request_is_refused(trained_experiment):
    limits = Limits(max_wait_ms=0, max_queue=4)  # a document's chunks: 1 sentence, two in flight
    translator = load(trained_experiment)
    hook = Hook(translator)
    with Served(build_app(translator, limits, threads=1)) as served:
        text = "\n".join(LINES[:10]).encode()
        plain = upload(served.url, "ten.txt", text)  # in chunks of one sentence
        assert plain.status_code == 200, plain.text
        hook.gate.clear()
        hook.entered.clear()
        held = threading.Thread(target=lambda: call(f"{served.url}/v1/translate", {"text": LINES[0]}))
        held.start()
        assert hook.entered.wait(30)  # the worker is in a search; the queue is empty
        # four requests of a sentence each fill the queue (one of four would go in in parts of one)
        filling = [threading.Thread(target=call, args=(f"{served.url}/v1/translate", {"text": [line]}))
                   for line in LINES[1:5]]
        for thread in filling:
            thread.start()
        deadline = time.monotonic() + 10
        while served.app.state.batcher.queued() < 4:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        answers: list[httpx.Response] = []
        batcher, met_a_full_queue = served.app.state.batcher, threading.Event()
        submit = batcher.submit

        def noting(encoded, options):  # the document's chunk meeting the full queue, seen (not slept on)
            try:
                return submit(encoded, options)
            except QueueFull:
                if threading.current_thread().name.startswith("mt-documents"):
                    met_a_full_queue.set()
                raise

        batcher.submit = noting
        document = threading.Thread(target=lambda: answers.append(upload(served.url, "ten.txt", text)))
        document.start()
        assert met_a_full_queue.wait(30)  # the document finds the queue full, and waits
        assert call(f"{served.url}/v1/translate", {"text": LINES[5]})[0] == 503  # a request is refused at once
        hook.gate.set()
        for thread in (held, *filling, document):
            thread.join(60)
        assert answers[0].status_code == 200
        assert httpx.get(answers[0].json()["translatedFileUrl"]).content == httpx.get(
            plain.json()["translatedFileUrl"]).content


def test_xml_in_a_multi_byte_legacy_encoding_is_checked_not_refused():
    """Was: expat's "multi-byte encodings are not supported" (a ValueError) made a valid Shift_JIS,
    GB2312 or EUC-KR XLIFF file a 400 that `mt translate` translates; entity declarations in one are
    still refused."""
    from mt.apps.serve.uploads import check_content
    from mt.documents.formats import FORMATS, DocumentError

    xliff = ('<?xml version="1.0" encoding="{}"?>\n{}<xliff version="1.2" '
             'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="ja" datatype="plaintext" '
             'original="x"><body><trans-unit id="1"><source>こんにちは世界</source></trans-unit></body></file></xliff>\n')
    for encoding in ("Shift_JIS", "EUC-JP"):
        check_content(xliff.format(encoding, "").encode(encoding), FORMATS["xliff"], "a.xlf", 10_000)
        hostile = xliff.format(encoding, '<!DOCTYPE xliff [<!ENTITY a "aaaa">]>').encode(encoding)
        with pytest.raises(DocumentError, match="declares the XML entity 'a'"):
            check_content(hostile, FORMATS["xliff"], "a.xlf", 10_000)


def test_a_document_of_little_text_and_much_structure_is_refused_before_it_is_read():
    """A page of a million empty tags (or a .docx of as many empty paragraphs, a file of blank lines)
    took a minute and gigabytes to read: --max-file-chars counts only its text."""
    import io

    import docx

    from mt.apps.serve.requests import ApiError
    from mt.apps.serve.uploads import check_content
    from mt.documents.formats import FORMATS

    page = b"<p>Ein Hund.</p>" + b"<i></i>" * 60 + b"\n" * 30
    check_content(page, FORMATS["html"], "a.html", 10**6, 200)  # within: 122 tags, 30 lines
    with pytest.raises(ApiError) as exc:
        check_content(page, FORMATS["html"], "a.html", 10**6, 100)
    assert exc.value.status == 413 and "152 tags and lines, more than 100" in str(exc.value)
    document = docx.Document()
    for _ in range(50):
        document.add_paragraph()
    data = io.BytesIO()
    document.save(data)
    with pytest.raises(ApiError, match="tags and lines, more than 100"):
        check_content(data.getvalue(), FORMATS["docx"], "a.docx", 10**6, 100)
    check_content(data.getvalue(), FORMATS["docx"], "a.docx", 10**6, 10**6)
