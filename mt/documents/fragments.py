"""Translated fragments made ready to write back into a document: an inline element that came back
around no word (none of its source words aligned to a target word) takes the word before it, else the
word after it, within its parent. An emphasis or a link around nothing would be lost to the reader:
Markdown cannot write an empty `**`, and a subtitle's empty `<i></i>` shows nothing.
"""

from __future__ import annotations

import re
from typing import Callable

from mt.text.markup import Element, Node

LAST_WORD = re.compile(r"(\S+)(\s*)$")
FIRST_WORD = re.compile(r"^(\s*)(\S+)")


def has_text(nodes: list[Node]) -> bool:
    """Whether any text under `nodes` is more than spaces."""
    return any((isinstance(n, str) and n.strip()) or (isinstance(n, Element) and has_text(n.children)) for n in nodes)


def embrace(nodes: list[Node], empty: Callable[[Element], bool]) -> list[Node]:
    """`nodes` with each element around no text given the word before or after it (module docstring);
    elements for which `empty(element)` holds (literals, markers) stay as they are."""
    out: list[Node] = []
    for i, node in enumerate(nodes):
        if not isinstance(node, Element) or node.void or empty(node):
            out.append(node)
            continue
        node.children = embrace(node.children, empty)
        if has_text(node.children):
            out.append(node)
            continue
        before = out[-1] if out and isinstance(out[-1], str) else ""
        after = nodes[i + 1] if i + 1 < len(nodes) and isinstance(nodes[i + 1], str) else ""
        if (last := LAST_WORD.search(before)) is not None:
            out[-1] = before[: last.start()]
            node.children = [last.group(1), *node.children]
            out += [node, last.group(2)]
        elif (first := FIRST_WORD.search(after)) is not None:
            out += [first.group(1), node]
            node.children = [*node.children, first.group(2)]
            nodes[i + 1] = after[first.end() :]
        else:
            out.append(node)
    return [n for n in out if not (isinstance(n, str) and not n)]
