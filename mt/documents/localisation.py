"""Localisation files through translate-toolkit: XLIFF 1.2 and 2.0 (.xlf, .xliff) and Gettext PO (.po).

Each unit's source is translated into its target; everything else (IDs, notes, contexts, flags,
locations, the header, obsolete entries) is kept. A unit that already has a translation (a non-empty
target or msgstr; not an XLIFF target whose state says it is none) is left alone unless
`DocumentOptions.retranslate` (fuzzy PO entries too, counted in a warning); one that mt translated is marked
for review: a PO entry `fuzzy` (msgfmt leaves fuzzy entries out of the compiled catalogue until a
translator clears the flag), an XLIFF 1.2 target state="needs-review-translation" with
state-qualifier="leveraged-mt", an XLIFF 2.0 segment state="translated" (translated, not reviewed).
The target language (PO Language, XLIFF target-language or trgLang) is set where the file has none.

A PO entry with a plural: msgid gives msgstr[0] and msgid_plural msgstr[1] to msgstr[nplurals-1],
nplurals being the header's Plural-Forms (written from the target language's default, translate-toolkit's
table, where the header has none); a language of one form takes msgid_plural's translation.

Placeholders, tags and XLIFF's inline elements come back exactly once (`mt.documents.placeholders`),
and a PO message's keyboard accelerator (`&File`, `Save _As`) is kept on the translation (`accelerator`).
"""

from __future__ import annotations

import re
from typing import Any

from mt import log
from mt.documents.encoding import DECLARED
from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.placeholders import XML_SPACE, Protected, placeholders
from mt.documents.units import Units
from mt.language_codes import language_tag

REVIEW_1 = {"state": "needs-review-translation", "state-qualifier": "leveraged-mt"}  # on an XLIFF 1.2 target
REVIEW_2 = "translated"  # an XLIFF 2.0 segment's state
MAX_PLURALS = 6  # gettext's largest plural families (Arabic, Welsh) have 6 forms
DECLARED_ENCODING = DECLARED["xliff"]  # an XML declaration's encoding
XML_DECLARATION = re.compile(r"\A\s*<\?xml\b.*?\?>", re.DOTALL)
PROLOG_NODE = re.compile(r"\s*(?:<!--.*?-->|<\?.*?\?>|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>)", re.DOTALL)


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
    check_target_language(store.parseheader().get("Language"), options.target, "its header's Language")
    pattern = placeholders()
    nplurals, plural = plural_forms(store, language_tag(options.target).replace("-", "_"))
    todo: list[tuple[Any, list[Protected]]] = []
    fuzzy_kept = 0
    for unit in store.units:
        if unit.isheader() or unit.isobsolete() or not str(unit.source):
            continue
        if any(getattr(unit.target, "strings", [unit.target])) and not options.retranslate:
            fuzzy_kept += unit.isfuzzy()
            continue
        sources = unit.source.strings[:2] if unit.hasplural() else [str(unit.source)]
        protected, keys = [], []
        for source in sources:
            key = accelerator(source, pattern)
            p = Protected(pattern)
            p.html = p.text(source if key is None else key[2])
            protected.append(p)
            keys.append(key)
        todo.append((unit, protected, keys))
    answers = iter(ask(units, [p for _, protected, _ in todo for p in protected]))
    plurals_used = False
    for unit, protected, keys in todo:
        found = [
            p.restore(next(answers)) if key is None else with_accelerator(p.restore(next(answers)), *key[:2], pattern)
            for p, key in zip(protected, keys)
        ]
        if unit.hasplural():
            plurals_used = True
            unit.target = multistring(found[:1] + found[1:] * (nplurals - 1) if nplurals > 1 else found[1:])
        else:
            unit.target = found[0]
        unit.markfuzzy(True)
    if todo and not store.parseheader().get("Language"):
        # a file without a header gets translate-toolkit's template, whose charset would be "CHARSET"
        written = (
            {} if store.header() else {"Content_Type": "text/plain; charset=UTF-8", "Content_Transfer_Encoding": "8bit"}
        )
        store.updateheader(add=True, Language=language_tag(options.target).replace("-", "_"), **written)
    if plurals_used and plural is not None:
        store.updateheaderplural(nplurals, plural)
    if fuzzy_kept:  # a translator's draft (msgmerge's guess, say): theirs to review, but not silently
        log.warn(
            f"{fuzzy_kept} fuzzy entr{'y' if fuzzy_kept == 1 else 'ies'} kept as written (msgfmt leaves them out "
            "until reviewed); --retranslate translates them too"
        )
    return bytes(store).decode(store.encoding)


# A menu's or a button's keyboard accelerator: "&File", "Save &As", "<b>&Help</b>", "E&xit" (Qt, Windows),
# "Save _As" (GTK): the marker before a letter or digit, at a word's start or, "&", inside a word before a
# small letter; not "&amp;" (an entity), "&&", "R&D", "Q&A", "file_name", "target=_blank", "$_POST", "@_x"
ACCELERATOR = re.compile(r"(?:(?<![\w&=$@])[&_]|(?<=[^\W\d_])&(?=[^\W\d_A-Z]))(?!\w+;)(?=[^\W_])")


def accelerator(source: str, protected: re.Pattern) -> tuple[str, str, str] | None:
    """A message's one accelerator: (its marker, the letter after it, the message without the
    marker), None where it has none, more than one, or a second "_" outside its placeholders
    (`protected`: Markdown's `_emphasis_`). The model read "&File" as a word and dropped the marker:
    the menu lost its key."""
    bare = protected.sub(lambda m: " " * len(m.group()), source)  # its placeholders' marks are theirs
    found = list(ACCELERATOR.finditer(bare))
    if len(found) != 1 or (bare[found[0].start()] == "_" and bare.count("_") > 1):
        return None
    at = found[0].start()
    return source[at], source[at + 1], source[:at] + source[at + 1 :]


def with_accelerator(translation: str, marker: str, letter: str, protected: re.Pattern) -> str:
    """The translation with the marker back: before a word that starts with the same letter, else
    before that letter anywhere, else before its first letter or digit (a translator reviews it:
    the entry is fuzzy), never inside a placeholder or tag (`protected`); as it is where the model
    kept a marker itself."""
    inside = [m.span() for m in protected.finditer(translation)]

    def free(k: int) -> bool:
        return not any(a <= k < b for a, b in inside)

    if any(free(m.start()) for m in re.finditer(re.escape(marker) + r"(?!\w+;)[^\W_]", translation)):
        return translation  # ("Druck&vorschau": within a word too)
    folded = translation.casefold()
    letters = [m.start() for m in re.finditer(r"[^\W_]", translation) if free(m.start())]
    starts = [k for k in letters if k == 0 or not translation[k - 1].isalnum()]
    at = next((k for k in starts if folded[k] == letter.casefold()), None)
    at = at if at is not None else next((k for k in letters if folded[k] == letter.casefold()), None)
    at = at if at is not None else next(iter(letters), None)
    return translation if at is None else translation[:at] + marker + translation[at:]


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
    except (AttributeError, TypeError, IndexError, KeyError) as exc:  # the parser's own faults on odd entries
        raise DocumentError(f"not a PO file translate-toolkit can read ({type(exc).__name__}: {exc})") from None
    return store


def plural_forms(store, target: str) -> tuple[int, str | None]:
    """nplurals from the header, or the target language's (with its plural expression, to write)."""
    from translate.lang import factory

    nplurals, _ = store.getheaderplural()
    if nplurals is not None and str(nplurals).isdigit() and int(nplurals) > 0:
        if int(nplurals) > MAX_PLURALS:  # each plural entry gets as many copies: a small file, any memory
            raise DocumentError(f"Plural-Forms: nplurals={nplurals}: no language has more than {MAX_PLURALS}")
        return int(nplurals), None
    language = factory.getlanguage(target)
    return (language.nplurals or 2), (language.pluralequation or "(n != 1)")


def translatable(unit) -> bool:
    """Whether an XLIFF unit is to be translated: its own translate="no", else its nearest enclosing
    <group>'s (2.0's <file> too), decides (translate-toolkit reads the unit's alone)."""
    element = unit.xmlelement
    while element is not None:
        value = element.get("translate")
        if value is not None:
            return value != "no"
        element = element.getparent()
    return unit.istranslatable()


def translate_xliff(text: str, units: Units, options: DocumentOptions) -> str:
    """An XLIFF file translated (module docstring)."""
    store, version = read_xliff(text)
    if version == 2:
        check_target_language(store.gettargetlanguage(), options.target, "its trgLang")
    else:
        for node in store.document.getroot().iterchildren(store.namespaced("file")):
            check_target_language(node.get("target-language"), options.target, "a <file>'s target-language")
    pattern = placeholders()
    todo: list[tuple[Any, Any, Protected]] = []  # (unit, the segment's element: source or a seg-source mrk, ...)
    for unit in store.units:
        source, target = unit.get_source_dom(), unit.get_target_dom()
        if not translatable(unit) or source is None or not "".join(source.itertext()).strip():
            continue
        if holds_translation(unit, target, version) and not options.retranslate:
            continue
        for element in segmented(unit) if version == 1 else [source]:
            p = Protected(pattern, wrapped=not space_preserved(element))
            p.html = p.element(element)
            todo.append((unit, element, p))
    translations = ask(units, [p for _, _, p in todo])
    marks: dict[int, Any] = {}  # a seg-source mrk's id -> its copy in the target
    for unit in {id(unit): unit for unit, _, _ in todo}.values():  # each once (units are not hashable)
        target = unit.get_target_dom()
        if target is None:
            unit.settarget("")
            target = unit.get_target_dom()
            laid_out_as_source(target)
        for child in list(target):
            target.remove(child)
        target.text = None
        if version == 1:
            marks.update(copy_seg_source(unit, target))
        if version == 2:
            unit.xmlelement.set("state", REVIEW_2)
        else:
            for name, value in REVIEW_1.items():
                target.set(name, value)
            if unit.xmlelement.get("approved") == "yes":
                unit.xmlelement.set("approved", "no")
    for (unit, element, p), translated in zip(todo, translations):
        into = marks.get(id(element), unit.get_target_dom())
        if into is not unit.get_target_dom():  # a segment's mrk, a copy of seg-source's: its text replaced
            for child in list(into):
                into.remove(child)
            into.text = None
        p.restore(translated, into)
    if todo:
        set_target_language(store, version, language_tag(options.target))
    return serialized(store, text)


def space_preserved(element) -> bool:
    """Whether the XML text of `element` keeps its whitespace as written (xml:space="preserve" on it or
    the nearest ancestor that says): else a line break in it is the writer's layout, as a space is."""
    while element is not None:
        value = element.get(XML_SPACE)
        if value is not None:
            return value == "preserve"
        element = element.getparent()
    return False


def laid_out_as_source(target) -> None:
    """A target mt added right after its source, on a line of its own with the source's indent where
    the source has one (it was written on the source's line, glued to what came after it)."""
    source = target.getprevious()
    if (
        source is None
        or not isinstance(source.tag, str)
        or source.tag.rpartition("}")[2] not in ("source", "seg-source")
    ):
        return
    before = source.getprevious().tail if source.getprevious() is not None else source.getparent().text
    if before and "\n" in before and not before.strip() and source.tail and not source.tail.strip():
        target.tail, source.tail = source.tail, before


def segments_of(unit) -> tuple[Any, list]:
    """An XLIFF 1.2 unit's `<seg-source>` (None without one) and its `<mrk mtype="seg">` segments."""
    seg_source = unit.xmlelement.find(unit.namespaced("seg-source"))
    if seg_source is None:
        return None, []
    return seg_source, [m for m in seg_source.iter(unit.namespaced("mrk")) if m.get("mtype") == "seg"]


def segmented(unit) -> list:
    """What of an XLIFF 1.2 unit is translated: the segments of its `<seg-source>` that hold text (as
    Trados, memoQ and Okapi write units they have segmented), else its source whole."""
    _, marks = segments_of(unit)
    if not marks:
        return [unit.get_source_dom()]
    return [m for m in marks if "".join(m.itertext()).strip()]


def copy_seg_source(unit, target) -> dict[int, Any]:
    """A segmented unit's target made a copy of its `<seg-source>` (its text, inline elements and every
    segment, each `<mrk>` with its mid: what CAT tools merge), and put after it, where XLIFF 1.2's order
    wants it; each seg-source segment's id -> its copy, whose text the translation replaces."""
    import copy

    seg_source, marks = segments_of(unit)
    if not marks:
        return {}
    element = unit.xmlelement
    if element.index(target) < element.index(seg_source):
        element.remove(target)
        seg_source.addnext(target)
    target.text = seg_source.text
    for child in seg_source:
        target.append(copy.deepcopy(child))  # with its tail
    copies = [m for m in target.iter(unit.namespaced("mrk")) if m.get("mtype") == "seg"]
    return {id(mark): made for mark, made in zip(marks, copies)}


NOT_TRANSLATED_1 = {"new", "needs-translation"}  # XLIFF 1.2 target states: its text is no translation (a copy)


def holds_translation(unit, target, version: int) -> bool:
    """Whether a unit's target is a translation to keep: not empty, and not marked as none (1.2's
    state new or needs-translation, 2.0's segment state initial, as editors mark a copy of the source)."""
    # text, or an element that is no empty segment (a CAT tool's pre-segmented target of empty mrks is none)
    holds = "".join(target.itertext()).strip() if target is not None else ""
    if target is None or not (holds or any(not str(child.tag).endswith("}mrk") for child in target)):
        return False
    if version == 2:
        return unit.xmlelement.get("state") != "initial"
    return target.get("state") not in NOT_TRANSLATED_1


def serialized(store, text: str) -> str:
    """The store's XML as text (the driver encodes it as the file was), written by lxml as it was read:
    translate-toolkit's writer indents the whole tree anew (spaces went into mixed content: between a
    seg-source's segments). The declaration names the store's encoding, as translate-toolkit's does.
    What comes before the root element (comments, a doctype) keeps the line breaks it had in `text`,
    which lxml leaves out."""
    from lxml import etree

    tree = etree.tostring(store.document, encoding="unicode")
    read = text[declaration.end() :] if (declaration := XML_DECLARATION.match(text)) else text
    theirs, mine = read[: _root_start(read)], tree[: _root_start(tree)]
    if mine and _packed(theirs) == _packed(mine):
        tree = theirs.lstrip() + tree[len(mine) :]
    standalone = getattr(store.document, "docinfo", None) and store.document.docinfo.standalone
    said = ' standalone="yes"' if standalone else ""  # kept as declared (lxml reads no declaration as "no")
    declaration = f'<?xml version="1.0" encoding="{store.encoding}"{said}?>\n'
    return declaration + tree + ("" if tree.endswith("\n") else "\n")


def _root_start(xml: str) -> int:
    """Where the root element's start tag begins: past the comments, processing instructions and
    doctype before it."""
    start = 0
    while found := PROLOG_NODE.match(xml, start):
        start = found.end()
    return start + len(xml[start:]) - len(xml[start:].lstrip())


def _packed(prolog: str) -> str:
    return re.sub(r">\s+<", "><", prolog.strip())


def read_xliff(text: str) -> tuple[Any, int]:
    """translate-toolkit's XLIFF store of the text (1.2, else 2.0) and its version's major number."""
    from lxml import etree
    from translate.storage import xliff, xliff2

    declared = DECLARED_ENCODING.match(text)
    name = declared.group(1) if declared else "utf-8"
    try:
        data = text.encode(name)
    except LookupError:
        raise DocumentError(f"its XML declaration names the encoding {name!r}, which is not one Python knows") from None
    except UnicodeEncodeError as exc:
        raise DocumentError(
            f"its XML declaration says {name}, but it has {exc.object[exc.start : exc.end]!r}, which {name} "
            "does not write: the file's bytes are in another encoding; correct the declaration"
        ) from None
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


OLD_CODES = {"pb": "pt", "iw": "he", "in": "id", "ji": "yi", "no": "nb", "tl": "fil", "jw": "jv"}  # -> ISO 639's


def check_target_language(named: str | None, target: str, where: str) -> None:
    """Refuse a file that names another target language than the translation's: its targets (and a
    PO file's plural forms, which are its language's) would be written in one language under another's
    name. Regional variants of one language are the same ("en-US" for en, "pt_BR" for pb); Chinese in
    traditional characters (zh-Hant, zh-TW, zh-HK: LibreTranslate's zt) is not the simplified (zh)."""
    if not named or not named.strip():
        return

    def base(code: str) -> str:
        parts = code.strip().replace("_", "-").lower().split("-")
        if parts[0] == "zh" and any(part in ("hant", "tw", "hk", "mo") for part in parts[1:]):
            return "zt"
        return OLD_CODES.get(parts[0], parts[0])

    if base(named) != base(target):
        raise DocumentError(
            f"{where} is {named.strip()!r}, not {target!r}, the language it would be translated into: "
            "translate it with a model into that language, or change the file"
        )


def set_target_language(store, version: int, target: str) -> None:
    """The file's target language, where it names none (XLIFF 1.2: each <file>'s; 2.0: the root's)."""
    if version == 2:
        if not store.gettargetlanguage():
            store.settargetlanguage(target)
        return
    for node in store.document.getroot().iterchildren(store.namespaced("file")):
        if not node.get("target-language"):
            node.set("target-language", target)
