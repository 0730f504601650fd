"""Subtitle cues translated as sentences and spread back over their cues (`mt.documents.subtitles`
reads and writes the files).

A sentence often runs over several cues; translated cue by cue it would come out as fragments. So
consecutive cues are grouped until a cue's text ends a sentence (. ! ? … or ♪, a closing quote or
bracket after them), the gap to the next cue is over 2 s, or the group has 5 cues or 300 characters.
A group is one HTML unit (a cue alone without inline tags: plain text): its cues' texts joined by
spaces, with an empty marker `<span data-cue="k"></span>` at each cue boundary, which the markup
translation places right after the target word aligned to the last source word before the boundary;
the translation is cut at the markers. A cue that would come out without a word (the markers out of
place, or the target shorter), and its group with it, is cut instead at the word boundaries nearest
the source cues' proportions of the group's characters, each cue at least one word while the
translation has words enough. A dialogue cue (every line opens with a dash, or with a voice tag
`<v Name>`; or a line after the first opens a turn of its own: a dash, a speaker's `NAME:`, a sound
`[...]` or `(...)`, a song's ♪; or the first line is a sound alone) keeps its lines: each is
translated alone. A song's notes (♪, or # between spaces) around a cue's text stay around its
translation. A cue without a letter or digit (blank, ♪) is left as it is.

Inline tags (<i>, <b>, <u>, <font ...>, VTT's <c.class>, <v Speaker>, <lang>, <ruby>) are inline
markup placed around the aligned target words; a tag around a cue's whole text (an italic cue, a
voice) stays around the cue's whole translation, as do a leading {\\an8}-style code and a dialogue
line's dash; VTT's timestamps, <rt> ruby text and stray end tags are kept as they are, placed as an
empty element is. An element cut by a marker stays in the cue it came from (or where most of its
translation went), so that each tag is written once; one the translation left around no word takes
the nearest word (`mt.documents.fragments`). Each cue's translation is wrapped again to balanced
lines of at most 42 characters (or its longest source line, if longer), on at most as many lines as
the source cue had, or 2: longer lines when the text would need more.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from mt.documents.fragments import embrace, empty_in
from mt.documents.units import Units
from mt.text.markup import Element, Node, parse

# a cue text's tag (a name after `<` or `</`, or a VTT timestamp), or an {\an8}-style code (kept); not
# "5 < 6 and 7 > 2", which is text
TAG = re.compile(r"</?[A-Za-z][^<>\n]*>|<\d[\d:.]*>|\{\\[^{}\n]*\}")
NAME = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)")
SENTENCE_END = re.compile(r"[.!?…。！？♪][\"'”’»)\]]*$")
DASH = re.compile(r"[-–—]\s*")
# What opens a line of its own in a cue: a speaker's dash, a name ("JOHN: "), a sound ("[DOOR SLAMS]",
# "(laughs)"), a song's note; a cue with such a line after its first keeps its lines apart
TURN = re.compile(r"[-–—]|[A-Z][A-Z0-9 .'-]*:\s|\[[^\]]*\]|\([^)]*\)|[♪♫]|#\s")
SOUND = re.compile(r"\s*(?:\[[^\]]*\]|\([^)]*\))\s*")  # a line that is a sound alone: "[DOOR SLAMS]"
# Chinese and Japanese are written without spaces: a line may break between any two of their
# characters, but not before a closing mark or small kana, nor after an opening mark (kinsoku)
UNSPACED = re.compile(
    r"[\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff"
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u3000-\u303f\uff00-\uffef]"
)
NO_BREAK_BEFORE = set(
    "、。，．・：；？！）」』】〕〉》〙〗ー々ぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ…‥,.:;?!)]}”’%"
)
NO_BREAK_AFTER = set("（「『【〔〈《〘〖([{“‘")
Word = tuple[str, int, bool]  # a word as written, its width in columns, whether it follows the one before with no space
# A song's notes around a cue's text (SDH marks lyrics so): kept around its translation, not read
NOTES_BEFORE, NOTES_AFTER = re.compile(r"(?:[♪♫]+|#+(?=\s))\s*"), re.compile(r"\s*(?:[♪♫]+|(?<=\s)#+)$")
GAP, MAX_CUES, MAX_CHARS = 2.0, 5, 300  # a group ends past a 2 s gap, 5 cues or 300 characters
WIDTH, MIN_LINES = 42, 2  # a cue's lines: at most 42 characters (or its longest), its count of lines or 2

Token = tuple[str, Any]  # ("text", str), ("open" | "close" | "lit", tag index), ("mark", k)


@dataclass(frozen=True)
class Cue:
    """A cue's text as written (its lines joined by "\\n") and its times in seconds."""

    text: str
    start: float
    end: float


@dataclass
class Tag:
    """An inline tag of a cue as written: its start tag (a literal's whole text) and end tag ("" when
    the cue's end closes it); `cue`: the piece of the group it came from."""

    open: str
    name: str = ""
    close: str = ""
    literal: bool = False
    cue: int = 0


@dataclass
class Piece:
    """What one cue (or one line of a dialogue cue) gives its group: its text's tokens inside the tags
    that wrap all of it, those tags as written (`prefix`, `suffix`), and its lines' width and count."""

    tokens: list[Token]
    prefix: list[str]
    suffix: list[str]
    width: int
    lines: int


def visible(text: str, vtt: bool) -> str:
    """A cue text without its tags (VTT's character references read)."""
    bare = TAG.sub("", text)
    return html.unescape(bare) if vtt else bare


def tokenize(text: str, tags: list[Tag], cue: int, vtt: bool) -> list[Token]:
    """The tokens of a cue's text; its tags appended to `tags` (an unclosed tag closes at the end)."""
    tokens: list[Token] = []
    stack: list[int] = []
    at = 0
    while (match := TAG.search(text, at)) is not None:
        if match.start() > at:
            plain = text[at : match.start()]
            tokens.append(("text", (html.unescape(plain) if vtt else plain).replace("\n", " ")))
        raw, end = match.group(), match.end()
        name = NAME.match(raw)
        if name and name.group(2).lower() == "rt" and not name.group(1) and "</rt>" in text[end:].lower():
            end = text.lower().index("</rt>", end) + len("</rt>")  # ruby text: kept whole
            name = None
            raw = text[match.start() : end]
        opened = [k for k in stack if name and tags[k].name == name.group(2).lower()]
        if name and not name.group(1):
            stack.append(len(tags))
            tokens.append(("open", len(tags)))
            tags.append(Tag(raw, name.group(2).lower(), cue=cue))
        elif name and opened:
            while stack[-1] != opened[-1]:
                tokens.append(("close", stack.pop()))
            tags[stack[-1]].close = raw
            tokens.append(("close", stack.pop()))
        else:  # a timestamp, a code, ruby text, an end tag that closes nothing
            tokens.append(("lit", len(tags)))
            tags.append(Tag(raw, literal=True, cue=cue))
        at = end
    if at < len(text):
        tokens.append(("text", (html.unescape(text[at:]) if vtt else text[at:]).replace("\n", " ")))
    tokens += [("close", k) for k in reversed(stack)]
    return tokens


def unwrap(tokens: list[Token], tags: list[Tag], dialogue: bool) -> tuple[list[Token], list[str], list[str]]:
    """The tokens inside the tags that wrap the whole text, and those tags (with leading codes and a
    dialogue line's dash) as written before and after it."""
    prefix: list[str] = []
    suffix: list[str] = []
    while True:
        while tokens and tokens[0][0] == "text" and not tokens[0][1].strip():
            tokens = tokens[1:]
        while tokens and tokens[-1][0] == "text" and not tokens[-1][1].strip():
            tokens = tokens[:-1]
        if tokens and tokens[0][0] == "lit":
            prefix.append(tags[tokens[0][1]].open)
            tokens = tokens[1:]
        elif tokens and tokens[0][0] == "open" and tokens[-1] == ("close", tokens[0][1]):
            tag = tags[tokens[0][1]]
            prefix.append(tag.open)
            suffix.insert(0, tag.close)
            tokens = tokens[1:-1]
        else:
            break
    if dialogue and tokens and tokens[0][0] == "text" and (dash := DASH.match(tokens[0][1].lstrip())):
        text = tokens[0][1].lstrip()
        prefix.append(text[: dash.end()])
        tokens = [("text", text[dash.end() :]), *tokens[1:]]
    if tokens and tokens[0][0] == "text" and (notes := NOTES_BEFORE.match(tokens[0][1].lstrip())):
        text = tokens[0][1].lstrip()
        prefix.append(text[: notes.end()])
        tokens = [("text", text[notes.end() :]), *tokens[1:]]
    if tokens and tokens[-1][0] == "text" and (notes := NOTES_AFTER.search(tokens[-1][1].rstrip())):
        text = tokens[-1][1].rstrip()
        suffix.insert(0, text[notes.start() :])
        tokens = [*tokens[:-1], ("text", text[: notes.start()])]
    return tokens, prefix, suffix


def fragment(tokens: list[Token]) -> str:
    """The tokens as an HTML fragment: each tag a span naming it (`data-t`), a literal an empty one."""
    parts = []
    for kind, value in tokens:
        if kind == "text":
            parts.append(html.escape(value, quote=False))
        elif kind == "open":
            parts.append(f'<span data-t="{value}">')
        elif kind == "close":
            parts.append("</span>")
        elif kind == "lit":
            parts.append(f'<span data-t="{value}"></span>')
    return "".join(parts)


def flat(nodes: list[Node], tags: list[Tag]) -> list[Token]:
    """A translated fragment's nodes back as tokens: the markers, the tags' spans and line breaks."""
    tokens: list[Token] = []
    for node in nodes:
        if isinstance(node, str):
            tokens.append(("text", node))
        elif isinstance(node, Element):
            attrs = dict(node.attrs)
            if "data-cue" in attrs:
                tokens.append(("mark", int(attrs["data-cue"])))
            elif "data-t" in attrs and tags[int(attrs["data-t"])].literal:
                tokens.append(("lit", int(attrs["data-t"])))
            elif "data-t" in attrs:
                k = int(attrs["data-t"])
                tokens += [("open", k), *flat(node.children, tags), ("close", k)]
            else:
                tokens += flat(node.children, tags)
    return tokens


def words(tokens: list[Token]) -> int:
    """How many words the tokens' text has."""
    return sum(len(v.split()) for kind, v in tokens if kind == "text")


def proportional(tokens: list[Token], weights: list[int]) -> list[Token]:
    """The tokens with their markers moved to the word boundaries nearest the source's proportions
    (module docstring)."""
    split: list[Token] = []
    for kind, value in tokens:
        if kind == "text":
            split += [("text", part) for part in re.split(r"(\s+)", value) if part]
        elif kind != "mark":
            split.append((kind, value))
    seen, chars, count = 0, 0, words(split)
    boundaries: list[tuple[int, int, int]] = []  # (index of a space, characters and words before it)
    for i, (kind, value) in enumerate(split):
        if kind == "text" and value.isspace():
            if 0 < seen < count and (not boundaries or boundaries[-1][2] != seen):
                boundaries.append((i, chars, seen))
        elif kind == "text":
            seen, chars = seen + 1, chars + len(value)
    total, cuts, at = sum(weights) or 1, [], 0
    for j in range(1, len(weights)):
        target = chars * sum(weights[:j]) / total
        room = boundaries[at : max(at + 1, len(boundaries) - (len(weights) - 1 - j))]  # room left for later cuts
        if not room:
            break
        best = min(range(len(room)), key=lambda r: abs(room[r][1] - target))
        cuts.append(room[best][0])
        at += best + 1
    out: list[Token] = []
    for i, token in enumerate(split):
        out.append(token)
        if i in cuts:
            out.append(("mark", len(cuts)))
    return out


def spread(tokens: list[Token], tags: list[Tag], weights: list[int]) -> list[list[Token]]:
    """A group's translated tokens cut at its markers into one list per piece, each element kept in the
    piece it came from, else in the one that holds most of it (module docstring)."""
    parts = [[]] * len(weights)
    if sum(1 for kind, _ in tokens if kind == "mark") == len(weights) - 1:
        parts = cut(tokens)
    if any(not words(part) for part in parts):
        tokens = proportional(tokens, weights)
    chars: dict[int, Counter] = defaultdict(Counter)
    where: dict[int, int] = {}
    part, stack = 0, []
    for kind, value in tokens:
        if kind == "mark":
            part += 1
        elif kind == "open":
            stack.append(value)
            where[stack[-1]] = part
        elif kind == "close":
            stack.remove(value)
        elif kind == "text":
            for k in stack:
                chars[k][part] += len(value.strip())
    home = {
        k: tags[k].cue if chars[k][tags[k].cue] else max(chars[k], key=lambda p: chars[k][p]) if chars[k] else first
        for k, first in where.items()
    }
    pieces: list[list[Token]] = [[] for _ in weights]
    part, stack, opened = 0, [], []

    def reopen() -> None:
        for k in stack:
            if home[k] == part and k not in opened:
                pieces[part].append(("open", k))
                opened.append(k)

    for kind, value in tokens:
        if kind == "mark":
            pieces[part] += [("close", k) for k in reversed(opened)]
            part, opened = min(part + 1, len(pieces) - 1), []
        elif kind == "open":
            stack.append(value)
            reopen()
        elif kind == "close":
            if value in opened:
                pieces[part].append(("close", value))
                opened.remove(value)
            stack.remove(value)
        else:
            reopen()
            pieces[part].append((kind, value))
    pieces[part] += [("close", k) for k in reversed(opened)]
    return pieces


def cut(tokens: list[Token]) -> list[list[Token]]:
    """The tokens between markers (the markers in their output order, whatever their numbers)."""
    parts: list[list[Token]] = [[]]
    for token in tokens:
        if token[0] == "mark":
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def columns(text: str) -> int:
    """The width of `text` on a screen: a Chinese or Japanese character takes two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def breaks_before(previous: str, char: str) -> bool:
    """Whether a line may break between `previous` and `char` with no space between them."""
    return bool(UNSPACED.match(char) or UNSPACED.match(previous)) and (
        char not in NO_BREAK_BEFORE and previous not in NO_BREAK_AFTER
    )


def layout(piece: Piece, tokens: list[Token], tags: list[Tag], vtt: bool) -> list[Word]:
    """A piece's translation as written, in words: (markup, visible width, glued), tags attached to the
    word they touch; in Chinese and Japanese each character a word of its own, glued to the one before
    (`breaks_before`)."""
    items: list[Token] = [("raw", p) for p in piece.prefix] + tokens + [("raw", s) for s in piece.suffix]
    more = [False] * (len(items) + 1)  # whether any text or literal follows item i
    for i in range(len(items) - 1, -1, -1):
        kind, value = items[i]
        more[i] = more[i + 1] or kind == "lit" or (kind == "text" and bool(value.strip()))
    words: list[Word] = []
    word, length, glued, last = "", 0, False, ""
    for i, (kind, value) in enumerate(items):
        if kind == "text":
            for part in re.split(r"(\s+)", value):
                if part.isspace():
                    if length:
                        words.append((word, length, glued))
                        word, length = "", 0
                    glued = False
                elif part:
                    part = part if vtt else part.replace("-->", "->")  # (SRT's timing arrow, never text)
                    for char in part:
                        if length and breaks_before(last, char):
                            words.append((word, length, glued))
                            word, length, glued = "", 0, True
                        word += html.escape(char, quote=False) if vtt else char
                        length += columns(char)
                        last = char
        elif kind == "raw":
            word += value
        else:
            tag = tags[value]
            if kind == "close":
                word += tag.close or (f"</{tag.name}>" if more[i + 1] else "")
            else:
                word += tag.open
    if word and not length and words:  # end tags after the last word
        words[-1] = (words[-1][0] + word, *words[-1][1:])
    elif word:
        words.append((word, length, glued))
    return words


def greedy(words: list[Word], width: int) -> list[list[Word]]:
    """Words filled into lines of at most `width` columns (a longer word alone)."""
    lines: list[list[Word]] = [[]]
    filled = 0
    for word in words:
        step = word[1] + (0 if word[2] else 1)
        if lines[-1] and filled + step > width:
            lines.append([])
        filled = (filled + step) if lines[-1] else word[1]
        lines[-1].append(word)
    return lines


def written(line: list[Word]) -> str:
    """A line's words, a space before each but the first and those glued to the one before."""
    return "".join(("" if k == 0 or glued else " ") + word for k, (word, _, glued) in enumerate(line))


def wrap(words: list[Word], width: int, most: int) -> list[str]:
    """Balanced lines of at most `width` columns, at most `most` of them (wider if the words need it)."""
    if not words:
        return []
    lines = greedy(words, width)
    if len(lines) > most:
        while len(lines) > most:
            width += 1
            lines = greedy(words, width)
    elif len(lines) > 1:
        total = sum(length + (0 if glued else 1) for _, length, glued in words) - 1
        narrow = next(w for w in range(-(-total // len(lines)), width + 1) if len(greedy(words, w)) == len(lines))
        lines = greedy(words, narrow)
    return [written(line) for line in lines]


def dialogue(text: str, vtt: bool) -> bool:
    """Whether a cue's lines are each its own: two lines or more, each opening with a dash or a voice
    tag, or one after the first opening a turn of its own (TURN: "Where is he?" / "- In the garden.",
    a name, a sound, a song's line): joined, a speaker's line ran into the other's."""
    lines = text.split("\n")
    if len(lines) < 2:
        return False
    opens = [bool(TURN.match(visible(line, vtt).lstrip())) or line.lstrip().lower().startswith("<v") for line in lines]
    return all(opens) or any(opens[1:]) or bool(SOUND.fullmatch(visible(lines[0], vtt)))


def grouped(cues: list[Cue], vtt: bool) -> list[list[int]]:
    """The cues (indices) translated together (module docstring); a cue without text in none."""
    groups: list[list[int]] = []
    current: list[int] = []
    chars = 0
    for i, cue in enumerate(cues):
        seen = " ".join(visible(cue.text, vtt).split())
        if not any(c.isalnum() for c in seen):
            seen = ""  # blank, or only "♪": kept as it is
        if current and (not seen or dialogue(cue.text, vtt) or cue.start - cues[current[-1]].end > GAP):
            groups.append(current)
            current, chars = [], 0
        if not seen:
            continue
        current.append(i)
        chars += len(seen)
        if dialogue(cue.text, vtt) or SENTENCE_END.search(seen) or len(current) >= MAX_CUES or chars >= MAX_CHARS:
            groups.append(current)
            current, chars = [], 0
    return groups + [current] if current else groups


def piece(text: str, tags: list[Tag], index: int, vtt: bool, line: bool = False) -> Piece:
    """A cue's text (or a dialogue line's) as a piece of its group."""
    tokens, prefix, suffix = unwrap(tokenize(text, tags, index, vtt), tags, line)
    lines = text.split("\n")
    width = max(WIDTH, *(columns(visible(line, vtt)) for line in lines))
    return Piece(tokens, prefix, suffix, width, 1 if line else max(MIN_LINES, len(lines)))


def translate_cues(cues: list[Cue], units: Units, vtt: bool) -> list[str | None]:
    """Each cue's translated text (its lines joined by "\\n"), None for a cue left as it was."""
    planned: list[tuple[list[int], list[Tag], list[Piece]]] = []  # per unit: each piece's cue, the tags, the pieces
    for group in grouped(cues, vtt):
        if dialogue(cues[group[0]].text, vtt):
            for line in cues[group[0]].text.split("\n"):
                tags: list[Tag] = []
                planned.append(([group[0]], tags, [piece(line, tags, 0, vtt, line=True)]))
        else:
            tags = []
            planned.append((group, tags, [piece(cues[i].text, tags, j, vtt) for j, i in enumerate(group)]))
    plain = [k for k, (_, _, ps) in enumerate(planned) if len(ps) == 1 and all(t[0] == "text" for t in ps[0].tokens)]
    searched_as_text = set(plain)
    marked = [k for k in range(len(planned)) if k not in searched_as_text]  # several cues, or tags inside: html
    results: dict[int, list[list[Token]]] = {}
    texts = units(["".join(v for _, v in planned[k][2][0].tokens).strip() for k in plain], "text") if plain else []
    for k, text in zip(plain, texts):
        results[k] = [[("text", text)]]
    sources = [
        "".join(
            (f'<span data-cue="{j}"></span> ' if j else "") + fragment(p.tokens) for j, p in enumerate(planned[k][2])
        )
        for k in marked
    ]
    for k, source, translated in zip(marked, sources, units(sources, "html") if marked else []):
        _, tags, pieces = planned[k]
        weights = [len("".join(v for kind, v in p.tokens if kind == "text").strip()) for p in pieces]
        empty = empty_in(source)  # literals, markers, tags around nothing: none takes a word
        nodes = embrace(parse(translated, "html"), lambda e: dict(e.attrs).get("data-t") in empty | {None})
        results[k] = spread(flat(nodes, tags), tags, weights)
    out: dict[int, list[str]] = defaultdict(list)
    for k, (indices, tags, pieces) in enumerate(planned):
        for i, p, tokens in zip(indices, pieces, results[k]):
            out[i] += wrap(layout(p, tokens, tags, vtt), p.width, p.lines)
        shown = [i for i in indices if any(line.strip() for line in out[i])]
        for i in indices if shown and len(shown) < len(indices) else []:
            if i not in shown:  # a translation of fewer words than cues: the words before stay on screen
                out[i] = list(out[max((j for j in shown if j < i), default=shown[0])])
    return [("\n".join(out[i]) if i in out else None) for i in range(len(cues))]
