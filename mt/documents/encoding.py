"""A text document's encoding and line endings, read and written back as they were: a byte-order mark
names the encoding; else UTF-8 if the bytes are UTF-8; else charset_normalizer's best guess (it comes
with datasets' requests). Line endings: "\\r\\n" if the file uses them (then every line break is written
so), else "\\n"; the formats see "\\n" only.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from mt import log
from mt.documents.formats import DocumentError

BOMS = (  # longest first: UTF-32's little-endian mark begins with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class TextEncoding:
    """How a text file was written: its codec, its byte-order mark (b"" if none) and its line break."""

    codec: str = "utf-8"
    bom: bytes = b""
    newline: str = "\n"


def decode(data: bytes) -> tuple[str, TextEncoding]:
    """The text of a file's bytes (line breaks as "\\n") and how to write it back; DocumentError if no
    encoding reads it."""
    bom, codec = next(((b, c) for b, c in BOMS if data.startswith(b)), (b"", ""))
    try:
        text = data[len(bom) :].decode(codec or "utf-8")
    except UnicodeDecodeError as exc:
        if codec:
            raise DocumentError(f"not {codec} as its byte-order mark says: {exc.reason} at byte {exc.start}") from None
        codec, text = guess(data)
    newline = "\r\n" if "\r\n" in text else "\n"
    return text.replace("\r\n", "\n"), TextEncoding(codec or "utf-8", bom, newline)


def guess(data: bytes) -> tuple[str, str]:
    """charset_normalizer's best reading of bytes that are not UTF-8."""
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise DocumentError("cannot tell the text's encoding (not UTF-8, and no other fits); convert it to UTF-8")
    return best.encoding, str(best)


def encode(text: str, encoding: TextEncoding, unwritable: str = "") -> bytes:
    """The text written as the file was (`decode`'s encoding). A character of the translation that the
    file's encoding cannot write (a Russian translation of a cp1252 file) is written as the format
    allows (`DocumentFormat.unwritable`): "references", as a character reference (&#1087;: HTML,
    XML); "utf-8", the whole file in UTF-8 with a byte-order mark, which editors read as UTF-8 (plain
    text, Markdown, subtitles); "", refused with DocumentError (a format that names its charset)."""
    body = text.replace("\n", encoding.newline)
    try:
        return encoding.bom + body.encode(encoding.codec)
    except UnicodeEncodeError as exc:
        if unwritable == "references":
            return encoding.bom + body.encode(encoding.codec, errors="xmlcharrefreplace")
        if unwritable == "utf-8":
            log.warn(
                f"the translation has {exc.object[exc.start : exc.end]!r}, which {encoding.codec} cannot write: "
                "the translated file is written in UTF-8 (with a byte-order mark)"
            )
            return codecs.BOM_UTF8 + body.encode("utf-8")
        raise DocumentError(
            f"the translation has {exc.object[exc.start : exc.end]!r}, which {encoding.codec} cannot write; "
            "convert the file to UTF-8 first"
        ) from None
