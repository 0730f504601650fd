"""The directions a model translates, and the token that asks for each (Johnson et al., 2017).

A bilingual model translates data.src_lang -> data.tgt_lang and knows no tags. A multilingual one
(data.directions) reads `<2xx>`, the target language's tag, as the first token of every source; it
was trained on some directions, and may be asked for another between its languages (zero-shot: a
target it was trained to write, from a source it reads, the pair never seen), which is allowed with a
warning. A target it has no tag for, or one it only ever read (its tag never led a training source),
is refused, in one line that lists the directions it knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mt import log
from mt.errors import ConfigError
from mt.language_codes import LIBRE_ALIASES
from mt.tokenizer import Tokenizer, language_tag


def spelled(code: str | None, languages: set[str]) -> str | None:
    """`code` as the model spells one of its `languages`, as `mt serve` reads a request's: "DE", "de_DE"
    or "de-DE" is its "de", "pt-BR" its "pt_BR", its "pb" (LibreTranslate's) or, with neither, its "pt";
    a script is not a region ("sr-Latn" is no "sr", "zh-Hant" or "zh-TW" no "zh", but LibreTranslate's
    "zt"); as it is where none fits (refused where it is resolved)."""
    if code is None or code in languages:
        return code
    by_lower = {language.lower(): language for language in languages}
    lowered = code.lower()
    hyphened = lowered.replace("_", "-")
    base, *rest = hyphened.split("-")
    spellings = [lowered, lowered.replace("-", "_"), hyphened, LIBRE_ALIASES.get(hyphened, "")]
    if base == "zh" and any(part in ("hant", "tw", "hk", "mo") for part in rest):
        spellings.append("zt")
    elif len(rest) == 1 and (len(rest[0]) == 2 or rest[0].isdigit()):  # a region: pt-BR, es-419
        spellings.append(base)
    return next((by_lower[spelling] for spelling in spellings if spelling in by_lower), code)


@dataclass(frozen=True)
class Directions:
    pairs: tuple[tuple[str, str], ...]  # the trained (source, target) languages
    tags: dict[str, int] = field(default_factory=dict)  # language -> its tag's id; empty: bilingual, no tags
    warned: set = field(default_factory=set, compare=False)  # the zero-shot directions warned about once

    @classmethod
    def of(cls, pairs: list[tuple[str, str]], multilingual: bool, tokenizer: Tokenizer) -> Directions:
        """A model's directions from its config's (data.pairs(), data.multilingual) and its tokenizer."""
        if not multilingual:
            return cls(tuple(pairs))
        languages = dict.fromkeys(lang for pair in pairs for lang in pair)
        tags = {lang: tokenizer.tag_id(lang) for lang in languages}
        return cls(tuple(pairs), {lang: tag for lang, tag in tags.items() if tag is not None})

    @property
    def multilingual(self) -> bool:
        return bool(self.tags)

    def names(self) -> str:
        return ", ".join(f"{src}-{tgt}" for src, tgt in self.pairs)

    def sources(self) -> list[str]:
        return list(dict.fromkeys(src for src, _ in self.pairs))

    def readable(self) -> list[str]:
        """Every language it may be asked to translate from: its sources, then (multilingual) the other
        languages it has a tag for, zero-shot sources."""
        sources = self.sources()
        return sources + [lang for lang in self.tags if lang not in sources]

    def knows_source(self, lang: str) -> bool:
        """Whether `lang` may be a source: a bilingual model's own; for a multilingual one, any language
        it was trained to read or to write (zero-shot from a target language)."""
        return lang == self.pairs[0][0] if not self.multilingual else lang in self.tags or lang in self.sources()

    def targets(self, src_lang: str | None = None) -> list[str]:
        return list(dict.fromkeys(tgt for src, tgt in self.pairs if src_lang in (None, src)))

    def check_pivot(self, src_lang: str | None, tgt_lang: str | None, pivot: str) -> None:
        """Both legs of `--pivot` (source -> pivot -> target) are directions this model translates;
        else one line naming --pivot (asked before any input is read)."""
        if not self.multilingual:
            raise ConfigError(f"--pivot {pivot}: this model translates {self.names()} only (a bilingual experiment)")
        src, tgt = self.resolve(src_lang, tgt_lang)
        for leg in ((src, pivot), (pivot, tgt)):
            try:
                self.resolve(*leg)
            except ConfigError as exc:
                raise ConfigError(f"--pivot {pivot}: {exc}") from None
            if leg[0] is not None and leg not in self.pairs:  # a zero-shot leg is what a pivot goes around
                raise ConfigError(
                    f"--pivot {pivot}: {leg[0]}-{leg[1]} was not trained; this model translates {self.names()}"
                )

    def resolve(self, src_lang: str | None, tgt_lang: str | None) -> tuple[str | None, str]:
        """(source, target) of a call that names them or not: a bilingual model's own, a multilingual
        one's only target when it has one; anything else that is not named, or not known, is refused."""
        if not self.multilingual:
            ((src, tgt),) = self.pairs
            if src_lang not in (None, src) or tgt_lang not in (None, tgt):
                # What was asked: a source alone is no direction ("en-en" for --src-lang en on de-en)
                asked = (
                    f"source {src_lang} (--src-lang)"
                    if tgt_lang is None
                    else f"target {tgt_lang} (--tgt-lang)"
                    if src_lang is None
                    else f"{src_lang}-{tgt_lang}"
                )
                raise ConfigError(f"{asked}: this model translates {src}-{tgt} only (a bilingual experiment)")
            return src, tgt
        if tgt_lang is None:
            targets = self.targets(src_lang)
            if len(targets) != 1:
                raise ConfigError(f"give the target language (--tgt-lang): this model translates {self.names()}")
            tgt_lang = targets[0]
        if tgt_lang not in self.tags:
            raise ConfigError(
                f"{src_lang or '?'}-{tgt_lang}: this model has no {language_tag(tgt_lang)}; it "
                f"translates {self.names()}"
            )
        if tgt_lang not in self.targets():  # its tag exists (it reads the language) but never led a source
            raise ConfigError(
                f"{src_lang or '?'}-{tgt_lang}: this model was never trained to write {tgt_lang} (its targets: "
                f"{', '.join(self.targets())}); it translates {self.names()}"
            )
        if src_lang == tgt_lang:  # not a direction: no model of mt's was trained to copy, nor warned as zero-shot
            raise ConfigError(
                f"{src_lang}-{tgt_lang}: source and target are the same language (--src-lang, --tgt-lang)"
            )
        if src_lang is not None and not self.knows_source(src_lang):  # else every made-up name is a zero-shot pair
            raise ConfigError(
                f"{src_lang}-{tgt_lang}: this model knows no language {src_lang} (--src-lang); it "
                f"translates {self.names()}"
            )
        return src_lang, tgt_lang

    def tag(self, src_lang: str | None, tgt_lang: str | None) -> int | None:
        """The id to put first in each source for this direction (None: bilingual); a direction that was
        not trained is allowed with a warning (zero-shot)."""
        src_lang, tgt_lang = self.resolve(src_lang, tgt_lang)
        if not self.multilingual:
            return None
        if src_lang is not None and (src_lang, tgt_lang) not in {*self.pairs, *self.warned}:
            self.warned.add((src_lang, tgt_lang))
            log.warn(
                f"{src_lang}-{tgt_lang} was not trained (zero-shot: the model knows {self.names()}); "
                f"--pivot LANG translates through a trained direction instead"
            )
        return self.tags[tgt_lang]
