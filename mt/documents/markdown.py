"""Markdown documents, read by markdown-it-py (CommonMark, with tables and ~~strikethrough~~; front
matter and footnotes found by mdit-py-plugins): the file comes back byte for byte but for the text
people read.

The block tokens' source maps say where each paragraph, heading (ATX or setext), list item, quoted
paragraph and table cell has its inline text; only that text is replaced, so list markers, `>`
prefixes, indentation, `#`s, tables' pipes, blank lines and all else stay as written. Fenced and
indented code, link reference definitions and front matter are not inline text: they are kept.

An inline text with markup becomes an HTML unit (`mt.text.markup`; one without is translated as plain
text): emphasis, strong, strikethrough, links and images are elements that remember their Markdown as
written (the `**` or `__`, a link's `](url "title")` or `][ref]`), placed around the aligned target
words and written back with it; link text and images' alt text are translated, their URLs kept. Inline
code, autolinks, footnote references (`[^1]`, `^[...]`), inline HTML tags (a start and end tag
pair around text is an element) are kept as written, placed as empty elements are. A hard line break
stays a line break. A paragraph of several lines is translated whole; hard-wrapped at a width (as
mt.documents.txt judges a paragraph), its translation is wrapped at it again (`rewrapped`: a line that
would start a list or heading escaped), else written on one line (with its first line's prefix). An HTML block with text is translated as HTML when mt's markup writer gives it back
unchanged (else, an unclosed `<details>` say, it is kept as it is).
"""

from __future__ import annotations

import bisect
import html
import re
import unicodedata
from dataclasses import dataclass, field

from mt import log
from mt.documents.formats import DocumentOptions
from mt.documents.fragments import embrace, empty_in
from mt.documents.txt import wrapped
from mt.documents.units import Units
from mt.text.markup import Element, Node, parse, segments, write
from mt.text.sentences import address_spans, split_at

ESCAPE = re.compile(r"([\\`*_~\[\]<])|&(?=#?\w+;)")  # what Markdown would read as markup (or an entity)
BLOCK_START = re.compile(r"^( *)(?:(\d+)(?=[.)])|(?=[#>+=-]))")  # a line's text that would start a block
OPENING = re.compile(r"<([A-Za-z][\w-]*)[^>]*(?<!/)>$")
SPANNED = (
    "link_open",
    "image",
    "code_inline",
    "html_inline",
    "hardbreak",
    "footnote_ref",
)  # whose source `spanned` records
CLOSING = re.compile(r"</([A-Za-z][\w-]*)\s*>$")
TASK = re.compile(r"\[[ xX]\] ")  # a task list item's box
ENTITY_LIKE = re.compile(r"&(?=#?\w+;)")  # an `&` Markdown would read as an entity's start
EMPHASIS = re.compile(r"\*|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # emphasis marks, in an address
ALERT = re.compile(r"\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]", re.IGNORECASE)  # GitHub's, a quote's first line


@dataclass
class Mark:
    """An inline element's Markdown as written: before and after its text (a literal's whole source)."""

    open: str
    close: str = ""
    literal: bool = False
    spaced: tuple[bool, bool] = (False, False)  # a literal's spaces before and after it in the source


@dataclass
class Place:
    """A text to translate: where it is ([start, end) of the file), its HTML fragment and marks, and
    what it is: "inline" text, a table "cell" (a pipe escaped), a "paragraph" (a character that would
    start a block escaped), an "html" block."""

    start: int
    end: int
    fragment: str
    marks: list[Mark]
    kind: str = "inline"
    # a paragraph hard-wrapped in the source: (its width, its first line's prefix width, the prefix of
    # the lines after it), to wrap its translation at; None: written on one line
    wrap: tuple[int, int, str] | None = None
    # characters the source wrote as references ("\xa0": "&nbsp;"), written so again in the translation
    references: dict[str, str] = field(default_factory=dict)


REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def parser():
    """CommonMark with tables and strikethrough, front matter, and the source span of each link,
    image and code span (`spanned`)."""
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import autolink, backtick, escape, html_inline, image, link, newline
    from mdit_py_plugins.footnote import footnote_plugin
    from mdit_py_plugins.footnote.index import footnote_inline, footnote_ref
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin).use(footnote_plugin)
    rules = (
        ("link", link),
        ("image", image),
        ("backticks", backtick),
        ("autolink", autolink),
        ("newline", newline),
        ("footnote_ref", footnote_ref),
        ("footnote_inline", footnote_inline),
    )
    for name, rule in (*rules, ("escape", escape), ("html_inline", html_inline)):
        md.inline.ruler.at(name, spanned(rule))
    return md


def spanned(rule):
    """An inline rule that records in its token's meta the source it consumed (`span`) and, for a
    link or image, where its label ends (`label`): the Markdown to write back around the translation
    (and, for a hard break, the line it ends)."""

    def recorded(state, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        found = rule(state, silent)
        token = next((t for t in state.tokens[count:] if t.type in SPANNED), None)
        if found and not silent and token is not None:  # (an unmatched backtick run is text: no token)
            token.meta["span"] = (start, state.pos)
            if token.type == "image":
                token.meta["label"] = state.md.helpers.parseLinkLabel(state, start + 1, False)
            elif token.type == "link_open" and token.markup != "autolink":
                token.meta["label"] = state.md.helpers.parseLinkLabel(state, start, True)
        return found

    return recorded


def fragment(children: list, src: str, marks: list[Mark], breaks: list[str]) -> str:
    """An inline's tokens as an HTML fragment: each element a span naming its mark (`data-t`), each
    literal an empty span, each hard break a `<br>` (whose mark is the break as it will be written)."""

    def mark(m: Mark) -> int:
        marks.append(m)
        return len(marks) - 1

    pairs = paired(children)
    parts: list[str] = []
    newlines: list[int] | None = None
    skip = 0
    for i, token in enumerate(children):
        if skip:
            skip -= token.type == "link_close"
            continue
        kind = token.type
        if kind in ("text", "text_special"):
            parts.append(html.escape(token.content, quote=False))
        elif kind == "softbreak":
            parts.append(" ")
        elif kind == "hardbreak":  # written as it was, with the next line's prefix
            if "span" in token.meta:  # the line it ends: newlines before it (found once: a paragraph may hold many)
                newlines = newlines if newlines is not None else [at for at, c in enumerate(src) if c == "\n"]
                line = bisect.bisect_left(newlines, token.meta["span"][0])
            else:
                line = len(breaks)
            written = breaks[line] if line < len(breaks) else "\\\n"
            parts.append(f'<br data-t="{mark(Mark(written))}">')
        elif kind in ("code_inline", "footnote_ref") or (kind == "link_open" and token.markup == "autolink"):
            start, end = token.meta["span"]
            literal = Mark(src[start:end], literal=True, spaced=spaced(src, start, end))
            parts.append(f'<span data-t="{mark(literal)}"></span>')
            skip = kind == "link_open"
        elif kind == "image":
            (start, end), label = token.meta["span"], token.meta["label"]
            k = mark(Mark("![", closing(src, start + 2, label, end)))
            parts.append(
                f'<span data-t="{k}">{fragment(token.children or [], src[start + 2 : label], marks, [])}</span>'
            )
        elif kind == "link_open":
            (start, end), label = token.meta["span"], token.meta["label"]
            parts.append(f'<span data-t="{mark(Mark("[", closing(src, start + 1, label, end)))}">')
        elif kind.endswith("_open"):
            parts.append(f'<span data-t="{mark(Mark(token.markup, token.markup))}">')
        elif kind.endswith("_close"):
            parts.append("</span>")
        elif kind == "html_inline" and i in pairs:
            parts.append(f'<span data-t="{mark(Mark(token.content, children[pairs[i]].content))}">')
        elif kind == "html_inline" and i in pairs.values():
            parts.append("</span>")
        else:  # inline HTML not paired, anything else: kept as written
            start, end = token.meta.get("span", (0, 0))
            literal = Mark(token.content, literal=True, spaced=spaced(src, start, end) if end else (False, False))
            parts.append(f'<span data-t="{mark(literal)}"></span>')
    return "".join(parts)


def closing(src: str, text_start: int, label: int, end: int) -> str:
    """What follows a link's or image's text as written: `](url)`, `][ref]`; a shortcut `[text]` or a
    collapsed `[text][]` reference is named by its text, which the translation changes: it gets its
    reference written out (`][text]`), or it would match no definition and show as brackets."""
    rest = src[label:end]
    return f"][{src[text_start:label]}]" if rest in ("]", "][]") else rest


def spaced(src: str, start: int, end: int) -> tuple[bool, bool]:
    """Whether the source has a space before [start, end), and after it."""
    return start > 0 and src[start - 1].isspace(), end < len(src) and src[end].isspace()


def paired(children: list) -> dict[int, int]:
    """Inline HTML start tags (index) and the end tags that close them at the same depth."""
    pairs: dict[int, int] = {}
    stack: list[tuple[int, str]] = []  # (index, tag name), "" for a Markdown element
    for i, token in enumerate(children):
        if token.type.endswith("_open"):
            stack.append((i, ""))
        elif token.type.endswith("_close"):
            while stack and stack.pop()[1]:
                pass
        elif token.type == "html_inline" and (opening := OPENING.match(token.content)):
            stack.append((i, opening.group(1).lower()))
        elif token.type == "html_inline" and (closing := CLOSING.match(token.content)):
            if stack and stack[-1][1] == closing.group(1).lower():
                pairs[stack.pop()[0]] = i
    return pairs


UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def unblock(text: str) -> str:
    """A line's text escaped where Markdown would read its start as a block: `\\#`, `1986\\.`."""
    return BLOCK_START.sub(lambda m: m.group(1) + (m.group(2) or "") + "\\", text, count=1)


def escaped(text: str) -> str:
    """Text escaped where Markdown would read it as markup, but for its web and mail addresses, written
    as they were (kept out of the translation: `repo\\_name` would be another link where they are
    linked bare)."""
    parts = []
    for before, address in split_at(text, address_spans(text)):
        parts.append(ESCAPE.sub(lambda m: "\\" + m.group() if m.group(1) else "&amp;", before))
        # in an address, only what could start or end emphasis (`*`, a `_` at a word's edge: the
        # author's `\_\_init\_\_`; `repo_name`'s stays)
        parts.append(ENTITY_LIKE.sub("&amp;", EMPHASIS.sub(r"\\\g<0>", address)))
    return "".join(parts)


AS_HTML = {"**": "strong", "__": "strong", "*": "em", "_": "em", "~~": "del", "~": "del"}


def flanking(delimiter: str, before: str, body: str, after: str) -> bool:
    """Whether `delimiter` on both sides of `body`, between the characters `before` and `after` ("" at
    a line's edge), is read as emphasis by CommonMark's flanking rules: the opening one is followed by
    no space and, followed by punctuation, is preceded by a space or punctuation; the closing one
    mirrors it; `_` only at a word's edge. Punctuation next to a letter of a script without spaces
    (Chinese, Japanese) breaks them."""

    def space(c: str) -> bool:
        return not c or c.isspace()

    def mark(c: str) -> bool:
        return bool(c) and unicodedata.category(c)[0] in "PS"

    first, last = body[:1], body[-1:]
    opens = not space(first) and (not mark(first) or space(before) or mark(before))
    closes = not space(last) and (not mark(last) or space(after) or mark(after))
    if delimiter.startswith("_"):  # intraword underscores are text
        opens = opens and (space(before) or mark(before))
        closes = closes and (space(after) or mark(after))
    return opens and closes


def markdown(nodes: list[Node], marks: list[Mark], cell: bool, references: dict[str, str] | None = None) -> str:
    """A translated fragment written back as Markdown: its elements with their marks, its text escaped
    (and, after a hard break, the start of the line), the characters of `references` in its text (not
    its code, addresses or tags) written as the source wrote them ("&nbsp;", not an invisible U+00A0)."""
    parts: list[str] = []
    pad = False  # a literal spaced from the word after it in the source: so in the translation
    for i, node in enumerate(nodes):
        if isinstance(node, str):
            text = escaped(node)
            for character, reference in (references or {}).items():
                text = text.replace(character, reference)
            after_break = i and isinstance(nodes[i - 1], Element) and nodes[i - 1].tag == "br"
            text = unblock(text) if after_break else " " + text if pad and text[:1].isalnum() else text
            parts.append(text.replace("|", "\\|") if cell else text)
            pad = False
        elif isinstance(node, Element) and "data-t" in dict(node.attrs):
            m = marks[int(dict(node.attrs)["data-t"])]
            if node.tag == "br" or m.literal:
                # spaced in the source: so after any word, not only after a letter (`code` after "x."
                # or a link's `)` was glued to it), but not after an opening bracket or quote
                last = parts[-1][-1:] if parts else ""
                glued = m.spaced[0] and last and not last.isspace() and last not in "([{\"'“‘«¿¡/"
                # a cell's literal comes from the cell's text, its `\|` read as `|`: escaped again
                written = UNESCAPED_PIPE.sub(r"\\|", m.open) if cell and m.literal else m.open
                parts.append(" " + written if glued else written)
                pad = m.spaced[1]
                continue
            inner = markdown(node.children, marks, cell, references)
            if not inner.strip() and m.open == m.close:  # an emphasis around nothing: no `****`
                continue
            if m.open == m.close:  # a delimiter: `** a**` is no emphasis, so the spaces go outside
                lead, trail = inner[: len(inner) - len(inner.lstrip(" "))], inner[len(inner.rstrip(" ")) :]
                body = inner.strip(" ")
                before = (parts[-1][-1:] if parts else "") + lead
                following = nodes[i + 1] if i + 1 < len(nodes) else ""
                after = trail or (escaped(following)[:1] if isinstance(following, str) else "a")
                if flanking(m.open, before[-1:], body, after) or m.open not in AS_HTML:
                    parts.append(lead + m.open + body + m.close + trail)
                else:  # written where a delimiter would be read as itself ("**注意：**请": asterisks shown)
                    tag = AS_HTML[m.open]
                    parts.append(f"{lead}<{tag}>{body}</{tag}>{trail}")
            else:
                parts.append(m.open + inner + m.close)
        elif isinstance(node, Element):
            parts.append(markdown(node.children, marks, cell, references))
    return "".join(parts)


def places(lines: list[str], offsets: list[int], tokens: list) -> list[Place]:
    """Each inline text of the document with its place (module docstring); one whose lines are not
    found in the file as the parser read them is left as it is."""
    found: list[Place] = []
    parent, cell_at = None, (-1, 0)  # a row's cells are found left to right
    grandparent = None
    for token in tokens:
        if token.type != "inline":
            grandparent, parent = parent, token
            continue
        if not token.content.strip() or token.map is None:
            continue
        first, content = token.map[0], token.content.split("\n")
        kind = {"th_open": "cell", "td_open": "cell", "paragraph_open": "paragraph"}.get(parent.type if parent else "")
        breaks: list[str] = []
        if kind == "cell":
            line = lines[first]
            since = cell_at[1] if cell_at[0] == first else 0
            spots = [(line.find(c, since), c) for c in (content[0], content[0].replace("|", "\\|"))]
            col, written = next(((s, c) for s, c in spots if s >= 0), (-1, ""))
            if col < 0:
                continue
            cell_at = (first, col + len(written))
            start, end = offsets[first] + col, offsets[first] + col + len(written)
        else:
            content = [part.lstrip() for part in content]  # a line's indent is its prefix's; the text ends it
            cols = [lines[first + i].rfind(part) if first + i < len(lines) else -1 for i, part in enumerate(content)]
            if min(cols) < 0:
                continue
            if (
                grandparent is not None
                and grandparent.type == "blockquote_open"
                and ALERT.fullmatch(content[0].strip())
            ):
                # GitHub's alert: its marker's line is the quote's prefix, kept as written (it was
                # escaped and joined to the text, no alert any more); the text starts on the next line
                children = token.children or []
                if len(content) < 2 or len(children) < 3 or children[1].type != "softbreak":
                    continue
                token.children, token.content = children[2:], token.content.split("\n", 1)[1]
                first, content, cols = first + 1, content[1:], cols[1:]
            start, end = offsets[first] + cols[0], offsets[first + len(content) - 1] + cols[-1] + len(content[-1])
            if grandparent is not None and grandparent.type == "list_item_open" and TASK.match(content[0]):
                start += 4  # a task list's box ("- [ ] ", GitHub's) is the item's prefix, kept as written
                head = (token.children or [None])[0]
                if head is None or head.type != "text" or not TASK.match(head.content):
                    continue
                head.content = head.content[4:]
            for i, part in enumerate(content[:-1]):  # a hard break written as it was, the next line's prefix after it
                written = part[len(part.rstrip(" ")) :] if part.endswith("  ") else "\\"
                breaks.append(written + "\n" + lines[first + i + 1][: cols[i + 1]])
        marks: list[Mark] = []
        unit = fragment(token.children or [], token.content, marks, breaks)
        references = {}  # characters other than ASCII written as references (&amp; and the like: escaped)
        for match in REFERENCE.finditer(UNBREAKABLE.sub("", token.content)):  # (not in code, tags, URLs)
            character = html.unescape(match.group())
            if len(character) == 1 and not character.isascii():
                references.setdefault(character, match.group())
        wrap = None
        if kind == "paragraph" and len(content) > 1 and not any(c.type == "hardbreak" for c in token.children or []):
            whole = lines[first : first + len(content)]
            if wrapped(whole):
                wrap = (max(len(line.rstrip()) for line in whole), start - offsets[first], whole[1][: cols[1]])
        found.append(Place(start, end, unit, marks, kind or "inline", wrap, references))
    return found


# Where a line of Markdown may not be broken: in a code span, an inline HTML tag or autolink, a link's
# destination and title
FOOTNOTE_DEFINITION = re.compile(r"\[\^[^\]]+\]:")
UNBREAKABLE = re.compile(r"(`+).*?(?<!`)\1(?!`)|<[^<>]*>|\]\([^()]*(?:\([^()]*\)[^()]*)*\)")


def rewrapped(text: str, width: int, first: int, prefix: str) -> str:
    """A paragraph's translation (one line) wrapped at the source's `width` (its first line after a
    prefix `first` wide, the others after `prefix`), broken only at single spaces outside code, tags and
    link destinations, and never before what would start a block no backslash escapes (`<div>`, an
    HTML comment, a footnote's definition `[^1]:`); a line that would start another block escaped
    (`unblock`)."""
    kept = [range(m.start(), m.end()) for m in UNBREAKABLE.finditer(text)]
    spots = [
        i
        for i, char in enumerate(text)
        if char == " "
        and text[i - 1 : i] not in ("", " ")
        and text[i + 1 : i + 2] not in ("", " ", "<")
        and not FOOTNOTE_DEFINITION.match(text, i + 1)
        and not any(i in span for span in kept)
    ]
    lines, start, room = [], 0, width - first
    while len(text) - start > room:
        after = bisect.bisect_right(spots, start)  # the spots past the line's start
        fits = bisect.bisect_right(spots, start + room)
        if after == len(spots):
            break
        cut = spots[fits - 1] if fits > after else spots[after]  # a word wider than the room: alone
        lines.append(text[start:cut])
        start, room = cut + 1, width - len(prefix)
    lines.append(text[start:])
    return "\n".join([lines[0], *(prefix + unblock(line) for line in lines[1:])])


TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)")


def html_blocks(text: str, offsets: list[int], tokens: list, first_line: int = 0) -> list[Place]:
    """The top-level HTML blocks with text whose tags mt's markup writer gives back as they were (in
    its own spelling: `<P>` as `<p>`, `<img />` as `<img>`, attributes in double quotes); a block it
    would change (one that opens an element a later block closes, `<details>` around Markdown) is
    left as it is, with a warning."""
    found = []
    for token in tokens:
        if token.type != "html_block" or token.level or token.map is None:
            continue
        start, end = offsets[token.map[0]], offsets[token.map[1]] - 1
        block = text[start:end]
        nodes = parse(block, "html")
        if not segments(nodes) or token.content.rstrip("\n") != block:
            continue
        if tags(write(nodes, "html")) == tags(block):
            found.append(Place(start, end, block, [], "html"))
        elif any(segment.plain.strip() for segment in segments(nodes)):
            log.warn(
                f"line {first_line + token.map[0] + 1}: an HTML block left untranslated: its elements do not close within it "
                "(Markdown between its tags)"
            )
    return found


def tags(html: str) -> list[tuple[str, str]]:
    """The start and end tags of an HTML text, in order, their names in lower case."""
    return [(slash, name.lower()) for slash, name in TAG.findall(html)]


# TOML front matter (Hugo's, Zola's), which the front matter plugin (YAML's `---` only) would read as text
TOML_FRONT_MATTER = re.compile(r"\A\+\+\+[ \t]*\n.*?\n\+\+\+[ \t]*(?:\n|\Z)", re.DOTALL)


def unreferenced(text: str, env: dict, first_line: int = 0) -> None:
    """A warning for each footnote nothing refers to: the footnote plugin drops it (renderers show none),
    so it is left as it is, untranslated."""
    for key, found in env.get("footnotes", {}).get("refs", {}).items():
        if found < 0:
            label = key[1:]
            where = re.search(rf"(?m)^ {{0,3}}\[\^{re.escape(label)}\]:", text)
            line = f"line {first_line + text.count(chr(10), 0, where.start()) + 1}: " if where else ""
            log.warn(f"{line}footnote [^{label}] is referred to nowhere: left untranslated (renderers do not show it)")


def translate(text: str, units: Units, options: DocumentOptions) -> str:
    """The translated Markdown (module docstring)."""
    front = TOML_FRONT_MATTER.match(text)  # kept as it is, as YAML's (the warnings count the file's lines)
    head = front.group() if front else ""
    return head + _translate(text[len(head) :], units, head.count("\n"))


def _translate(text: str, units: Units, first_line: int) -> str:
    """The Markdown after any TOML front matter (`first_line`: the lines before it) translated."""
    env: dict = {}
    tokens = parser().parse(text, env)
    unreferenced(text, env, first_line)
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    found = sorted(
        places(lines, offsets, tokens) + html_blocks(text, offsets, tokens, first_line), key=lambda p: p.start
    )
    plain = [i for i, p in enumerate(found) if not p.marks and p.kind != "html"]  # no markup: searched as text
    searched_as_text = set(plain)
    marked = [i for i in range(len(found)) if i not in searched_as_text]
    translated: list[str] = [""] * len(found)
    for indices, fmt in ((plain, "text"), (marked, "html")):
        sources = [html.unescape(found[i].fragment) if fmt == "text" else found[i].fragment for i in indices]
        for i, out in zip(indices, units(sources, fmt) if indices else []):
            translated[i] = html.escape(out, quote=False) if fmt == "text" else out
    parts, at = [], 0
    for place, out in zip(found, translated):
        if place.kind == "html":
            written = out
        else:
            marks, empty = place.marks, empty_in(place.fragment)
            nodes = embrace(parse(out, "html"), lambda e: e.tag == "br" or dict(e.attrs).get("data-t", "") in empty)
            written = markdown(nodes, marks, place.kind == "cell", place.references).strip()
        if place.kind == "paragraph":
            written = unblock(written)
            if place.wrap is not None and "\n" not in written:
                written = rewrapped(written, *place.wrap)
        parts += [text[at : place.start], written]
        at = place.end
    return "".join(parts) + text[at:]
