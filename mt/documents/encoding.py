"""A text document's encoding and line endings, read and written back as they were: a byte-order mark
names the encoding; else UTF-8 if the bytes are UTF-8; else charset_normalizer's best guess (it comes
with datasets' requests). Line endings: "\\r\\n" if most of the file's lines end so (then every line
break is written so), else "\\n"; the formats see "\\n" only.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, replace

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


def decode(data: bytes, fmt: str = "", named: str | None = None) -> tuple[str, TextEncoding]:
    """The text of a file's bytes (line breaks as "\\n") and how to write it back; DocumentError if no
    encoding reads it. A file of ASCII bytes alone is written back in the charset its format declares
    (`fmt`: HTML's meta, XLIFF's declaration, PO's header), as the readers of the translation will read
    it (UTF-8 there would be read as that charset's mojibake). `named`: the encoding the file's user
    names (`mt translate --encoding`), read and written in without a guess."""
    if named is not None:
        return _named(data, named)
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
        read = data.decode("utf-8", errors="replace")
        if sum(1 for c in read if not c.isascii() and c != "\ufffd") > read.count("\ufffd"):
            # UTF-8 with a few bad bytes (one stray Latin-1 é): not a legacy file to guess (it was read as
            # a DOS code page whole, every umlaut a Cyrillic letter)
            line = data[: exc.start].count(b"\n") + 1
            raise DocumentError(
                f"line {line}: not valid UTF-8 ({exc.reason} at byte {exc.start}); correct it"
            ) from None
        codec, text = declared_reading(data, fmt) or guess(data)
    return text.replace("\r\n", "\n"), TextEncoding(codec or "utf-8", bom, line_ending(text))


def _named(data: bytes, named: str) -> tuple[str, TextEncoding]:
    """`decode` in the encoding the user names: a byte-order mark of its family (UTF-8, -16, -32) kept
    aside and written back as the file had it, its byte order the one the mark says (UTF-16 without one:
    little-endian, as Python reads it); bytes it cannot read an error naming their line."""
    codec = codecs.lookup(named).name
    family = next((f for f in ("utf-8", "utf-16", "utf-32") if codec.startswith(f)), None)
    bom, marked = next(((b, c) for b, c in BOMS if family and c.startswith(family) and data.startswith(b)), (b"", ""))
    if marked:
        codec = marked
    elif family is not None:
        codec = {"utf-8-sig": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}.get(codec, codec)
    try:
        text = data[len(bom) :].decode(codec)
    except UnicodeDecodeError as exc:
        at = len(bom) + exc.start  # in the file's bytes
        line = data[:at].count(b"\n") + 1
        where = f"line {line}: " if "\n".encode(codec) == b"\n" else ""  # not in UTF-16's bytes
        raise DocumentError(f"{where}not {codec}, as --encoding says ({exc.reason} at byte {at})") from None
    except UnicodeError as exc:  # a codec that reads no file (undefined)
        raise DocumentError(f"not {codec}, as --encoding says ({exc})") from None
    return text.replace("\r\n", "\n"), TextEncoding(codec, bom, line_ending(text))


def declared_reading(data: bytes, fmt: str) -> tuple[str, str] | None:
    """The codec a file that is not UTF-8 declares (HTML's meta, XLIFF's declaration, PO's header) and
    its text, where it reads the bytes; None otherwise."""
    found = DECLARED.get(fmt)
    declared = found.search(data.decode("latin-1")) if found else None
    if declared is None:
        return None
    try:
        codec = codecs.lookup(declared.group(1)).name
        if codec == "iso8859-1" and any(0x80 <= b < 0xA0 for b in data):  # C1 controls: cp1252's “ ” – € …,
            codec = "cp1252"  # which a Latin-1 label stands for in browsers (WHATWG) and in practice
        return codec, data.decode(codec)
    except (LookupError, UnicodeDecodeError):
        return None


def line_ending(text: str) -> str:
    """The file's line break: "\\r\\n" where most of its lines end so, else "\\n" (one CRLF among
    a thousand LF lines made every line CRLF: a diff of the whole file)."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and 2 * crlf >= text.count("\n") else "\n"


def guess(data: bytes) -> tuple[str, str]:
    """The likeliest reading of bytes that are not UTF-8, with a warning naming it: charset_normalizer's
    best guess, unless that is a code page few files are in (a Mac's, a DOS one, hp_roman8) or a
    Chinese, Japanese or Korean one under which the text is mostly Latin letters, and the bytes read
    as Western European text in Windows-1252, the commonest encoding after UTF-8 (a short German
    subtitle file's "Über" was big5's "鈁er")."""
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    latin = western(data)
    if latin is not None and (best is None or not plausible(best.encoding, str(best))):
        codec, text = "cp1252", latin
    elif best is None:
        raise DocumentError("cannot tell the text's encoding (not UTF-8, and no other fits); convert it to UTF-8")
    else:
        codec, text = best.encoding, str(best)
    log.warn(f"the document is not UTF-8: read as {codec}, a guess (convert it to UTF-8 if its text is wrong)")
    return codec, text


EAST_ASIAN = ("big5", "gb", "cp932", "cp936", "cp949", "cp950", "shift_jis", "euc", "johab", "hz", "iso2022")


def plausible(codec: str, text: str) -> bool:
    """Whether a guessed codec is one files are commonly in, and for an East Asian one, whether the
    text it gives is mostly East Asian (a few accented letters read as CJK characters are not)."""
    name = codec.lower()
    if name.startswith(EAST_ASIAN):
        letters = [c for c in text if c.isalpha()]
        return len([c for c in letters if ord(c) >= 0x1100]) >= 0.3 * len(letters)
    return name.startswith(("cp125", "iso8859", "latin", "koi8", "tis", "cp874", "utf"))


WESTERN_PUNCTUATION = set("€£¥°§©®«»‹›‘’‚“”„–—…•·¡¿×÷±µ¶ºª¹²³½¼¾\xa0")


def western(data: bytes) -> str | None:
    """The bytes read as Windows-1252 if they look like text in a Western European language: every
    character past ASCII a letter or common punctuation, and the letters past ASCII a minority of the
    letters (Russian in cp1251 reads as Latin letters in cp1252, all of them past ASCII; Polish in
    cp1250 as symbols inside words: "Za¿ó³æ"); None otherwise."""
    import unicodedata

    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:  # one of its five undefined bytes
        return None
    letters = accented = 0
    for i, c in enumerate(text):
        if c.isascii():
            letters += c.isalpha()
        elif unicodedata.category(c).startswith("L"):
            letters += 1
            accented += 1
        elif c not in WESTERN_PUNCTUATION or (
            c not in "’‘·–—" and text[i - 1 : i].isalpha() and text[i + 1 : i + 2].isalpha()
        ):
            return None  # a symbol between letters ("Za¿ó³æ") is a letter of another code page
    return text if accented and 3 * accented < letters else None


def encode(text: str, encoding: TextEncoding, unwritable: str = "") -> bytes:
    """The text written as the file was (`decode`'s encoding). A character of the translation that the
    file's encoding cannot write (a Russian translation of a cp1252 file) is written as the format
    allows (`DocumentFormat.unwritable`): "references", as a character reference (&#1087;: HTML,
    XML); "utf-8", the whole file in UTF-8 with a byte-order mark, which editors read as UTF-8 (plain
    text, Markdown, subtitles); "header", in UTF-8 with the header's charset changed to it (PO, as
    msgconv does); "", refused with DocumentError."""
    body = text.replace("\n", encoding.newline)
    if unwritable == "header" and not encoding.bom and (declared := DECLARED["po"].search(body)):
        # a file without a header, read in a guessed codec, got one that says UTF-8: written as it says
        try:
            said = codecs.lookup(declared.group(1)).name
            if said == "utf-8" != encoding.codec and body.encode(encoding.codec):
                log.warn(f"the translated file is written in {said}, as the header it was given says")
                encoding = replace(encoding, codec=said)
        except (LookupError, UnicodeEncodeError):  # (one it cannot write: below)
            pass
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
