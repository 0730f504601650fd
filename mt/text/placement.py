"""A segment's inline elements placed around its translation's words, by the word alignment of each
translated piece (Pharaoh `i-j` over whitespace-separated words, `mt.decoding.alignment`).

The rule, for an inline item covering source characters [start, end):
- its target is the contiguous hull of the target words aligned to the source words it covers (a word
  it covers in part counts, less the punctuation that closes or opens its translation where the
  source's lies outside the item), and the whole translation of a piece it covers whole; where those target
  words fall apart into runs, split by target words aligned only to source words outside it (attention
  that aligns a word with a repeated word far away too), the hull of the longest run, of equals the
  one nearest the target words of its aligned neighbours (the nearest aligned source words before
  and after it);
- an item that covers words of a piece, none of them aligned, takes the target words between those
  of its aligned neighbours (the piece's edge where there is none: the whole piece if nothing in it
  is aligned), if any lie there;
- an end outside every piece (in the spaces between sentences, at a line break) maps exactly, since
  those characters are copied to the output as they are (a space `gaps` adds between two pieces of an
  unspaced source lies between them, where no source offset is);
- an item that covers no aligned word and has no target words between its neighbours', and an empty
  one (`<br>` between words, `<img>`, a comment, an element kept verbatim; `<wbr>` inside a word too),
  is placed after the target words aligned to the nearest aligned source word before it in its piece
  (at the piece's start if there is none);
- a child is clipped to its parent's target (nested stays nested), and of two siblings that would
  overlap, the one later in the source gives way (it keeps the part outside the other, or becomes
  empty at its end).
The output's text is the pieces' translations between the source's own spaces, whatever the tags:
tags only go between characters of it (an empty void element takes the place of the line break that
stood for it).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right, insort

from mt.text.markup import Element, Node, Raw, Segment
from mt.text.sentences import UNSPACED, Span, gaps

WORD = re.compile(r"\S+")
CLOSING = ".,;:!?…)]}»”’\"'"  # what ends a sentence or closes a bracket or quote after a word
OPENING = "([{¿¡«„“‘\"'"  # what opens a bracket or quote before a word
TARGET_CLOSING = CLOSING + "“‘«›」』。，、！？"  # and in a translation: German and CJK closing marks too
TARGET_OPENING = OPENING + "»‚›「『"


class Mapping:
    """Source offsets of a segment -> offsets into its output text, through its translated pieces."""

    def __init__(self, source: str, spans: list[Span], translations: list[str], alignments: list[str]):
        self.source = source
        self.spans = spans  # in order, apart: the methods below find the few an offset concerns by bisection
        self.starts, self.ends = [a for a, _ in spans], [b for _, b in spans]
        between = gaps(source, spans, translations)  # reassemble's: the output is built from them here
        self.out: list[Span] = []  # each piece's translation in the output
        parts, at = [], 0
        for gap, translation in zip(between, translations):
            at += len(gap)  # the source's text between pieces, or the space `gaps` put where it had none
            self.out.append((at, at + len(translation)))
            at += len(translation)
            parts += [gap, translation]
        self.output = "".join(parts) + between[-1]
        self.words: list[list[tuple[int, int, list[Span]]]] = []  # per piece: (start, end, aligned targets)
        self.targets: list[list[Span]] = []  # per piece: the words of its translation
        for (start, _), (out_start, _), translation, pairs, text in zip(
            spans, self.out, translations, alignments, (source[a:b] for a, b in spans)
        ):
            targets = [(out_start + m.start(), out_start + m.end()) for m in WORD.finditer(translation)]
            self.targets.append(targets)
            words: list[tuple[int, int, list[Span]]] = [
                (start + m.start(), start + m.end(), []) for m in WORD.finditer(text)
            ]
            for pair in pairs.split():
                i, j = (int(x) for x in pair.split("-"))
                if i < len(words) and j < len(targets):
                    words[i][2].append(targets[j])
            self.words.append(words)

    def offset(self, k: int) -> int:
        """The output offset of a source offset outside every piece (or at a piece's edge)."""
        i = bisect_right(self.starts, k) - 1  # the last piece that starts at or before k
        if i < 0:
            return k
        (_, end), (out_start, out_end) = self.spans[i], self.out[i]
        return out_end + k - end if end <= k else out_start

    def covered(self, start: int, end: int) -> list[Span]:
        """The target spans of what [start, end) covers: whole pieces, aligned words."""
        found = []
        for i in range(bisect_left(self.ends, start), bisect_right(self.starts, end)):  # the others add nothing
            (a, b), out, words = self.spans[i], self.out[i], self.words[i]
            if start <= a and b <= end:
                found.append(out)
                continue
            for ws, we, targets in words:
                if ws < end and start < we:
                    part = start > ws or end < we  # H<sub>2</sub>O, m<sup>2</sup>: of a word copied, its characters
                    found += [self.within(t, ws, we, max(start, ws), min(end, we)) if part else t for t in targets]
        return found

    def same(self, target: Span, ws: int, we: int) -> bool:
        """Whether a target word is the source word [ws, we) copied (in any case): a formula, a number,
        a name, a placeholder's brackets."""
        word, source = self.output[target[0] : target[1]], self.source[ws:we]
        return len(word) == len(source) and word.casefold() == source.casefold()  # (not "Maße" as "MASSE")

    def within(self, target: Span, ws: int, we: int, start: int, end: int) -> Span:
        """The target of source characters [start, end) of word [ws, we): the same characters of the target
        word where it is the source word copied, else the target word without the punctuation that
        closes or opens it where the source's lies outside the item (`<a>snow</a>.` is `<a>Schnee</a>.`,
        not `<a>Schnee.</a>`)."""
        if self.same(target, ws, we):
            return target[0] + start - ws, target[0] + end - ws
        lo, hi = target
        if end < we and all(c in CLOSING for c in self.source[end:we]):
            while hi - 1 > lo and self.output[hi - 1] in TARGET_CLOSING:
                hi -= 1
        if ws < start and all(c in OPENING for c in self.source[ws:start]):
            while lo + 1 < hi and self.output[lo] in TARGET_OPENING:
                lo += 1
        return lo, hi

    def piece(self, start: int, end: int) -> int | None:
        """The index of the piece that holds [start, end), None if none does."""
        i = bisect_left(self.ends, end)  # the first piece that ends at or after end: the only candidate
        return i if i < len(self.spans) and self.starts[i] <= start else None

    def neighbours(self, index: int, start: int, end: int) -> tuple[Span | None, Span | None]:
        """The hulls of the target words of the nearest aligned source words before and after [start, end)
        in piece `index` (None: no aligned word there)."""
        words = self.words[index]
        before = [targets for _, we, targets in words if we <= start and targets]
        after = [targets for ws, _, targets in words if ws >= end and targets]

        def hull(targets: list[Span]) -> Span:
            return min(t[0] for t in targets), max(t[1] for t in targets)

        return (hull(before[-1]) if before else None), (hull(after[0]) if after else None)

    def cluster(self, start: int, end: int, targets: list[Span]) -> list[Span]:
        """Of an item's `targets` within one piece, the run it goes around (module docstring)."""
        index = self.piece(start, end)
        if index is None:
            return targets
        mine = set(targets)
        outside = {t for ws, we, aligned in self.words[index] if not (ws < end and start < we) for t in aligned}
        runs: list[list[Span]] = [[]]
        for word in self.targets[index]:
            if word in mine:
                runs[-1].append(word)
            elif word in outside and runs[-1]:
                runs.append([])
        runs = [run for run in runs if run]
        if len(runs) < 2:
            return targets
        left, right = self.neighbours(index, start, end)

        def rank(run: list[Span]) -> tuple[int, int]:
            distance = (abs(run[0][0] - left[1]) if left else 0) + (abs(right[0] - run[-1][1]) if right else 0)
            return -len(run), distance

        return min(runs, key=rank)

    def gap(self, start: int, end: int) -> Span | None:
        """The target words between those of the aligned neighbours of [start, end) (module docstring)."""
        index = self.piece(start, end)
        if index is None:
            return None
        left, right = self.neighbours(index, start, end)
        lo, hi = left[1] if left else self.out[index][0], right[0] if right else self.out[index][1]
        if left and right and right[1] <= left[0]:  # the neighbours' translations in the other order
            lo, hi = right[1], left[0]
        inside = [t for t in self.targets[index] if lo <= t[0] and t[1] <= hi]
        return (inside[0][0], inside[-1][1]) if inside else None

    def anchor(self, k: int) -> int:
        """Where an empty item at source offset k goes (module docstring)."""
        i = bisect_right(self.ends, k)  # the first piece that ends after k: the one k may be inside
        if i < len(self.spans):
            (a, b), (out_start, _), words = self.spans[i], self.out[i], self.words[i]
            if a < k < b:
                # (not before punctuation that closes the word before: "me@example.com, please")
                glued = next((w for w in words if w[0] <= k < w[1] and w[2]), None)
                if glued is not None and k == glued[0] and all(c in CLOSING for c in self.source[k : glued[1]]):
                    glued = None
                if glued is not None:
                    return self.glued(k, *glued)
                before = [targets for _, we, targets in words if we <= k and targets]
                return max(t[1] for t in before[-1]) if before else out_start
        return self.offset(k)

    def glued(self, k: int, ws: int, we: int, targets: list[Span]) -> int:
        """Where an empty item at k inside an aligned word [ws, we), or at its start, goes: with that
        word's translation rather than after the word before (`File '%s' not found`, `Open {file}.txt`,
        `Smith¹,`): at the same character of a word copied, before punctuation that followed it in the
        source, after punctuation that opened it, else at the edge of the word's translation it was at."""
        if k == ws:
            return min(t[0] for t in targets)
        last = max(targets, key=lambda t: t[1])
        if len(targets) == 1 and self.same(last, ws, we):
            return last[0] + k - ws
        word = self.output[last[0] : last[1]]
        pre, post = self.source[ws:k], self.source[k:we]
        if all(c in CLOSING for c in post) and word.endswith(post):
            return last[1] - len(post)
        if all(c in OPENING for c in pre) and word.startswith(pre):
            return last[0] + len(pre)
        return last[1]

    def place(self, start: int, end: int) -> Span:
        """The output span of an item covering source [start, end) (module docstring)."""
        if start == end:  # empty, even inside a word (Donau<wbr>dampf): it covers no target word
            k = self.anchor(start)
            return k, k
        first = bisect_right(self.ends, start)  # the first piece that ends after start
        inside_start = first < len(self.spans) and self.starts[first] <= start
        last = bisect_left(self.ends, end)  # the first piece that ends at or after end
        inside_end = last < len(self.spans) and self.starts[last] < end
        lo = None if inside_start else self.offset(start)
        hi = None if inside_end else self.offset(end)
        targets = self.covered(start, end)
        if targets and lo is None and hi is None:
            targets = self.cluster(start, end, targets)
        if targets:
            lo = min(t[0] for t in targets) if lo is None else lo
            hi = max(t[1] for t in targets) if hi is None else hi
            return lo, max(lo, hi)
        if start < end and lo is not None and hi is not None:
            return lo, hi
        between = self.gap(start, end) if start < end else None
        if between is not None:
            return between
        k = self.anchor(start)
        return k, k


def arrange(segment: Segment, places: list[Span]) -> list[Span]:
    """The items' output spans nested as in the source and without overlapping siblings (module docstring)."""
    spans: list[Span] = []
    placed: dict[int | None, list[tuple[int, int, int]]] = {}  # by parent: its items' non-empty spans, in order
    for index, item in enumerate(segment.items):
        lo, hi = places[index]
        if item.parent is not None:
            top, bottom = spans[item.parent]
            lo = min(max(lo, top), bottom)
            hi = min(max(hi, lo), bottom)
        siblings = placed.setdefault(item.parent, [])
        lo, hi = give_way(siblings, lo, hi)
        spans.append((lo, hi))
        if lo < hi:
            insort(siblings, (lo, hi, index))
    return spans


def give_way(siblings: list[tuple[int, int, int]], lo: int, hi: int) -> Span:
    """[lo, hi) moved off the earlier siblings' non-empty spans (`siblings`: (start, end, item), apart,
    in order): passes over them in item order, each sibling it overlaps when its turn comes moving it
    (to the part before it, else past it; an empty span inside one to its end), until a pass moves
    nothing. Only the siblings near [lo, hi) can overlap it, found by bisection."""
    moved = True
    while moved:
        moved, after = False, -1  # the item whose turn was last in this pass
        while True:
            first = bisect_right(siblings, lo, key=lambda sibling: sibling[1])  # the first ending after lo
            near = []
            for s, e, k in siblings[first:]:
                if s >= hi:
                    break
                if k > after and ((lo < hi and lo < e and s < hi) or (lo == hi and s < lo < e)):
                    near.append((k, s, e))
            if not near:
                break
            after, s, e = min(near)
            lo, hi = (lo, s) if lo < s else (e, max(hi, e)) if lo < hi else (e, e)
            moved = True
    return lo, hi


def build(
    segment: Segment,
    spans: list[Span],
    output: str,
    parent: int | None,
    lo: int,
    hi: int,
    children_of: dict[int | None, list[int]] | None = None,
) -> list[Node]:
    """The nodes of output[lo:hi] with the items inside `parent` (None: the segment's top) around their spans."""
    if children_of is None:
        children_of = {}
        for k, item in enumerate(segment.items):
            children_of.setdefault(item.parent, []).append(k)
    children = sorted(children_of.get(parent, []), key=lambda k: (spans[k][0], k))
    nodes: list[Node] = []
    at, glued_to = lo, -1  # glued_to: the source end of the item just placed, where the output is at it
    for k in children:
        start = max(spans[k][0], at)
        end = max(spans[k][1], start)
        item = segment.items[k]
        node = item.node
        text = segment.text
        # an address, or an element that holds only addresses (a link written as its URL): it stands
        # between the words as a kept element does, outside its parent's edges
        addressed = (isinstance(node, Raw) and node.address) or (
            isinstance(node, Element)
            and not node.void
            and item.start == item.end
            and bool(children_of.get(k))
            and all(isinstance(segment.items[j].node, Raw) and segment.items[j].node.address for j in children_of[k])
        )
        if addressed and item.end < len(text) and text[item.end] in CLOSING:
            # the source's punctuation followed it ("Visit https://x.org."): before the punctuation its
            # word took in the translation ("Besuchen Sie." and the address after the period)
            while start > at and output[start - 1] in CLOSING:
                start -= 1
            end = start
        if start > at:
            nodes.append(output[at:start])
        # an address in a parent that holds addresses alone (a link written as its URL) leaves its
        # spaces to that parent, which is spaced itself
        in_address_only = (
            addressed
            and isinstance(node, Raw)
            and item.parent is not None
            and segment.items[item.parent].start == segment.items[item.parent].end
        )
        # a kept element or an image between words keeps the spaces it stood between ("Run
        # <code>ls</code> now" came back "Ein<code>ls</code> ..."): one where the output has none
        # beside its place (not a comment's, which shows nothing, nor a <br>'s, a break itself)
        seen = not in_address_only and (shown(node) if isinstance(node, Raw) or node.void else addressed)
        spaced_before = seen and 0 < item.start and text[item.start - 1].isspace() and 0 < start <= len(output)
        spaced_before = spaced_before and not (glued_to == item.start and start == at)  # `%d%%`: none between
        spaced_after = seen and item.end < len(text) and text[item.end].isspace()
        if spaced_before and not output[start - 1].isspace() and not UNSPACED.match(output[start - 1]):
            nodes.append(" ")  # (none beside a word of a script written without spaces)
        if isinstance(node, Raw) or node.void:
            if isinstance(node, Raw):
                nodes.append(node)
                end = start
            else:  # what it covers is the line break that stood for it, and never words
                nodes.append(Element(node.tag, node.attrs, [], node.block, True))
                if output[start:end].strip():
                    end = start
        else:
            inner = build(segment, spans, output, k, start, end, children_of)
            nodes.append(Element(node.tag, node.attrs, inner, node.block))
        if spaced_after and end == start and start < len(output) and not output[start].isspace():
            if not UNSPACED.match(output[start]):
                nodes.append(" ")
        at, glued_to = end, item.end
    if at < hi:
        nodes.append(output[at:hi])
    return nodes


def shown(node: Element | Raw) -> bool:
    """Whether an empty item shows on the page: a kept element (code, translate="no") or a void one
    but a line break; not a comment, a processing instruction or an entity reference."""
    if isinstance(node, Raw):
        return node.address or (node.markup.startswith("<") and not node.markup.startswith(("<!--", "<?", "<!")))
    return node.tag != "br"


def place_segment(segment: Segment, spans: list[Span], translations: list[str], alignments: list[str]) -> list[Node]:
    """The translated segment as nodes: the pieces' translations (`spans` of the segment's text) with the
    segment's inline items placed by the pieces' `alignments`."""
    mapping = Mapping(segment.text, spans, translations, alignments)
    places = [mapping.place(item.start, item.end) for item in segment.items]
    return build(segment, arrange(segment, places), mapping.output, None, 0, len(mapping.output))
