"""Inline markup that a format writes into an html unit to stand for its own inline content, and reads
back from the translation: a wrapper (`<span data-run="3">text</span>`, `<a data-link="1">...</a>`)
around text that keeps its formatting, a link or a paired tag, and an empty marker
(`<span data-run="4" translate="no"></span>`, or `<br data-run="5">` for a line break) for content that
is no text to translate (an image, a tab, a field, a placeholder such as %s). The text layer places
wrappers around the target words aligned to the words they covered and each marker after the target
word aligned to the nearest source word before it (`mt.text.placement`), and never changes attributes:
so a format numbers its pieces in an attribute and finds them again by that number in `read`'s tree.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Union


@dataclass
class Wrapped:
    """A wrapper read back: its tag, attributes (the number the format gave it) and what it holds."""

    tag: str
    attrs: dict[str, str]
    children: list[Piece] = field(default_factory=list)


@dataclass
class Marker:
    """A marker read back (an element kept verbatim, or a `<br>`): its tag and attributes."""

    tag: str
    attrs: dict[str, str]


Piece = Union[str, Wrapped, Marker]


def text(value: str) -> str:
    """Text as it stands in an html unit (escaped)."""
    return html.escape(value, quote=False)


def wrapper(tag: str, name: str, key: int, inner: str) -> str:
    """`<tag name="key">inner</tag>`: text that keeps what the format numbered `key`."""
    return f'<{tag} {name}="{key}">{inner}</{tag}>'


def marker(name: str, key: int, line_break: bool = False) -> str:
    """An empty element the text layer moves with its neighbour word; a `<br>` (a line break, where a
    sentence ends) if `line_break`."""
    return f'<br {name}="{key}">' if line_break else f'<span {name}="{key}" translate="no"></span>'


def read(fragment: str) -> list[Piece]:
    """A translated unit as text, wrappers and markers, in order."""
    from mt.text.markup import parse

    return pieces(parse(fragment, "html"))


def pieces(nodes: list) -> list[Piece]:
    """mt.text.markup's nodes -> pieces: a verbatim element (Raw) or a `<br>` is a marker."""
    import lxml.html

    from mt.text.markup import Element, Raw

    found: list[Piece] = []
    for node in nodes:
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, Raw):
            if node.markup.startswith("<") and not node.markup.startswith("<!"):
                element = lxml.html.fragment_fromstring(node.markup)
                found.append(Marker(element.tag, dict(element.attrib)))
        elif isinstance(node, Element) and node.void:
            found.append(Marker(node.tag, dict(node.attrs)))
        elif isinstance(node, Element):
            found.append(Wrapped(node.tag, dict(node.attrs), pieces(node.children)))
    return found


def number(attrs: dict[str, str], name: str) -> int | None:
    """The number a format gave a piece in attribute `name`, None if it has none (not the format's)."""
    value = attrs.get(name, "")
    return int(value) if value.isdigit() else None
