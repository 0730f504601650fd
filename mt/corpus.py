"""Parallel text in: aligned text files (plain or .gz), hub datasets, or the Ding dictionary.

Everything here returns `(src_lines, tgt_lines)` for one split and writes nothing. Lines keep their
text exactly, less the line ending; cleaning and length filtering happen in `mt.binarize`.

Ding (Debian's trans-de-en, https://dict.tu-chemnitz.de/) lines look like

    Aal {m} [cook.] | Aale {pl} :: eel | eels

Sides are split at ' :: ', variants at ' | ' (aligned one-to-one), synonyms at ';'. Variants where
both sides read as full sentences become sentence pairs; every other variant gives one phrase pair
(its first synonym on each side). Valid and test are held-out sentence pairs picked by a fixed hash.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import re
import zlib
from pathlib import Path

from mt.config import DataConfig
from mt.errors import MtError

SPLITS = ("train", "valid", "test")
Pair = tuple[str, str]


# ---------------------------------------------------------------------------------------------
# Text files


def read_lines(path: str | os.PathLike) -> list[str]:
    """UTF-8 lines of a text file (gzip if the name ends in .gz), without line endings.

    Only '\\n' ends a line (str.splitlines would also split at U+2028, form feeds etc. and break
    the alignment of parallel files); a '\\r' before it is dropped, and so is a leading BOM.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                data = handle.read()
        else:
            data = path.read_bytes()
    except FileNotFoundError:
        raise MtError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MtError(f"{path}: is a directory, expected a text file") from None
    except OSError as exc:  # permissions, and gzip.BadGzipFile (an OSError subclass)
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (EOFError, zlib.error) as exc:
        raise MtError(f"{path}: broken gzip file ({exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = data.count(b"\n", 0, exc.start) + 1
        raise MtError(f"{path}:{line_no}: not valid UTF-8 (byte {data[exc.start]:#04x})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start a new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel_files(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Two line-aligned files; an error naming both files if their line counts differ."""
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise MtError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}: "
            "parallel files must be line-aligned"
        )
    return src_lines, tgt_lines


def _prefix_file(prefix: str, lang: str) -> str:
    """PREFIX.lang, or PREFIX.lang.gz when only that exists."""
    plain = f"{prefix}.{lang}"
    if not Path(plain).exists() and Path(plain + ".gz").exists():
        return plain + ".gz"
    return plain


def _file_paths(data: DataConfig, split: str) -> tuple[str, str]:
    src = getattr(data, f"{split}_src")
    tgt = getattr(data, f"{split}_tgt")
    prefix = getattr(data, f"{split}_prefix")
    if src is not None and tgt is not None:
        return src, tgt
    if src is not None or tgt is not None:
        missing = "tgt" if src is not None else "src"
        raise MtError(f"{split} data: --{split}-{missing} (data.{split}_{missing}) is not set; give both files")
    if prefix is not None:
        return _prefix_file(prefix, data.src_lang), _prefix_file(prefix, data.tgt_lang)
    raise MtError(
        f"no {split} data configured: set --{split}-src/--{split}-tgt or --{split}-prefix "
        f"(recipe: data.{split}_src/data.{split}_tgt or data.{split}_prefix)"
    )


# ---------------------------------------------------------------------------------------------
# Hub datasets


def _load_hf(data: DataConfig, split: str) -> tuple[list[str], list[str]]:
    if not data.hf_name:
        raise MtError("data.source is hf but no dataset is named: set --hf-dataset (data.hf_name)")
    hf_split = data.hf_splits.get(split)
    if not hf_split:
        raise MtError(f"no {split} split configured for dataset {data.hf_name!r}: set data.hf_splits.{split}")
    import datasets  # slow to import; only this source needs it

    what = f"{data.hf_name!r}" + (f" ({data.hf_config})" if data.hf_config else "")
    args = [data.hf_name] + ([data.hf_config] if data.hf_config else [])
    kwargs = {"split": hf_split}
    if data.hf_data_files:
        kwargs["data_files"] = data.hf_data_files
    try:
        dataset = datasets.load_dataset(*args, **kwargs)
    except Exception as exc:  # the library raises many types (network, missing split, bad files)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 300:
            reason = reason[:300] + "..."
        raise MtError(
            f"cannot load dataset {what} split {hf_split!r}: {reason} (no network? use local files)"
        ) from None

    columns = dataset.column_names
    if "translation" in columns:  # wmt14, iwslt: {"translation": {"de": ..., "en": ...}}
        records = dataset["translation"]
        src_lines = _column(records, data.src_lang, what)
        tgt_lines = _column(records, data.tgt_lang, what)
    else:  # bentrevett/multi30k: {"en": ..., "de": ...}
        for lang in (data.src_lang, data.tgt_lang):
            if lang not in columns:
                raise MtError(f"dataset {what} has no language key {lang!r}; its columns: {', '.join(columns)}")
        src_lines = [_text(x, data.src_lang, what) for x in dataset[data.src_lang]]
        tgt_lines = [_text(x, data.tgt_lang, what) for x in dataset[data.tgt_lang]]
    return src_lines, tgt_lines


def _column(records, lang: str, what: str) -> list[str]:
    lines = []
    for record in records:
        if lang not in record:
            raise MtError(
                f"dataset {what} has no language key {lang!r} in 'translation'; it has: {', '.join(record)}"
            )
        lines.append(_text(record[lang], lang, what))
    return lines


def _text(value, lang: str, what: str) -> str:
    if not isinstance(value, str):
        raise MtError(f"dataset {what}: language key {lang!r} holds {type(value).__name__}, expected text")
    return value


# ---------------------------------------------------------------------------------------------
# Ding dictionary

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
            f"{path}: no such file (the Ding dictionary: apt install trans-de-en, or set data.ding_path)"
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
def _ding_splits(path: str, mtime_ns: int, valid_size: int, test_size: int, phrases: bool) -> dict[str, list[Pair]]:
    """German-English pairs of each split. Held-out pairs share neither side with train or each other."""
    sentences, phrase_pairs = _parse_ding_cached(path, mtime_ns)
    if valid_size + test_size > len(sentences):
        raise MtError(
            f"{path}: data.ding_valid_size + data.ding_test_size = {valid_size + test_size} "
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
    train = [pair for i, pair in enumerate(sentences) if i not in held_index]
    if phrases:
        train += phrase_pairs
    train = [(de, en) for de, en in train if de not in held_de and en not in held_en]
    return {"train": train, **held_out}


def _load_ding(data: DataConfig, split: str) -> tuple[list[str], list[str]]:
    langs = (data.src_lang, data.tgt_lang)
    if langs not in (("de", "en"), ("en", "de")):
        raise MtError(
            f"the Ding dictionary is German-English: --src-lang/--tgt-lang must be de/en or en/de, "
            f"not {data.src_lang}/{data.tgt_lang}"
        )
    if not has_split(data, split):
        raise MtError(f"no {split} split: set data.ding_{split}_size (held-out sentence pairs) above 0")
    pairs = _ding_splits(*_ding_key(data.ding_path), data.ding_valid_size, data.ding_test_size, data.ding_phrases)
    de_lines = [de for de, _ in pairs[split]]
    en_lines = [en for _, en in pairs[split]]
    return (de_lines, en_lines) if langs == ("de", "en") else (en_lines, de_lines)


# ---------------------------------------------------------------------------------------------
# The one entry point


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise MtError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)}")


def has_split(data: DataConfig, split: str) -> bool:
    """Whether the config names this split at all (a half-named one counts, so load_split can say why)."""
    _check_split(split)
    if data.source == "files":
        return any(getattr(data, f"{split}_{key}") is not None for key in ("src", "tgt", "prefix"))
    if data.source == "hf":
        return bool(data.hf_name) and bool(data.hf_splits.get(split))
    if data.source == "ding":
        return split == "train" or getattr(data, f"ding_{split}_size") > 0
    return False


def load_split(data: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """Source and target lines of split "train" | "valid" | "test" for data.src_lang -> data.tgt_lang."""
    _check_split(split)
    if data.source == "files":
        return read_parallel_files(*_file_paths(data, split))
    if data.source == "hf":
        return _load_hf(data, split)
    if data.source == "ding":
        return _load_ding(data, split)
    raise MtError(f"unknown data source {data.source!r}; expected files, hf or ding (data.source)")
