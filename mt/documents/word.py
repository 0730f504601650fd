"""Word documents (.docx) through python-docx: every paragraph of the body, of tables (nested ones
too), of text boxes, of every header and footer (each part once, however many sections link to it) and
of footnotes and endnotes is translated with its runs' formatting as inline markup; styles, numbering,
images, comments, sections and every other part of the package are saved as they were.

A paragraph is one html unit (`mt.documents.inline`). The formatting of most of its characters (a run's
w:rPr, compared as XML) is its plain text; each group of adjacent runs with another formatting is a
`<span data-run="k">`, a hyperlink (or a tracked insertion, a content control, a smart tag) an
`<a data-link="k">` (`<span data-wrap="k">`) around its runs, and what holds no text (a drawing, a tab,
a break, a footnote reference, a bookmark, a field with its result, a deletion) an empty marker that
moves with its neighbour word; a tab, as a break, a `<br>` marker, where a sentence ends; a
non-breaking hyphen the character U+2011 of the text. The paragraph is then written again: a run for each piece of
translated text, with a copy of the w:rPr its wrapper stood for, each hyperlink with its attributes,
each marker's elements where the marker landed. A span the text layer left empty (its words aligned
to none) is an empty run: its formatting kept once, as an html page keeps `<b></b>`. Spelling marks
(w:proofErr) and rendered page breaks (w:lastRenderedPageBreak), which Word recomputes, and soft hyphens
(w:softHyphen), which mark where the source's words may break, are left out.
A field's result (a page number, a cross-reference, a table of contents' first line) is kept as it is,
but for a HYPERLINK field's, which Word shows and never regenerates: translated as a link's text.
The labels a reader is given beside the text (`labels`: an image's or a shape's alternative text and
title, a hyperlink's tooltip) are translated as plain text.

A .docx is a zip: `check_zip` refuses, before python-docx opens it, a package that unpacks to more
than MAX_UNPACKED bytes or more than MAX_RATIO times its packed size (a zip bomb), so that a server can
check an upload the same way.
"""

from __future__ import annotations

import copy
import io
import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mt.documents import inline
from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.fragments import embrace, empty_in
from mt.documents.units import Units
from mt.language_codes import language_tag
from mt.text.markup import parse

MAX_UNPACKED = 256 * 2**20  # bytes a package may unpack to
MAX_RATIO = 100  # unpacked / packed bytes, over the whole package; Word's own files are 5-20
RATIO_FLOOR = 2**20  # a package that unpacks to less is not checked for its ratio: no bomb is that small

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
WP = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
WRAPPERS = {W + tag for tag in ("hyperlink", "ins", "moveTo", "smartTag", "customXml", "dir", "bdo", "sdt")}
# What Word recomputes, and a soft hyphen (where the source word may break), which belongs to the
# source's words: left out, not markers moving with a translated word
DROPPED = {W + "proofErr", W + "lastRenderedPageBreak", W + "softHyphen"}
# Markers the text reads as a break between words, where a sentence ends (`<br>`): line breaks, and tabs,
# which part a label from its value or a number from its heading ("Name:<tab>John", "1.<tab>Scope").
# As an empty marker a tab joined its neighbours into one word ("Chapter 1<tab>5" was "Chapter 15").
BREAKS = {W + "br", W + "cr", W + "tab", W + "ptab"}
CHARACTERS = {W + "noBreakHyphen": "\u2011"}  # elements that stand for a character of the text
RANGES = [(W + "bookmarkStart", W + "bookmarkEnd"), (W + "commentRangeStart", W + "commentRangeEnd")]


def check_zip(data: bytes, max_unpacked: int = MAX_UNPACKED, max_ratio: float = MAX_RATIO) -> None:
    """DocumentError unless `data` is a zip package (an Office file) of a safe size: the entries' sizes
    as its directory declares them (which bound what zipfile will unpack) at most `max_unpacked` in
    all, and at most `max_ratio` times their packed size."""
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise DocumentError(f"not a Word document: not a zip package ({exc})") from None
    if not any(info.filename == "[Content_Types].xml" for info in infos):
        raise DocumentError("not a Word document: a zip package without [Content_Types].xml")
    unpacked = sum(info.file_size for info in infos)
    packed = sum(info.compress_size for info in infos)
    if unpacked > max_unpacked:
        raise DocumentError(f"unpacks to {unpacked} bytes, more than the {max_unpacked} allowed (a zip bomb?)")
    if unpacked > RATIO_FLOOR and unpacked > max_ratio * max(packed, 1):
        raise DocumentError(
            f"unpacks to {unpacked / max(packed, 1):.0f} times its packed size, more than the {max_ratio:g} "
            "allowed (a zip bomb?)"
        )


@dataclass
class Text:
    """Text of a run (its w:t elements) with the run's w:rPr (None if it has none)."""

    text: str
    rpr: Any
    key: bytes  # the w:rPr as XML, to compare formattings


@dataclass
class Code:
    """Content that is no text, put back whole: runs and other elements as they are (`split`: one child
    of a run that also held text, put back in a new run with that run's w:rPr)."""

    elements: list[Any]
    rpr: Any = None
    split: bool = False
    line_break: bool = False


@dataclass
class Wrap:
    """A hyperlink (or another element around runs) and what it holds."""

    element: Any
    items: list[Text | Code | Wrap]


@dataclass
class FieldLink:
    """A HYPERLINK field written as a complex field: its runs up to the separator (the code) and its end
    run, around the runs of its shown text, which Word never regenerates (unlike a page number's)."""

    head: list[Any]
    tail: list[Any]
    tag: str = W + "hyperlink"  # written as a link is: <a data-link> around its words


@dataclass
class Paragraph:
    """A paragraph (w:p) as a unit: its html, and what each number in it stands for."""

    element: Any
    dominant: Any = None  # the w:rPr of its plain text
    dominant_key: bytes = b""
    formats: dict[int, Any] = field(default_factory=dict)  # a <span data-run>'s w:rPr
    codes: dict[int, Code] = field(default_factory=dict)  # a marker's content
    wraps: dict[int, Any] = field(default_factory=dict)  # an <a data-link> / <span data-wrap>'s element
    html: str = ""


def translate(content: bytes, units: Units, options: DocumentOptions) -> bytes:
    """The translated .docx (module docstring)."""
    from docx.opc.constants import CONTENT_TYPE as CT

    document = open_document(content)
    parts = {CT.WML_DOCUMENT_MAIN, CT.WML_HEADER, CT.WML_FOOTER, CT.WML_FOOTNOTES, CT.WML_ENDNOTES}
    paragraphs, shown = [], []
    for part in document.part.package.iter_parts():
        if part.content_type in parts:
            paragraphs += [p for p in map(paragraph, part.element.iter(W + "p")) if p is not None]
            shown += labels(part.element)
    unique = list(dict.fromkeys(p.html for p in paragraphs))  # a text box's fallback copy is asked once
    translated = dict(zip(unique, units(unique, "html")))
    asked = list(dict.fromkeys(element.get(name) for element, name in shown))  # (an image's copies: once)
    said = dict(zip(asked, units(asked, "text"))) if asked else {}
    for element, name in shown:
        element.set(name, said[element.get(name)])
    changed = False
    right_to_left = options.target.split("-")[0].lower() in RIGHT_TO_LEFT
    for p in paragraphs:
        if translated[p.html] != p.html:
            rebuild(p, translated[p.html])
            relabel(p.element, options.target)
            if right_to_left:
                read_right_to_left(p.element)
            changed = True
    if changed and (styles := styles_part(document)) is not None:
        # the styles' and defaults' language: Word spell-checks and hyphenates by it
        relabel(styles.element, options.target, defaults=True)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


EAST_ASIAN = {"zh", "zt", "ja", "ko"}  # w:lang's eastAsia attribute: the language of those scripts' runs
RIGHT_TO_LEFT = {"ar", "he", "fa", "ur", "yi", "ps", "dv", "ug"}  # its bidi attribute
AFTER_LANG = {W + tag for tag in ("eastAsianLayout", "specVanish", "oMath", "rPrChange")}  # w:rPr's order


# w:pPr's children that come after w:bidi (ECMA-376's order, which Word holds a document to)
AFTER_BIDI = {
    W + tag
    for tag in (
        "adjustRightInd snapToGrid spacing ind contextualSpacing mirrorIndents suppressOverlap jc textDirection "
        "textAlignment textboxTightWrap outlineLvl divId cnfStyle rPr sectPr pPrChange"
    ).split()
}


def styles_part(document):
    """The document's styles part, None where it has none (python-docx's `styles` would add its own
    template's, and with it another Normal style, fonts and spacing)."""
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    try:
        return document.part.part_related_by(RT.STYLES)
    except KeyError:
        return None


def read_right_to_left(paragraph_element) -> None:
    """A translated paragraph of a right-to-left language set right to left (w:bidi): its words keep
    their order by the script, but an LTR paragraph put its full stop on the wrong side, left-aligned."""
    bidi = child(child(paragraph_element, "pPr"), "bidi", AFTER_BIDI)
    bidi.attrib.pop(W + "val", None)  # (w:val="0" would say left to right)


def labels(root) -> list[tuple[Any, str]]:
    """The text a reader is given beside a part's content, as (element, attribute): a drawing's
    alternative text and title (wp:docPr descr, title; a screen reader reads them aloud), a
    hyperlink's tooltip (w:tooltip)."""
    found = [
        (element, name)
        for element in root.iter(WP + "docPr")
        for name in ("descr", "title")
        if element.get(name, "").strip()
    ]
    return found + [
        (element, W + "tooltip") for element in root.iter(W + "hyperlink") if element.get(W + "tooltip", "").strip()
    ]


def relabel(root, target: str, defaults: bool = False) -> None:
    """Every w:lang under `root` names the target language (the attribute for its script: w:val,
    w:eastAsia or w:bidi); with `defaults` (styles.xml) the document defaults get one where they have
    none. The runs kept their source language: an English translation spell-checked as German."""
    code = target.split("-")[0].lower()
    attribute = W + ("eastAsia" if code in EAST_ASIAN else "bidi" if code in RIGHT_TO_LEFT else "val")
    value = language_tag(target)
    for lang in root.iter(W + "lang"):
        lang.set(attribute, value)
    if defaults:
        rpr = child(child(child(root, "docDefaults"), "rPrDefault"), "rPr", frozenset())
        child(rpr, "lang", AFTER_LANG).set(attribute, value)


def open_document(content: bytes):
    """python-docx's Document of a checked package (`check_zip`), its footnotes and endnotes parsed as
    XML parts; a one-line DocumentError for anything it cannot read."""
    import docx
    import lxml.etree
    from docx.opc.constants import CONTENT_TYPE as CT
    from docx.opc.exceptions import PackageNotFoundError
    from docx.opc.part import PartFactory, XmlPart

    check_zip(content)
    for content_type in (CT.WML_FOOTNOTES, CT.WML_ENDNOTES):
        PartFactory.part_type_for.setdefault(content_type, XmlPart)
    try:
        return docx.Document(io.BytesIO(content))
    except lxml.etree.XMLSyntaxError as exc:
        raise DocumentError(f"{broken_part(content)}: not well-formed XML: {exc.msg}") from None
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        reason = str(exc.args[0]).splitlines()[0] if exc.args else type(exc).__name__  # KeyError's str(): a repr
        reason = re.sub(r"file '<[^>]*>' is not a Word file, content", "its main part's content", reason)
        raise DocumentError(f"not a Word document: {reason}") from None


def broken_part(content: bytes) -> str:
    """The name of the package's first XML part that does not parse (for the error message)."""
    import lxml.etree

    package = zipfile.ZipFile(io.BytesIO(content))
    for name in package.namelist():
        if name.endswith((".xml", ".rels")):
            try:
                lxml.etree.fromstring(package.read(name), lxml.etree.XMLParser(resolve_entities=False))
            except lxml.etree.XMLSyntaxError:
                return name
    return "a part"


def paragraph(element) -> Paragraph | None:
    """A paragraph as a unit, None if it holds no text to translate. Its dominant formatting, which
    a translated word outside every span takes, is that of most of its text outside links (a link's
    style, the longest part of "See the full documentation here.", made the words around it blue and
    underlined); of all its text where it is all links."""
    items = walk(element)
    if not any(text.text.strip() for text in texts(items)):
        return None
    formats: dict[bytes, Any] = {}
    for outside in (True, False):
        counts: Counter[bytes] = Counter()
        for text in texts(items, links=not outside):
            counts[text.key] += len(text.text.strip())
            formats.setdefault(text.key, text.rpr)
        if sum(counts.values()):
            break
    key = counts.most_common(1)[0][0]
    p = Paragraph(element, formats[key], key)
    p.html = encode(items, p)
    return p


def walk(container) -> list[Text | Code | Wrap]:
    """A paragraph's (or a wrapper's) content as text, codes and wrappers. A complex field (w:fldChar
    begin ... end) is one code, from its first run to its last."""
    items: list[Text | Code | Wrap] = []
    field_code: Code | None = None
    depth = 0
    for child in container:
        tag = child.tag
        if field_code is not None:
            field_code.elements.append(child)
            depth += field_depth(child)
            if depth <= 0:
                if (link := field_link(field_code.elements)) is not None:
                    items[-1] = link
                field_code, depth = None, 0
        elif tag == W + "fldSimple" and is_hyperlink(child.get(W + "instr", "")):
            items.append(Wrap(child, walk(child)))
        elif tag in DROPPED or not isinstance(tag, str) or properties(child):
            continue  # w:pPr, a wrapper's properties (copied with it), comments in the XML
        elif tag == W + "r" and (child.find(W + "fldChar") is not None or child.find(W + "instrText") is not None):
            code = Code([child])
            items.append(code)
            depth = field_depth(child)
            field_code = code if depth > 0 else None
        elif tag == W + "r":
            items += run_items(child)
        elif tag in WRAPPERS:
            content = child.find(W + "sdtContent") if tag == W + "sdt" else child
            items.append(Wrap(child, walk(content) if content is not None else []))
        else:
            items.append(Code([child]))  # bookmarks, comment ranges, simple fields, math, deletions, ...
    return items


def is_hyperlink(instruction: str) -> bool:
    return instruction.split()[:1] == ["HYPERLINK"]


def field_link(elements: list[Any]) -> Wrap | None:
    """A complex field's runs as a link around its shown text, when it is a HYPERLINK field whose result
    is runs, with empty markers between them (a bookmark) at most; None for any other field (its result
    kept as it is)."""
    kinds = [[f.get(W + "fldCharType") for f in run.iter(W + "fldChar")] for run in elements]
    separate = next((i for i, k in enumerate(kinds) if "separate" in k), None)
    if separate is None or kinds[0] != ["begin"] or kinds[-1] != ["end"] or len(elements) < 3:
        return None
    instruction = "".join(t.text or "" for run in elements[:separate] for t in run.iter(W + "instrText"))
    result = [e for e in elements[separate + 1 : -1] if e.tag not in DROPPED]  # Word's spelling marks: dropped
    if not is_hyperlink(instruction) or any(k for k in kinds[separate + 1 : -1]) or kinds[separate] != ["separate"]:
        return None
    if any(e.tag == W + "r" and e.find(W + "instrText") is not None for e in result):
        return None
    if any(e.tag != W + "r" and next(e.iter(W + "t"), None) is not None for e in result):
        return None  # text in something else (a tracked insertion, a content control): kept as it is
    # its text's runs, and what lies between them (a bookmark: _GoBack) as codes that move with the words
    items = [item for e in result for item in (run_items(e) if e.tag == W + "r" else [Code([e])])]
    return Wrap(FieldLink(elements[: separate + 1], elements[-1:]), items)


def properties(element) -> bool:
    """Whether an element is a w:...Pr (a paragraph's or a wrapper's properties)."""
    tag = element.tag
    return isinstance(tag, str) and tag.startswith(W) and tag.endswith("Pr")


def field_depth(element) -> int:
    """Complex fields that `element` opens (w:fldChar begin) less those it closes (end)."""
    kinds = [f.get(W + "fldCharType") for f in element.iter(W + "fldChar")]
    return kinds.count("begin") - kinds.count("end")


def run_items(run) -> list[Text | Code | Wrap]:
    """A run as text (its w:t) and codes (each other child): a run without text is one code, kept whole."""
    rpr = run.find(W + "rPr")
    content = [c for c in run if c.tag != W + "rPr" and c.tag not in DROPPED]
    if not content and any(c.tag in DROPPED for c in run):  # nothing but what is left out
        return []
    if not any((c.tag == W + "t" and c.text) or c.tag in CHARACTERS for c in content):
        return [Code([run], line_break=bool(content) and all(c.tag in BREAKS for c in content))]
    import lxml.etree

    key = lxml.etree.tostring(rpr) if rpr is not None else b""
    items: list[Text | Code | Wrap] = []
    for child in content:
        if child.tag == W + "t" or child.tag in CHARACTERS:
            text = CHARACTERS[child.tag] if child.tag in CHARACTERS else child.text or ""
            if items and isinstance(items[-1], Text):
                items[-1].text += text
            else:
                items.append(Text(text, rpr, key))
        else:
            items.append(Code([child], rpr, split=True, line_break=child.tag in BREAKS))
    return items


def texts(items: list[Text | Code | Wrap], links: bool = True):
    """The text items, wrappers' included (a link's only with `links`), in order."""
    for item in items:
        if isinstance(item, Text):
            yield item
        elif isinstance(item, Wrap) and (links or not is_link(item)):
            yield from texts(item.items, links)


def is_link(wrap: Wrap) -> bool:
    """Whether a wrapper is a link: a w:hyperlink, or a HYPERLINK field (simple or complex)."""
    return isinstance(wrap.element, FieldLink) or wrap.element.tag in (W + "hyperlink", W + "fldSimple")


def encode(items: list[Text | Code | Wrap], p: Paragraph) -> str:
    """The html of items: plain text in the dominant formatting, a span around each group of adjacent
    text in another, a marker for each code, a link or wrap around a wrapper's items."""
    parts: list[str] = []
    open_key: bytes | None = None
    for item in items:
        number = len(p.formats) + len(p.codes) + len(p.wraps)
        if isinstance(item, Text):
            if item.key != open_key and open_key is not None:
                parts.append("</span>")
                open_key = None
            if item.key != p.dominant_key and open_key is None:
                p.formats[number] = item.rpr
                parts.append(f'<span data-run="{number}">')
                open_key = item.key
            parts.append(inline.text(item.text))
        elif isinstance(item, Code):
            p.codes[number] = item
            parts.append(inline.marker("data-run", number, item.line_break))
        else:
            if open_key is not None:
                parts.append("</span>")
                open_key = None
            p.wraps[number] = item.element
            hyperlink = item.element.tag == W + "hyperlink" or item.element.tag == W + "fldSimple"
            tag, name = ("a", "data-link") if hyperlink else ("span", "data-wrap")
            parts.append(inline.wrapper(tag, name, number, encode(item.items, p)))
    if open_key is not None:
        parts.append("</span>")
    return "".join(parts)


def rebuild(p: Paragraph, translated: str) -> None:
    """Write the paragraph again from its translated html (module docstring); a code the translation
    lost (none should be) goes at the paragraph's end, so that no image or field is ever dropped."""
    for child in list(p.element):
        if child.tag != W + "pPr":
            p.element.remove(child)
    used: set[int] = set()
    # A link (or other wrapper) whose words the alignment placed nowhere goes around the nearest word,
    # as in Markdown and subtitles: an empty w:hyperlink loses its link. A formatted run stays empty.
    names = ("data-link", "data-wrap")
    empty = {(name, value) for name in names for value in empty_in(p.html, name)}

    def kept_empty(element) -> bool:
        return not any((name, value) not in empty for name, value in element.attrs if name in names)

    nodes = embrace(parse(translated, "html"), kept_empty)
    put(inline.pieces(nodes), p.element, p.dominant, p, used)
    for number, code in p.codes.items():
        if number not in used:
            put_code(code, p.element)
    order_ranges(p.element)


def put(pieces: list[inline.Piece], parent, rpr, p: Paragraph, used: set[int]) -> None:
    """Append the pieces to `parent`: text as runs with `rpr`, spans with theirs, links, codes."""
    for piece in pieces:
        if isinstance(piece, str):
            if piece:
                parent.append(text_run(piece.replace("\n", " "), rpr))
        elif isinstance(piece, inline.Marker):
            number = inline.number(piece.attrs, "data-run")
            if number in p.codes and number not in used:
                used.add(number)
                put_code(p.codes[number], parent)
        else:
            run, link = (inline.number(piece.attrs, name) for name in ("data-run", "data-link"))
            link = link if link is not None else inline.number(piece.attrs, "data-wrap")
            if run in p.formats:
                written = len(parent)
                put(piece.children, parent, p.formats[run], p, used)
                if len(parent) == written:  # its words aligned to none: kept empty, as html keeps <b></b>
                    parent.append(text_run("", p.formats[run]))
            elif link in p.wraps and link not in used and isinstance(p.wraps[link], FieldLink):
                used.add(link)  # the field's code runs, its translated text, its end run
                parent.extend(copy.deepcopy(p.wraps[link].head))
                put(piece.children, parent, p.dominant, p, used)
                parent.extend(copy.deepcopy(p.wraps[link].tail))
            elif link in p.wraps and link not in used:
                used.add(link)
                wrapper, content = copy_wrapper(p.wraps[link])
                parent.append(wrapper)
                put(piece.children, content, p.dominant, p, used)
            else:
                put(piece.children, parent, rpr, p, used)


def put_code(code: Code, parent) -> None:
    """Append a code's elements to `parent` (a split one in a run of its own, with its w:rPr)."""
    if not code.split:
        parent.extend(code.elements)
        return
    run = new_element("r")
    if code.rpr is not None:
        run.append(copy.deepcopy(code.rpr))
    run.extend(code.elements)
    parent.append(run)


def text_run(text: str, rpr):
    """A w:r holding `text`, with a copy of `rpr`."""
    run = new_element("r")
    if rpr is not None:
        run.append(copy.deepcopy(rpr))
    t = new_element("t")
    t.text = text
    t.set(XML_SPACE, "preserve")
    run.append(t)
    return run


def copy_wrapper(element) -> tuple[Any, Any]:
    """An empty copy of a wrapper (its attributes and properties) and where its runs go in it."""
    wrapper = new_element(element.tag)
    for name, value in element.attrib.items():
        wrapper.set(name, value)
    for child in element:
        if properties(child):
            wrapper.append(copy.deepcopy(child))
    if element.tag == W + "sdt":
        content = new_element("sdtContent")
        wrapper.append(content)
        return wrapper, content
    return wrapper, wrapper


def child(parent, tag: str, later: set[str] | frozenset[str] | None = None):
    """`parent`'s `tag` element ("pPr"), made where it has none: first, or (with `later`, the tags that
    follow it in the schema's order, which Word holds a document to) before the first of those, else
    last."""
    found = parent.find(W + tag)
    if found is None:
        found = new_element(tag)
        at = 0 if later is None else next((i for i, c in enumerate(parent) if c.tag in later), len(parent))
        parent.insert(at, found)
    return found


def new_element(tag: str):
    """A new python-docx element in the w: namespace ("r", or a Clark name)."""
    from docx.oxml.parser import OxmlElement

    return OxmlElement("w:" + tag.removeprefix(W))


def order_ranges(paragraph) -> None:
    """A bookmark's (or comment range's) end that translation put before its start: moved after it."""
    for start_tag, end_tag in RANGES:
        starts = {el.get(W + "id"): el for el in paragraph.iter(start_tag)}
        if not starts:
            continue
        elements = list(paragraph.iter())  # held, so that each element keeps its one proxy
        for end in list(paragraph.iter(end_tag)):
            start = starts.get(end.get(W + "id"))
            if start is not None and elements.index(end) < elements.index(start):
                start.addnext(end)
                elements = list(paragraph.iter())
