"""A text document's encoding and line endings, read and written back as they were: a byte-order mark
names the encoding; else UTF-8 if the bytes are UTF-8; else charset_normalizer's best guess (it comes
with datasets' requests). Line endings: "\\r\\n" if most of the file's lines end so (then every line
break is written so), else "\\n"; the formats see "\\n" only.
"""

from __future__ import annotations

import codecs
import re
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


# Where a format names its own charset: an HTML page's meta, an XML declaration, a PO header.
DECLARED = {
    "html": re.compile(r"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE),
    "xliff": re.compile(r"""\A\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']"""),
    "po": re.compile(r"""Content-Type:[^"\n]*?charset=([A-Za-z0-9._-]+)"""),
}


def decode(data: bytes, fmt: str = "") -> tuple[str, TextEncoding]:
    """The text of a file's bytes (line breaks as "\\n") and how to write it back; DocumentError if no
    encoding reads it. A file of ASCII bytes alone is written back in the charset its format declares
    (`fmt`: HTML's meta, XLIFF's declaration, PO's header), as the readers of the translation will read
    it (UTF-8 there would be read as that charset's mojibake)."""
    if data.isascii() and (found := DECLARED.get(fmt)) and (declared := found.search(data.decode("ascii"))):
        try:
            codec = codecs.lookup(declared.group(1)).name
        except LookupError:  # a template's "CHARSET", a name Python does not know
            codec = ""
        # "ascii" too: a page that says us-ascii, written back in UTF-8, is mojibake to its readers
        if codec and codec != "utf-8" and not codec.startswith(("utf-16", "utf-32")):
            text = data.decode(codec)
            return text.replace("\r\n", "\n"), TextEncoding(codec, b"", line_ending(text))
    bom, codec = next(((b, c) for b, c in BOMS if data.startswith(b)), (b"", ""))
    try:
        text = data[len(bom) :].decode(codec or "utf-8")
    except UnicodeDecodeError as exc:
        if codec:
            raise DocumentError(f"not {codec} as its byte-order mark says: {exc.reason} at byte {exc.start}") from None
        codec, text = guess(data)
    return text.replace("\r\n", "\n"), TextEncoding(codec or "utf-8", bom, line_ending(text))


def line_ending(text: str) -> str:
    """The file's line break: "\\r\\n" where most of its lines end so, else "\\n" (one CRLF among
    a thousand LF lines made every line CRLF: a diff of the whole file)."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and 2 * crlf >= text.count("\n") else "\n"


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
    text, Markdown, subtitles); "header", in UTF-8 with the header's charset changed to it (PO, as
    msgconv does); "", refused with DocumentError."""
    body = text.replace("\n", encoding.newline)
    try:
        return encoding.bom + body.encode(encoding.codec)
    except UnicodeEncodeError as exc:
        if unwritable == "references":
            return encoding.bom + body.encode(encoding.codec, errors="xmlcharrefreplace")
        if unwritable == "header" and (declared := DECLARED["po"].search(body)):
            log.warn(
                f"the translation has {exc.object[exc.start : exc.end]!r}, which {encoding.codec} cannot write: "
                "the translated file is written in UTF-8, its header's charset changed to UTF-8"
            )
            return (body[: declared.start(1)] + "UTF-8" + body[declared.end(1) :]).encode("utf-8")
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
