"""The Ding German-English dictionary (Debian's trans-de-en, https://dict.tu-chemnitz.de/) as a corpus.

Its lines look like

    Aal {m} [cook.] | Aale {pl} :: eel | eels

Sides are split at ' :: ', variants at ' | ' (aligned one-to-one), synonyms at ';'. Variants where
both sides read as full sentences become sentence pairs; every other variant gives one phrase pair
(its first synonym on each side). Valid and test are HELD_OUT sentence pairs each, picked by a
fixed hash; train ("train": sentences and phrases; "sentences" and "phrases" alone) shares no side
with them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from mt.data.text_files import read_lines
from mt.errors import MtError

Pair = tuple[str, str]
HELD_OUT = 500  # sentence pairs in each of valid and test


# An annotation with the spaces before it: {n} {vt} (grammar), [ugs.] [cook.] (register, field),
# <Aalmolch> (other spellings), and /Kto./ (abbreviations, slash-delimited and space-separated).
_ANNOTATION = re.compile(r"\s*(?:\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|(?<!\S)/[^/\s][^/]*/(?!\S))")
# Parentheses glued to a word mark optional letters: "(a)round", "Lehrer(in)". Keep the letters.
_OPTIONAL_LETTERS = re.compile(r"(?<=\w)\(([^()\s]*)\)|\(([^()\s]*)\)(?=\w)")
_PAREN_NOTE = re.compile(r"\s*\([^()]*\)")
_OPENERS = "\"'„“‚‘»«"
_CLOSERS = "\"'“”‘’»«)"


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _strip_notes(text: str) -> str:
    """Drop parenthesised notes such as '(Wasserbau)' (innermost first, so nesting works)."""
    if "(" not in text:
        return text
    text = _OPTIONAL_LETTERS.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    while True:
        stripped = _PAREN_NOTE.sub("", text)
        if stripped == text:
            return text
        text = stripped


def _as_sentence(text: str) -> str | None:
    """The variant as a sentence, or None if it does not read as one.

    In sentences parentheses mark optional words ("Nehmen Sie (irgendwelche) Medikamente?"), so the
    words are kept and only the brackets go: that leaves a grammatical sentence.
    """
    if not text.rstrip().rstrip(_CLOSERS).endswith((".", "!", "?")):
        return None  # cheap test first: most variants are phrases
    sentence = _collapse(text.replace("(", "").replace(")", ""))
    if ";" in sentence or len(sentence.split()) < 3:
        return None
    first = sentence[0]
    if not (first.isupper() or first.isdigit() or first in _OPENERS):
        return None
    return sentence


def _first_synonym(text: str) -> str:
    return _collapse(_strip_notes(text).split(";")[0])


def _parse_ding(path: str) -> tuple[list[Pair], list[Pair]]:
    sentences: list[Pair] = []
    phrases: list[Pair] = []
    seen: set[Pair] = set()
    for line_no, line in enumerate(read_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        sides = line.split(" :: ")
        if len(sides) != 2:
            raise MtError(f"{path}:{line_no}: expected one 'German :: English' separator")
        de_variants = sides[0].split("|")
        en_variants = sides[1].split("|")
        if len(de_variants) != len(en_variants):  # unaligned: trust only the head words
            de_variants, en_variants = de_variants[:1], en_variants[:1]
        for de_raw, en_raw in zip(de_variants, en_variants):
            de_text = _ANNOTATION.sub("", de_raw)
            en_text = _ANNOTATION.sub("", en_raw)
            de_sentence = _as_sentence(de_text)
            en_sentence = _as_sentence(en_text) if de_sentence else None
            if de_sentence and en_sentence:
                pair, bucket = (de_sentence, en_sentence), sentences
            else:
                pair, bucket = (_first_synonym(de_text), _first_synonym(en_text)), phrases
                if not pair[0] or not pair[1]:
                    continue
            if pair not in seen:
                seen.add(pair)
                bucket.append(pair)
    return sentences, phrases


@functools.lru_cache(maxsize=4)
def _parse_ding_cached(path: str, mtime_ns: int) -> tuple[list[Pair], list[Pair]]:
    return _parse_ding(path)


def _ding_key(path: str | os.PathLike) -> tuple[str, int]:
    path = str(Path(path).resolve())
    try:
        return path, os.stat(path).st_mtime_ns
    except FileNotFoundError:
        raise MtError(
            f"{path}: no such file (the Ding dictionary: apt install trans-de-en, or name the file: ding:FILE)"
        ) from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror})") from None


def read_ding(path: str | os.PathLike) -> tuple[list[Pair], list[Pair]]:
    """(sentence_pairs, phrase_pairs) of a Ding file, each pair (german, english), deduplicated.

    Parsed once per file and modification time in this process.
    """
    sentences, phrases = _parse_ding_cached(*_ding_key(path))
    return list(sentences), list(phrases)


def _hash(text: str) -> bytes:
    # A fixed hash: Python's hash() is salted per process and would change the split every run.
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


@functools.lru_cache(maxsize=4)
def _held_out_splits(path: str, mtime_ns: int, valid_size: int, test_size: int) -> dict[str, list[Pair]]:
    sentences, phrase_pairs = _parse_ding_cached(path, mtime_ns)
    if valid_size + test_size > len(sentences):
        raise MtError(
            f"{path}: {valid_size} valid + {test_size} test pairs are held out, "
            f"but the dictionary has only {len(sentences)} sentence pairs"
        )
    # Rank sentences by the hash of the German side; take held-out pairs from the top, skipping any
    # that repeats a side already held out, so valid and test are disjoint on both sides.
    order = sorted(range(len(sentences)), key=lambda i: (_hash(sentences[i][0]), i))
    held_de: set[str] = set()
    held_en: set[str] = set()
    held_out: dict[str, list[Pair]] = {"valid": [], "test": []}
    held_index: set[int] = set()
    wanted = [("valid", valid_size), ("test", test_size)]
    for i in order:
        while wanted and len(held_out[wanted[0][0]]) >= wanted[0][1]:
            wanted.pop(0)
        if not wanted:
            break
        de, en = sentences[i]
        if de in held_de or en in held_en:
            continue
        held_out[wanted[0][0]].append((de, en))
        held_de.add(de)
        held_en.add(en)
        held_index.add(i)

    def kept(pairs):
        return [(de, en) for de, en in pairs if de not in held_de and en not in held_en]

    train_sentences = kept(pair for i, pair in enumerate(sentences) if i not in held_index)
    train_phrases = kept(phrase_pairs)
    return {
        "train": train_sentences + train_phrases,
        "sentences": train_sentences,
        "phrases": train_phrases,
        **held_out,
    }


def held_out_splits(
    path: str | os.PathLike, valid_size: int = HELD_OUT, test_size: int = HELD_OUT
) -> dict[str, list[Pair]]:
    """(German, English) pairs of each part: train, sentences, phrases, valid, test. Held-out pairs share
    neither side with train or each other. Computed once per file, modification time and sizes."""
    parts = _held_out_splits(*_ding_key(path), valid_size, test_size)
    return {part: list(pairs) for part, pairs in parts.items()}  # the cache's own lists stay as they are


def ding_part(path: str | os.PathLike, part: str, langs: tuple[str, str]) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of one part, for langs ("de", "en") or ("en", "de")."""
    pairs = _held_out_splits(*_ding_key(path), HELD_OUT, HELD_OUT)[part]  # read only: no copy of the cache's lists
    de_lines = [de for de, _ in pairs]
    en_lines = [en for _, en in pairs]
    return (de_lines, en_lines) if tuple(langs) == ("de", "en") else (en_lines, de_lines)


def clear_cache() -> None:
    """Forget parsed files (they are also re-read when their modification time changes)."""
    _parse_ding_cached.cache_clear()
    _held_out_splits.cache_clear()
