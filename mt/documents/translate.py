"""A document translated whole: its bytes read, its format's module given its content (text in the
file's own encoding, or bytes), the units to translate with and the `DocumentOptions`, and the result written atomically, never
over the input and never over another file without `force`.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from mt.atomic_files import check_output, same_file, write_bytes_atomic
from mt.documents.encoding import TextEncoding, decode, encode
from mt.documents.formats import DocumentError, DocumentFormat, DocumentOptions, by_extension, load, named
from mt.documents.units import Units
from mt.errors import MtError

XML_DECLARED_ENCODING = re.compile(r"""(\A\s*<\?xml[^>]*?encoding\s*=\s*["'])([A-Za-z0-9._-]+)(["'])""")


def format_of(path: Path | str, name: str | None = None) -> DocumentFormat:
    """The document format of `path`: `name` if given (--format), else its extension's."""
    if name is not None:
        return named(name)
    found = by_extension(path)
    if found is None:
        raise DocumentError(f"{path}: not a document mt knows by its extension; name one with --format")
    return found


def translate_content(data: bytes, fmt: DocumentFormat, units: Units, options: DocumentOptions) -> bytes:
    """The translated document of `data` in `fmt`."""
    module = load(fmt)
    if fmt.binary:
        return module.translate(data, units, options)
    text, encoding = decode(data, fmt.name, options.encoding)
    return encode(declared_as(module.translate(text, units, options), fmt, encoding), encoding, fmt.unwritable)


def declared_as(text: str, fmt: DocumentFormat, encoding: TextEncoding) -> str:
    """An XML document written in UTF-16 or UTF-32 (its byte-order mark read it) declares that: a file
    without a declaration came back from translate-toolkit saying UTF-8, which expat and strict readers
    refuse in UTF-16 bytes."""
    try:
        codec = codecs.lookup(encoding.codec).name  # charset_normalizer's "utf_16_le" too
    except LookupError:
        return text
    family = next((f for f in ("utf-16", "utf-32") if codec.startswith(f)), None)
    if fmt.name != "xliff" or family is None:
        return text
    # with a byte-order mark the family's name; without one, XML wants the byte order named
    name = family.upper() if encoding.bom else codec.upper().replace("-LE", "LE").replace("-BE", "BE")
    return XML_DECLARED_ENCODING.sub(lambda m: f"{m.group(1)}{name}{m.group(3)}", text, count=1)


def gunzipped(source: Path, data: bytes) -> bytes:
    """The document inside a gzip file; one that is not gzip, or is damaged, is a one-line error."""
    import gzip
    import zlib

    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise DocumentError(
            f"{source}: not a readable gzip file ({exc}); decompress it, or name it without .gz"
        ) from None


def translate_file(
    source: Path, output: Path | None, fmt: DocumentFormat, units: Units, options: DocumentOptions, force: bool = False
) -> bytes | None:
    """Translate the file `source` into `output` (written atomically), or return its bytes when
    `output` is None (for stdout: text formats only). Errors name the file."""
    source = Path(source)
    if output is not None:
        if same_file(output, source):
            raise DocumentError(f"--output {output}: is the input; write the translation to another file")
        check_output(output, force)
    elif fmt.binary:
        raise DocumentError(f"{source}: a {fmt.name} document is not text; name the file to write with --output")
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{source}: {exc.strerror}") from None
    if source.name.lower().endswith(".gz") or data[:2] == b"\x1f\x8b":  # as a corpus's or lines' gzip is read
        data = gunzipped(source, data)
    try:
        translated = translate_content(data, fmt, units, options)
    except MtError as exc:
        if str(exc).startswith(f"{source}:"):
            raise
        raise type(exc)(f"{source}: {exc}") from None
    if output is None:
        return translated
    if output.name.lower().endswith(".gz"):  # as the lines of `mt translate --output`: mt reads such a name as gzip
        import gzip

        translated = gzip.compress(translated, mtime=0)
    write_bytes_atomic(output, translated)
    return None
