"""Markup (an HTML or XML fragment) as a tree, its translatable text as segments, and the tree written
back: the format side of markup translation (`mt.text.markup_translate` translates, `mt.text.placement`
puts the inline elements back around the target words).

The parser is lxml's (libxml2's HTML parser, `lxml.html`; `lxml.etree` for XML), already installed with
sacrebleu, chosen by measurement over html5lib, selectolax and BeautifulSoup (docs/translating.md,
"Markup"). Its tree becomes mt's own (`Element`, `Raw`, text as `str`), which mt writes back itself: text
escaped, attributes as parsed (values re-escaped, never changed), HTML's void elements without end tags.

Block elements (p, div, li, td, h1 ...; in XML an element whose parent holds no text of its own) bound
segments; within one, the text of the inline elements (b, i, a, span, br ...) is joined, and each inline
element remembers the characters it covers (`Segment`). script, style, code, pre, kbd, samp, var, math
and svg, any element with translate="no" or class "notranslate", and an inline element of no letters
right after a word (a footnote's mark: `marker_after_word`; an element in the tree, read back as one)
are kept verbatim (`Raw`): a block one bounds segments, an inline one stands in its segment as an empty
element does. `<br>` is a line break in the segment's text, so
that the sentences break there.

A text is a whole document when its doctype, `<html>`, `<head>` or `<body>` comes first (the last two
written back without an html element around them), after what a saved page may start with (a
byte-order mark, comments: kept as they are); comments before `<html>` and whatever follows `</html>`
are the document's too. In a fragment, an end tag of body or html is dropped, not what follows it
(one in a comment, a script or a style is their text, and kept).
"""

from __future__ import annotations

import collections
import html
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Union

from mt.errors import MtError
from mt.text.sentences import address_spans, enclosed, split_at

Format = Literal["text", "html", "xml"]
FORMATS: tuple[str, ...] = ("text", "html", "xml")

BLOCK = frozenset(  # a form's button and label too: "Email" and "Send" beside them are not one word
    "address article aside blockquote body button caption center col colgroup dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe "
    "label legend li link main menu meta nav noscript ol optgroup option p pre section select summary table tbody "
    "td template textarea tfoot th thead title tr ul".split()
)
VOID = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param source track wbr".split()
)
# kept as they are, with translate="no" and notranslate: code, keys, sample output, variables, formulas, drawings
VERBATIM = frozenset("script style code pre kbd samp var math svg".split())
RAW_TEXT = frozenset("script style".split())  # HTML elements whose text is written unescaped
# Characters libxml2 refuses and HTML does not allow: a form feed is a space, the rest U+FFFD (as a NUL in HTML).
# libxml2's HTML parser drops, without an error, the text of elements nested 255 deep or more: a
# fragment or document as deep as this is refused instead (no page nests so deep)
MAX_DEPTH = 250
UNSPACED_SCRIPTS = (("\u0e00", "\u0fff"), ("\u1000", "\u109f"), ("\u1780", "\u17ff"))  # Thai to Tibetan, Myanmar, Khmer
CONTROLS = {c: "\ufffd" for c in [*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0xFFFE, 0xFFFF]} | {0x0C: " "}


class MarkupError(MtError):
    """A fragment the parser refuses (XML that is not well-formed); `line`, where known, the input line
    it is on (`mt translate` names it with its file), and `reason` the message without it."""

    def __init__(self, message: str, line: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.line, self.reason = line, reason or message


@dataclass
class Element:
    """An element: its name, attributes (in order, as parsed) and children; `block` bounds segments."""

    tag: str
    attrs: list[tuple[str, str]]
    children: list[Node] = field(default_factory=list)
    block: bool = False
    void: bool = False  # written without children or end tag: HTML's void elements, an empty XML element
    marker: bool = False  # a footnote's mark after a word (`marker_after_word`): in a segment, kept as it is


@dataclass
class Raw:
    """Markup written back as it was: a comment, a processing instruction, an entity reference, an
    element kept verbatim (`block`: one that bounds segments)."""

    markup: str
    block: bool = False
    address: bool = False  # text kept as it is (flatten: an address, what `keep` finds), shown as text is


Node = Union[Element, Raw, str]


@dataclass
class Inline:
    """An inline element (or a comment, a verbatim element) within a segment: [start, end) are the
    characters of the segment's text it covers (start == end: none); `parent` the index of the item it
    is inside, None at the segment's top."""

    node: Element | Raw
    start: int
    end: int
    parent: int | None


@dataclass
class Segment:
    """The text of a run of inline content between block boundaries, with its inline items in
    document order (a parent before its children). A line break in the markup's text is a space
    in `plain`, which is segmented and translated; `text`'s characters between sentences are kept."""

    text: str
    items: list[Inline]
    plain: str = ""  # the text as the sentences are found in it: its line breaks and tabs spaces, but a <br>'s


def parse(text: str, fmt: Format) -> list[Node]:
    """The fragment's top-level nodes (a whole HTML document's: `document`); MarkupError for XML that
    is not well-formed."""
    import lxml.etree
    import lxml.html

    if fmt == "xml":
        if declaration := XML_DECLARATION.match(text):  # kept as it is: inside the wrapper it is not XML
            return [Raw(declaration.group(), True), *parse(text[declaration.end() :], fmt)]
        parser = lxml.etree.XMLParser(resolve_entities=False, strip_cdata=True, remove_blank_text=False)
        try:
            root = lxml.etree.fromstring(f"<mt-fragment>{text}</mt-fragment>", parser)
        except lxml.etree.XMLSyntaxError as exc:  # the wrapper's name and columns are mt's: left out
            said = exc.msg.split(", line ")[0].replace(" and mt-fragment", "")
            if "\n" not in text:  # "tag mismatch: b line 1 and i": the line in the fragment, always 1
                said = re.sub(r" line \d+\b", "", said)
            raise MarkupError(f"not well-formed XML: {said}") from None
        except ValueError as exc:  # a control character
            raise MarkupError(f"not well-formed XML: {exc}") from None
    elif "<?" in text and (marked := _marked(text))[1]:  # <?php ... ?>: written back as it was (libxml2's
        return [_unmark(node, marked[1]) for node in parse(marked[0], fmt)]  # HTML parser made a comment of it)
    elif (start := document_start(text)) is not None:  # what comes before it is kept as it is
        prefix = [Raw(text[:start], True)] if start else []
        end = len(text.rstrip())  # the spaces after </html>, which libxml2 drops, kept too
        nodes = document(text[start:end].translate(CONTROLS))
        if not DOCUMENT.match(text, start):  # it starts with head or body: no html element of its own
            nodes = [c for n in nodes for c in (n.children if isinstance(n, Element) and n.tag == "html" else [n])]
        return prefix + nodes + ([text[end:]] if text[end:] else [])
    else:  # libxml2 drops the spaces before a fragment's first element: kept here
        # and everything after an end tag of body or html, which a fragment has no start tag for
        text = STRAY_END.sub(lambda m: m.group(1) or "", text.translate(CONTROLS))
        text = _closed_at_end(text)
        body = text.lstrip()
        root = lxml.html.fragment_fromstring(body, create_parent="div")
        check_depth(root)
        if len(body) != len(text):
            root.text = text[: len(text) - len(body)] + (root.text or "")
    top = convert(root, fmt)
    return top.children if isinstance(top, Element) else [top]


# A processing instruction (<?php ... ?>) outside comments, scripts, styles, titles and text areas (their
# text is text) and tags (an attribute's value): those kept, group 1
PROCESSING = re.compile(
    r"(<!--.*?(?:-->|\Z)|<(script|style|title|textarea)\b.*?(?:</\2\s*>|\Z)"
    r"|<[A-Za-z][^>\"']*(?:(?:\"[^\"]*(?:\"|\Z)|'[^']*(?:'|\Z))[^>\"']*)*>?)|<\?.*?\?>",
    re.IGNORECASE | re.DOTALL,
)
PROCESSING_MARK = "mt-processing-instruction-"
# A fragment as a browser's tokenizer sees it, in the parts that can be left open at its end: comments,
# scripts and styles (which run to their end), and tags (their quoted values may hold "<!--")
SCANNED = re.compile(
    r"(?P<comment><!--.*?(?:-->|\Z))|<(?P<raw>script|style)\b.*?(?:</(?P=raw)\s*>|\Z)"
    r"|(?P<tag><[A-Za-z/][^>\"']*(?:(?:\"[^\"]*(?:\"|\Z)|'[^']*(?:'|\Z))[^>\"']*)*>?)",
    re.IGNORECASE | re.DOTALL,
)


def _closed_at_end(text: str) -> str:
    """A fragment whose last part is left open, as a browser reads it: a comment, script or style runs
    to the end, and is closed there (libxml2 put the wrapper's `</body></html>` into it, text the
    client never sent); a tag left open ("A dog <div runs.") is text, its `<` escaped (libxml2 made an
    element of it with the wrapper's end tags for attributes, `<div runs.<="" body="">`)."""
    parts = collections.deque(SCANNED.finditer(text), maxlen=1)  # the last part
    last = parts[0] if parts else None
    if last is None or last.end() != len(text):
        return text
    if last.group("comment") and not last.group().endswith("-->"):
        return text + "-->"
    if last.group("raw") and not re.search(r"</\w+\s*>\Z", last.group()):
        return text + f"</{last.group('raw').lower()}>"
    if last.group("tag") and not last.group().endswith(">"):
        return text[: last.start()] + "&lt;" + text[last.start() + 1 :]
    return text


def _marked(text: str) -> tuple[str, list[str]]:
    """`text` with each processing instruction hidden in a comment (`_unmark` puts it back), and them."""
    pis: list[str] = []

    def mark(match: re.Match) -> str:
        if match.group(1):
            return match.group(1)
        pis.append(match.group())
        return f"<!--{PROCESSING_MARK}{len(pis) - 1}-->"

    end = text.rfind("?>") + 2  # a "<?" after the last "?>" ends none: not tried (each try ran to the end)
    return (PROCESSING.sub(mark, text[:end]) + text[end:], pis) if end > 1 else (text, pis)


def _unmark(node: Node, pis: list[str]) -> Node:
    """`node` with each processing instruction `_mark` hid in a comment written back as it was."""
    if isinstance(node, Raw):
        restored = re.sub(f"<!--{PROCESSING_MARK}(\\d+)-->", lambda m: pis[int(m.group(1))], node.markup)
        return Raw(restored, node.block)
    if isinstance(node, Element):
        node.children = [_unmark(child, pis) for child in node.children]
    return node


XML_DECLARATION = re.compile(r"\ufeff?<\?xml\s[^>]*\?>\s*")  # <?xml version="1.0" ...?> and the spaces after it
LEADING = re.compile(r"(?:\ufeff|\s+|<!--.*?-->|<\?.*?>)*", re.DOTALL)  # a BOM, spaces, comments, PIs
DOCUMENT = re.compile(r"<(?:!doctype|html)(?=[\s>/]|$)", re.IGNORECASE)
# A text that starts with head or body is a document too, without its html (their start tags are
# optional in HTML: as a fragment, both were dropped with their attributes)
DOCUMENT_PART = re.compile(r"<(?:!doctype|html|head|body)(?=[\s>/]|$)", re.IGNORECASE)
# An end tag of body or html, outside comments, scripts and styles (their text, kept: group 1)
STRAY_END = re.compile(
    r"(<!--.*?(?:-->|\Z)|<(script|style)\b.*?(?:</\2\s*>|\Z))|</\s*(?:body|html)\s*>", re.IGNORECASE | re.DOTALL
)


def document_start(text: str) -> int | None:
    """Where a whole HTML document begins (its doctype or its html tag) after what may come first (a byte-order mark, spaces, comments: a page saved by a browser starts with one), or
    None for a fragment."""
    start = LEADING.match(text).end()
    return start if DOCUMENT_PART.match(text, start) else None


def check_depth(root) -> None:
    """MarkupError for elements nested MAX_DEPTH deep (their text may be lost: MAX_DEPTH)."""
    deepest, stack = 0, [(root, 0)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element)
    if deepest >= MAX_DEPTH:
        raise MarkupError(f"elements nested {deepest} deep: HTML parsing loses text past {MAX_DEPTH}")


DOCTYPE_ALONE = re.compile(r"<!doctype[^<>]*>\s*", re.IGNORECASE)


def document(text: str) -> list[Node]:
    """A whole HTML document (from `<!DOCTYPE` or `<html>`): its doctype, if it has one, and its html
    element, head and title (translated) included."""
    import lxml.etree
    import lxml.html

    if DOCTYPE_ALONE.fullmatch(text):  # a line of a page given line by line (--format html): as it is
        return [Raw(text, True)]
    try:  # an unclosed `<html`: libxml2 builds no element (a client's text: its error)
        root = lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError) as exc:
        raise MarkupError(f"not an HTML document: {exc}") from None
    check_depth(root)
    # Comments between the doctype and <html>, and whatever follows </html> (libxml2 puts it beside
    # the html element, not in it), are the document's too.
    nodes: list[Node] = []
    for sibling in [*reversed(list(root.itersiblings(preceding=True))), root, *root.itersiblings()]:
        node = convert(sibling, "html")
        while sibling is not root and isinstance(node, Element) and node.tag in ("html", "body") and not node.attrs:
            nodes += node.children[:-1]  # the html or body element libxml2 wraps content after </html> in
            node = node.children[-1] if node.children else ""
        nodes.append(node)
        if sibling is not root and sibling.tail:
            nodes.append(sibling.tail)
    doctype = root.getroottree().docinfo.doctype if text.lstrip()[:9].lower() == "<!doctype" else ""
    if not doctype:
        return nodes
    if ">" not in text[text.lower().index("<!doctype") :]:
        raise MarkupError("not an HTML document: its doctype does not end")
    end = text.index(">", text.lower().index("<!doctype")) + 1
    gap = text[end : len(text) - len(text[end:].lstrip())]  # the line break after the doctype, kept
    return [Raw(doctype + gap, True), *nodes]


def convert(el, fmt: Format, parent_nsmap: dict | None = None) -> Node:
    """lxml's element -> mt's node, its children converted with it."""
    import lxml.etree as et

    if isinstance(el, et._Comment):
        return Raw(f"<!--{el.text or ''}-->")
    if isinstance(el, et._ProcessingInstruction):
        return Raw(f"<?{el.target} {el.text or ''}?>" if el.text else f"<?{el.target}?>")
    if isinstance(el, et._Entity):
        return Raw(el.text)  # "&name;", kept as written (XML parsed without resolving entities)
    children: list[Node] = [el.text] if el.text else []
    for child in el:
        children.append(convert(child, fmt, el.nsmap))
        if child.tail:
            children.append(child.tail)
    tag, attrs = names(el, parent_nsmap or {}) if fmt == "xml" else (el.tag, list(el.attrib.items()))
    if fmt == "html":
        for i, child in enumerate(children):
            if marker_after_word(children, i):
                child.marker = True
    element = Element(tag, attrs, children)
    mixed = any(isinstance(c, str) and c.strip() for c in children)
    for child in children:
        if isinstance(child, (Element, Raw)) and fmt == "xml" and not mixed:
            child.block = True  # XML: an element beside which its parent holds no text
    element.block = (fmt == "html" and tag in BLOCK) or any(isinstance(c, (Element, Raw)) and c.block for c in children)
    element.void = (tag in VOID) if fmt == "html" else not children
    if verbatim(element, fmt):
        return Raw(write([element], fmt), element.block)
    return element


def marker_after_word(children: list[Node], i: int) -> bool:
    """Whether children[i] is an inline element of no letters right after a word, and not inside one:
    a footnote's mark (`runs<sup>1</sup> and`, `sleeps<sup><a href="#fn2">[2]</a></sup>.`), a unit's
    exponent (`m<sup>2</sup>`). Kept as it is and placed after that word's translation, as a verbatim
    element is: in the model's text it glued a number to the word, which came back changed or not at
    all. Within a word (`H<sub>2</sub>O`) it stays part of the word."""
    child = children[i]
    if not isinstance(child, Element) or child.block or child.void:
        return False
    words = all_text(child)
    if not words.strip() or any(c.isalpha() for c in words):
        return False
    before = children[i - 1] if i else None
    after = children[i + 1] if i + 1 < len(children) else None
    glued = isinstance(before, str) and before[-1:].isalnum()
    return glued and not (isinstance(after, str) and after[:1].isalnum())


def all_text(node: Node) -> str:
    """The text in `node` and its descendants (a kept one's: none)."""
    if isinstance(node, str):
        return node
    return "".join(all_text(c) for c in node.children) if isinstance(node, Element) else ""


def names(el, parent_nsmap: dict) -> tuple[str, list[tuple[str, str]]]:
    """An XML element's qualified name and attributes with their prefixes, the namespaces it declares first."""
    prefixes = {uri: prefix for prefix, uri in el.nsmap.items()}
    prefixes["http://www.w3.org/XML/1998/namespace"] = "xml"

    def qualified(name: str) -> str:
        if not name.startswith("{"):
            return name
        uri, local = name[1:].split("}", 1)
        return f"{prefixes[uri]}:{local}" if prefixes.get(uri) else local

    declared = [
        ("xmlns" if prefix is None else f"xmlns:{prefix}", uri)
        for prefix, uri in el.nsmap.items()
        if parent_nsmap.get(prefix) != uri
    ]
    return qualified(el.tag), declared + [(qualified(k), v) for k, v in el.attrib.items()]


def verbatim(element: Element, fmt: Format) -> bool:
    """Whether an element is kept as it is: script, style, code, pre (HTML), translate="no", class notranslate."""
    attrs = dict(element.attrs)
    no = any(k.split(":")[-1] == "translate" and v.strip().lower() == "no" for k, v in element.attrs)
    return (fmt == "html" and element.tag in VERBATIM) or no or "notranslate" in attrs.get("class", "").split()


def write(nodes: list[Node], fmt: Format, raw_text: bool = False) -> str:
    """The markup of `nodes`: text escaped (but a script's or style's), attribute values quoted."""
    parts = []
    for node in nodes:
        if isinstance(node, str):
            parts.append(node if raw_text else html.escape(node, quote=False))
        elif isinstance(node, Raw):
            parts.append(node.markup)
        else:
            parts.append(start_tag(node, fmt))
            if not node.void:
                parts += [write(node.children, fmt, fmt == "html" and node.tag in RAW_TEXT), f"</{node.tag}>"]
    return "".join(parts)


ATTRIBUTE_WHITESPACE = str.maketrans({"\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


def start_tag(element: Element, fmt: Format) -> str:
    """`<tag name="value" ...>` (`/>` for an empty XML element). In XML a tab or line break in a value
    is written as its reference, as the source had it: raw, an XML reader turns it into a space."""
    table = ATTRIBUTE_WHITESPACE if fmt == "xml" else {}
    attrs = "".join(f' {name}="{html.escape(value, quote=True).translate(table)}"' for name, value in element.attrs)
    return f"<{element.tag}{attrs}{'/>' if element.void and fmt == 'xml' else '>'}"


def runs(children: list[Node]) -> Iterator[tuple[bool, list[Node]]]:
    """`children` in order as (is_run, nodes): each run of inline content (text, inline elements, inline
    raw markup) as (True, run), each block node alone as (False, [node])."""
    run: list[Node] = []
    for child in children:
        if isinstance(child, (Element, Raw)) and child.block:
            if run:
                yield True, run
            run = []
            yield False, [child]
        else:
            run.append(child)
    if run:
        yield True, run


def translatable(run: list[Node]) -> bool:
    """Whether a run holds text to translate (not only spaces, comments, verbatim elements)."""
    return any((isinstance(n, str) and n.strip()) or (isinstance(n, Element) and translatable(n.children)) for n in run)


Keep = Callable[[str], list[tuple[int, int]]]  # a text's spans to keep out of the model's text, besides addresses


def segments(nodes: list[Node], keep: Keep | None = None) -> list[Segment]:
    """The segments of a fragment, in document order (`render` takes their translations in that order);
    `keep`: what else of a text to keep as it is, as its addresses are (characters the model cannot read)."""
    found = []
    for is_run, part in runs(nodes):
        if is_run and translatable(part):
            segment = Segment("", [])
            flatten(part, segment, None, keep)
            found.append(segment)
        elif not is_run and isinstance(part[0], Element):
            found += segments(part[0].children, keep)
    return found


def plain_text(fragment: str, fmt: Format) -> str:
    """A fragment's translatable text, as its language is identified: tag names, attributes and URLs,
    mostly English whatever the page's language, left out; MarkupError for one that does not parse."""
    return " ".join(segment.plain for segment in segments(parse(fragment, fmt)))


def language_text(text: str, fmt: Format) -> str:
    """What `--src-lang auto` identifies of a text in `fmt`: a markup text's `plain_text`, or the text
    itself (plain, or markup that does not parse: its error comes when it is translated)."""
    if fmt == "text":
        return text
    try:
        return plain_text(text, fmt)
    except MarkupError:
        return text


def flatten(nodes: list[Node], segment: Segment, parent: int | None, keep: Keep | None = None) -> None:
    """Append the text of `nodes` to the segment's, and an item for each inline element or raw markup.

    Two elements side by side with words at their meeting point (`<a>Home</a><a>About</a>`, a menu a
    style sheet spaces out) are two words to the model: a space goes between them in the text. A word
    cut by one element (`un<u>der</u>line`) stays one, and scripts written without spaces get none."""
    previous: Node | None = None
    for i, node in enumerate(nodes):
        if isinstance(node, str):
            # its addresses kept as they are, out of the text the model reads (mt.text.sentences)
            kept = kept_addresses(node, i > 0 and glues(previous), i + 1 < len(nodes) and glues(nodes[i + 1]), keep)
            for part, address in split_at(node, kept):
                segment.text += part
                segment.plain += part.replace("\r", " ").replace("\n", " ").replace("\t", " ")  # markup's indentation
                if address:
                    kept_as = Raw(html.escape(address, quote=False), address=True)
                    segment.items.append(Inline(kept_as, len(segment.text), len(segment.text), parent))
            previous = node
            continue
        if isinstance(previous, Element) and isinstance(node, Element) and _word_end(segment.text):
            if first_text(previous) and _word_start(first_text(node)):
                segment.text += " "
                segment.plain += " "
        previous = node
        if isinstance(node, Element) and node.marker:  # as a verbatim element, in the tree an element still
            segment.items.append(Inline(Raw(write([node], "html")), len(segment.text), len(segment.text), parent))
            continue
        index = len(segment.items)
        segment.items.append(Inline(node, len(segment.text), len(segment.text), parent))
        if isinstance(node, Element) and node.tag == "br":
            segment.text += "\n"  # a line break: sentences break here, and it marks the place
            segment.plain += "\n"
        elif isinstance(node, Element):
            flatten(node.children, segment, index, keep)
        segment.items[index].end = len(segment.text)


def kept_addresses(text: str, glued_before: bool, glued_after: bool, keep: Keep | None = None) -> list[tuple[int, int]]:
    """The addresses of a text node that `flatten` keeps out of the model's text, each with the bracket
    or quotes right around it, and what `keep` finds beside them: not one that runs into what `glues`
    beside it (`https://x.org/` and a placeholder, then `/docs`: the model would get the rest of it as
    a word)."""
    found = [enclosed(text, span) for span in address_spans(text)]
    if keep is not None:
        found += [(a, b) for a, b in keep(text) if not any(a < end and start < b for start, end in found)]
    return sorted(
        (start, end)
        for start, end in found
        if not ((start == 0 and glued_before) or (end == len(text) and glued_after))
    )


def glues(node: Node | None) -> bool:
    """Whether a word can run on through `node`: an inline element, a kept one (a placeholder), an
    entity; not a line break, an image or another void element, a comment, a processing instruction."""
    if isinstance(node, Element):
        return not node.void
    if isinstance(node, Raw):
        return not node.markup.startswith(("<!", "<?"))
    return False


def first_text(element: Element) -> str:
    """The first non-empty text inside `element` ("" if none)."""
    for child in element.children:
        text = child if isinstance(child, str) else first_text(child) if isinstance(child, Element) else ""
        if text:
            return text
    return ""


def _word_end(text: str) -> bool:
    return bool(text) and _spaced_word_char(text[-1])


def _word_start(text: str) -> bool:
    return bool(text) and _spaced_word_char(text[0])


def _spaced_word_char(char: str) -> bool:
    """A letter or digit of a script that puts spaces between words (not CJK's wide characters, Thai,
    Lao, Khmer, Myanmar)."""
    if not char.isalnum() or unicodedata.east_asian_width(char) in "WF":
        return False
    return not any(low <= char <= high for low, high in UNSPACED_SCRIPTS)


def render(nodes: list[Node], fmt: Format, translated: Iterator[list[Node]]) -> str:
    """The fragment written back, each segment's nodes replaced by its translation (`translated`, in
    the order of `segments`)."""
    parts = []
    for is_run, part in runs(nodes):
        if is_run and translatable(part):
            parts.append(write(next(translated), fmt))
        elif not is_run and isinstance(part[0], Element):
            element = part[0]
            parts.append(start_tag(element, fmt))
            if not element.void:
                parts += [render(element.children, fmt, translated), f"</{element.tag}>"]
        else:
            parts.append(write(part, fmt))
    return "".join(parts)
