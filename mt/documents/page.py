"""Whole HTML pages: the text of the body and the `<title>` translated as markup (`mt.text.markup`:
inline elements placed around the aligned words; script, style, code, pre, translate="no" and
class="notranslate" kept as they are), and the attributes people read translated as plain text: `alt`,
`title`, `placeholder`, `aria-label`, a button's `value` (`<input type="submit">`), and the content of
`<meta name="description">`. The `<html>`
element's `lang` (and `xml:lang` if it has one) becomes the target language, with `dir="rtl"` for a
right-to-left one. Every other attribute, comment and element is written back as it was.

The attributes are translated first and written into the page, which is then translated as one
fragment: markup translation never changes an attribute, so they come through as set.
"""

from __future__ import annotations

from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.units import Units
from mt.language_codes import language_tag
from mt.text.markup import Element, MarkupError, Node, parse, write

ATTRIBUTES = frozenset({"alt", "title", "placeholder", "aria-label"})
META = frozenset({"description", "og:title", "og:description", "twitter:title", "twitter:description"})
BUTTONS = frozenset({"submit", "button", "reset"})  # an <input> whose value is the label people read
RTL = frozenset({"ar", "arc", "dv", "fa", "ha", "he", "khw", "ks", "ku", "ps", "sd", "ur", "yi"})


def readable(element: Element) -> list[int]:
    """Indices into `element.attrs` of the values to translate (module docstring)."""
    attrs = dict(element.attrs)
    meta = element.tag == "meta" and (attrs.get("name") or attrs.get("property") or "").lower() in META
    button = element.tag == "input" and (attrs.get("type") or "").lower() in BUTTONS  # its value is its label
    return [
        i
        for i, (name, value) in enumerate(element.attrs)
        if value.strip()
        and (name.lower() in ATTRIBUTES or (meta and name.lower() == "content") or (button and name.lower() == "value"))
    ]


def elements(nodes: list[Node]):
    """Every element of the tree, in document order (verbatim ones are `Raw`: not entered)."""
    for node in nodes:
        if isinstance(node, Element):
            yield node
            yield from elements(node.children)


def set_language(element: Element, target: str) -> None:
    """lang (and xml:lang where present) = target; dir="rtl" for a right-to-left target."""
    attrs = [(k, v) for k, v in element.attrs if k.lower() not in ("lang", "dir")]
    xml_lang = [i for i, (k, _) in enumerate(attrs) if k.lower() == "xml:lang"]
    for i in xml_lang:
        attrs[i] = (attrs[i][0], target)
    attrs.insert(0, ("lang", target))
    if target.split("-")[0].lower() in RTL:
        attrs.insert(1, ("dir", "rtl"))
    element.attrs = attrs


def translate(text: str, units: Units, options: DocumentOptions) -> str:
    """The translated page (module docstring)."""
    if not text.strip():  # nothing to translate (its spaces were written twice, before and after)
        return text
    try:
        nodes = parse(text, "html")
    except MarkupError as exc:
        raise DocumentError(str(exc)) from None
    found = [(element, i) for element in elements(nodes) for i in readable(element)]
    values = units([element.attrs[i][1] for element, i in found], "text")
    for (element, i), value in zip(found, values):
        element.attrs[i] = (element.attrs[i][0], value)
    for element in elements(nodes):
        if element.tag == "html":
            set_language(element, language_tag(options.target))
    before, after = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    return before + units([write(nodes, "html").strip()], "html")[0] + after
