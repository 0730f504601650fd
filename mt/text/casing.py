"""Text in capitals or in title case, searched in the casing the model learned.

A model learns the casing of its training text, which is sentences in sentence case. Given a sentence
in capitals ("A MAN IS SLEEPING ON A SOFA") it reads a string of rare pieces and writes a runaway (a
model trained on Multi30k answered "Ein „AAAAAAAA..."); in title case ("A Man Is Sleeping On A Sofa")
it guessed at pieces of words. So a piece (a sentence of a text, `mt.text.translate`) in capitals or
in title case is searched with each word in the casing the source vocabulary writes best (`recased`:
of a word's casings, the one the tokenizer spells in the fewest and likeliest pieces, the casing its
training text used: "MANN" is read as "Mann", "SOFA" as "sofa", "NASA" stays), and a translation of
capitals is written in capitals (`restored`). Title case is a style of headlines that not every
language shares: its translation keeps the casing the model gave it. Any other casing is the writer's
and is searched as it is.
"""

from __future__ import annotations

import re

from mt.tokenizer import Tokenizer

WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")  # letters, with an apostrophe inside ("DON'T")
# Title case: after its first word, at least TITLE_WORDS words start with a capital, more than do not,
# and those that do not are short (fewer than TITLE_LETTERS letters) or small words titles leave in
# lower case ("A Group of Men Loading Cotton onto a Truck"); "I love New York", "My name is John Smith"
# are sentences. Not in a language that capitalises its nouns, where a sentence of nouns looks like a title.
TITLE_WORDS = 3
TITLE_LETTERS = 4
SMALL_WORDS = frozenset("from into onto over upon with than that near down unto till".split())
NOUNS_CAPITALISED = frozenset({"de", "lb", "gsw", "bar", "nds"})
LIKELIER = 0.7  # nats: about twice as likely
SENTENCE_END = re.compile(r"[.!?…]")


def shouted(piece: str) -> bool:
    """Whether `piece` is written in capitals: two capital letters or more and no lower-case letter."""
    return piece.isupper() and sum(1 for c in piece if c.isupper()) >= 2


def capitalises_nouns(language: str) -> bool:
    """Whether `language` (an ISO code, "de", "de-CH", "de_AT") writes its nouns with a capital."""
    return language.replace("_", "-").split("-")[0].lower() in NOUNS_CAPITALISED


def titled(piece: str) -> bool:
    """Whether `piece` is in title case ("Breaking News from the Capital"): see TITLE_WORDS. A word in
    capitals (an acronym) fits a title too; a piece of capitals alone is `shouted`."""
    capitalised = lower = 0
    for word in WORD.findall(piece)[1:]:
        if word[0].isupper():
            capitalised += 1
        elif len(word) >= TITLE_LETTERS and word.lower() not in SMALL_WORDS:
            return False
        else:
            lower += 1
    return capitalised >= TITLE_WORDS and capitalised > lower and not piece.isupper()


def recased(tok: Tokenizer, piece: str, titles: bool = True) -> str:
    """`piece` as the model should read it (module docstring): in capitals or (with `titles`: not in a
    language that capitalises its nouns) in title case, each word in its likeliest casing, a sentence's
    first with a capital; else as it is."""
    if shouted(piece):
        capitals = True
    elif titles and titled(piece):
        capitals = False
    else:
        return piece
    words = list(WORD.finditer(piece))
    choices = [spellings(match.group(), capitals) for match in words]
    costs = iter(tok.spelling_costs([spelling for spelling_list in choices for spelling in spelling_list]))
    out, at = [], 0
    for k, (match, spelling_list) in enumerate(zip(words, choices)):
        mine = [next(costs) for _ in spelling_list]
        # In capitals, the cheapest spelling, lower case first where costs tie. In title case, an
        # acronym stays; another word is lowered where the vocabulary writes its lower case as one
        # piece (a word it knows; in a joint vocabulary the capitalised piece may be the other
        # language's noun: "Park", "Hut"), in fewer pieces, or in pieces LIKELIER; a name it does not
        # know, spelt piece by piece either way, keeps its capital.
        if capitals:
            best = min(range(len(spelling_list)), key=lambda i: mine[i])
        else:
            (as_is, as_is_score), (lower, lower_score) = [cost[1:] for cost in mine]
            known = mine[1][0] <= mine[0][0]  # (no more pieces the vocabulary lacks)
            acronym = sum(1 for c in match.group() if c.isupper()) > 1
            best = int(
                known
                and not acronym
                and (lower < as_is or lower == 1 or (lower == as_is and lower_score < as_is_score - LIKELIER))
            )
        word = spelling_list[best]
        if k == 0 or SENTENCE_END.search(piece, words[k - 1].end(), match.start()):
            word = word[:1].title() + word[1:]
        out += [piece[at : match.start()], word]
        at = match.end()
    return "".join(out) + piece[at:]


def spellings(word: str, capitals: bool) -> list[str]:
    """The casings of `word` to choose from: from capitals, lower case, capitalised and capitals (an
    acronym); from title case, the word as written and in lower case."""
    if capitals:
        return [word.lower(), word[:1].title() + word[1:].lower(), word]
    return [word, word.lower()]


def restored(source: str, hyp: tuple) -> tuple:
    """`hyp` (translation, score[, alignment]) in capitals where its source piece is in capitals."""
    return (hyp[0].upper(), *hyp[1:]) if shouted(source) else hyp
