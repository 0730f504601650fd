"""What /translate_file checks of an upload before its format's library reads it (mt.apps.serve.uploads),
and how a kept translation is named and typed (mt.apps.serve.files): names made safe, zip archives
measured from their directory, XML parsed without entities, text told from binary data."""

from __future__ import annotations

import io
import zipfile

import pytest

from mt.apps.serve.files import disposition, media_type
from mt.apps.serve.requests import ApiError
from mt.apps.serve.uploads import check_content, check_xml, check_zip, format_of, safe_name, url_name
from mt.documents.formats import FORMATS, DocumentError


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return out.getvalue()


@pytest.mark.parametrize("given, safe, in_url", [
    ("report.txt", "report.txt", "report.txt"),
    ("../../etc/passwd.txt", "passwd.txt", "passwd.txt"),
    ("C:\\Users\\me\\Bericht über Hunde.txt", "Bericht über Hunde.txt", "Bericht_uber_Hunde.txt"),
    ("報告.txt", "報告.txt", "document.txt"),
    ("a\x00b\r\n.txt", "ab.txt", "ab.txt"),
    ("...hidden.txt", "hidden.txt", "hidden.txt"),
    ("x" * 300 + ".txt", "x" * 196 + ".txt", "x" * 196 + ".txt"),
    ("㎉" * 196 + ".txt", "㎉" * 196 + ".txt", "kcal" * 49 + ".txt"),  # NFKD widens it: cut after
    ("dir/", "", "document"),
])
def test_names_lose_their_folders_and_control_characters_and_urls_are_ascii(given, safe, in_url):
    assert safe_name(given) == safe
    assert url_name(safe) == in_url


def test_the_format_is_the_extensions_and_others_are_refused_naming_what_is_taken():
    assert format_of("A.TXT") is FORMATS["txt"]
    with pytest.raises(ApiError) as refused:
        format_of("a.pdf")
    assert refused.value.status == 400 and ".txt" in refused.value.message and "a.pdf" in refused.value.message
    with pytest.raises(ApiError):  # a server takes no gzip: how large it grows is not known before
        format_of("page.html.gz")


def test_zip_archives_are_measured_by_their_directory():
    check_zip(zipped({"word/document.xml": bytes(range(256)) * 40}), 100_000)
    with pytest.raises(DocumentError, match="^not a zip archive, as a .docx file is$"):
        check_zip(b"PK but not really", 100_000, ".docx")
    with pytest.raises(DocumentError, match="unzips to 200000 bytes, more than 100000"):
        check_zip(zipped({"a": bytes(range(256)) * 400, "b": bytes(range(256)) * 381 + b"x" * 64}), 100_000)
    with pytest.raises(DocumentError, match=r"more than 100 times its size \(a zip bomb\?\)"):
        check_zip(zipped({"a": b"\0" * 90_000}), 100_000)
    many = zipped({f"{i}": b"" for i in range(10_001)})
    with pytest.raises(DocumentError, match="10001 entries"):
        check_zip(many, 10**9)


def test_xml_is_parsed_without_entities_and_its_faults_name_the_line():
    check_xml(b'<?xml version="1.0"?>\n<xliff version="1.2"><file><source>Der Hund.</source></file></xliff>')
    check_xml(b'<!DOCTYPE xliff PUBLIC "-//XLIFF//DTD XLIFF//EN" "http://example.org/x.dtd">\n<xliff/>')  # nothing fetched
    with pytest.raises(DocumentError, match="^not well-formed XML: mismatched tag at line 2, column 3$"):
        check_xml(b"<a>\n</b>")
    with pytest.raises(DocumentError, match="declares the XML entity 'e'"):
        check_xml(b'<!DOCTYPE a [<!ENTITY e "x">]>\n<a>&e;</a>')
    with pytest.raises(DocumentError, match="declares the XML entity 'ext'"):
        check_xml(b'<!DOCTYPE a [<!ENTITY ext SYSTEM "file:///etc/passwd">]>\n<a>&ext;</a>')


def test_text_formats_must_be_text():
    txt = FORMATS["txt"]
    check_content("Der Hund läuft.\n".encode("utf-16"), txt, "a.txt", 1000)
    with pytest.raises(DocumentError, match="binary data"):
        check_content("Der\0Hund".encode("utf-16"), txt, "a.txt", 1000)


def test_downloads_are_typed_by_extension_and_named_for_old_and_new_clients():
    assert media_type("a.txt", b"The dog.") == "text/plain; charset=utf-8"
    assert media_type("a.txt", "Le chien é".encode("latin-1")) == "text/plain"
    assert media_type("a.srt", b"1") == "application/x-subrip"
    assert media_type("a.docx", b"PK").startswith("application/vnd.openxmlformats-officedocument")
    assert media_type("a.unknown", b"x") == "application/octet-stream"
    assert disposition("Bericht über.txt") == (
        "attachment; filename=\"Bericht_uber.txt\"; filename*=UTF-8''Bericht%20%C3%BCber.txt")
