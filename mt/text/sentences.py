"""Where a text's sentences are: character spans into the text itself, never strings searched for
again, so that whatever lies between two sentences (spaces, tabs, line breaks) is kept byte for byte
when the translations are put back (`reassemble`), as bergamot's AnnotatedText keeps it; where an
unspaced source (Chinese, Japanese) has nothing between two, a space goes between translations in a
spaced script (`gaps`).

The segmenter is sentencex (Wikimedia's rule-based segmenter, ~300 languages through fallback chains,
offline): chosen by bench/segmenters.py against pysbd, syntok and the Moses splitter (docs/benchmarks.md).
A language it does not know is segmented by English's rules. A sentence never crosses a line break
or a tab.
Two cuts sentencex makes are taken back: after an initial ("M. Dupont", "J.-P. Sartre") in a language
whose rules cut there (a Golden Rule, pysbd's), and after a German ordinal ("der 2. Weltkrieg", "im 19.
Jahrhundert": an article or a preposition, a number, its period), where the noun after it is capitalised.
`cut_long` cuts a sentence of too many tokens at clause marks, then at spaces, then anywhere.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from mt.language_codes import base_language

Span = tuple[int, int]  # [start, end) character offsets into the text

# A clause ends here (the mark and the spaces after it). An ASCII mark only before a space: "1,250,000",
# "12:45" and "https://" are not cut; the CJK marks take no space after them.
CLAUSE = re.compile(r"[,;:](?=\s)\s*|[，；：、]\s*")
SPACE = re.compile(r"\s+")
# What lies between line breaks ("\n", "\r\n", a lone "\r") and tabs: a tab separates columns (a table
# pasted as text, a row of a .txt file), each its own piece, the tabs kept between them
LINE = re.compile(r"[^\r\n\t]+")


# Web and mail addresses: no words to translate (a model asked to turns them into words: a URL came back
# as "Tomeeee"), and no words to identify a language by. The characters of a URL, not the CJK text that
# follows one without a space; the punctuation that ends a sentence after one is not its own.
_UNSPACED = "\u0e00-\u0e7f\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
_NOT_URL = f'\\s<>"{_UNSPACED}'
_W = f"[^\\W{_UNSPACED}]"  # a letter or digit (any script's but those written without spaces) or _
# Top-level domains a bare domain is known by: those that are no word nor file extension, and those
# that are (`in`, `es`, `it`, `de`: `m.in.`, `gut.es regnete`, `Makefile.in`), known only under a
# subdomain (`news.heise.de`) or with a path or port after them (`heise.de/news`)
_TLDS = (
    "com|org|net|edu|gov|int|info|biz|io|dev|eu|ch|fr|nl|lu|uk|ie|pt|gr|cz|sk|hu|bg|hr|si|dk|fi|ee|lv|lt|ru|ua|"
    "tr|il|cn|jp|kr|tw|hk|au|nz|ca|mx|br|ar|cl|za"
)
_WORD_TLDS = "de|at|be|es|it|in|no|se|us|co|pl|ro|app|ai"
_DOMAIN_LABEL = f"{_W}(?:{_W}|-)*\\."
_DOMAIN_END = f"(?!{_W}|-)"
_DOMAIN_TAIL = f"(?::\\d+)?(?:[/?#][^{_NOT_URL}]*)?"  # a port, a path, a query, a fragment
ADDRESSES = re.compile(
    rf"(?<![a-z0-9+.-])(?:[a-z][a-z0-9+.-]*://|www\.)[^{_NOT_URL}]+"  # not the Thai, Hangul or CJK after it
    # a mail address, `müller@firma.de` too (`mailto:` and a `?subject=` after it; git's
    # `git@host:org/repo.git`), beginning where its run of address characters does
    rf"|(?<!{_W})(?<![.%+-])(?:mailto:)?(?:{_W}|[.%+-])+@(?:{_W}|-)+(?:\.(?:{_W}|-)+)*\.[^\W\d_{_UNSPACED}]{{2,}}"
    rf"(?:[:?][^{_NOT_URL}]+|(?!{_W}|-))"
    # a bare domain (`example.com`, `heise.de/news`), known by a lower-case top-level domain of the common
    # ones (_TLDS, _WORD_TLDS): not a file name (`README.md`) nor two sentences without a space (`fine.It`)
    rf"|(?<!{_W})(?<![@.+-])(?:{_DOMAIN_LABEL})+(?-i:{_TLDS}){_DOMAIN_END}{_DOMAIN_TAIL}"
    rf"|(?<!{_W})(?<![@.+-])(?:{_DOMAIN_LABEL}){{2,}}(?-i:{_WORD_TLDS}){_DOMAIN_END}{_DOMAIN_TAIL}"
    rf"|(?<!{_W})(?<![@.+-]){_DOMAIN_LABEL}(?-i:{_WORD_TLDS}){_DOMAIN_END}(?::\d+|[/?#])[^{_NOT_URL}]*",
    re.IGNORECASE,
)
TRAILING = ".,;:!?'\"»”’)]}"  # what ends a sentence or closes a bracket or quote after an address
PAIRS = {"(": ")", "[": "]", "<": ">", '"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "„": "“"}


# What every address holds (a scheme's "://", "www.", a mail's "@", a dot before a domain's label): a text
# without any is answered without ADDRESSES, whose lookbehinds at every character are most of what a
# server's event loop spends on a line's addresses
MAYBE_ADDRESS = re.compile(r"://|www\.|@|\.\w", re.IGNORECASE)


def address_spans(text: str) -> list[Span]:
    """Where `text`'s web and mail addresses are (ADDRESSES), without the punctuation after them (a
    closing parenthesis stays where the address opened one: a Wikipedia link)."""
    if not MAYBE_ADDRESS.search(text):
        return []
    spans = []
    for match in ADDRESSES.finditer(text):
        start, end = match.span()
        stripped = start + len(text[start:end].rstrip(TRAILING))
        while (
            stripped < end
            and text[stripped] == ")"
            and text.count("(", start, stripped) > text.count(")", start, stripped)
        ):
            stripped += 1
        if stripped > start:
            spans.append((start, stripped))
    return spans


def split_at(text: str, spans: list[Span]) -> list[tuple[str, str]]:
    """`text` as (what precedes a span, the span's text) pairs, in order, the last span "" (what
    follows the last one): the one walk of every caller that treats addresses apart from the rest."""
    pairs, at = [], 0
    for start, end in [*spans, (len(text), len(text))]:
        pairs.append((text[at:start], text[start:end]))
        at = end
    return pairs


def enclosed(text: str, span: Span) -> Span:
    """`span` with the bracket or quotes right around it (`(https://x.org)`, `"www.x.org"`, `<...>`):
    kept with the address, where the translation would part them."""
    start, end = span
    if 0 < start and end < len(text) and PAIRS.get(text[start - 1]) == text[end]:
        return start - 1, end + 1
    return span


# An initial: one letter alone before its period, where sentencex cut.
INITIAL = re.compile(r"(?:^|[\s(\-‐])([^\W\d_])\.\s*$")
# A German ordinal: the word before the number is an article, a contracted preposition or a possessive
# ("der 2. Weltkrieg", "im 19. Jahrhundert", "beim 1. FC Köln"); a number after a noun ends its sentence
# ("mit der Nummer 10. Ein Mann ..."). Other languages that write ordinals with a period (Danish, Czech,
# Finnish, ...) write the noun after it in lower case, and there sentencex does not cut.
ORDINAL = re.compile(r"(?:^|\s)(\w+)\s+\d{1,3}\.\s*$")
GERMAN_ORDINAL_LEADS = frozenset(
    """der die das dem den des ein eine einem einen einer eines am im zum zur vom beim ins ans aufs
    jeder jede jedes jedem jeden dieser diese dieses diesem diesen
    mein meine meinem meinen meiner meines dein deine deinem deinen deiner deines sein seine seinem seinen
    seiner seines ihr ihre ihrem ihren ihrer ihres unser unsere unserem unseren unserer unseres euer eure
    eurem euren eurer eures""".split()
)


# Words that start a sentence, not a name or a noun after an initial or an ordinal: pronouns, articles,
# conjunctions and adverbs of German and of the languages whose initials are joined (French, Spanish,
# Portuguese, Italian). After one, the cut sentencex made stands.
STARTERS = frozenset(
    """er sie es wir ihr ich du man das die der den dem des ein eine einen einem einer am im zum zur
    danach dann doch aber und oder also auch heute gestern hier dort so nun jetzt wenn als da weil dies
    diese dieser dieses was wer wie wo warum nach vor bei mit seit in an auf für um ab bis nicht kein keine
    il elle ils elles je tu nous vous on le la les un une ce cette ces mais et puis alors ensuite donc car
    si quand dans pour sur avec après avant ici oui non
    el los las él ella ellos ellas yo pero luego después entonces hoy ayer aquí sí no es está son
    o os as um uma ele ela eles elas eu nós mas depois então hoje ontem aqui sim não
    lo gli io lui lei noi voi loro ma poi oggi ieri qui""".split()
)


@lru_cache(maxsize=64)
def rules_for(lang: str) -> str:
    """`lang` if sentencex splits by its rules, else "en": sentencex leaves text whole in a language
    it has no rules or fallback for."""
    import sentencex

    probe = "One two. Three four."
    for code in (base_language(lang or "en"), lang):  # (pt-BR, PT, Argos's pb: Portuguese)
        if code and len(sentencex.get_sentence_boundaries(code, probe)) == 2:
            return code
    return "en"


@lru_cache(maxsize=64)
def misses_initials(rules: str) -> bool:
    """Whether sentencex's rules for `rules` cut after an initial that follows a lower-case word (its
    French, Spanish, Portuguese, Polish, Czech, Russian: "Il voit M. Dupont." was two sentences)."""
    import sentencex

    return len(sentencex.get_sentence_boundaries(rules, "Abc def J. Ghi jkl. Mno.")) > 2


def continues(text: str, cut: int, end: int, rules: str, lang: str) -> bool:
    """Whether the sentence cut at `cut` goes on: a lower-case word follows what looks like an
    abbreviation sentencex does not know (`abbreviated`: "3 mi. on Sun. afternoon"), or the cut follows
    an initial or a German ordinal (above) and a word (or an initial's hyphen) comes next."""
    after = text[cut:end].lstrip()
    if after[:1].isdigit():  # "approx. 5 euros", "vol. 2", "No. 5": the abbreviation of a number's
        word = NUMBER_WORD.search(text[:cut].rstrip())
        base = rules.replace("_", "-").split("-")[0].lower()
        return word is not None and (
            word.group(1).lower() in BEFORE_NUMBERS or word.group(1) in BEFORE_NUMBERS_IN.get(base, ())
        )
    if not after or not (after[0].isalpha() or after[0] in "-‐"):
        return False
    word = re.match(r"\S+", after)
    lower = word is not None and not any(c.isupper() for c in word.group())  # ("iPhone" starts a sentence)
    if lower and after[0].islower() and text[:cut].rstrip().endswith(".") and abbreviated(text[:cut].rstrip()):
        return True
    word = re.match(r"[^\W\d_]+", after)
    if word and word.group().lower() in STARTERS and after[word.end() : word.end() + 1] != ".":
        return False  # a word that starts sentences ("am 3. Danach ...", "au point A. Elle ..."): one does
    before = text[max(0, cut - 40) : cut]
    initial = INITIAL.search(before)
    if initial and initial.group(1).isupper() and misses_initials(rules):
        return True
    german = rules.replace("_", "-").split("-")[0].lower() == "de"
    ordinal = ORDINAL.search(before) if german else None
    return ordinal is not None and ordinal.group(1).lower() in GERMAN_ORDINAL_LEADS


# Abbreviations written before a number, whose stop ends no sentence (sentencex cuts "approx. 5" and
# "vol. 2" in English): in any language, and, as written, in one ("Art." in German; "art." ends an
# English sentence: "He loves art. 5 people came.")
BEFORE_NUMBERS = frozenset("approx ca cca nr nrs vol vols fig figs pp eq eqs refs".split())
BEFORE_NUMBERS_IN = {
    "en": frozenset("p No Nos ch Ch chap Chap para Para Tab Sec".split()),
    "de": frozenset("Art Abs Tab S Bd Kap Ziff".split()),
    "fr": frozenset("env p chap para".split()),
    "it": frozenset("p pag para".split()),
    "es": frozenset("p pág núm".split()),
    "pt": frozenset("p pág".split()),
    "pl": frozenset("s".split()),
    "cs": frozenset("s".split()),
}
NUMBER_WORD = re.compile(r"(?:^|[\s(])([^\W\d_]+)\.$")
ABBREVIATION = re.compile(r"(?:^|[\s(])(?:[^\W\d_]{1,6}|[^\W\d_]{1,2}(?:\.[^\W\d_]{1,2})+)\.$")


def abbreviated(before: str) -> bool:
    """Whether `before` (a text up to a full stop) ends in what looks like an abbreviation: a word of at
        most three letters ("mi.", "Sun.", "etc.") or short letters with stops inside ("e.g.", "z.B."; not
    "readme.txt."), in a text
        with capitals (lower-cased text, a chat's or a recogniser's, starts its sentences in lower case)."""
    return bool(ABBREVIATION.search(before)) and any(c.isupper() for c in before)


def sentence_spans(text: str, lang: str) -> list[Span]:
    """The spans of the sentences of `text` in language `lang` (an ISO code such as "en", "de"), in
    order, each without the whitespace around it; a blank text has none."""
    import sentencex

    rules = rules_for(lang)
    spans = []
    for line in LINE.finditer(text):
        start, end = line.span()
        cuts = [start]
        for boundary in sentencex.get_sentence_boundaries(rules, text[start:end]):
            cut = start + boundary["end_index"]
            if cuts[-1] < cut < end and not continues(text, cut, end, rules, lang):
                cuts.append(cut)
        pieces = [s for s in (strip(text, a, b) for a, b in zip(cuts, [*cuts[1:], end])) if s[0] < s[1]]
        if pieces and (mark := LINE_MARK.match(text, pieces[0][0], pieces[0][1])) and mark.end() < pieces[0][1]:
            pieces[0] = (mark.end(), pieces[0][1])  # the mark stays outside, as the spaces around it do
        spans += [unbracketed(text, a, b) for a, b in pieces]
    return spans


BRACKETS = {"(": ")", "[": "]", "{": "}", "（": "）", "【": "】"}


def unbracketed(text: str, start: int, end: int) -> Span:
    """A sentence's span inside the brackets around the whole of it ("(A dog is sleeping.)"): they stay
    outside its translation, as a line's mark does (a model dropped them)."""
    close = BRACKETS.get(text[start]) if start < end else None
    if close is None or text[end - 1] != close:
        return start, end
    depth = 0
    for i in range(start, end):
        depth += (text[i] == text[start]) - (text[i] == close)
        if depth == 0 and i < end - 1:  # "(a) and (b)": the first closes before the end
            return start, end
    inner = strip(text, start + 1, end - 1)
    return inner if inner[0] < inner[1] else (start, end)


# What a line may start with outside its text: a mail's quote marks, a list's bullet or its letter or
# number in brackets, a heading's hashes; each before a space. A model asked to translate it drops it
# or makes a word of it ("* A dog runs." came back without its bullet, "> Thanks" without its quote).
# Not "1." or "a.": a German date ("3. Oktober") or an abbreviation ("e. g.") starts so (and a list's
# "1." that sentencex cuts off is a piece without letters, copied as it is).
LINE_MARK = re.compile(r"(?:(?:>[ \t]?)*>|[-*+•‣◦–—]|\(?\d{1,3}\)|\(?[a-z]\)|#{1,6})[ \t]+")


def strip(text: str, start: int, end: int) -> Span:
    """The span without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def line_span(text: str) -> list[Span]:
    """The whole text as one segment (sentence splitting off), whitespace around it left out."""
    span = strip(text, 0, len(text))
    return [span] if span[0] < span[1] else []


def cut_long(text: str, span: Span, tokens: Callable[[str], int], limit: int) -> list[Span]:
    """`span` as pieces of at most `limit` tokens (`tokens` counts them): cut at the clause mark
    (, ; : and their CJK forms) nearest its middle, else at the space nearest it, else in the middle
    (a text without spaces: Chinese, Japanese), and the halves cut again until each fits."""
    start, end = span
    if end - start < 2 or tokens(text[start:end]) <= limit:
        return [span]
    middle = (start + end) // 2
    cut = nearest(CLAUSE, text, start, end, middle) or nearest(SPACE, text, start, end, middle) or middle
    pieces = []
    for part in ((start, cut), (cut, end)):
        part = strip(text, *part)
        if part[0] < part[1]:
            pieces += cut_long(text, part, tokens, limit)
    return pieces


def nearest(pattern: re.Pattern, text: str, start: int, end: int, middle: int) -> int | None:
    """The end of the match of `pattern` within [start, end) nearest `middle`, that leaves text on
    both sides; None if there is none."""
    ends = [m.end() for m in pattern.finditer(text, start, end) if start < m.start() and m.end() < end]
    return min(ends, key=lambda cut: abs(cut - middle)) if ends else None


def reassemble(text: str, spans: list[Span], translations: list[str]) -> str:
    """`text` with each span replaced by its translation: everything outside the spans as it was, but
    for a space between two pieces of a text that had none (`gaps`)."""
    between = gaps(text, spans, translations)
    return "".join(part for gap, translation in zip(between, translations) for part in (gap, translation)) + between[-1]


# Scripts written without spaces between words and sentences: Han, kana, Hangul's symbols and full-width
# forms (。！？), Thai, Lao, Khmer, Myanmar.
UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)


def gaps(text: str, spans: list[Span], translations: list[str]) -> list[str]:
    """What goes before each piece's translation, and after the last: the source's text between the
    spans, as it was, but a space where the source had nothing between two pieces (Chinese, Japanese,
    Thai sentences, or a long sentence cut at "，"; not within a word of a spaced script, cut past the
    limit) and the translations either side of it end and begin in a spaced script ("I like cats.Do you
    like dogs?" was glued so)."""
    out, at = [], 0
    previous = ""
    for (start, end), translation in zip(spans, translations, strict=True):
        gap = text[at:start]
        # not inside a word of a spaced script (a long URL cut in its middle, or a word past the limit)
        in_word = 0 < start < len(text) and all(
            c.isalnum() and not UNSPACED.match(c) for c in text[start - 1 : start + 1]
        )
        spaced_out = previous and translation and not (UNSPACED.match(previous[-1]) or UNSPACED.match(translation[0]))
        if not gap and not in_word and spaced_out:
            gap = " " if not (previous[-1].isspace() or translation[0].isspace()) else ""
        out.append(gap)
        at, previous = end, (translation or (previous if not gap else ""))
    out.append(text[at:])
    return out
