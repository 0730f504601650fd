"""`mt serve`'s documents: LibreTranslate's POST /translate_file (a multipart form, as its page and
clients send it), the download at the URL it answers, /frontend/settings' formats, and the clients
that upload files (libretranslate-aio) or read them (deep-translator). A real server on a loopback
port over conftest's tiny trained experiment; every translated file is compared with the same file
translated by `mt.documents` with the translator called directly. The refusals: test_serve_files_hostile.py.
"""

from __future__ import annotations

import codecs
import re

import httpx
import pytest
from helpers import LINES, Served, escape_lines, load, ok, registered

from mt.apps.serve.app import Limits, build_app
from mt.decoding.options import DecodeOptions
from mt.documents.formats import DocumentOptions, by_extension
from mt.documents.translate import translate_content
from mt.documents.units import TranslatorUnits

pytestmark = pytest.mark.usefixtures("single_thread")

LIMITS = Limits(max_wait_ms=0, max_file_bytes=20_000, max_file_chars=4000)
URL = re.compile(r"^http://127\.0\.0\.1:\d+/download_file/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\.")


@pytest.fixture(scope="module")
def units(trained_experiment) -> TranslatorUnits:
    """The units of `mt translate --input`, over the same translator the servers load."""
    return TranslatorUnits(load(trained_experiment), DecodeOptions())


@pytest.fixture(scope="module")
def servers(trained_experiment):
    """(a server without a key, one with the key SECRET)."""
    with Served(build_app(load(trained_experiment), LIMITS, threads=1)) as plain, Served(
        build_app(load(trained_experiment), LIMITS, api_key="SECRET", threads=1)
    ) as keyed:
        yield plain, keyed


def expected(units, name: str, data: bytes) -> bytes:
    return translate_content(data, by_extension(name), units, DocumentOptions("en"))


def upload(url: str, name: str, data: bytes, source: str = "de", target: str | None = "en", **fields) -> httpx.Response:
    """POST /translate_file as LibreTranslate's page sends it: a multipart form with the file and its fields."""
    form = {"source": source, **({"target": target} if target else {}), **fields}
    return httpx.post(f"{url}/translate_file", data=form, files={"file": (name, data)}, timeout=120)


def translated(url: str, name: str, data: bytes, **fields) -> httpx.Response:
    """The download of the file's translation (its URL checked to be LibreTranslate's shape)."""
    answer = upload(url, name, data, **fields)
    assert answer.status_code == 200, answer.text
    assert list(answer.json()) == ["translatedFileUrl"] and URL.match(answer.json()["translatedFileUrl"])
    download = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    assert download.status_code == 200, download.text
    return download


def test_a_text_file_is_translated_and_downloaded_with_its_name_encoding_and_line_ends(servers, units):
    plain, _ = servers
    text = f"{LINES[0]}\r\n  {LINES[1]}\r\n\r\n{LINES[2]} {LINES[3]}\r\n"
    for name, data, kind in (
        ("Bericht über die Hunde.txt", codecs.BOM_UTF8 + text.encode(), "text/plain; charset=utf-8"),
        ("katzen.TXT", text.encode("latin-1"), "text/plain; charset=utf-8"),  # the English is ASCII
    ):
        download = translated(plain.url, name, data)
        assert download.content == expected(units, name, data) and download.content != data
        assert download.headers["content-type"] == kind
        assert download.headers["content-length"] == str(len(download.content))
        assert f"filename*=UTF-8''{httpx.URL('/' + name).raw_path.decode()[1:]}" in download.headers["content-disposition"]
    assert download.content.decode("latin-1").count("\r\n") == 4  # encoding and line ends as they were
    kept = f"{LINES[0]} `Größe`\n".encode("latin-1")  # inline code is kept: its ö stays Latin-1
    download = translated(plain.url, "liste.md", kept)
    assert b"Gr\xf6\xdfe" in download.content
    assert download.headers["content-type"] == "text/markdown"  # was: "; charset=utf-8", which it is not
    url = upload(plain.url, "Bericht über die Hunde.txt", b"Der Hund.").json()["translatedFileUrl"]
    assert url.endswith(".Bericht_uber_die_Hunde.txt")  # LibreTranslate's "UUID.NAME", the name made ASCII
    head = httpx.get(url).headers["content-disposition"]
    assert head.startswith('attachment; filename="Bericht_uber_die_Hunde.txt"; ')


def test_a_documents_warnings_are_said_once(servers, capsys):
    """The pass that counts a file's characters before it is translated said its warnings too: each
    one twice in the server's log."""
    plain, _ = servers
    capsys.readouterr()
    translated(plain.url, "notes.md", f"{LINES[0]}\n\n[^1]: {LINES[1]}\n".encode())  # a footnote nothing cites
    err = capsys.readouterr().err
    assert err.count("footnote [^1] is referred to nowhere") == 1, err


def test_source_auto_is_identified_and_the_languages_are_checked_as_for_translate(servers, units):
    plain, _ = servers
    data = "\n".join(LINES[:4]).encode()
    assert translated(plain.url, "a.txt", data, source="auto").content == expected(units, "a.txt", data)
    for source, target, message in (
        ("fr", "en", "fr is not supported"),
        ("de", "xx", "xx is not supported"),
        ("de", None, "Invalid request: missing target parameter"),
        ("", "en", "Invalid request: missing source parameter"),
    ):
        answer = upload(plain.url, "a.txt", data, source=source, target=target)
        assert answer.status_code == 400 and answer.json()["error"].startswith(message), answer.text
    # a document whose source is its target comes back as it is, as /translate gives such a text (was
    # refused); and one found in it by `auto` (on a sample of its first texts: it was refused too)
    english = b"A man in a blue shirt is riding his bicycle down a busy street."
    assert translated(plain.url, "a.txt", english, source="auto").content == english
    assert translated(plain.url, "a.txt", data, source="de", target="de").content == data
    spanish = "Un hombre con una camisa azul monta su bicicleta por una calle concurrida.".encode()
    answer = upload(plain.url, "a.txt", spanish, source="auto")
    assert answer.status_code == 400 and answer.json()["error"].startswith("file: es is not supported: the text looks")
    # the document is judged by its body, not by the first texts its format asks (a page's attribute
    # values: an English description made a German page come back untranslated)
    page = (
        f'<html><head><meta name="description" content="{english.decode()}"></head>'
        f"<body><p>{' '.join(LINES[:8])}</p></body></html>"
    ).encode()
    assert translated(plain.url, "a.html", page, source="auto").content == expected(units, "a.html", page) != page


def test_every_registered_format_is_listed_and_translated_markup_and_all(servers, units):
    plain, _ = servers
    settings = ok(f"{plain.url}/frontend/settings")
    assert ".txt" in settings["supportedFilesFormat"] and settings["keyRequired"] is False
    assert settings["language"] == {"source": {"code": "de", "name": "German"}, "target": {"code": "en", "name": "English"}}
    with registered("toyhtml"):
        assert ".toyhtml" in ok(f"{plain.url}/frontend/settings")["supportedFilesFormat"]
        data = escape_lines(LINES[:5]).encode()
        download = translated(plain.url, "lines.toyhtml", data)
        assert download.content == expected(units, "lines.toyhtml", data)
        assert download.content.decode().count("<b>") == 5 and download.headers["content-type"] == "application/octet-stream"
    assert ".toyhtml" not in ok(f"{plain.url}/frontend/settings")["supportedFilesFormat"]


def test_a_web_page_comes_back_as_mt_translate_writes_it(servers, units):
    plain, _ = servers
    page = (f'<!DOCTYPE html>\n<html lang="de"><head><meta charset="utf-8"><title>{LINES[0]}</title></head>\n'
            f'<body><p>{LINES[1]} <b>{LINES[2]}</b></p><p><img src="a.png" alt="{LINES[3]}"></p></body></html>\n')
    download = translated(plain.url, "seite.html", page.encode())
    assert download.content == expected(units, "seite.html", page.encode())
    assert '<html lang="en">' in download.text and download.headers["content-type"] == "text/html; charset=utf-8"
    assert ".html" in ok(f"{plain.url}/frontend/settings")["supportedFilesFormat"]


def test_the_key_is_asked_for_as_on_translate(servers, units):
    _, keyed = servers
    data = LINES[0].encode()
    answer = upload(keyed.url, "a.txt", data)
    assert answer.status_code == 400 and answer.json() == {"error": "Please contact the server operator to get an API key"}
    assert upload(keyed.url, "a.txt", data, api_key="WRONG").json() == {"error": "Invalid API key"}
    assert translated(keyed.url, "a.txt", data, api_key="SECRET").content == expected(units, "a.txt", data)
    by_header = httpx.post(f"{keyed.url}/translate_file", data={"source": "de", "target": "en"},
                           files={"file": ("a.txt", data)}, headers={"Authorization": "Bearer SECRET"})
    assert by_header.status_code == 200
    assert ok(f"{keyed.url}/frontend/settings")["keyRequired"] is True


def test_libretranslate_aio_uploads_the_file_and_downloads_the_translation(servers, units, tmp_path):
    from libretranslate_aio import LibreTranslate
    from libretranslate_aio.exceptions import ForbiddenError, LibreTranslateError

    plain, keyed = servers
    path = tmp_path / "hunde.txt"
    path.write_text("\n".join(LINES[:6]) + "\n", encoding="utf-8")
    for served, key in ((plain, None), (keyed, "SECRET")):
        with LibreTranslate(served.url, api_key=key) as client:
            result = client.translate_file(path, source="de", target="en")
            assert URL.match(result.translated_file_url) and result.translated_file_url.endswith(".hunde.txt")
            assert httpx.get(result.translated_file_url).content == expected(units, "hunde.txt", path.read_bytes())
            assert ".txt" in client.frontend_settings().supported_files_format
            assert client.health()
    with LibreTranslate(keyed.url) as client, pytest.raises(LibreTranslateError) as refused:
        client.translate_file(path, source="de", target="en")
    assert refused.value.status_code == 400  # no key: LibreTranslate's 400
    # a server that keeps no suggestions answers as LibreTranslate's with them off (was: 404, no such route)
    with LibreTranslate(plain.url) as client, pytest.raises(ForbiddenError) as forbidden:
        client.suggest("Hallo.", "Hello.", source="de", target="en")
    assert forbidden.value.status_code == 403 and "Suggestions are disabled" in str(forbidden.value)


def test_deep_translators_translate_file_reads_the_file_and_asks_translate(servers, tmp_path):
    from deep_translator import LibreTranslator

    plain, _ = servers
    path = tmp_path / "hunde.txt"
    path.write_text("\n".join(LINES[:3]) + "\n", encoding="utf-8")
    client = LibreTranslator(source="de", target="en", api_key="x", custom_url=f"{plain.url}/")
    answer = ok(f"{plain.url}/translate", {"q": "\n".join(LINES[:3]), "source": "de", "target": "en"})
    assert client.translate_file(str(path)) == answer["translatedText"]  # the text, stripped, through /translate


def test_the_form_is_read_as_translate_reads_it_the_key_from_the_query_too_a_repeated_field_first(servers, units):
    """The query string's api_key was not read here (400 for a key /translate took), and of a field
    given twice the last was taken (LibreTranslate, and /translate, take the first)."""
    plain, keyed = servers
    data = "\n".join(LINES[:2]).encode()
    answer = httpx.post(f"{keyed.url}/translate_file?api_key=SECRET", data={"source": "de", "target": "en"},
                        files={"file": ("a.txt", data)}, timeout=120)
    assert answer.status_code == 200, answer.text
    answer = httpx.post(f"{plain.url}/translate_file", data={"source": ["de", "fr"], "target": "en"},
                        files={"file": ("a.txt", data)}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert httpx.get(answer.json()["translatedFileUrl"], timeout=60).content == expected(units, "a.txt", data)
