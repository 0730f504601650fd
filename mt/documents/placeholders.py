"""What a localisation unit must give back exactly, each protected as an element kept verbatim in the
html unit it is translated as (`mt.documents.inline`) and put back where the text layer places it,
with the spaces the source had around it (the text layer puts a marker right after a word):
printf placeholders (translate-toolkit's own pattern: %s, %d, %(name)s, %1$s, %@), %%, {name} {0}
{{name}} %{name} ${name}, tags in the text (<b>, around the words it covered when its </b> follows),
line breaks and tabs (as <br>, where a sentence ends: a tab parts columns, a label from its value; in
XLIFF a line break is a space unless xml:space="preserve" says otherwise), and XLIFF's inline elements: <x/> <ph> <it> (2.0: <ph/>
<sm/> <em/> <cp/>) are kept with their content; <g>, <pc> and <mrk>, and the pairs <bpt>...<ept>,
<bx/>...<ex/> and <sc/>...<ec/>, go around the words they covered.
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mt.documents import inline
from mt.documents.fragments import embrace, empty_in
from mt.text.markup import parse

PAIRED = {"g", "pc", "mrk"}  # XLIFF inline elements around translatable text
CODE_PAIRS = {"bpt": ("ept", "id", "id"), "bx": ("ex", "rid", "rid"), "sc": ("ec", "id", "startRef")}
TAG_NAME = re.compile(r"</?([A-Za-z][\w:.-]*)")
WRAPPED = re.compile(r"[ \t]*\n\s*")  # a line break in XML text laid out by its writer, and the indent after it
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
PLACEHOLDER_PATTERN = r"""
    \n | \t | %% | \{\{[^{}]*\}\} | [%$]?\{[^{}]*\} | </?[A-Za-z][^<>]*> |
"""


def placeholders() -> re.Pattern:
    """What a unit's text keeps exactly (module docstring), translate-toolkit's printf pattern last."""
    from translate.filters.checks.standard import printf_pat

    return re.compile(PLACEHOLDER_PATTERN + printf_pat.pattern, re.VERBOSE)


@dataclass
class Protected:
    """A source as an html unit: its text escaped, each number standing for something to put back as
    it is (`kept`: a placeholder's string or an XLIFF element, with whether the source had a space
    before and after it) or around translated text (`wraps`: an XLIFF element, or a tag pair's strings)."""

    pattern: re.Pattern
    wrapped: bool = False  # line breaks are the file's layout, a space (XML text not xml:space="preserve")
    html: str = ""
    kept: dict[int, tuple[Any, bool, bool]] = field(default_factory=dict)
    wraps: dict[int, Any] = field(default_factory=dict)

    def number(self) -> int:
        return len(self.kept) + len(self.wraps)

    def keep(self, value: Any, before: str, after: str) -> str:
        """A marker for a string or an element to put back as it is, between the texts `before` and `after`."""
        number = self.number()
        line_break = value in ("\n", "\t")  # a tab divides as a line break does: columns, a label and its value
        spaced = (before[-1:].isspace() and not line_break, after[:1].isspace() and not line_break)
        self.kept[number] = (value, *spaced)
        return inline.marker("data-ph", number, line_break)

    def text(self, text: str) -> str:
        """Text with its placeholders as markers, and a tag with its closing tag as a wrapper."""
        if self.wrapped:  # ("Ein Hund läuft\n  im Park." was translated as two sentences)
            text = WRAPPED.sub(" ", text)
        found = list(self.pattern.finditer(text))
        pairs = tag_pairs([m.group() for m in found])
        closing: set[int] = set()
        parts, at = [], 0
        for i, match in enumerate(found):
            parts.append(inline.text(text[at : match.start()]))
            if i in pairs:
                number = self.number()
                self.wraps[number] = (match.group(), found[pairs[i]].group())
                parts.append(f'<span data-wrap="{number}">')
                closing.add(pairs[i])
            elif i in closing:
                parts.append("</span>")
            else:
                parts.append(self.keep(match.group(), text[: match.start()], text[match.end() :]))
            at = match.end()
        return "".join(parts) + inline.text(text[at:])

    def element(self, element) -> str:
        """An XLIFF element's content: text, paired elements (and a pair of codes, <bpt>...<ept>) as
        wrappers, any other element kept."""
        return self.text(element.text or "") + self.siblings(list(element), 0, len(element), element.text or "")

    def siblings(self, children: list, start: int, end: int, before: str) -> str:
        """children[start:end] (each with its tail), `before` the text before the first."""
        parts = []
        i = start
        while i < end:
            child = children[i]
            close = partner(children, i, end)
            if local_name(child) in PAIRED and child.get("mtype") != "protected" and child.get("translate") != "no":
                number = self.number()
                self.wraps[number] = child
                parts.append(inline.wrapper("span", "data-wrap", number, self.element(child)))
            elif close is not None:
                number = self.number()
                self.wraps[number] = (child, children[close])
                inner = self.text(child.tail or "") + self.siblings(children, i + 1, close, child.tail or "")
                parts.append(inline.wrapper("span", "data-wrap", number, inner))
                child = children[close]
                i = close
            else:
                parts.append(self.keep(child, before, child.tail or ""))
            parts.append(self.text(child.tail or ""))
            before = child.tail or ""
            i += 1
        return "".join(parts)

    def restore(self, translated: str, target=None) -> str:
        """The translation with everything put back: as a string, or as `target`'s content (XLIFF). A
        placeholder the translation lost (none should) goes at the end: never dropped."""
        out = Output(target)
        used: set[int] = set()
        # a wrapper the alignment left around no word (`<b>here</b>` with "here" unaligned) takes the
        # nearest word, as in the other formats; one empty in the source stays empty, a marker stays put
        empty = empty_in(self.html, "data-wrap")
        nodes = embrace(parse(translated, "html"), lambda e: dict(e.attrs).get("data-wrap") in empty | {None})
        self._restore(inline.pieces(nodes), out, used)
        for number, kept in self.kept.items():
            if number not in used:
                out.placeholder(*kept)
        return "".join(out.parts)

    def _restore(self, pieces: list[inline.Piece], out: Output, used: set[int]) -> None:
        for piece in pieces:
            if isinstance(piece, str):
                out.text(piece)
            elif isinstance(piece, inline.Marker):
                number = inline.number(piece.attrs, "data-ph")
                if number in self.kept and number not in used:
                    used.add(number)
                    out.placeholder(*self.kept[number])
            else:
                number = inline.number(piece.attrs, "data-wrap")
                wrap = None
                if number is not None and number not in used:
                    wrap = self.wraps.get(number)
                    used.add(number)
                if isinstance(wrap, tuple):
                    out.code(wrap[0])
                    self._restore(piece.children, out, used)
                    out.code(wrap[1])
                elif wrap is not None:
                    with out.inside(wrap):
                        self._restore(piece.children, out, used)
                else:
                    self._restore(piece.children, out, used)


def local_name(element) -> str:
    """An element's name without its namespace ("" for a comment or a processing instruction)."""
    from lxml import etree

    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def partner(children: list, i: int, end: int) -> int | None:
    """The index before `end` of the code that closes children[i] (<bpt id> <ept id>; <bx rid> <ex rid>;
    2.0's <sc id> <ec startRef>), None if it opens none."""
    name = local_name(children[i])
    closer, key, closer_key = CODE_PAIRS.get(name, ("", "", ""))
    value = children[i].get(key) if closer else None
    if value is None:
        return None
    for j in range(i + 1, end):
        if local_name(children[j]) == closer and children[j].get(closer_key) == value:
            return j
    return None


def tag_pairs(tokens: list[str]) -> dict[int, int]:
    """Which token (a tag such as <b>) is closed by which (</b>): index -> index."""
    pairs: dict[int, int] = {}
    open_tags: list[tuple[str, int]] = []
    for i, token in enumerate(tokens):
        name = TAG_NAME.match(token)
        if name is None or token.endswith("/>"):
            continue
        if not token.startswith("</"):
            open_tags.append((name.group(1).lower(), i))
        elif open_tags and open_tags[-1][0] == name.group(1).lower():
            pairs[open_tags.pop()[1]] = i
    return pairs


class Output:
    """A restored translation, written as a string or into an element, with a space put back beside a
    placeholder where the source had one and the translation does not (the text layer places a
    marker right after a word)."""

    def __init__(self, target=None):
        self.parts: list[str] = []
        self.at = target
        self.last = " "  # the last character written: a space at the start
        self.pending = False  # a space is due before the next text

    def write(self, text: str) -> None:
        if not text:
            return
        if self.at is None:
            self.parts.append(text)
        else:
            append_text(self.at, text)
        self.last = text[-1]

    def text(self, text: str) -> None:
        if text and self.pending and not text[0].isspace():
            self.write(" ")
        self.pending = self.pending and not text
        self.write(text)

    def placeholder(self, value: Any, before: bool, after: bool) -> None:
        if before and not self.last.isspace():
            self.write(" ")
        self.code(value)
        self.pending = after

    def code(self, value: Any) -> None:
        """A string or a copy of an element (without its tail), as it is."""
        if isinstance(value, str):
            self.write(value)
        else:
            kept = copy.deepcopy(value)
            kept.tail = None
            self.at.append(kept)
            self.last = ">"

    @contextmanager
    def inside(self, source):
        """Write into a copy of the XLIFF element `source` (its tag and attributes) for a while."""
        from lxml import etree

        outer = self.at
        self.at = etree.SubElement(outer, source.tag, dict(source.attrib))
        yield
        self.at = outer


def append_text(element, text: str) -> None:
    """Text after what `element` holds so far."""
    if len(element):
        element[-1].tail = (element[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text
