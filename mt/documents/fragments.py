"""Translated fragments made ready to write back into a document: an inline element that came back
around no word (none of its source words aligned to a target word), but held some in the source,
moves around the nearest word
before it among its siblings, else the nearest after it. An emphasis or a link around nothing would be lost to the reader:
Markdown cannot write an empty `**`, and a subtitle's empty `<i></i>` shows nothing.
"""

from __future__ import annotations

import re
from typing import Callable

from mt.text.markup import Element, Node, parse

LAST_WORD = re.compile(r"(\S+)(\s*)$")
FIRST_WORD = re.compile(r"^(\s*)(\S+)")


def has_text(nodes: list[Node]) -> bool:
    """Whether any text under `nodes` is more than spaces."""
    return any((isinstance(n, str) and n.strip()) or (isinstance(n, Element) and has_text(n.children)) for n in nodes)


def empty_in(fragment: str, name: str = "data-t") -> set[str]:
    """The `name` values of the elements of a source fragment that hold no text: they stay empty."""
    found: set[str] = set()

    def walk(nodes: list[Node]) -> None:
        for node in nodes:
            if isinstance(node, Element):
                if name in dict(node.attrs) and not has_text(node.children):
                    found.add(dict(node.attrs)[name])
                walk(node.children)

    walk(parse(fragment, "html"))
    return found


def embrace(nodes: list[Node], empty: Callable[[Element], bool]) -> list[Node]:
    """`nodes` with each element around no text moved around the nearest word before it among its
    siblings, else the nearest after it (module docstring); elements for which `empty(element)` holds
    (literals, markers) stay as they are."""
    out: list[Node] = []
    for i, node in enumerate(nodes):
        if not isinstance(node, Element) or node.void or empty(node):
            out.append(node)
            continue
        node.children = embrace(node.children, empty)
        if has_text(node.children):
            out.append(node)
            continue
        before = next((j for j in range(len(out) - 1, -1, -1) if isinstance(out[j], str) and out[j].strip()), None)
        after = next((j for j in range(i + 1, len(nodes)) if isinstance(nodes[j], str) and nodes[j].strip()), None)
        if before is not None:
            text = str(out[before])
            last = LAST_WORD.search(text)
            assert last is not None
            node.children = [last.group(1), *node.children]
            out[before : before + 1] = [text[: last.start()], node, last.group(2)]
        elif after is not None:
            text = str(nodes[after])
            first = FIRST_WORD.search(text)
            assert first is not None
            node.children = [*node.children, first.group(2)]
            nodes[after] = text[first.end() :]
            nodes.insert(after, node)
            nodes.insert(after, first.group(1))
        else:
            out.append(node)
    return [n for n in out if not (isinstance(n, str) and not n)]
