"""Subtitles: SubRip (.srt, read by the `srt` package) and WebVTT (.vtt, read by `webvtt-py`); a file
that begins with "WEBVTT" is WebVTT, any other SubRip. The cues' texts are translated by
`mt.documents.cues` (a sentence over several cues translated once and spread back over them; inline
tags placed around the aligned words; lines wrapped again).

The libraries find the cues; the file is written back as it was read, with only the lines of each
cue's text replaced. So cue numbers and identifiers, timings as written, cue settings, the WebVTT
header, NOTE, STYLE and REGION blocks, blank lines and everything else stay byte for byte. (webvtt-py's
own writer puts REGION blocks before STYLE ones and rewrites NOTE and REGION lines, and pysubs2 drops
cue identifiers, settings, voices and notes: neither writes a file back as it came.)

A file the library cannot read is a one-line error naming the line: SubRip text that is not a cue, a
timing line srt cannot read (srt would take it as text of the cue before), a WebVTT file without its
header, a WebVTT timing line webvtt-py cannot read.
"""

from __future__ import annotations

import re

from mt.documents.cues import Cue, translate_cues
from mt.documents.formats import DocumentError, DocumentOptions
from mt.documents.units import Units
from mt.language_codes import language_tag

Span = tuple[int, int]  # [start, end) characters of the file: a cue's text
TIMING = re.compile(r"^[ \t]*\d+:\d\d:\d\d[,.]\d+[ \t]*-+ *>?[ \t]*\d+:\d\d", re.MULTILINE)  # well formed or not
VTT_TIMING = re.compile(r"[ \t]*(?:\d+:)?\d\d:\d\d[,.]\d+[ \t]*[-=]+ *>?[ \t]*(?:\d+:)?\d\d:\d\d")  # hours optional


def line_of(text: str, at: int) -> int:
    """The line number (from 1) of character `at`."""
    return text.count("\n", 0, at) + 1


def read_srt(text: str) -> tuple[list[Cue], list[Span]]:
    """A SubRip file's cues and where their texts are; DocumentError naming the line srt cannot read."""
    import srt

    try:
        subtitles = list(srt.parse(text))
    except srt.SRTParseError as exc:
        unread = exc.unmatched_content
        at = exc.expected_start + len(unread) - len(unread.lstrip())
        shown = " / ".join(unread.strip().split("\n")[:2])[:80]
        raise DocumentError(
            f"line {line_of(text, at)}: not a SubRip cue: {shown!r} (a cue is its number, a timing line "
            "such as 00:00:01,000 --> 00:00:02,500, its text and a blank line; a WebVTT file begins with WEBVTT)"
        ) from None
    except ValueError as exc:
        raise DocumentError(f"a timing srt cannot read: {exc}") from None
    cues, spans = [], []
    for subtitle, match in zip(subtitles, srt.SRT_REGEX.finditer(text)):  # srt.parse's own matches
        start, end = match.span(5)
        content = text[start:end]
        start, end = start + len(content) - len(content.lstrip()), start + len(content.rstrip())
        inside = TIMING.search(text, start, end)
        if inside is not None:
            raise DocumentError(
                f"line {line_of(text, inside.start())}: a timing line srt cannot read, or a cue without its "
                f"number (read as the text of cue {subtitle.index}): {inside.group().strip()!r}"
            )
        blank = re.search(r"\n[ \t]*\n\s*(\S[^\n]*)", text[start:end])
        if blank is not None:  # srt reads on past a blank line to the next timing: not a cue of its own
            raise DocumentError(
                f"line {line_of(text, start + blank.start(1))}: text after cue {subtitle.index} that is not a "
                f"cue (no number and timing line): {blank.group(1).strip()[:80]!r}"
            )
        cues.append(Cue(text[start:end], subtitle.start.total_seconds(), subtitle.end.total_seconds()))
        spans.append((start, end))
    return cues, spans


def read_vtt(text: str) -> tuple[list[Cue], list[Span]]:
    """A WebVTT file's cues and where their texts are; DocumentError naming the line webvtt-py cannot read."""
    import webvtt
    from webvtt.errors import MalformedFileError

    try:
        captions = webvtt.from_string(text).captions
    except MalformedFileError:
        raise DocumentError("line 1: not a WebVTT file: the first line must begin with WEBVTT") from None
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    cues, spans, at = [], [], 0
    read: set[int] = set()  # the lines of the cues read: their timing lines and texts
    for caption in captions:  # each caption's timing line: the next line with "-->" (none elsewhere is valid)
        timing = next((i for i in range(at, len(lines)) if "-->" in lines[i]), len(lines))
        payload = lines[timing + 1 : timing + 1 + len(caption.lines)]
        if timing == len(lines) or payload != caption.lines:
            break
        at = timing + 1 + len(caption.lines)
        read.update(range(timing, at))
        start = caption.start_time.in_milliseconds() / 1000
        cues.append(Cue("\n".join(payload), start, caption.end_time.in_milliseconds() / 1000))
        spans.append((offsets[timing + 1], offsets[at] - 1) if payload else (offsets[at], offsets[at]))
    # a timing line it did not read, well formed or not ("00:03.000 -> 00:04.000"): its cue would be
    # left untranslated without a word, as a SubRip file's is refused
    unread = next(
        (i for i, line in enumerate(lines) if i not in read and ("-->" in line or VTT_TIMING.match(line))), None
    )
    if unread is not None:
        raise DocumentError(
            f"line {unread + 1}: a cue webvtt-py cannot read: {lines[unread].strip()[:60]!r} (a timing line is "
            "such as 00:00:01.000 --> 00:00:02.500, after the cue's identifier if it has one)"
        )
    return cues, spans


def translate(text: str, units: Units, options: DocumentOptions) -> str:
    """The subtitles with each cue's text translated (module docstring)."""
    vtt = text.startswith("WEBVTT")
    cues, spans = read_vtt(text) if vtt else read_srt(text)
    parts, at = [], 0
    for (start, end), translated in zip(spans, translate_cues(cues, units, vtt)):
        if translated is not None:
            parts += [text[at:start], translated]
            at = end
    out = "".join(parts) + text[at:]
    if vtt:  # the header's `Language: en` (YouTube's, many players') names the translation's language
        header = out.split("\n\n", 1)
        header[0] = LANGUAGE.sub(lambda m: m.group(1) + language_tag(options.target), header[0])
        out = "\n\n".join(header)
    return out


LANGUAGE = re.compile(r"(?m)^(Language:[ \t]*)\S+[ \t]*$")
