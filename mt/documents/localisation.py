"""Localisation files through translate-toolkit: XLIFF 1.2 and 2.0 (.xlf, .xliff) and Gettext PO (.po).

Each unit's source is translated into its target; everything else (IDs, notes, contexts, flags,
locations, the header, obsolete entries) is kept. A unit that already has a translation (a non-empty
target or msgstr) is left alone unless `DocumentOptions.retranslate`; one that mt translated is marked
for review: a PO entry `fuzzy` (msgfmt leaves fuzzy entries out of the compiled catalogue until a
translator clears the flag), an XLIFF 1.2 target state="needs-review-translation" with
state-qualifier="leveraged-mt", an XLIFF 2.0 segment state="translated" (translated, not reviewed).
The target language (PO Language, XLIFF target-language or trgLang) is set where the file has none.

A PO entry with a plural: msgid gives msgstr[0] and msgid_plural msgstr[1] to msgstr[nplurals-1],
nplurals being the header's Plural-Forms (written from the target language's default, translate-toolkit's
table, where the header has none); a language of one form takes msgid_plural's translation.

What must come back exactly is protected as an element kept verbatim in an html unit
(`mt.documents.inline`) and put back where the text layer places it: printf placeholders (translate-
toolkit's own pattern: %s, %d, %(name)s, %1$s, %@), %%, {name} {0} {{name}} %{name} ${name}, tags in the
text (<b>), line breaks (as <br>, where a sentence ends), and XLIFF's inline elements: <x/> <bx/> <ex/>
<ph> <bpt> <ept> <it> (2.0: <ph/> <sc/> <ec/> <sm/> <em/> <cp/>) are kept with their content, while
<g>, <pc> and <mrk> wrap translated text and are placed around its aligned words.
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mt.documents import inline
from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.units import Units

PAIRED = {"g", "pc", "mrk"}  # XLIFF inline elements around translatable text
CODE_PAIRS = {"bpt": ("ept", "id", "id"), "bx": ("ex", "rid", "rid"), "sc": ("ec", "id", "startRef")}
REVIEW_1 = {"state": "needs-review-translation", "state-qualifier": "leveraged-mt"}  # on an XLIFF 1.2 target
REVIEW_2 = "translated"  # an XLIFF 2.0 segment's state
DECLARED_ENCODING = re.compile(r"""\A\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
TAG_NAME = re.compile(r"</?([A-Za-z][\w:.-]*)")
PLACEHOLDER_PATTERN = r"""
    \n | %% | \{\{[^{}]*\}\} | [%$]?\{[^{}]*\} | </?[A-Za-z][^<>]*> |
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
    html: str = ""
    kept: dict[int, tuple[Any, bool, bool]] = field(default_factory=dict)
    wraps: dict[int, Any] = field(default_factory=dict)

    def number(self) -> int:
        return len(self.kept) + len(self.wraps)

    def keep(self, value: Any, before: str, after: str) -> str:
        """A marker for a string or an element to put back as it is, between the texts `before` and `after`."""
        number = self.number()
        line_break = value == "\n"
        spaced = (before[-1:].isspace() and not line_break, after[:1].isspace() and not line_break)
        self.kept[number] = (value, *spaced)
        return inline.marker("data-ph", number, line_break)

    def text(self, text: str) -> str:
        """Text with its placeholders as markers, and a tag with its closing tag as a wrapper."""
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
        self._restore(inline.read(translated), out, used)
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


def ask(units: Units, protected: list[Protected]) -> list[str]:
    """The translation of each protected source, all asked at once (each distinct one once)."""
    unique = list(dict.fromkeys(p.html for p in protected))
    answers = dict(zip(unique, units(unique, "html")))
    return [answers[p.html] for p in protected]


def translate(text: str, units: Units, options: DocumentOptions) -> str:
    """The translated file: XLIFF if it is XML (it begins with "<"), else PO."""
    if text.lstrip().startswith("<"):
        return translate_xliff(text, units, options)
    return translate_po(text, units, options)


def translate_po(text: str, units: Units, options: DocumentOptions) -> str:
    """A PO file translated (module docstring)."""
    from translate.misc.multistring import multistring

    store = read_po(text)
    pattern = placeholders()
    nplurals, plural = plural_forms(store, options.target)
    todo: list[tuple[Any, list[Protected]]] = []
    for unit in store.units:
        if unit.isheader() or unit.isobsolete() or not str(unit.source):
            continue
        if any(getattr(unit.target, "strings", [unit.target])) and not options.retranslate:
            continue
        sources = unit.source.strings[:2] if unit.hasplural() else [str(unit.source)]
        protected = []
        for source in sources:
            p = Protected(pattern)
            p.html = p.text(source)
            protected.append(p)
        todo.append((unit, protected))
    answers = iter(ask(units, [p for _, protected in todo for p in protected]))
    plurals_used = False
    for unit, protected in todo:
        found = [p.restore(next(answers)) for p in protected]
        if unit.hasplural():
            plurals_used = True
            unit.target = multistring(found[:1] + found[1:] * (nplurals - 1) if nplurals > 1 else found[1:])
        else:
            unit.target = found[0]
        unit.markfuzzy(True)
    if todo and not store.parseheader().get("Language"):
        store.updateheader(add=True, Language=options.target)
    if plurals_used and plural is not None:
        store.updateheaderplural(nplurals, plural)
    return bytes(store).decode(store.encoding)


def read_po(text: str):
    """translate-toolkit's pofile of the text: its lines given as text, which the parser reads as they
    are (given bytes, translate-toolkit 3.20 does not re-decode them by the header's charset)."""
    from translate.storage import poparser, pypo

    store = pypo.pofile()
    store.units = []
    lines = [line + "\n" for line in text.split("\n")]
    try:
        poparser.parse_units(poparser.PoParseState(lines, store.create_unit), store)
    except (poparser.PoParseError, ValueError) as exc:
        raise DocumentError(f"not a PO file: {str(exc).splitlines()[0][:200]}") from None
    return store


def plural_forms(store, target: str) -> tuple[int, str | None]:
    """nplurals from the header, or the target language's (with its plural expression, to write)."""
    from translate.lang import factory

    nplurals, _ = store.getheaderplural()
    if nplurals is not None and str(nplurals).isdigit() and int(nplurals) > 0:
        return int(nplurals), None
    language = factory.getlanguage(target)
    return (language.nplurals or 2), (language.pluralequation or "(n != 1)")


def translate_xliff(text: str, units: Units, options: DocumentOptions) -> str:
    """An XLIFF file translated (module docstring)."""
    store, version = read_xliff(text)
    pattern = placeholders()
    todo: list[tuple[Any, Protected]] = []
    for unit in store.units:
        source, target = unit.get_source_dom(), unit.get_target_dom()
        if not unit.istranslatable() or source is None or not "".join(source.itertext()).strip():
            continue
        if target is not None and (len(target) or (target.text or "").strip()) and not options.retranslate:
            continue
        p = Protected(pattern)
        p.html = p.element(source)
        todo.append((unit, p))
    for (unit, p), translated in zip(todo, ask(units, [p for _, p in todo])):
        target = unit.get_target_dom()
        if target is None:
            unit.settarget("")
            target = unit.get_target_dom()
        for child in list(target):
            target.remove(child)
        target.text = None
        p.restore(translated, target)
        if version == 2:
            unit.xmlelement.set("state", REVIEW_2)
        else:
            for name, value in REVIEW_1.items():
                target.set(name, value)
            if unit.xmlelement.get("approved") == "yes":
                unit.xmlelement.set("approved", "no")
    if todo:
        set_target_language(store, version, options.target)
    return serialized(store)


def serialized(store) -> str:
    """The store's XML as text (the driver encodes it as the file was). translate-toolkit encodes the
    declaration and the tree apart: in UTF-16 or UTF-32 each comes with a byte-order mark, left out."""
    declaration, newline, tree = bytes(store).decode(store.encoding).lstrip("\ufeff").partition("\n")
    return declaration + newline + tree.lstrip("\ufeff")


def read_xliff(text: str) -> tuple[Any, int]:
    """translate-toolkit's XLIFF store of the text (1.2, else 2.0) and its version's major number."""
    from lxml import etree
    from translate.storage import xliff, xliff2

    declared = DECLARED_ENCODING.match(text)
    data = text.encode(declared.group(1) if declared else "utf-8")
    errors = []
    for version, store_class in ((1, xliff.xlifffile), (2, xliff2.Xliff2File)):
        try:
            return store_class.parsestring(data), version
        except etree.XMLSyntaxError as exc:
            raise DocumentError(f"not well-formed XML: {exc.msg}") from None
        except (ValueError, AssertionError, StopIteration, LookupError) as exc:
            errors.append(str(exc).splitlines()[0] if str(exc) else "no <file> element")
    root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    name = etree.QName(root).localname
    if name != "xliff":
        raise DocumentError(f"not an XLIFF file: its root element is <{name}>, not <xliff>")
    two = root.get("version", "").startswith("2") or ":2." in (root.nsmap.get(None) or "")
    raise DocumentError(f"an XLIFF file translate-toolkit cannot read: {errors[two]}")


def set_target_language(store, version: int, target: str) -> None:
    """The file's target language, where it names none (XLIFF 1.2: each <file>'s; 2.0: the root's)."""
    if version == 2:
        if not store.gettargetlanguage():
            store.settargetlanguage(target)
        return
    for node in store.document.getroot().iterchildren(store.namespaced("file")):
        if not node.get("target-language"):
            node.set("target-language", target)
