"""Document formats registered by a test beside mt's own (mt.documents.formats.FORMATS), each a small
real format written here with the standard library: a module `mt.documents.<name>` with its
`translate(content, units, options)`, as mt's formats have. They show that what reads the registry
(mt serve's /translate_file and /frontend/settings) takes any format, and stand in for a format of
mt's own until it is registered (`stand_in`): a zip package for .docx, an XML file for .xlf.
"""

from __future__ import annotations

import contextlib
import html
import io
import sys
import types
import zipfile
from xml.etree import ElementTree

from mt.documents.formats import FORMATS, DocumentError, DocumentFormat, by_extension


def lines_as_html(text: str, units, options) -> str:
    """.toyhtml: each line an HTML fragment, all translated in one call (inline tags placed by alignments)."""
    lines = text.split("\n")
    return "\n".join(units(lines, "html"))


def zip_of_texts(data: bytes, units, options) -> bytes:
    """A zip package of .txt members, each line translated; the other members kept as they are."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise DocumentError(f"not a zip package: {exc}") from None
    members = [(info, archive.read(info)) for info in archive.infolist()]
    texts = [(i, body.decode("utf-8").split("\n")) for i, (info, body) in enumerate(members)
             if info.filename.endswith(".txt")]
    answers = iter(units([line for _, lines in texts for line in lines]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as written:
        translated = {i: "\n".join(next(answers) for _ in lines) for i, lines in texts}
        for i, (info, body) in enumerate(members):
            written.writestr(info, translated[i].encode("utf-8") if i in translated else body)
    return out.getvalue()


def xml_sources(text: str, units, options) -> str:
    """An XML file whose <source> elements' text is translated into a <target> beside each."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise DocumentError(f"not XML: {exc}") from None
    sources = list(root.iter("source"))
    parents = {child: parent for parent in root.iter() for child in parent}
    for source, answer in zip(sources, units([s.text or "" for s in sources])):
        target = ElementTree.SubElement(parents[source], "target")
        target.text = answer
    return ElementTree.tostring(root, encoding="unicode")


TOYS = {
    "toyhtml": ((".toyhtml",), lines_as_html, False),
    "toyzip": ((".docx",), zip_of_texts, True),
    "toyxml": ((".xlf",), xml_sources, False),
}


@contextlib.contextmanager
def registered(name: str, extensions: tuple[str, ...] | None = None):
    """TOYS[name] registered as a document format while the block runs (with other `extensions` if given)."""
    default, translate, binary = TOYS[name]
    module = types.ModuleType(f"mt.documents.{name}")
    module.translate = translate
    sys.modules[module.__name__] = module
    FORMATS[name] = DocumentFormat(name, extensions or default, name, binary, description="a test's own format")
    try:
        yield FORMATS[name]
    finally:
        del FORMATS[name]
        sys.modules.pop(module.__name__, None)


@contextlib.contextmanager
def stand_in(extension: str):
    """mt's own format for `extension` when it has one, else the toy that stands in for it (TOYS)."""
    if by_extension(f"x{extension}") is not None:
        yield by_extension(f"x{extension}")
        return
    name = next(name for name, (extensions, _, _) in TOYS.items() if extension in extensions)
    with registered(name) as fmt:
        yield fmt


def escape_lines(lines: list[str]) -> str:
    """Lines as a .toyhtml file: each escaped, the first words of each in <b>."""
    out = []
    for line in lines:
        first, _, rest = html.escape(line, quote=False).partition(" ")
        out.append(f"<b>{first}</b> {rest}")
    return "\n".join(out)

