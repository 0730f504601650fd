"""Which language a text is in, among those a model reads: `mt serve`'s /detect and `source: auto`,
`mt translate --src-lang auto`.

lingua (lingua-language-detector) identifies offline: its models ship in its wheel and nothing is
downloaded. Two detectors, built once per `LanguageIdentifier` and loaded on first use:
- the model's source languages only (lingua's high-accuracy mode), which ranks them: which of the
  languages the model reads a text is in (on Multi30k's test2016 en/de/fr, 3,000 sentences, 100%:
  docs/benchmarks.md);
- every language lingua knows, in its low-accuracy mode (a few MB, a fraction of a millisecond),
  the guard: a text whose model's languages get at most FOREIGN_AT_MOST of the confidence among all
  75 is in a language the model cannot read, and is not translated (about 0.1-0.3% of test2016's
  sentences are taken for foreign by it; a caller that knows the language names it instead of auto);
  a short text (SHORT_LETTERS) only when the guard is all but sure of a language in a script none of
  the model's sources is written in.
A source language lingua does not know: a model with that one source takes every text as it
(unguarded); a model with several sources, one of them unknown to lingua, cannot tell them apart,
and `identify` refuses (Unidentifiable) with what to do instead.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mt import log
from mt.errors import MtError
from mt.language_codes import base_language

FOREIGN_AT_MOST = (
    0.01  # the model's languages' share of the confidence over all languages, at or below which a text is foreign
)
# A short text (a name, a product, a menu item, an address) gives the guard's low-accuracy mode little to go
# by: "iPhone 15 Pro" is Zulu to it, "Hello world" Vietnamese, and one diacritic makes it sure ("Crème
# brûlée" French, "Kraków" Polish). Below SHORT_LETTERS letters a text is foreign only when the guard is
# SURE_AT_LEAST sure of a script none of the model's sources is written in, and not Latin (Japanese or
# Cyrillic to an English model; a brand name in Latin letters to a Russian one is not).
SHORT_LETTERS = 24
SURE_AT_LEAST = 0.9
SENTENCE_LETTERS = 12  # a line's sentence shorter than this goes with the line (`auto_search`'s `mixed`)


def without_addresses(text: str) -> str:
    """The text that tells its language: web and mail addresses (mt.text.sentences.address_spans) taken
    out, which say nothing of it, and whose letters outvoted its words: "Mehr dazu unter
    https://www.example.com/documentation/getting-started" was English to a German model."""
    from mt.text.sentences import address_spans, split_at

    return " ".join(before for before, _ in split_at(text, address_spans(text)))


class Unidentifiable(MtError):
    """auto cannot be answered for this model: it reads several languages and lingua does not know one."""


@dataclass(frozen=True)
class Identified:
    """What a text is: `language`, the model's source language it is most likely in, with `confidence`
    (0 to 1, among the model's sources); `ranking`, every source best first; `foreign`, the language
    lingua takes it for when the model cannot read it (None: it can)."""

    language: str
    confidence: float
    ranking: tuple[tuple[str, float], ...]
    foreign: str | None = None
    foreign_confidence: float = 0.0  # lingua's that the text is in `foreign` (among all) or in `target`
    script: str = ""  # where a short text was judged by its script alone: the script's name ("Cyrillic")
    target: str | None = None  # the target `identify` was given, where the text is surely in it already

    def is_in(self, target: str) -> bool:
        """Whether the text is in `target` already (to come back as it is): the model's source language
        it was identified as, or another it is surely in (`written_in`)."""
        return self.written_in(target) or (self.foreign is None and self.language == target)

    def written_in(self, code: str) -> bool:
        """Whether the text is in `code` (a model's language: "pt-BR" is lingua's "pt"), a language the
        model does not read: a text already in the target language, say."""
        if self.target is not None and self.target == code:
            return True
        if self.foreign is None:
            return False
        language = lingua_language(code)  # "deu" and "de" are one language
        if self.script and language is not None:  # a short text known by its script: any language of it
            return language in script_languages().get(self.script, ())
        return (
            language == lingua_language(self.foreign) if language is not None else self.foreign == base_language(code)
        )

    def message(self, sources: Sequence[str]) -> str:
        """Why a foreign text is not translated, in one line."""
        looks = (
            f"is in {self.script} script (perhaps {language_name(self.foreign or '')}, {self.foreign})"
            if self.script
            else f"looks like {language_name(self.foreign or '')} ({self.foreign})"
        )
        return (
            f"the text {looks}, which this model "
            f"does not read (it translates from {', '.join(sources)}); give the source language to translate it anyway"
        )


# ISO 639-3 individual languages (FLORES-200 writes them) of the macrolanguages lingua knows by theirs
INDIVIDUAL = {
    "arb": "ara", "cmn": "zho", "yue": "zho", "pes": "fas", "prs": "fas", "zsm": "msa", "swh": "swa",
    "als": "sqi", "lvs": "lav", "ekk": "est", "azj": "aze", "uzn": "uzb", "khk": "mon", "gaz": "orm",
    "npi": "nep", "ory": "ori", "plt": "mlg", "ydd": "yid", "quy": "que",
}  # fmt: skip


def lingua_language(code: str) -> Any:
    """lingua's Language for an ISO 639-1 or 639-3 code ("de", "deu"; "pt-BR" as "pt", FLORES's
    "deu_Latn" as "deu"), or None when it knows none."""
    from lingua import IsoCode639_1, IsoCode639_3, Language

    base = INDIVIDUAL.get(base_language(code), base_language(code)).upper()  # (Argos's zt and pb too)
    table, build = (
        (IsoCode639_1, Language.from_iso_code_639_1) if len(base) == 2 else (IsoCode639_3, Language.from_iso_code_639_3)
    )
    iso = getattr(table, base, None)
    if iso is None:
        return None
    try:
        return build(iso)
    except ValueError:  # a code lingua has a name for but no model
        return None


def language_name(code: str) -> str:
    """English's name for a language code ("de": "German"), or the code when lingua knows none."""
    language = lingua_language(code) if code else None
    return language.name.title() if language is not None else code


class LanguageIdentifier:
    """Identifies texts among `sources`, a model's source languages (module docstring); thread-safe."""

    def __init__(self, sources: Sequence[str]):
        self.sources = list(dict.fromkeys(sources))
        self.known = {code: lang for code in self.sources if (lang := lingua_language(code)) is not None}
        self.unknown = [code for code in self.sources if code not in self.known]
        self._lock = threading.Lock()
        self._ranker: Any = None
        self._guard: Any = None
        self._targets: dict[str, Any] = {}  # per target not among the sources: `in_target`'s detector

    def _detectors(self, guarded: bool = True) -> tuple[Any, Any]:
        """(ranker over the known sources or None with fewer than two, guard or None when a source is
        unknown to lingua or not `guarded`), built at the first call that needs them."""
        from lingua import LanguageDetectorBuilder

        with self._lock:
            if self._guard is None and not self.unknown and guarded:
                self._guard = LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()
            if self._ranker is None and len(self.known) >= 2:
                self._ranker = LanguageDetectorBuilder.from_languages(*self.known.values()).build()
        return self._ranker, self._guard if guarded else None

    def _check_identifiable(self) -> None:
        if len(self.sources) > 1 and self.unknown:
            raise Unidentifiable(
                f"auto: lingua, which identifies languages here, does not know {', '.join(self.unknown)}, so "
                f"it cannot tell this model's sources ({', '.join(self.sources)}) apart; give the source language"
            )

    def likeliest(self, text: str) -> str:
        """The source language `text` is most likely in, without the guard's check (sentence rules)."""
        self._check_identifiable()
        ranker, _ = self._detectors(guarded=False)
        if ranker is None:
            return self.sources[0]
        text = without_addresses(text)
        found = ranker.detect_language_of(text)
        codes = {lang: code for code, lang in self.known.items()}
        return codes[found] if found is not None else self.sources[0]

    def identify(self, text: str, target: str | None = None) -> Identified:
        """The model's source language `text` is most likely in, and whether it is another language; with
        `target`, whether it is surely in that one already (`in_target`: `target` set, `foreign` None)."""
        self._check_identifiable()
        ranker, guard = self._detectors()
        text = without_addresses(text)
        if ranker is None:  # one source: every text is in it, unless the guard says otherwise
            # but a text without letters ("", "12 345") shows no language: no confidence in it, as lingua's
            ranking: tuple[tuple[str, float], ...] = ((self.sources[0], float(any(c.isalpha() for c in text))),)
        else:
            codes = {lang: code for code, lang in self.known.items()}
            values = [(codes[v.language], v.value) for v in ranker.compute_language_confidence_values(text)]
            ranking = tuple(values) if values and values[0][1] > 0 else tuple((code, 0.0) for code in self.known)
        foreign, sure, script = self._foreign(text, guard)
        in_target = self.in_target(text, target) if target is not None and foreign is None else 0.0
        if in_target:
            return Identified(ranking[0][0], ranking[0][1], ranking, None, in_target, "", target)
        return Identified(ranking[0][0], ranking[0][1], ranking, foreign, sure, script)

    def in_target(self, text: str, target: str) -> float:
        """lingua's confidence that `text`, which the guard took for one of the model's languages, is in
        `target` when told apart from them (`told_apart`), where it is all but sure (else 0): the guard
        lets a short text in a Latin script pass ("Der Hund läuft." to an English model, which then
        "translated" it into German), and a model of one source has no ranker to ask. A target among
        the sources (or a variant of one: pt-BR beside pt) is the ranker's to say."""
        language = lingua_language(target)
        if language is None or language in self.known.values():
            return 0.0
        found, sure = self.told_apart(text, target)
        return sure if found == language else 0.0

    def surely_source(self, text: str, target: str) -> bool:
        """Whether a short text the guard let pass (it cannot call one foreign) is in one of the model's
        sources: lingua tells it apart from `target` with 80% (`told_apart`; told apart from English
        and German alone, "Merci beaucoup." is English), and the guard's likeliest language among all
        of lingua's is that source too ("Je suis très fatigué." is French)."""
        language, _ = self.told_apart(text, target, 0.8)
        if language is None or language not in self.known.values():
            return False
        _, guard = self._detectors()
        values = guard.compute_language_confidence_values(text) if guard is not None else []
        return bool(values) and values[0].language == language

    def told_apart(self, text: str, target: str, at_least: float = SURE_AT_LEAST) -> tuple[Any, float]:
        """The language (lingua's) `text` is in among the model's sources and `target`, with lingua's
        high-accuracy mode, where it is `at_least` sure, and its confidence; (None, 0.0) if none is."""
        language = lingua_language(target)
        if language is None or not self.known or not any(c.isalpha() for c in text):
            return None, 0.0
        with self._lock:
            detector = self._targets.get(target)
            if detector is None:
                from lingua import LanguageDetectorBuilder

                languages = {*self.known.values(), language}
                if len(languages) < 2:
                    return None, 0.0
                detector = self._targets[target] = LanguageDetectorBuilder.from_languages(*languages).build()
        values = detector.compute_language_confidence_values(text)
        if values and values[0].value >= at_least:
            return values[0].language, values[0].value
        return None, 0.0

    def _foreign(self, text: str, guard: Any) -> tuple[str | None, float, str]:
        """The language lingua takes `text` for when the model's own get almost none of the confidence,
        lingua's confidence in it, and the script's name where a short text was judged by it alone;
        (None, 0.0, "") when the model can read it."""
        if guard is None:
            return None, 0.0, ""
        values = guard.compute_language_confidence_values(text)
        if not values or values[0].value <= 0:  # no letters: nothing to go by
            return None, 0.0, ""
        own = sum(v.value for v in values if v.language in self.known.values())
        if own > FOREIGN_AT_MOST:
            return None, 0.0, ""
        code = values[0].language.iso_code_639_1.name.lower()
        if sum(c.isalpha() for c in text) < SHORT_LETTERS:
            judged = self._surely_other_script(values)
            if judged is None:  # "Crème brûlée", "São Paulo" to an English model: one letter is all lingua goes by
                return None, 0.0, ""
            return code, *judged  # "Привет": Cyrillic, surely; which of its languages, lingua cannot say
        return code, values[0].value, ""

    def _surely_other_script(self, values: Sequence[Any]) -> tuple[float, str] | None:
        """Whether a short text is, all but surely (SURE_AT_LEAST), in a script none of the model's
        sources is written in: the confidence in it and the script's name ("" for a language's own
        script), None if not. lingua's script families (Latin, Cyrillic, Arabic, Devanagari) count as
        one: "Привет" spreads its confidence over Russian, Ukrainian, Bulgarian. Latin letters never
        are: brands, names and codes are written in them whatever the language."""
        from lingua import Language

        latin, families = Language.all_with_latin_script(), script_languages()
        top = values[0].language
        if top in latin:
            return None
        name, family = next(((n, f) for n, f in families.items() if top in f), ("", None))
        if family is not None and any(known in family for known in self.known.values()):
            return None
        sure = sum(v.value for v in values if v.language in family) if family is not None else values[0].value
        return (sure, name) if sure >= SURE_AT_LEAST else None


@functools.lru_cache(maxsize=1)
def script_languages() -> dict[str, frozenset]:
    """lingua's script families beside Latin, by name: the languages written in each."""
    from lingua import Language

    return {
        "Cyrillic": frozenset(Language.all_with_cyrillic_script()),
        "Arabic": frozenset(Language.all_with_arabic_script()),
        "Devanagari": frozenset(Language.all_with_devanagari_script()),
    }


@functools.lru_cache(maxsize=8)
def identifier_for(sources: tuple[str, ...]) -> LanguageIdentifier:
    """One LanguageIdentifier a set of sources, built once (its detectors take a while to load)."""
    return LanguageIdentifier(sources)


def identifiable(directions) -> list[str]:
    """The languages `auto` tells apart for a model's `directions` (mt.decoding.directions): its
    sources, then the zero-shot ones lingua knows (one it does not know, a target-only language, would
    make every text unidentifiable; a source it does not know is `LanguageIdentifier`'s refusal)."""
    sources = directions.sources()
    return sources + [lang for lang in directions.readable() if lang not in sources and lingua_language(lang)]


def auto_search(
    search: Callable[..., list[list[tuple]]],
    identifier: LanguageIdentifier,
    target: str,
    seen_language: Callable[[str], object] = lambda language: None,
    text: Callable[[str], str] = lambda line: line,
    kept: Callable[[str], str] = lambda line: line,
    sentences: bool = False,
) -> Callable[..., list[list[tuple]]]:
    """`mt translate --src-lang auto`: `search` (as mt.decoding.output.stream calls it) with each line
    identified first by its `text` (a markup line's words, a constrained line's source). A line in the
    target language already comes back as it is (`kept`: the line, a constrained line's source), as
    `mt serve` gives it (the model translated it into its own language, or emptied it as foreign); one
    in another language the model cannot read comes back empty, with a warning on stderr; the rest are
    translated, each language noted once and handed to `seen_language` (which warns of a direction
    never trained). With `sentences` (plain text, one best translation), a line whose sentences are
    not all of one kind (`mixed`) has each sentence translated or kept as it is by its own language."""
    seen: set[str] = set()

    def note(language: str, number: int) -> None:
        if language not in seen:
            seen.add(language)
            if len(identifier.sources) > 1:
                log.info(f"--src-lang auto: line {number} is {language_name(language)} ({language})")
            seen_language(language)

    def mixed(line: str, found: Identified) -> list[tuple[int, int, Identified, bool]] | None:
        """A line's sentences, each with what it was identified as and whether it is translated (else kept
        as it is: in the target, or in a language the model cannot read), if they are not all as the whole
        line is: "Please read the manual. Lesen Sie bitte das Handbuch, bevor Sie ..." into German was
        judged German whole and came back untranslated. A sentence too short to tell (SENTENCE_LETTERS)
        goes with the line."""
        from mt.text.sentences import sentence_spans

        spans = sentence_spans(line, found.language)
        if len(spans) < 2:
            return None
        whole = not (found.is_in(target) or found.foreign is not None)
        parts, differs = [], False
        for a, b in spans:
            piece = line[a:b]
            letters = sum(c.isalpha() for c in piece)
            mine = identifier.identify(piece, target) if letters >= SENTENCE_LETTERS else found
            translated = not (mine.is_in(target) or mine.foreign is not None)
            if translated and not whole and letters < SHORT_LETTERS:
                # a short sentence the guard cannot call foreign ("Je suis très fatigué." to an English
                # model) is translated only where lingua is sure it is one of the model's sources
                translated = identifier.surely_source(piece, target)
            # (a sentence in a language the model cannot read, in a line of the target: kept, but said)
            foreign_in_target = found.is_in(target) and mine.foreign is not None and not mine.is_in(target)
            differs = differs or translated != whole or foreign_in_target
            parts.append((a, b, mine, translated))
        return parts if differs else None

    def identified_search(
        translator: Any, lines: list[str], options: Any = None, first_line: int = 0
    ) -> list[list[tuple]]:
        todo, copies, split, languages = [], {}, {}, []
        for i, line in enumerate(lines):
            number = first_line + i + 1
            found = identifier.identify(text(line), target) if line.strip() else None
            parts = mixed(line, found) if sentences and found is not None and one_best(options) else None
            if parts is not None:
                split[i] = parts
                todo.append("")
            elif found is not None and found.is_in(target):
                if target not in seen:
                    seen.add(target)
                    log.info(
                        f"--src-lang auto: line {number} is in the target language ({target}): "
                        "lines in it come back as they are"
                    )
                copies[i] = kept(line)
                todo.append("")
            elif found is not None and found.foreign is not None:
                log.warn(f"line {number}: not translated: {found.message(identifier.sources)} (--src-lang)")
                todo.append("")
            else:
                if found is not None:
                    note(found.language, number)
                todo.append(line)
            languages.append(found.language if found is not None and todo[-1] else None)
        results = by_language(translator, todo, languages, options, first_line)
        for i, copy in copies.items():
            results[i] = [(copy, 0.0, *rest) for _, _, *rest in results[i][:1]]
        if split:
            results = sentence_by_sentence(translator, lines, split, results, options, first_line)
        return results

    def sentence_by_sentence(translator, lines, split, results, options, first_line) -> list[list[tuple]]:
        """Each `split` line from its sentences: those to translate searched together (each warning
        naming its line), the others as they are."""
        from mt.text.sentences import reassemble

        asked, names, languages = [], [], []
        for i, parts in split.items():
            for a, b, found, translated in parts:
                number = first_line + i + 1
                if translated:
                    note(found.language, number)
                    asked.append(lines[i][a:b])
                    names.append(f"input line {number}")
                    languages.append(found.language)
                elif not found.is_in(target):
                    log.warn(f"line {number}: a sentence not translated: {found.message(identifier.sources)}")
        answers = iter(by_language(translator, asked, languages, options, first_line, names) if asked else [])
        for i, parts in split.items():
            outs, scores = [], []
            for a, b, _, translated in parts:
                if not translated:
                    outs.append(lines[i][a:b])
                    continue
                text, score, *_ = next(answers)[0]
                outs.append(text)
                scores.append(score)
            joined = reassemble(lines[i], [(a, b) for a, b, _, _ in parts], outs)
            results[i] = [(joined, sum(scores) / len(scores) if scores else 0.0)]  # (none: each kept, said)
        return results

    def by_language(translator, texts, languages, options, first_line, names=None) -> list[list[tuple]]:
        """`search` over `texts` (`names`: what a warning calls each; else its input line); under a
        pivot, the texts of each language (`languages`, None: a blank text) on their own, with that
        language as their source: one already in the pivot language is translated on into the target
        alone (was: into the pivot too, a direction never trained)."""
        if options is None or options.pivot is None:
            if names is None:
                return search(translator, texts, options, first_line)
            return search(translator, texts, options, first_line, None, names)
        names = names or [f"input line {first_line + i + 1}" for i in range(len(texts))]
        results: list[list[tuple]] = [[("", 0.0)] for _ in texts]
        for language in dict.fromkeys(found for found in languages if found is not None):
            mine = [i for i, found in enumerate(languages) if found == language]
            asked = from_language(translator, options, language)
            for i, hyps in zip(
                mine, search(translator, [texts[i] for i in mine], asked, first_line, None, [names[i] for i in mine])
            ):
                results[i] = hyps
        return results

    return identified_search


def from_language(translator: Any, options: Any, language: str) -> Any:
    """`options` (with a pivot) for texts identified as `language`: from it, through the pivot; in the
    pivot language, straight into the target; in a language with no trained direction into the pivot,
    straight into the target where that direction was trained, else as before (the source unnamed),
    its zero-shot first leg warned of (it went through a direction never trained without a word)."""
    from mt.errors import ConfigError

    if language == options.pivot:
        return replace(options, src_lang=language, pivot=None)
    directions = translator.directions
    target = directions.resolve(None, options.tgt_lang)[1]
    try:
        directions.check_pivot(language, target, options.pivot)
    except ConfigError:
        if (language, target) in directions.pairs:  # no trained way through the pivot, but one straight
            return replace(options, src_lang=language, pivot=None)
        directions.tag(language, options.pivot)  # (warns: its first leg is zero-shot)
        return options
    return replace(options, src_lang=language)


def one_best(options: Any) -> bool:
    """Whether `options` ask one translation of a line and nothing of its words (alignments,
    constraints): what a line put together from its sentences can answer."""
    return options is None or (options.nbest == 1 and options.alignment_layer is None and not options.constraints)
