"""The document formats mt translates, how a file's is recognised (its extension, or `--format`), and
what each needs installed: the format's library comes with an extra, and a format without it says which.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from mt.errors import MtError


@dataclass(frozen=True)
class DocumentOptions:
    """What a format needs to know besides the units: the language it translates into (an HTML page's
    lang, an XLIFF file's target-language, a PO file's Language), whether units that already have a
    translation (XLIFF, PO) are translated again, and the encoding of a text file where its user names it."""

    target: str
    retranslate: bool = False
    # the text file's encoding as its user names it (`mt translate --encoding`): read and written back in
    # it, whatever a guess or the file's declared charset would say
    encoding: str | None = None


class DocumentError(MtError):
    """A document mt cannot read or translate: the message names the file (and the line where known)."""


@dataclass(frozen=True)
class DocumentFormat:
    """A format: its name (as --format takes it), the extensions that mean it, the module under
    mt.documents that translates it, whether its content is bytes (else text in its own encoding),
    the import names of what it needs with the extra that installs them, and how a text format writes
    a character its file's encoding cannot (`mt.documents.encoding.encode`)."""

    name: str
    extensions: tuple[str, ...]
    module: str
    binary: bool = False
    requires: tuple[str, ...] = ()
    extra: str = "documents"
    description: str = ""
    unwritable: str = "utf-8"  # "utf-8", "references", "header" or "" (refused)


FORMATS: dict[str, DocumentFormat] = {
    f.name: f
    for f in (
        DocumentFormat("txt", (".txt",), "txt", description="plain text: paragraphs and line breaks kept"),
        # Not .xhtml: the page is written back as HTML (<br>, no CDATA), which an XML reader refuses.
        DocumentFormat("html", (".html", ".htm"), "page", description="a web page", unwritable="references"),
        DocumentFormat(
            "docx",
            (".docx",),
            "word",
            binary=True,
            requires=("docx",),
            description="Word: paragraphs with their runs' formatting and links, tables, headers, footers, footnotes",
        ),
        DocumentFormat(
            "xliff",
            (".xlf", ".xliff"),
            "localisation",
            requires=("translate.storage",),
            description="XLIFF 1.2 and 2.0: each unit's source into its target, inline tags and placeholders kept",
            unwritable="references",
        ),
        DocumentFormat(
            "po",
            (".po", ".pot"),  # a template too: its msgstrs empty, its header's placeholders filled in
            "localisation",
            requires=("translate.storage",),
            description="Gettext PO: each msgid into its msgstr (plural forms too), placeholders kept, marked fuzzy",
            unwritable="header",  # its header names the charset
        ),
        DocumentFormat("srt", (".srt",), "subtitles", requires=("srt",), description="SubRip subtitles"),
        DocumentFormat("vtt", (".vtt",), "subtitles", requires=("webvtt",), description="WebVTT subtitles"),
        DocumentFormat(
            "md", (".md", ".markdown"), "markdown", requires=("markdown_it", "mdit_py_plugins"), description="Markdown"
        ),
    )
}


def by_extension(path: Path | str) -> DocumentFormat | None:
    """The format a file's extension names (case-insensitive; before a .gz, which mt reads as gzip:
    `page.html.gz` is html), None for any other."""
    name = Path(path).name.lower()
    suffix = Path(name[:-3] if name.endswith(".gz") else name).suffix
    return next((f for f in FORMATS.values() if suffix in f.extensions), None)


def named(name: str, flag: str = "--format") -> DocumentFormat:
    """The format called `name`; a one-line error listing the formats for any other."""
    if name not in FORMATS:
        raise DocumentError(f"{flag} {name}: not a document format; expected one of {', '.join(FORMATS)}")
    return FORMATS[name]


def _installed(name: str) -> bool:
    """Whether module `name` can be imported; find_spec imports a dotted name's parent, whose absence
    ("translate" for translate.storage) it raises rather than answers."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def load(fmt: DocumentFormat) -> ModuleType:
    """The format's module, once what it needs is installed; else a one-line error saying how to install it."""
    missing = [name for name in fmt.requires if not _installed(name)]
    if missing:
        raise DocumentError(
            f"{fmt.name} documents need {', '.join(missing)} (in mt's checkout: pip install -e '.[{fmt.extra}]', or the package itself)"
        )
    return importlib.import_module(f"mt.documents.{fmt.module}")
