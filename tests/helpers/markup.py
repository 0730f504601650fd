"""Markup in the tests: what a translated fragment must keep, read back with parsers (lxml, and the
standard library's html.parser for balance): its tags with their attributes, its comments, its text."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def markup_tags(markup: str, fmt: str = "html") -> Counter:
    """The multiset of (tag, attributes) of every element and of ("!--", text) of every comment."""
    import lxml.etree
    import lxml.html

    root = (lxml.etree.fromstring(f"<r>{markup}</r>") if fmt == "xml"
            else lxml.html.fragment_fromstring(markup, create_parent="div"))
    found: Counter = Counter()
    for el in root.iter():
        if el is root:
            continue
        if isinstance(el, lxml.etree._Comment):
            found["!--", el.text] += 1
        else:
            found[el.tag, tuple(sorted(el.attrib.items()))] += 1
    return found


def markup_text(markup: str, fmt: str = "html") -> str:
    """The fragment's text, its tags and comments left out."""
    import lxml.etree
    import lxml.html

    root = (lxml.etree.fromstring(f"<r>{markup}</r>") if fmt == "xml"
            else lxml.html.fragment_fromstring(markup, create_parent="div"))
    return "".join(root.itertext(with_tail=True, tag=lxml.etree.Element if fmt == "xml" else None))


def balanced(markup: str) -> bool:
    """Whether every HTML element that is not void is closed, in order (html.parser reads it)."""
    stack: list[str] = []
    ok = [True]

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in VOID:
                stack.append(tag)

        def handle_endtag(self, tag):
            if not stack or stack.pop() != tag:
                ok[0] = False

    Reader(convert_charrefs=True).feed(markup)
    return ok[0] and not stack
