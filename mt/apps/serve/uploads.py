"""A document uploaded to `mt serve` (POST /translate_file), read and checked before any of it is
parsed by its format's library: the multipart body read as it arrives and refused once it passes
--max-file-bytes (nothing past the limit is held), the file's name made safe, its format chosen by
its extension among those this server can translate, and its content sniffed to be what the
extension says: a zip package (.docx and every binary format) that is a zip and no zip bomb, an XML
file that is well-formed XML without entity declarations (entity expansion), a text file that is text.
Each refusal is an ApiError naming the field `file` in one line.
"""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable
from xml.parsers import expat

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from mt.apps.serve.requests import ApiError, bounded_body, form_fields, query_pairs
from mt.documents.encoding import DECLARED, decode
from mt.documents.formats import FORMATS, DocumentError, DocumentFormat, by_extension, load

FORM_ROOM = 64 * 1024  # bytes of the body beside the file: the other fields, the parts' headers
ZIP_EXTENSIONS = (".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods", ".epub")  # packages, whatever the format
XML_EXTENSIONS = (".xlf", ".xliff", ".xml", ".tmx", ".svg")
MAX_ZIP_RATIO = 100  # unzipped bytes per zipped byte, overall: Word's XML packs about 10:1
MAX_ZIP_GROWTH = 10  # a package may unzip to 10x --max-file-bytes, at most
MAX_ZIP_ENTRIES = 10_000
MIN_PARTS = 100_000  # tags and lines a document may always have (`check_parts`)


@dataclass
class Upload:
    """What /translate_file was sent: the form's text fields, the file's safe name, its format and bytes."""

    fields: dict[str, str]
    name: str
    fmt: DocumentFormat
    data: bytes


def available() -> list[DocumentFormat]:
    """The formats this server translates: those whose libraries are installed."""
    usable = []
    for fmt in FORMATS.values():
        try:
            load(fmt)
        except DocumentError:
            continue
        usable.append(fmt)
    return usable


def extensions() -> list[str]:
    """The extensions of `available` formats, as LibreTranslate lists them (".txt", ...)."""
    return [ext for fmt in available() for ext in fmt.extensions]


async def read_upload(request, max_bytes: int, hold: Callable[[int], None] | None = None) -> Upload:
    """The multipart form of /translate_file (LibreTranslate's: `file`, `source`, `target`, `api_key`),
    read within `max_bytes` for the file (413 past it, while reading; `hold`: told each chunk's bytes,
    as `bounded_body`), its file named and of a format this server translates (400 otherwise)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "multipart/form-data":
        raise ApiError(
            400, "Invalid request: send the file as a multipart form (multipart/form-data) with a file field"
        )
    limit = max_bytes + FORM_ROOM
    await bounded_body(
        request,
        limit,
        f"file: the request has {{declared}} bytes; a file may have at most {max_bytes} (--max-file-bytes)",
        f"file: more than {max_bytes} bytes (--max-file-bytes)",
        hold,
    )
    try:
        form = await request.form(max_files=1, max_fields=16)
    except (MultiPartException, HTTPException) as exc:  # starlette's refusal (as an HTTPException in an app)
        message = exc.message if isinstance(exc, MultiPartException) else exc.detail
        raise ApiError(400, f"the multipart form is not valid: {message}") from None
    try:
        # as LibreTranslate reads them: each field's first value; the key from the query string too
        pairs = [(name, value) for name, value in form.multi_items() if isinstance(value, str)]
        fields = form_fields(pairs)
        query = form_fields(query_pairs(request))
        if "api_key" in query and not fields.get("api_key"):
            fields["api_key"] = query["api_key"]
        upload = form.get("file")
        if upload is None or upload == "":
            raise ApiError(400, "Invalid request: missing file parameter")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "Invalid request: file must be a file (a part with a filename)")
        data = await upload.read()
        filename = upload.filename or ""
    finally:
        await form.close()
    request._body = b""  # the body is in `data` now: not held twice
    if len(data) > max_bytes:
        raise ApiError(413, f"file: {len(data)} bytes, more than {max_bytes} (--max-file-bytes)")
    name = safe_name(filename)
    if not name:
        raise ApiError(400, "Invalid request: empty file (a file part needs a filename)")
    return Upload(fields, name, format_of(name), data)


def safe_name(filename: str) -> str:
    """The file's own name, without any folder a client put before it, without control characters
    and at most 200 characters (its extension kept); "" if nothing is left."""
    name = re.split(r"[/\\]", filename)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C").strip().lstrip(".")
    if len(name) > 200:
        suffix = PurePosixPath(name).suffix[:20]
        name = name[: 200 - len(suffix)] + suffix
    return name


# A download name's stem and extension at most: with the key's UUID and dots, 250 bytes (a file
# system's names hold 255)
URL_STEM_CHARS, URL_SUFFIX_CHARS = 196, 16


def url_name(name: str) -> str:
    """`name` in ASCII letters, digits, ".", "_" and "-", as LibreTranslate (werkzeug's
    secure_filename) puts it in the download's URL; its extension kept ("document.txt" for "報告.txt")."""

    def ascii_only(text: str) -> str:
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")

    path = PurePosixPath(name)
    suffix = ascii_only(path.suffix)[:URL_SUFFIX_CHARS]
    # NFKD may widen a character into several ("㎉": "kcal"): the stem is cut after, so that the name
    # (and the file kept under it) stays within a file system's 255 bytes
    return (ascii_only(path.stem)[:URL_STEM_CHARS] or "document") + (f".{suffix}" if suffix else "")


def format_of(name: str) -> DocumentFormat:
    """The format `name`'s extension means, if this server translates it; 400 naming the ones it does."""
    fmt = by_extension(name) if not name.lower().endswith(".gz") else None  # (no gzip here: its size unknown)
    if fmt is not None:
        try:
            load(fmt)
            return fmt
        except DocumentError as exc:  # its library is not installed here
            raise ApiError(400, f"Invalid request: file format not supported: {exc}") from None
    known = ", ".join(extensions()) or "none"
    raise ApiError(400, f"Invalid request: file format not supported ({name}); this server translates {known}")


# -- what the content is --------------------------------------------------------------------------
def check_content(data: bytes, fmt: DocumentFormat, name: str, max_bytes: int, max_parts: int | None = None) -> None:
    """DocumentError unless the bytes are what `name`'s extension says (module docstring); run before
    the format's library reads them. `max_parts`: `check_parts`."""
    suffix = PurePosixPath(name).suffix.lower()
    if fmt.binary or suffix in ZIP_EXTENSIONS:
        check_zip(data, MAX_ZIP_GROWTH * max_bytes, suffix)
        if max_parts is not None:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                check_parts(sum(_count_in(archive, entry) for entry in archive.infolist()), max_parts)
        return
    text, _ = decode(data)
    if max_parts is not None:
        check_parts(text.count("<") + text.count("\n"), max_parts)
    if "\x00" in text:
        raise DocumentError(
            f"binary data (a NUL character at character {text.index(chr(0))}), not a {fmt.name} text file"
        )
    if suffix in XML_EXTENSIONS:
        check_xml(data)


def check_parts(parts: int, max_parts: int) -> None:
    """413 past `max_parts` tags and lines: a document of little text and much structure (a page of a
    million empty tags, a file of blank lines, a .docx of empty paragraphs) took a minute and gigabytes
    to read, which --max-file-chars, counting only its text, let through."""
    if parts > max_parts:
        raise ApiError(
            413,
            f"file: {parts:,} tags and lines, more than {max_parts:,} (twice --max-file-chars, at least "
            f"{MIN_PARTS:,}): too little text for its size",
        )


def _count_in(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> int:
    """The tags of one of a package's parts of text, read in blocks: a Word document's body, headers,
    footers and notes (not its styles, theme or settings); another package's XML and XHTML."""
    name = entry.filename
    if name.startswith("word/"):  # (by what they are not: the main part may have another name)
        settings = ("styles", "theme", "settings", "fontTable", "numbering", "webSettings", "stylesWithEffects")
        if not name.endswith(".xml") or any(part in name for part in settings) or "/_rels/" in name:
            return 0
    elif not name.endswith((".xml", ".xhtml", ".html", ".htm")):
        return 0
    count = 0
    with archive.open(entry) as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"<")
    return count


def check_zip(data: bytes, max_unzipped: int, suffix: str = ".zip") -> None:
    """DocumentError unless `data` is a zip archive whose entries, as its directory declares them (what
    zipfile then reads at most), unzip to at most `max_unzipped` bytes and MAX_ZIP_RATIO times its size."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise DocumentError(f"not a zip archive, as a {suffix} file is")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DocumentError(f"a damaged zip archive: {exc}") from None
    if len(entries) > MAX_ZIP_ENTRIES:
        raise DocumentError(f"{len(entries)} entries in the zip archive, more than {MAX_ZIP_ENTRIES}")
    unzipped = sum(entry.file_size for entry in entries)
    if unzipped > max_unzipped:
        raise DocumentError(f"unzips to {unzipped} bytes, more than {max_unzipped} (10 times --max-file-bytes)")
    if unzipped > MAX_ZIP_RATIO * max(len(data), 1):
        raise DocumentError(
            f"unzips to {unzipped} bytes from {len(data)}, more than {MAX_ZIP_RATIO} times its size (a zip bomb?)"
        )


def check_xml(data: bytes) -> None:
    """DocumentError unless `data` is well-formed XML without entity declarations
    (expat, which fetches nothing: an entity declared in the file could expand without bound). expat
    reads no multi-byte encoding but UTF-8 and UTF-16: a Shift_JIS, GB2312 or EUC-KR file is checked
    as its text in UTF-8, as the format's reader reads it."""

    def refuse_entities(name, *_):
        raise DocumentError(f"declares the XML entity {name!r}: entity declarations are refused")

    parser = expat.ParserCreate()
    parser.EntityDeclHandler = refuse_entities
    try:
        try:
            parser.Parse(data, True)
        except ValueError:  # "multi-byte encodings are not supported"
            parser = expat.ParserCreate("utf-8")
            parser.EntityDeclHandler = refuse_entities
            text = decode(data, "xliff")[0]
            utf8 = DECLARED["xliff"].sub(lambda m: m.group(0).replace(m.group(1), "utf-8"), text, count=1)
            parser.Parse(utf8.encode("utf-8"), True)
    except expat.ExpatError as exc:
        reason = expat.ErrorString(exc.code) if exc.code else str(exc)
        raise DocumentError(f"not well-formed XML: {reason} at line {exc.lineno}, column {exc.offset + 1}") from None
