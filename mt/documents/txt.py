"""Plain text documents: paragraphs (separated by blank lines) and line breaks kept.

Each line is translated as a text (its sentences found in it) and keeps its indentation, except in a
hard-wrapped paragraph: one whose every line break falls where the next line's first word would not
have fitted on the line (the mark of a wrap at a fixed width, as `fmt` and mail clients do; the
longest line counts as such a mark only where another line is shorter, or where it is as long as
text wrapped at a usual width is: a heading over one line of text is no wrap), and where
some line ends inside a sentence (without . ! ? : ; or a closing quote). Such a paragraph is translated
as one text and wrapped again at its own width, so that a sentence wrapped over two lines is translated
whole; a mark every line starts with (a mail's `> `, a comment's `# ` or `// `) is taken off before and
put back on every line after. A list of short lines, or of lines that each end a sentence, is
translated line by line, and so is a table or an aligned listing (columns: runs of spaces or tabs
inside lines, rules without letters, rows of one length), each cell of a row on its own between the
row's gaps where columns line up (`cells`); `--format text` translates every line as itself.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from mt.documents.formats import DocumentOptions
from mt.documents.units import Units

BLANK = re.compile(r"(\n[ \t]*(?:\n|$))")  # a line break that ends a paragraph
MIN_WIDTH = 30  # narrower lines are a list or verse, not wrapped prose
WRAP_WIDTH = 60  # a line at least this long ends where text wrapped at a usual width (70-80) ends
SENTENCE_END = tuple(".!?:;\"'”’»)…。！？")


# What a quoted or commented line starts with: a mail's "> > ", a comment's "# ", "// ", "-- ", "; ".
MARK = re.compile(r"[ \t]*(?:(?:>[ \t]?)+|#+[ \t]+|//+[ \t]?|--[ \t]+|;+[ \t]+)[ \t]*")
INDENT = re.compile(r"[ \t]*")
COLUMNS = re.compile(r"\S(?: {2,}|\t)\S")  # a gap of two spaces or a tab between words: columns


def prefixes(lines: list[str]) -> list[str]:
    """What each line starts with outside its text: the mark all of them share (MARK), with the spaces
    around it, else its indent."""
    marks = [MARK.match(line) for line in lines]
    if all(marks) and len({m.group().strip() for m in marks if m}) == 1:
        return [m.group() for m in marks if m]
    return [INDENT.match(line).group() for line in lines]


def wrapped(lines: list[str]) -> bool:
    """Whether a paragraph's lines look wrapped at a fixed width (module docstring)."""
    if len(lines) < 2:
        return False
    width = max(len(line) for line in lines)
    if width < MIN_WIDTH:
        return False
    texts = [line[len(prefix) :].rstrip() for line, prefix in zip(lines, prefixes(lines))]
    if any(COLUMNS.search(text) or not any(c.isalpha() for c in text) for text in texts):
        return False  # a table, an aligned listing, a rule: lines that are rows
    if len(lines) > 2 and len({len(line.rstrip()) for line in lines}) == 1:
        return False  # rows of one length: a box or a table, not prose wrapped at a width
    for line, following in zip(lines, texts[1:]):
        words = following.split()
        if not words or len(line.rstrip()) + 1 + len(words[0]) <= width:
            return False
    # The longest line is "full" by definition: alone (a heading over a line of text, two list items),
    # it shows a width only where it is as long as wrapped text's lines are.
    shorter = any(len(line.rstrip()) < width for line in lines[:-1])
    if not shorter and width < WRAP_WIDTH:
        return False
    return any(not text.endswith(SENTENCE_END) for text in texts[:-1])


GAP = re.compile(r"(?<=\S)(?: {2,}|\t)[ \t]*(?=\S)")  # between two columns of a row


def cells(lines: list[str]) -> list[list[str]]:
    """Each line of a paragraph as its cells and the gaps between them ([cell, gap, cell, ...]): cut at
    a gap of spaces whose next column starts where one does in another line of the paragraph (an aligned
    listing: "Name:   John Smith" over "Age:    42"), or at a tab; a gap nothing lines up with (text
    justified by spaces) is part of its sentence."""
    starts = [{m.end() for m in GAP.finditer(line)} for line in lines]
    shared = {
        k for i, found in enumerate(starts) for k in found if any(k in other for other in starts[:i] + starts[i + 1 :])
    }
    rows = []
    for line in lines:
        row, at = [], 0
        for gap in GAP.finditer(line):
            if gap.end() in shared or "\t" in gap.group():
                row += [line[at : gap.start()], gap.group()]
                at = gap.end()
        rows.append(row + [line[at:]])
    return rows


def translate(text: str, units: Units, options: DocumentOptions) -> str:
    """The translated text, paragraph by paragraph (module docstring)."""
    parts = BLANK.split(text)  # paragraphs at even indices, the blank lines between them at odd
    plans: list[tuple[int, list[str], bool, list[list[str]]]] = []
    asked: list[str] = []
    for index in range(0, len(parts), 2):
        lines = parts[index].split("\n")
        joined = wrapped(lines)
        rows = [] if joined else cells(lines)
        if joined:
            asked.append(" ".join(line[len(p) :].strip() for line, p in zip(lines, prefixes(lines))))
        else:
            asked += [cell for row in rows for cell in row[0::2]]
        plans.append((index, lines, joined, rows))
    answers = iter(units(asked))
    for index, lines, joined, rows in plans:
        if joined:  # the first line's prefix, and the second's for the rest (a list item's hanging indent)
            indent, rest = prefixes(lines)[:2]
            width = max(len(line) for line in lines)
            parts[index] = textwrap.fill(
                next(answers),
                width=width,
                initial_indent=indent,
                subsequent_indent=rest,
                break_long_words=False,
                break_on_hyphens=False,
            )
        else:  # each cell's translation, its columns lined up again
            translated = [[next(answers) for _ in row[0::2]] for row in rows]
            parts[index] = "\n".join(realigned(rows, translated))
    return "".join(parts)


def width(text: str) -> int:
    """Columns on a screen: a Chinese or Japanese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def realigned(rows: list[list[str]], translated: list[list[str]]) -> list[str]:
    """Each row's translated cells (`cells`' rows, `translated` the cells' translations) with its
    columns lined up again: each column starts where the widest translation before it in any row
    ends, plus the narrowest gap the source had there ("Name:    John" over "Alter:   42" came back
    ragged, each translation between the source's gaps). Rows with a tab keep their gaps (tab stops
    align them)."""
    if any("\t" in gap for row in rows for gap in row[1::2]):
        return [
            "".join(t[k // 2] if k % 2 == 0 else gap for k, gap in enumerate(row)) for row, t in zip(rows, translated)
        ]
    starts = []  # each row's cells' columns in the source
    for row in rows:
        at, mine = 0, []
        for k, part in enumerate(row):
            if k % 2 == 0:
                mine.append(at)
            at += len(part)
        starts.append(mine)
    columns = sorted({start for mine in starts for start in mine[1:]})
    moved = {0: 0}
    for column in columns:  # (left to right: each from the columns before it)
        ends, gaps = [], []
        for row, mine, cells in zip(rows, starts, translated):
            for i, start in enumerate(mine):
                if i and start == column:
                    ends.append(moved[mine[i - 1]] + width(cells[i - 1]))
                    gaps.append(len(row[2 * i - 1]))  # the source's gap before it
        moved[column] = max(ends) + max(min(gaps), 1)
    lines = []
    for mine, t in zip(starts, translated):
        line, at = "", 0
        for start, cell in zip(mine, t):
            line += " " * (moved[start] - at) + cell
            at = moved[start] + width(cell)
        lines.append(line)
    return lines
