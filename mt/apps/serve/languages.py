"""The languages of `mt serve`, as LibreTranslate gives them: GET /languages (every language the model
knows, each with the targets it reaches), POST /detect and `source: auto` (mt.text.language's
identifier, restricted to the model's source languages and built once per server). Confidences are
LibreTranslate's: 0 to 100, two decimals. Under `auto` a text already in the target language comes
back as it is (LibreTranslate's identity translation); one in another language the model cannot read
is refused with 400, "xx is not supported: ...", as LibreTranslate refuses a detected language it has
no model for.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mt.apps.serve.requests import ApiError, unicode_text
from mt.decoding.directions import Directions, spelled
from mt.errors import MtError
from mt.text.language import Identified, LanguageIdentifier, Unidentifiable, identifiable, language_name

LANGUAGE_NAMES = {  # lingua's names for the others
    "ar": "Arabic",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hi": "Hindi",
    "hu": "Hungarian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


# LibreTranslate's names for the codes Argos Translate's models use (its iso2model): what its clients send


def name_of(code: str) -> str:
    return LANGUAGE_NAMES.get(code) or language_name(code)


def confidence(value: float) -> float:
    return round(100 * value, 2)


class Languages:
    """What /languages, /detect and `auto` answer for a model's `directions`."""

    def __init__(self, directions: Directions):
        self.directions = directions
        self.readable = directions.readable()  # its sources, then (multilingual) the zero-shot ones
        self.identifier = LanguageIdentifier(identifiable(directions))
        # every language the model knows, sources first (/languages), and by lower case (`canonical`)
        self.codes = dict.fromkeys([*self.readable, *directions.targets(), *directions.tags])
        self._known = set(self.codes)  # (what `canonical` spells a request's codes as)

    def listing(self) -> list[dict[str, Any]]:
        """GET /languages: every language the model knows, sources first, each with the targets it was
        trained to reach (zero-shot directions are taken, not listed; a language it only writes lists
        none). LibreTranslate lists both sides of each installed pair, and its clients check a request's
        languages against this list."""
        return [{"code": code, "name": name_of(code), "targets": self.directions.targets(code)} for code in self.codes]

    async def identify(self, texts: list[str], target: str | None = None) -> list[Identified]:
        """Each text's language (in a worker thread: lingua loads its models on first use); with
        `target`, whether it is in that one already (`Identified.is_in`)."""
        try:
            return await asyncio.to_thread(lambda: [self.identifier.identify(text, target) for text in texts])
        except Unidentifiable as exc:
            raise ApiError(400, str(exc)) from None

    async def detect(self, fields: dict, max_chars: int) -> list[dict[str, Any]]:
        """POST /detect: the model's source languages, likeliest first, with LibreTranslate's confidence;
        every confidence 0 when the text is in a language the model cannot read (LibreTranslate's
        answer when none of its languages fits). Judged by its first `max_chars` characters (--max-chars):
        LibreTranslate answers a text of any length (a document's, to choose its model), and the first
        pages say its language as well as the whole would."""
        q = fields.get("q")
        if q in (None, "", []):
            raise ApiError(400, "Invalid request: missing q parameter")
        texts = [q] if isinstance(q, str) else q
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise ApiError(400, "Invalid request: q must be a string or a list of strings")
        (found,) = await self.identify(["\n".join(unicode_text(text, "q", 400) for text in texts)[:max_chars]])
        scale = 0.0 if found.foreign is not None else 1.0
        return [{"confidence": confidence(scale * value), "language": code} for code, value in found.ranking]

    def canonical(self, code: Any) -> Any:
        """A request's language code as the model writes it: `DE` is `de`, LibreTranslate's `zh-Hans` is
        a model's `zh` (and `zh-Hant` `zt`, `pt-BR` `pb`), `pt-BR` a model's `pt_BR`, or its `pt` where it
        has no other (a region, not a script: `zh-Hant` is no `zh`); as it is when the model has none such."""
        if not isinstance(code, str) or code == "auto":
            return code
        return spelled(code, self._known)

    def knows(self, code: str) -> bool:
        """Whether `code` is one of the languages /languages lists."""
        return code in self.codes

    async def auto(
        self, texts: list[str], fields: list[str] | None = None, target: str | None = None
    ) -> tuple[list[dict[str, Any]], set[int]]:
        """`source: auto`: each text's detectedLanguage ({"confidence", "language"}) and the texts
        already in `target` (their detectedLanguage the target: they come back as they are, as
        LibreTranslate's identity translation gives them); 400 when one is in another language the model
        cannot read (naming its field, /v1's text[i], where given)."""
        found = await self.identify(texts, target)
        detected, same = [], set()
        for i, item in enumerate(found):
            if target is not None and item.written_in(target):
                same.add(i)
                detected.append({"confidence": confidence(item.foreign_confidence), "language": target})
            elif target is not None and item.foreign is None and item.language == target:  # a multilingual
                same.add(i)  # model reads its target too: "Deux hommes." into fr is no fr -> fr translation
                detected.append({"confidence": confidence(item.confidence), "language": target})
            elif item.foreign is not None:
                where = f"{fields[i]}: " if fields else ""
                what = f"{item.script} script" if item.script else item.foreign  # a short text known by its script
                raise ApiError(400, f"{where}{what} is not supported: {item.message(self.readable)}")
            else:
                detected.append({"confidence": confidence(item.confidence), "language": item.language})
                if target is not None:  # a direction never trained: said once in the log, as the docs promise
                    with contextlib.suppress(MtError):  # (one it cannot take is refused where it is resolved)
                        self.directions.tag(item.language, target)
        return detected, same
