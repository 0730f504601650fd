"""Texts in, translations out, through sentences: each text (an input line, a request's item) is cut
into sentences (`mt.text.sentences`), a sentence of more than `DecodeOptions.segment_tokens` source
tokens into clauses, and every piece of every text is searched in `Translator`'s usual batches; each
text's translations are put back between the source's own whitespace. One result per text, as
`Translator.search` gives: `search` has its signature, so that `mt.decoding.output.stream` and
`mt serve` take either.

Segmenting applies to one-best translation without alignments or constraints; with `nbest` above 1,
`alignment_layer` or `constraints`, each text is one segment (an n-best list or an alignment of a
joined paragraph would mean nothing), and the model's position limit cuts it as before. A joined
text's score is the mean of its pieces' scores.

A piece at least half of whose letters the source vocabulary cannot write (`UNREADABLE`; they would be
byte pieces or <unk>: text in a script the model's vocabulary never held, which it can only turn into a runaway of guesses, 200,000 characters for a
20,000-character Chinese line into an EN->DE model) is not searched: it is copied into the
translation as it is (score 0), with a warning where the caller shows them (`kept`). A piece of no
letters (a list's number cut off its sentence, "42" or "12:45" alone, a rule of dashes, emoji alone)
is copied too, without a word: there is nothing to translate, and a model asked anyway invents a
sentence ("42" came back as "Drei Arbeiter kämpfen."). In a piece the model can read, what the
vocabulary cannot write (a name in another script, an emoji, a symbol) is kept as it is and placed by
the alignment, as web addresses are (`unknown_runs`, through markup's search: mt.text.markup_translate).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from typing import Callable

from mt import log
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.text.casing import capitalises_nouns, recased, restored, shouted
from mt.text.sentences import UNSPACED, Span, cut_long, line_span, reassemble, sentence_spans
from mt.tokenizer import Tokenizer

UNREADABLE = 0.5  # a piece with at least this share of letters the vocabulary lacks is copied, not searched
# A source piece that ends in one of these ends a sentence; one that does not (a heading, a table cell, a
# button's label, a clause cut off a long sentence) gets no full stop the model added (`as_source_ends`).
SENTENCE_ENDS = ".!?…:;‽‼⁉⁈⁇。！？｡।॥؟۔።։။"
CLOSING = "\"'»«”’›‹」』）)]}"  # after the sentence's end: ("He left.") ends in a full stop too
ADDED_STOPS = (".", "。", "｡")
# Abbreviations a translation may end in, whose stop is theirs, not a sentence's (lower case, without it)
ABBREVIATIONS = frozenset(
    "usw bzw etc evtl ggf inkl zzgl exkl bspw vgl sog ca nr dr mr mrs ms jr sr st inc ltd co corp vs "
    "approx dept vol fig abs tel mio mrd cf cie mme mlle env av".split()
)
DOTTED = re.compile(r"[^\W\d_]{1,3}(?:\.[^\W\d_]{1,3})+")  # z.B, u.a, U.S, e.g (their last stop taken off)
ROMAN = re.compile(r"[IVXLC]{1,7}")


def segments_apply(options: DecodeOptions, any_nbest: bool = False) -> bool:
    """Whether texts are cut into pieces under `options` (module docstring); with `any_nbest`, whatever
    n-best list they ask (`pieces`' nbest_of_sentences)."""
    return (any_nbest or options.nbest == 1) and options.alignment_layer is None and not options.constraints


def rules_language(translator: Translator, text: str, options: DecodeOptions) -> str:
    """The language whose sentence rules cut `text`: the source given, the model's one source, or,
    for a model of several given none (`--src-lang auto`), the one the text is identified as."""
    sources = translator.directions.sources()
    if options.src_lang or len(sources) == 1:
        return options.src_lang or sources[0]
    from mt.text.language import Unidentifiable, identifier_for

    try:
        return identifier_for(tuple(sources)).likeliest(text)
    except Unidentifiable:  # a source lingua does not know: the first source's rules, as before
        return sources[0]


def segment(translator: Translator, texts: list[str], options: DecodeOptions) -> list[list[Span]]:
    """Each text's pieces as spans: its sentences (or the whole text, `options.sentences` off), each
    cut to at most `options.segment_tokens` source tokens (within the model's positions)."""
    limit = min(options.segment_tokens, translator.max_src_tokens - 1)

    def tokens(piece: str) -> int:  # (a piece in capitals is cut as it will be read: mt.text.casing)
        return len(translator.src_tok.encode([piece.lower() if options.recase and shouted(piece) else piece])[0])

    plans = []
    for text in texts:
        spans = (
            sentence_spans(text, rules_language(translator, text, options)) if options.sentences else line_span(text)
        )
        plans.append([piece for span in spans for piece in cut_long(text, span, tokens, limit)])
    return plans


JOINING = "\u200d\ufe0e\ufe0f\u20e3"  # inside an emoji's sequence: the joiner, the variation selectors, a keycap


def mostly_unreadable(tok: Tokenizer, text: str) -> bool:
    """Whether at least UNREADABLE of the letters of `text` are ones the source vocabulary cannot write."""
    letters = [c for c in text if c.isalpha()]
    capitals = shouted(text)
    return bool(letters) and sum(unknown(tok, c, capitals) for c in letters) >= UNREADABLE * len(letters)


def unknown_letters(tok: Tokenizer, text: str) -> int:
    """How many letters of `text` the source vocabulary cannot write (as `unknown_runs` finds them)."""
    capitals = shouted(text)
    return sum(1 for c in text if c.isalpha() and not c.isascii() and unknown(tok, c, capitals))


def unknown(tok: Tokenizer, c: str, capitals: bool) -> bool:
    """Whether the source vocabulary cannot write `c`; in a text in `capitals`, which is read in lower
    case (mt.text.casing), a capital it lacks whose lower case it has is read ("LÄUFT": "läuft")."""
    if not tok.unknown_character(c):
        return False
    lower = c.lower()
    return not (capitals and lower != c and len(lower) == 1 and not tok.unknown_character(lower))


def unknown_runs(tok: Tokenizer, text: str) -> list[Span]:
    """The runs of characters the source vocabulary cannot write: a name in another script, an emoji, a
    symbol. In a text the model can otherwise read (not `mostly_unreadable`: such a text is copied
    whole, with a warning), they were byte pieces the model turned into a runaway ("A man from Москва"
    lost the name and the rest of the sentence came back as "oder oder oder"); kept as they are, they
    are placed by the alignment as addresses are. Runs one space apart are one ("Новый Город")."""
    if text.isascii() or not any(tok.unknown_character(c) for c in set(text) if not c.isascii()):
        return []  # the common case, at C's speed: a server asks this of every line on its event loop
    capitals = shouted(text)
    runs: list[list[int]] = []
    for i, c in enumerate(text):
        inside = bool(runs) and runs[-1][1] == i
        if c.isspace():
            continue
        if c in JOINING or combining(c):  # with what it joins, never alone
            if inside:
                runs[-1][1] = i + 1
            continue
        if not c.isascii() and unknown(tok, c, capitals):  # (ASCII's punctuation marks lines and lists: read)
            if inside:
                runs[-1][1] = i + 1
            elif runs and text[runs[-1][1] : i] == " ":
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
    return merged([whole_word(text, a, b) for a, b in runs])


def combining(c: str) -> bool:
    """A mark written on the character before it (an accent, an enclosing circle)."""
    return unicodedata.category(c) in ("Mn", "Me")


def whole_word(text: str, start: int, end: int) -> Span:
    """A run of letters grown to the word it is in: "Wałęsa" kept whole, not "Wa" and "sa" read around a
    kept "łę". Only over letters of scripts written with spaces (in Chinese or Thai the "word" would be
    the clause), and not a run of symbols or emoji ("Thanks😊": the word is read)."""
    if not any(c.isalpha() for c in text[start:end]):
        return start, end

    def letter(c: str) -> bool:
        return (c.isalpha() and not UNSPACED.match(c)) or combining(c)

    while start > 0 and letter(text[start - 1]):
        start -= 1
    while end < len(text) and letter(text[end]):
        end += 1
    return start, end


def merged(spans: list[Span]) -> list[Span]:
    """Spans in order with those that overlap or touch made one."""
    out: list[list[int]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def unreadable(tok: Tokenizer, pieces: list[str]) -> dict[int, str]:
    """The pieces copied rather than searched, by index (module docstring): those without letters, and
    those at least UNREADABLE of whose letters the source vocabulary does not hold. Counted in letters,
    not tokens: an emoji is four byte pieces, and "Love it 😍😍" was copied untranslated. All encoded
    in one call (`tok`: the source's)."""
    found = {}
    for i, (piece, ids) in enumerate(zip(pieces, tok.encode(pieces) if pieces else [])):
        if not any(c.isalpha() for c in piece):  # numbers, punctuation, symbols: nothing to translate
            found[i] = piece
        elif tok.unknown_pieces(ids) and mostly_unreadable(tok, piece):
            found[i] = piece
    return found


def pieces(
    translator: Translator, texts: list[str], options: DecodeOptions, nbest_of_sentences: bool = False
) -> tuple[list[str], list[list[Span]], dict[int, str]]:
    """The pieces to search, all texts' in order; each text's plan (`segment`) for `join`; and the
    pieces copied instead (`unreadable`), by their index among all texts' pieces. Under options that
    segmenting does not apply to, each text is its one piece; but with `nbest_of_sentences` an n-best
    list asked still cuts texts: a text of one sentence keeps its n best, one of several is joined
    from its sentences' best (`mt serve`: a page's pasted paragraph was one segment, translated badly,
    because the page asks for alternatives; `mt translate --nbest` promises K lines per input)."""
    if segments_apply(options, nbest_of_sentences):
        plans = segment(translator, texts, options)
    else:  # each text whole; one without letters, or in a script the model cannot read, still copied
        plans = [[(0, len(text))] for text in texts]
    every = [text[a:b] for text, plan in zip(texts, plans) for a, b in plan]
    kept = unreadable(translator.src_tok, every)
    if not segments_apply(options, nbest_of_sentences):  # a blank line gives an empty one, as the search's
        kept.update({i: "" for i, text in enumerate(texts) if not text.strip()})
    return read_cased(translator, [piece for i, piece in enumerate(every) if i not in kept], options), plans, kept


def recasing(options: DecodeOptions) -> bool:
    """Whether pieces in capitals or title case are searched in the model's casing (mt.text.casing):
    unless `options` ask for the text as it is, or for constraints (a phrase as it is given)."""
    return options.recase and not options.constraints


def read_cased(translator: Translator, pieces: list[str], options: DecodeOptions) -> list[str]:
    """`pieces` as the model reads them (`recasing`), by the source language's casing table where it is
    known and the experiment has one; title case only where neither the source language asked nor, not
    asked, any of the model's sources capitalises its nouns (mt.text.casing)."""
    if not recasing(options):
        return pieces
    languages = [options.src_lang] if options.src_lang else translator.directions.sources()
    titles = not any(capitalises_nouns(language) for language in languages)
    tok = translator.src_tok
    language = languages[0] if len(languages) == 1 else None  # (one language's words and letters)
    table = tok.casing.get(language) if language else None
    return [recased(tok, piece, titles, table, language) for piece in pieces]


def target_language(translator: Translator, options: DecodeOptions) -> str | None:
    """The language the translations are written in: the one asked, else the model's only one."""
    targets = [options.tgt_lang] if options.tgt_lang else translator.directions.targets(options.src_lang)
    return targets[0] if len(targets) == 1 else None


def identity(text: str) -> str:
    """The alignment of a text copied as it is: each word to itself."""
    return " ".join(f"{k}-{k}" for k in range(len(text.split())))


def as_source_ends(source: str, hyp: tuple) -> tuple:
    """`hyp` (translation, score[, alignment]) without the full stop its translation ends in where the
    source piece ends in none: trained on sentences, a model ends a title or a label with one ("# A dog
    in the park" came back "# Ein Hund im Park."). An ellipsis stays; a stop that was a word of its own
    takes its alignment links with it."""
    text = hyp[0]
    body = text.rstrip()
    end = source.rstrip().rstrip(CLOSING)
    if not end or end[-1] in SENTENCE_ENDS or not body.endswith(ADDED_STOPS) or body.endswith(".."):
        return hyp
    if stop_needed(source, body):  # "Ludwig XIV.", "Er wurde 3.", "usw.": the target's own stop
        return hyp
    kept = body[:-1]
    if len(hyp) > 2 and (not kept or kept[-1].isspace()):  # the stop was the last word: its links go
        last = len(body.split()) - 1
        links = " ".join(link for link in hyp[2].split() if int(link.split("-")[1]) != last)
        return (kept.rstrip() + text[len(body) :], hyp[1], links, *hyp[3:])
    return (kept.rstrip() + text[len(body) :], *hyp[1:])


def ended_as(source: str, hyps: list[tuple]) -> list[tuple]:
    """Each hypothesis ended as its source (`as_source_ends`), the n-best list without the entries that
    became another's ("Ein Hund" beside "Ein Hund.")."""
    found, seen = [], set()
    for hyp in (as_source_ends(source, h) for h in hyps):
        if hyp[0] not in seen:
            seen.add(hyp[0])
            found.append(hyp)
    return found


def stop_needed(source: str, body: str) -> bool:
    """Whether a translation's final stop is its last word's, not a sentence's: an abbreviation's
    ("usw.", "z.B."), an ordinal's where the source marks one ("He finished 3rd": "Er wurde 3."), a
    Roman numeral's where the source has that numeral ("Louis XIV": "Ludwig XIV.")."""
    words = body[:-1].split()
    last = words[-1] if words else ""
    if last.isdigit():
        return re.search(rf"(?<!\d){last}(?:st|nd|rd|th|\.)", source) is not None
    if ROMAN.fullmatch(last):
        return last in source.split()
    return last.lower() in ABBREVIATIONS or DOTTED.fullmatch(last) is not None


def join(
    texts: list[str],
    plans: list[list[Span]],
    found: list[list[tuple]],
    kept: dict[int, str] | None,
    options: DecodeOptions,
    language: str | None = None,
) -> list[list[tuple]]:
    """Each text's result from its pieces' (`found`, `Translator.search`'s of `pieces`, for the pieces
    searched; `kept` pieces as they are), a piece in capitals translated into capitals (`recasing`
    under `options`, as the target `language` writes them): a plan of one piece keeps its hypotheses (put between the text's own spaces);
    else one (translation, mean score)."""
    kept = kept or {}
    recase = recasing(options)
    searched = iter(found)
    sources = [text[a:b] for text, plan in zip(texts, plans) for a, b in plan]
    every = [
        [(kept[i], 0.0, *([identity(kept[i])] if options.alignment_layer is not None else []))]
        if i in kept
        else ended_as(sources[i], [restored(sources[i], h, language) if recase else h for h in next(searched)])
        for i in range(len(sources))
    ]
    results, at = [], 0
    for text, plan in zip(texts, plans):
        hyps = every[at : at + len(plan)]
        at += len(plan)
        if plan == [(0, len(text))]:
            results.append(hyps[0])
            continue
        if len(plan) == 1:  # one piece between spaces ("Hello world. "): its n best kept, with those spaces
            results.append([(reassemble(text, plan, [h[0]]), *h[1:]) for h in hyps[0]])
            continue
        score = sum(h[0][1] for h in hyps) / len(hyps) if hyps else 0.0
        joined = reassemble(text, plan, [h[0][0] for h in hyps]) if plan else text  # a blank text: as it is
        results.append([(joined, score)])
    return results


def labels(count: int, first_line: int, names: list[str] | None) -> list[str]:
    """What a warning calls each of `count` texts: `names` (a document's unit: "the text '...'"), else
    its input line."""
    return names if names is not None else [f"input line {first_line + k + 1}" for k in range(count)]


def piece_names(plans: list[list[Span]], kept: dict[int, str], names: list[str]) -> list[str]:
    """Each searched piece's text's name (`names`), so that a warning about a piece (a language tag
    written in it, a cut) names the line it is in, not its place among all texts' pieces."""
    every = [name for name, plan in zip(names, plans) for _ in plan]
    return [name for i, name in enumerate(every) if i not in kept]


def kept_warnings(plans: list[list[Span]], kept: dict[int, str], names: list[str]) -> list[str]:
    """One warning per text with pieces copied untranslated, by its name; a piece without letters,
    copied as there is nothing in it to translate, is not one."""
    warnings, at = [], 0
    for name, plan in zip(names, plans):
        chars = sum(len(kept[i]) for i in range(at, at + len(plan)) if i in kept and any(c.isalpha() for c in kept[i]))
        at += len(plan)
        if chars:
            warnings.append(
                f"{name}: {chars} characters in a script the model cannot read (not in its vocabulary) "
                "copied untranslated"
            )
    return warnings


def search_pieces(
    translator: Translator,
    todo: list[str],
    plans: list[list[Span]],
    kept: dict[int, str],
    options: DecodeOptions,
    first_line: int = 0,
    names: list[str] | None = None,
) -> list[list[tuple]]:
    """The searched pieces' hypotheses (`todo`, of `plans` less `kept`), each warning naming the text
    the piece is in: one for each text with pieces copied untranslated, and the search's own."""
    names = labels(len(plans), first_line, names)
    for warning in kept_warnings(plans, kept, names):
        log.warn(warning)
    return translator.search(todo, options, first_line, names=piece_names(plans, kept, names)) if todo else []


def search(
    translator: Translator,
    texts: list[str],
    options: DecodeOptions | None = None,
    first_line: int = 0,
    progress: Callable[[int], None] | None = None,
    names: list[str] | None = None,
) -> list[list[tuple]]:
    """`Translator.search` over `texts`, each translated piece by piece (module docstring); `progress`
    counts texts, as there; `names`, what a warning calls each text (default: its input line)."""
    options = options or DecodeOptions()
    if options.constraints:  # (a phrase the translation must hold may end in its stop, be in capitals)
        return translator.search(texts, options, first_line, progress)
    todo, plans, kept = pieces(translator, texts, options)
    found = search_pieces(translator, todo, plans, kept, options, first_line, names)
    results = join(texts, plans, found, kept, options, target_language(translator, options))
    if progress is not None:
        progress(len(texts))
    return results


def translate(translator: Translator, texts: list[str], options: DecodeOptions | None = None) -> list[str]:
    """The best translation of each text, piece by piece."""
    return [hyps[0][0] for hyps in search(translator, texts, replace(options or DecodeOptions(), nbest=1))]
