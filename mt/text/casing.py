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
# Title case: at least TITLE_WORDS words start with a capital, and every word of TITLE_LETTERS letters or
# more does (short words may be in lower case: "A Group of Men Loading Cotton onto a Truck"). Not in a
# language that capitalises its nouns, where a short sentence of nouns looks like one ("Der Hund ist im Park").
TITLE_WORDS = 3
TITLE_LETTERS = 5
NOUNS_CAPITALISED = frozenset({"de", "lb", "gsw", "bar", "nds"})
LIKELIER = 0.7  # nats: about twice as likely


def shouted(piece: str) -> bool:
    """Whether `piece` is written in capitals: two capital letters or more and no lower-case letter."""
    return piece.isupper() and sum(1 for c in piece if c.isupper()) >= 2


def titled(piece: str, language: str | None = None) -> bool:
    """Whether `piece`, in `language` (None: not known), is in title case ("Breaking News From The
    Capital"): see TITLE_WORDS. A word in capitals (an acronym) fits a title too; a piece of capitals
    alone is `shouted`."""
    if language is not None and language.split("-")[0].lower() in NOUNS_CAPITALISED:
        return False
    capitalised = 0
    for word in WORD.findall(piece):
        if word[0].isupper():
            capitalised += 1
        elif len(word) >= TITLE_LETTERS:
            return False
    return capitalised >= TITLE_WORDS and not piece.isupper()


def recased(tok: Tokenizer, piece: str, language: str | None = None) -> str:
    """`piece` (in `language`, where known) as the model should read it (module docstring): in capitals
    or in title case, each word in its likeliest casing, the first with a capital; else as it is."""
    if shouted(piece):
        capitals = True
    elif titled(piece, language):
        capitals = False
    else:
        return piece
    words = list(WORD.finditer(piece))
    choices = [spellings(match.group(), capitals) for match in words]
    costs = iter(tok.spelling_costs([spelling for spelling_list in choices for spelling in spelling_list]))
    out, at = [], 0
    for k, (match, spelling_list) in enumerate(zip(words, choices)):
        mine = [next(costs) for _ in spelling_list]
        # In capitals, the cheapest spelling, lower case first where costs tie. In title case, lower
        # case where the vocabulary writes it as one piece (a word it knows; in a joint vocabulary the
        # capitalised piece may be the other language's noun: "Park", "Hut"), in fewer pieces, or in
        # pieces LIKELIER; a name it does not know, spelt piece by piece either way, keeps its capital.
        if capitals:
            best = min(range(len(spelling_list)), key=lambda i: mine[i])
        else:
            (as_is, as_is_score), (lower, lower_score) = mine
            best = int(lower < as_is or lower == 1 or (lower == as_is and lower_score < as_is_score - LIKELIER))
        word = spelling_list[best]
        if k == 0:
            word = word[0].upper() + word[1:]
        out += [piece[at : match.start()], word]
        at = match.end()
    return "".join(out) + piece[at:]


def spellings(word: str, capitals: bool) -> list[str]:
    """The casings of `word` to choose from: from capitals, lower case, capitalised and capitals (an
    acronym); from title case, the word as written and in lower case."""
    if capitals:
        return [word.lower(), word[0] + word[1:].lower(), word]
    return [word, word.lower()]


def restored(source: str, hyp: tuple) -> tuple:
    """`hyp` (translation, score[, alignment]) in capitals where its source piece is in capitals."""
    return (hyp[0].upper(), *hyp[1:]) if shouted(source) else hyp
