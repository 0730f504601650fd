"""Markup translated: each text (an input line, a request's item) is an HTML or XML fragment
(`mt.text.markup`); the text of each of its segments is cut into sentences and long sentences into
pieces as plain text is (`mt.text.translate.segment`), every piece is searched with word alignments
(the last decoder layer's), and the inline elements are put back around the aligned target words
(`mt.text.placement`). `search` has `Translator.search`'s signature, for `mt.decoding.output.stream`;
`plan` and `finish` are its two halves, for `mt serve`, which searches through its batcher.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from mt import log
from mt.config.values import coerce
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.text.casing import restored
from mt.text.markup import Format, MarkupError, Node, Raw, Segment, parse, render, segments
from mt.text.placement import place_segment
from mt.text.sentences import Span, address_spans
from mt.text.translate import (
    ended_as,
    labels,
    mostly_unreadable,
    read_cased,
    recasing,
    search_pieces,
    segment,
    segments_apply,
    target_language,
    unknown_letters,
    unknown_runs,
    unreadable,
)
from mt.text.translate import search as plain_search
from mt.tokenizer import Tokenizer


@dataclass
class Plan:
    """What to search for a list of fragments and how to put it back: each fragment's nodes, its
    segments, each segment's pieces (spans of its text), and all pieces' texts in order."""

    fmt: Format
    fragments: list[list[Node]]
    segments: list[list[Segment]]
    pieces: list[list[list[Span]]]
    originals: list[str]  # the pieces searched, all but `kept`, as the text has them
    sources: list[str]  # ... and as the model reads them (mt.text.translate.read_cased)
    recase: bool  # whether they were recased, a translation of capitals to be written in capitals
    target: str | None  # ... in capitals as this language writes them (mt.text.translate.target_language)
    kept: dict[int, str]  # pieces copied as they are (mt.text.translate.unreadable), by index among all
    unknown: list[int]  # per fragment, the letters kept as they are within readable text (`readable_segments`)


def aligned(translator: Translator, options: DecodeOptions | None, alternatives: bool = False) -> DecodeOptions:
    """`options` for the pieces: one best translation each (with `alternatives`, the n-best list
    `options` asks, for `finish`), aligned by the last decoder layer (a teacher-forced pass of mt's model
    over each translation, whichever engine found it). Under decode.engine ctranslate2 they are decoded
    as engine auto decodes them (mt.decoding.engine): what CTranslate2 cannot decode as mt would (the
    gnmt penalty, an ensemble) goes to mt's search rather than being refused."""
    from mt.decoding.alignment import check_layer

    layer = check_layer(translator.model, None, "alignments")
    options = options or DecodeOptions()
    engine = options.engine or translator.decode_cfg.engine
    nbest = options.nbest if alternatives else 1
    return replace(options, nbest=nbest, alignment_layer=layer, engine="auto" if engine == "ctranslate2" else engine)


def plan(
    translator: Translator, texts: list[str], fmt: Format, options: DecodeOptions | None = None, first_line: int = 0
) -> Plan:
    """Parse each text and cut its segments into pieces; MarkupError naming the text (counted from
    `first_line` + 1) that does not parse."""
    options = options or DecodeOptions()
    fragments = []
    for i, text in enumerate(texts):
        try:
            fragments.append(parse(text, fmt))
        except MarkupError as exc:
            line = first_line + i + 1
            raise MarkupError(f"input line {line}: {exc}", line, str(exc)) from None
    found = [readable_segments(fragment, translator.src_tok) for fragment in fragments]
    flat = [s.plain for fragment in found for s in fragment]
    spans = iter(segment(translator, flat, options) if flat else [])
    pieces = [[next(spans) for _ in fragment] for fragment in found]
    every = [s.plain[a:b] for fragment, plans in zip(found, pieces) for s, p in zip(fragment, plans) for a, b in p]
    kept = unreadable(translator.src_tok, every)
    tok = translator.src_tok
    unknown = [sum(unknown_letters(tok, kept) for kept in unknown_kept(fragment)) for fragment in found]
    originals = [p for i, p in enumerate(every) if i not in kept]
    sources = read_cased(translator, originals, options)
    target = target_language(translator, options)
    return Plan(fmt, fragments, found, pieces, originals, sources, recasing(options), target, kept, unknown)


def unknown_kept(segments: list[Segment]) -> list[str]:
    """What `readable_segments` kept out of the model's text for its vocabulary (not the addresses)."""
    kept = [
        html.unescape(i.node.markup) for s in segments for i in s.items if isinstance(i.node, Raw) and i.node.address
    ]
    return [text for text in kept if not address_spans(text)]


def readable_segments(fragment: list[Node], tok: Tokenizer) -> list[Segment]:
    """The fragment's segments, in each that the model can read (not `mostly_unreadable`: such a one is
    copied whole, with a warning) what its vocabulary cannot write kept as it is, as addresses are
    (`unknown_runs`)."""
    found = segments(fragment)
    if not any(unknown_runs(tok, segment.plain) for segment in found):
        return found
    keeping = segments(fragment, partial(unknown_runs, tok))
    return [kept if not mostly_unreadable(tok, whole.plain) else whole for whole, kept in zip(found, keeping)]


def finish(plan: Plan, found: list[list[tuple]]) -> list[list[tuple]]:
    """Each fragment's (translation, score) pairs from its searched pieces' (translation, score,
    alignment) triples, a kept piece being itself aligned word for word: the score is the mean of its
    pieces' (0 without any). A fragment of one searched piece has a pair for each of that piece's
    hypotheses (an n-best list, `aligned`); one of several pieces, its best, as a line of several
    sentences has."""
    searched = iter(zip(plan.originals, found, strict=True))
    total = sum(len(spans) for plans in plan.pieces for spans in plans)
    every = []
    for i in range(total):
        if i in plan.kept:
            every.append([(plan.kept[i], 0.0, " ".join(f"{k}-{k}" for k in range(len(plan.kept[i].split()))))])
        else:
            source, hyps = next(searched)
            every.append(ended_as(source, [restored(source, h, plan.target) if plan.recase else h for h in hyps]))
    found = every
    results, at = [], 0
    for fragment, segs, plans in zip(plan.fragments, plan.segments, plan.pieces):
        mine = found[at : at + sum(len(spans) for spans in plans)]
        at += len(mine)
        results.append(
            [
                rendered(plan.fmt, fragment, segs, plans, [hyps[k] for hyps in mine])
                for k in range(len(mine[0]) if len(mine) == 1 else 1)
            ]
        )
    return results


def rendered(
    fmt: Format, fragment: list[Node], segs: list[Segment], plans: list[list[Span]], hyps: list[tuple]
) -> tuple[str, float]:
    """One fragment written back from one hypothesis of each of its pieces (`hyps`, in order), with
    their mean score."""
    translated, at = [], 0
    for seg, spans in zip(segs, plans):
        mine = hyps[at : at + len(spans)]
        at += len(spans)
        translated.append(place_segment(seg, spans, [h[0] for h in mine], [h[2] for h in mine]))
    scores = [h[1] for h in hyps]
    return render(fragment, fmt, iter(translated)), sum(scores) / len(scores) if scores else 0.0


def search(
    translator: Translator,
    texts: list[str],
    options: DecodeOptions | None = None,
    first_line: int = 0,
    progress: Callable[[int], None] | None = None,
    fmt: Format = "html",
    names: list[str] | None = None,
    alternatives: bool = False,
) -> list[list[tuple]]:
    """Each markup text's translation and score, as `Translator.search` gives them (module docstring);
    `names`, what a warning calls each text (default: its input line). With `alternatives`, the n-best
    list `options` asks of each text searched as one piece (`finish`); else its best."""
    options = aligned(translator, options, alternatives)
    planned = plan(translator, texts, fmt, options, first_line)
    for name, count in zip(labels(len(texts), first_line, names), planned.unknown):
        if count:
            log.warn(f"{name}: {count} letters the model cannot read (not in its vocabulary) kept as they are")
    every = [[span for spans in fragment for span in spans] for fragment in planned.pieces]
    found = search_pieces(translator, planned.sources, every, planned.kept, options, first_line, names)
    results = finish(planned, found)
    if progress is not None:
        progress(len(texts))
    return results


def text_search(
    translator: Translator,
    texts: list[str],
    options: DecodeOptions | None = None,
    first_line: int = 0,
    progress: Callable[[int], None] | None = None,
    names: list[str] | None = None,
) -> list[list[tuple]]:
    """Plain text's `search` (mt.text.translate), but for a text with a web or mail address, which the
    model would read as words and write back as words: escaped into an HTML fragment and searched as
    markup, whose segments keep the address as it is and place it by the alignment (`flatten`). An
    n-best list too (`finish`: of a text searched as one piece); alignments are of the text as it is."""
    options = options or DecodeOptions()
    kept = addresses_apply(options, True)
    addressed = [i for i, text in enumerate(texts) if addresses_kept(text, translator.src_tok)] if kept else []
    if not addressed:
        return plain_search(translator, texts, options, first_line, progress, names)
    label = names or [f"input line {first_line + i + 1}" for i in range(len(texts))]
    if any("\t" in texts[i] for i in addressed):  # each column its own text, as plain text's pieces are
        cells, owner = columns(texts, label)
        found = text_search(translator, [cell for cell, _ in cells], options, first_line, None, [n for _, n in cells])
        if progress is not None:
            progress(len(texts))
        return joined_columns(texts, owner, found)
    rest = [i for i in range(len(texts)) if i not in addressed]
    results: list[list[tuple]] = [[] for _ in texts]
    if rest:
        found = plain_search(translator, [texts[i] for i in rest], options, first_line, None, [label[i] for i in rest])
        for i, hyps in zip(rest, found):
            results[i] = hyps
    lines = [as_fragment(texts[i]) for i in addressed]
    for i, hyps in zip(
        addressed, search(translator, lines, options, first_line, None, "html", [label[i] for i in addressed], True)
    ):
        results[i] = as_text(hyps)
    if progress is not None:
        progress(len(texts))
    return results


# A line the markup route would change beyond its addresses: a lone CR (a line break to the HTML
# parser), control characters (the parser's U+FFFD); a tab is a space in markup's text: a line's
# columns go their own ways (`columns`)
NOT_THROUGH_MARKUP = re.compile(r"[\r\x00-\x08\x0b-\x1f\x7f]")


def as_fragment(text: str) -> str:
    """A plain-text line as an HTML fragment of text alone, for markup's search (its addresses kept)."""
    return html.escape(text, quote=False)


def as_text(hyps: list[tuple]) -> list[tuple]:
    """Hypotheses of an `as_fragment` line as plain text again."""
    return [(html.unescape(text), *more) for text, *more in hyps]


def columns(texts: list[str], names: list[str]) -> tuple[list[tuple[str, str]], list[int]]:
    """Every text's tab-separated columns as texts of their own (with the text's name), and the text
    each belongs to."""
    cells, owner = [], []
    for i, text in enumerate(texts):
        for cell in text.split("\t"):
            cells.append((cell, names[i]))
            owner.append(i)
    return cells, owner


def joined_columns(texts: list[str], owner: list[int], found: list[list[tuple]]) -> list[list[tuple]]:
    """Each text's columns' translations joined by its tabs again, with their mean score (`columns`)."""
    results: list[list[tuple]] = []
    for i, text in enumerate(texts):
        mine = [hyps for k, hyps in zip(owner, found) if k == i]
        if len(mine) == 1:  # no tab: its hypotheses as they are
            results.append(mine[0])
            continue
        scored = [hyps[0][1] for hyps, cell in zip(mine, text.split("\t")) if cell.strip()]
        results.append([("\t".join(hyps[0][0] for hyps in mine), sum(scored) / len(scored) if scored else 0.0)])
    return results


def addresses_apply(options: DecodeOptions, any_nbest: bool = False) -> bool:
    """Whether a text's addresses are kept through markup's search under `options`: one-best (with
    `any_nbest`, an n-best list asked too: `search`'s alternatives), no alignments or constraints, no
    pivot (markup's search aligns, and a pivot's two translations have no alignment: `through_pivot`
    searches each leg of its own, as text)."""
    return segments_apply(options, any_nbest) and options.pivot is None


def addresses_kept(text: str, tok: Tokenizer) -> bool:
    """Whether `text` goes through markup's search to keep its addresses, or characters the model
    cannot read (`unknown_runs`), as they are (`text_search`)."""
    kept = address_spans(text) or (unknown_runs(tok, text) and not mostly_unreadable(tok, text))
    return bool(kept) and not NOT_THROUGH_MARKUP.search(text)


def searcher(fmt: str) -> Callable[..., list[list[tuple]]]:
    """`search` for texts in `fmt` (text, html, xml): markup's, or plain text's (`text_search`), each
    through a pivot where one is asked (`through_pivot`)."""
    if fmt == "text":
        return through_pivot(text_search)
    markup_format = coerce(fmt, Format, "format")

    def markup(translator, texts, options=None, first_line=0, progress=None, names=None):
        found = search(translator, texts, options, first_line, progress, markup_format, names)
        return [
            [(on_one_line(out), *rest) for out, *rest in hyps] if "\n" not in text and "\r" not in text else hyps
            for text, hyps in zip(texts, found)
        ]

    return through_pivot(markup)


def through_pivot(search: Callable[..., list[list[tuple]]]) -> Callable[..., list[list[tuple]]]:
    """`search` (texts in, hypotheses out), which under `options.pivot` translates each text into the
    pivot and its best translation on into the target, both times as text (or markup) is translated:
    sentence by sentence, addresses and tags kept and placed, capitals read in the model's casing.
    (`Translator.search` pivots sentences as they are; markup's aligned search cannot pivot at all.)"""

    def pivoted(translator, texts, options=None, first_line=0, progress=None, names=None):
        options = options or DecodeOptions()
        if options.pivot is None:
            return search(translator, texts, options, first_line, progress, names)
        src_lang, tgt_lang = translator.directions.resolve(options.src_lang, options.tgt_lang)
        replace(options, src_lang=src_lang, tgt_lang=tgt_lang)  # made to be checked: a third language
        translator.directions.check_pivot(src_lang, tgt_lang, options.pivot)
        into = replace(options, pivot=None, src_lang=src_lang, tgt_lang=options.pivot, nbest=1)
        middle = [hyps[0][0] for hyps in search(translator, texts, into, first_line, None, names)]
        onward = replace(options, pivot=None, src_lang=options.pivot, tgt_lang=tgt_lang)
        return search(translator, middle, onward, first_line, progress, names)

    return pivoted


def on_one_line(markup: str) -> str:
    """A line's translated markup (a text of one line: a document's keep theirs) without line breaks,
    one line out for one in: a break that a
    character reference (`&#10;`) put in its text or an attribute, or the stand-in of a `<br>` the
    alignment moved, written as the reference again (whitespace in either place, as it was)."""
    return markup.replace("\r", "&#13;").replace("\n", "&#10;")


def translate(translator: Translator, texts: list[str], fmt: Format, options: DecodeOptions | None = None) -> list[str]:
    """The translation of each markup text."""
    return [hyps[0][0] for hyps in search(translator, texts, options, fmt=fmt)]
