"""Text in capitals, in title case or all in lower case, searched in the casing the model learned.

A model learns the casing of its training text, which is sentences in sentence case. Given a sentence
in capitals ("A MAN IS SLEEPING ON A SOFA") it reads a string of rare pieces and writes a runaway (a
model trained on Multi30k answered "Ein „AAAAAAAA..."); in title case ("A Man Is Sleeping On A Sofa")
it guessed at pieces of words; all in lower case ("ein mann schläft"), it reads German nouns and
names it knows with capitals as other pieces. So a piece (a sentence of a text, `mt.text.translate`)
cased so is searched with each word in the casing the source vocabulary writes best (`recased`: of a
word's casings, the one the tokenizer spells in the fewest and likeliest pieces, the casing its
training text used: "MANN" and "mann" are read as "Mann", "SOFA" as "sofa", "NASA" stays), and a
translation of capitals is written in capitals (`restored`). Title case is a style of headlines that
not every language shares, and lower case a writer's haste: their translations keep the casing the
model gave them. Any other casing is the writer's and is searched as it is.
"""

from __future__ import annotations

import re
import unicodedata

from mt.tokenizer import WORD, Tokenizer, capitalised, dotted_i, lower, upper

# Title case: after its first word, at least TITLE_WORDS words start with a capital, more than do not,
# and those that do not are SMALL_WORDS, which titles leave in lower case ("A Group of Men Loading
# Cotton onto a Truck"); "I love New York", "I met John in New York" are sentences. Not in a language
# that capitalises its nouns, where a sentence of nouns looks like a title.
TITLE_WORDS = 3
SMALL_WORDS = frozenset(
    "a an the and or but nor for so yet of in on at to by as via per off out up from into onto over upon "
    "with than near down unto till vs v de la le les los las el del des du da di y e et van von".split()
)
NOUNS_CAPITALISED = frozenset({"de", "lb", "gsw", "bar", "nds"})
LIKELIER = 0.7  # nats: about twice as likely
# A sentence's end between two words: the mark, what closes after it, then a space ("2.0", "U.S." none)
SENTENCE_END = re.compile(r"[.!?…][\"'”’“‘»«)\]]*\s")
# In a word's token (between spaces): code, an address, a handle
CODE_MARKS = ("://", "@", "#", "_", "\\", "=", "{", "}", "$", "|")
DOTTED_NAME = re.compile(r"[^\W_]\.[^\W\d_]{2}")  # "df.groupby", "WWW.EXAMPLE.DE"; not "z.B.", "U.S."
INITIALS = re.compile(r"(?<![^\W\d_])(?:[^\W\d_]\.){2,}")  # "U.S.A.", "z.B.", "i.e.": as written


def shouted(piece: str) -> bool:
    """Whether `piece` is written in capitals: two capital letters or more and no lower-case letter
    but "ß", which has no capital in common use ("STRAßE")."""
    if "ß" in piece:
        piece = piece.replace("ß", "")
    return piece.isupper() and sum(1 for c in piece if c.isupper()) >= 2


def capitalises_nouns(language: str) -> bool:
    """Whether `language` (an ISO code, "de", "de-CH", "de_AT") writes its nouns with a capital."""
    return language.replace("_", "-").split("-")[0].lower() in NOUNS_CAPITALISED


def titled(piece: str, strict: bool = False) -> bool:
    """Whether `piece` is in title case ("Breaking News from the Capital"): see TITLE_WORDS; `strict`
    (a language that capitalises its nouns, whose articles and verbs are not): every word after the
    first with a capital ("Zwei Junge Männer Spielen Fußball"). A word in capitals (an acronym) fits a
    title too; a piece of capitals alone is `shouted`."""
    capitalised = lower = 0
    for word in WORD.findall(piece)[1:]:
        if word[0].isupper():
            capitalised += 1
        elif strict or word.lower() not in SMALL_WORDS:
            return False
        else:
            lower += 1
    return capitalised >= TITLE_WORDS and capitalised > lower and not piece.isupper()


def lowered(piece: str) -> bool:
    """Whether `piece` is written all in lower case, two words or more (a chat's, a recogniser's)."""
    return piece.islower() and len(WORD.findall(piece)) > 1


def casing_of(piece: str, titles: bool = True, strict_titles: bool = False) -> str | None:
    """How `piece` is cased, where it is not as the model learned: "capitals", "title" (only with
    `titles`, or `strict_titles`: `titled`'s strict), "lower"; None: as written."""
    if shouted(piece):
        return "capitals"
    if (titles and titled(piece)) or (strict_titles and titled(piece, strict=True)):
        return "title"
    return "lower" if lowered(piece) else None


def recased(
    tok: Tokenizer, piece: str, titles: bool = True, table: dict[str, str] | None = None, language: str | None = None
) -> str:
    """`piece` as the model should read it (module docstring): in capitals, in lower case, or (with
    `titles`: not in a language that capitalises its nouns) in title case, each word in the casing
    its language's training text writes it in (`table`, where it holds the word), else the likeliest
    for the vocabulary, a sentence's first with a capital; else as it is. `language`: the source's, whose
    letters' cases are its own (Turkish "İ" and "I" are "i" and "ı" in lower case)."""
    normal = unicodedata.normalize("NFC", piece)  # a decomposed "Ä" is one letter of its word, not two
    mode = casing_of(normal, titles, strict_titles=table is not None)  # (a language of capitalised nouns:
    if mode is None:  # its title case only by a table, which knows its nouns from its other words)
        return piece
    capitals, piece = mode == "capitals", normal
    every = list(WORD.finditer(piece))  # (each word's place among all: a sentence's start, `starts_sentence`)
    places = [j for j, match in enumerate(every) if not in_code(piece, match)]
    words = [every[j] for j in places]
    choices = [spellings(match.group(), mode, language) for match in words]
    costs = iter(tok.spelling_costs([spelling for spelling_list in choices for spelling in spelling_list]))
    out, at = [], 0
    for k, (match, spelling_list) in enumerate(zip(words, choices)):
        mine = [next(costs) for _ in spelling_list]
        # In capitals, the spelling in the fewest pieces, lower case first where they tie (in a joint
        # vocabulary the capitalised piece may be the other language's noun, likelier than the word:
        # "Sofa", "Hand"); only a language that capitalises its nouns breaks ties by likelihood
        # ("MANN": "Mann", where "mann" is one piece too). In title case, an
        # acronym stays; another word is lowered where the vocabulary writes its lower case as one
        # piece (a word it knows; in a joint vocabulary the capitalised piece may be the other
        # language's noun: "Park", "Hut"), in fewer pieces, or in pieces LIKELIER; a name it does not
        # know, spelt piece by piece either way, keeps its capital.
        if capitals:
            best = min(range(len(spelling_list)), key=lambda i: mine[i] if not titles else mine[i][:2])
        elif mode == "lower":  # a capital only where the vocabulary writes the word better with one
            best = int(mine[1][0] <= mine[0][0] and mine[1][1] < mine[0][1])
        else:
            (as_is, as_is_score), (lowered_pieces, lower_score) = [cost[1:] for cost in mine]
            known = mine[1][0] <= mine[0][0]  # (no more pieces the vocabulary lacks)
            acronym = sum(1 for c in match.group() if c.isupper()) > 1
            best = int(
                titles  # (a strict title of capitalised nouns: only its table lowers a word)
                and known
                and not acronym
                and (
                    lowered_pieces < as_is
                    or lowered_pieces == 1
                    or (lowered_pieces == as_is and lower_score < as_is_score - LIKELIER)
                )
            )
        word = spelling_list[best]
        listed = table.get(upper(match.group(), language)) if table else None
        if listed is None and table and dotted_i(language):  # a table written before its language's i
            listed = table.get(lower(match.group(), language).upper())
        if listed is not None and (mode == "capitals" or lower(listed, language) == lower(match.group(), language)):
            # (but from capitals, the table's spelling is its casing: "STRASSE" is "Straße", where
            # "strasse" is not "Straße", nor "schoss" "Schoß"; in a title, an acronym stays as it is)
            if mode != "title" or sum(1 for c in match.group() if c.isupper()) < 2:
                word = listed
        if starts_sentence(piece, every, places[k]):
            word = capitalised(word, language)
        out += [piece[at : match.start()], word]
        at = match.end()
    return "".join(out) + piece[at:]


def in_code(piece: str, match: re.Match) -> bool:
    """Whether a word is part of something other than prose, whose letters are as they must be: a
    handle, a hashtag, a path or address, an identifier, a unit after a number ("@max_mustermann",
    "#berlin", "/usr/bin", "https://...", "df.groupby", "example.com", "2.5KG", "KM/H"), or initials
    ("U.S.A.", "z.B."); not "MÄNNER/FRAUEN", "UND/ODER" or "NICHT...VIELLEICHT"."""
    start = piece.rfind(" ", 0, match.start()) + 1
    end = piece.find(" ", match.end())
    token = piece[start : end if end >= 0 else len(piece)]
    before = piece[match.start() - 1] if match.start() else " "
    after = piece[match.end()] if match.end() < len(piece) else " "
    return (
        any(mark in token for mark in CODE_MARKS)
        or token.startswith(("/", "~"))
        or before.isdigit()
        or after.isdigit()
        or before in "<>"
        or after in "<>"
        or DOTTED_NAME.search(token) is not None
        or INITIALS.search(token) is not None
        or ("/" in token and any(len(part) < 3 or not part.isalpha() for part in token.strip(".,;:!?()\"'").split("/")))
    )


def starts_sentence(piece: str, words: list[re.Match], k: int) -> bool:
    """Whether the `k`th of the `words` of `piece` starts a sentence: the first, with nothing but
    punctuation before it ("5 MEN" is no sentence's start), or the first after a sentence's end, which
    does not follow a single letter's stop ("U.S. ARMY": an abbreviation's; "AUF DER A7. DIE" ends one)."""
    if k == 0:
        return not any(c.isalnum() for c in piece[: words[0].start()])
    before = words[k - 1]
    if len(before.group()) == 1 and piece[before.end() : before.end() + 1] == ".":
        return False
    return SENTENCE_END.search(piece, before.end(), words[k].start()) is not None


def spellings(word: str, mode: str, language: str | None = None) -> list[str]:
    """The casings of `word` to choose from: from capitals, lower case, capitalised and capitals (an
    acronym); from title case, the word as written and in lower case; from lower case, the word as
    written and capitalised."""
    if mode == "capitals":
        found = [lower(word, language), capitalised(lower(word, language), language), word]
    elif mode == "lower":
        found = [word, capitalised(word, language)]
    else:
        found = [word, lower(word, language)]
    # composed: lower() makes "İ" an "i" and a combining dot, which capitalised to "I" and the dot
    return [unicodedata.normalize("NFC", spelling) for spelling in found]


def restored(source: str, hyp: tuple, language: str | None = None) -> tuple:
    """`hyp` (translation, score[, alignment]) in capitals where its source piece is in capitals, as
    the translation's `language` writes them."""
    return (upper(hyp[0], language), *hyp[1:]) if shouted(source) else hyp
