"""What a document format asks to translate: a list of units, each a plain text (its sentences found and
translated, `mt.text.translate`) or a markup fragment (html or xml: its inline elements placed around
the aligned target words, `mt.text.markup_translate`). A format gathers all of its file's units and asks
once (or once per kind), so that they are searched in the usual batches; blank units come back as they are.

`Units` is the protocol the formats see; `TranslatorUnits` answers it with a loaded `Translator`, and
`mt serve` answers it through its batcher.
"""

from __future__ import annotations

import contextlib
import re
from typing import Callable, Protocol

from mt import log
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.documents.formats import DocumentError
from mt.errors import MtError
from mt.text.language import LanguageIdentifier, from_language
from mt.text.markup import Format, MarkupError, language_text

Progress = Callable[[int, int], None]  # (units done, units asked) of the current request


class Units(Protocol):
    def __call__(self, texts: list[str], fmt: Format = "text") -> list[str]:
        """The translation of each text (fmt "text") or fragment ("html", "xml"), in order."""
        ...


class TranslatorUnits:
    """`Units` with a Translator under DecodeOptions, `chunk` units a search, reporting progress."""

    def __init__(
        self,
        translator: Translator,
        options: DecodeOptions,
        progress: Progress | None = None,
        chunk: int = 2048,
        identifier: LanguageIdentifier | None = None,
    ):
        self.translator, self.options, self.progress, self.chunk = translator, options, progress, chunk
        self.identifier = identifier  # --src-lang auto: a unit the model cannot read is kept as it is

    def readable(self, text: str, fmt: Format = "text") -> str | None:
        """The language to translate a unit from, or None not to: it has text, in a language the model
        reads (a warning if not) other than the target (kept as it is); a markup unit's language is its
        text's, not its tags', styles' and scripts'. "" where no language is identified (not auto)."""
        if not text.strip():
            return None
        if self.identifier is None:
            return ""
        target = self.translator.directions.resolve(self.options.src_lang, self.options.tgt_lang)[1]
        found = self.identifier.identify(language_text(text, fmt), target)
        if found.is_in(target):
            return None  # already in the target language: kept as it is, as `mt serve` gives it
        if found.foreign is not None:
            shown = text.strip()[:40]
            log.warn(f"not translated: {shown!r}: {found.message(self.identifier.sources)} (--src-lang)")
            return None
        if self.options.pivot is None:  # a direction never trained: said once (under a pivot, as it pivots)
            with contextlib.suppress(MtError):  # (one it cannot take is refused where it is searched)
                self.translator.directions.tag(found.language, target)
        return found.language

    def __call__(self, texts: list[str], fmt: Format = "text") -> list[str]:
        from mt.text.markup_translate import searcher

        search = searcher(fmt)
        out = list(texts)
        languages = {i: self.readable(text, fmt) for i, text in enumerate(texts)}
        todo = [i for i, language in languages.items() if language is not None]
        # Under a pivot, each language's units are searched from it (`--src-lang auto`): those in the
        # pivot language take one leg only, as mt.text.language's lines do
        pivoting = self.options.pivot is not None
        groups: dict[str, list[int]] = {}
        for i in todo:
            groups.setdefault(str(languages[i]) if pivoting else "", []).append(i)
        done = 0
        for language, units in groups.items():
            options = from_language(self.translator, self.options, language) if language else self.options
            for start in range(0, len(units), self.chunk):
                chunk = units[start : start + self.chunk]
                # a warning names the unit by its text: "input line N" counted this call's units, no line of the file
                names = [f"the text {' '.join(texts[i].split())[:40]!r}" for i in chunk]
                try:
                    found = search(self.translator, [texts[i] for i in chunk], options, names=names)
                except MarkupError as exc:  # "input line N" counts this call's units: the text says which
                    number = re.match(r"input line (\d+): (.*)", str(exc), re.S)
                    if number is None or not 0 < int(number.group(1)) <= len(chunk):
                        raise
                    shown = " ".join(texts[chunk[int(number.group(1)) - 1]].split())[:60]
                    raise DocumentError(f"the text {shown!r}: {number.group(2)}") from None
                for i, hyps in zip(chunk, found):
                    out[i] = hyps[0][0]
                done += len(chunk)
                if self.progress is not None:
                    self.progress(done, len(todo))
        return out
