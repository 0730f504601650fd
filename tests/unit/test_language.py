"""mt.text.language: which of a model's source languages a text is in (lingua, offline), a text in a
language the model cannot read told apart, sources lingua does not know, and `--src-lang auto`'s lines."""

from __future__ import annotations

import pytest

from mt.text.language import (
    LanguageIdentifier,
    Unidentifiable,
    identifiable,
    language_name,
    lingua_language,
    readable_lines,
)

SENTENCES = {
    "en": "Two young men are playing football on a green field.",
    "de": "Zwei junge Männer spielen auf einem grünen Feld Fußball.",
    "fr": "Deux jeunes hommes jouent au football sur un terrain vert.",
}
SPANISH = "Dos hombres jóvenes juegan al fútbol en un campo verde."


def test_each_text_is_ranked_among_the_models_sources_only():
    identifier = LanguageIdentifier(["en", "de", "fr"])
    for lang, text in SENTENCES.items():
        found = identifier.identify(text)
        assert found.language == lang and found.foreign is None
        assert [code for code, _ in found.ranking][0] == lang and sorted(c for c, _ in found.ranking) == ["de", "en", "fr"]
        assert 0.5 < found.confidence <= 1 and found.confidence == found.ranking[0][1]


def test_short_names_products_and_addresses_are_not_taken_for_foreign():
    english, german = LanguageIdentifier(["en"]), LanguageIdentifier(["de"])
    for text in ("iPhone 15 Pro", "Dr. Angela Merkel", "Samsung Galaxy S24 Ultra", "https://example.com/a", "Berlin, Germany"):
        assert english.identify(text).foreign is None, text
    for text in ("Hello world", "Impressum"):
        assert german.identify(text).foreign is None, text
    # one diacritic made the guard sure of another language: refused, and `--src-lang auto` wrote an
    # empty line for it; a short text is foreign only in a script none of the sources is written in
    for text in ("Naïve", "Fiancée", "São Paulo", "Kraków", "Crème brûlée", "Ich habe Hunger."):
        assert english.identify(text).foreign is None, text
    assert english.identify("こんにちは").foreign == "ja" and german.identify("Καλημέρα").foreign == "el"
    russian = LanguageIdentifier(["ru"])  # the other way round: a brand in Latin letters is not foreign
    for text in ("iPhone 15 Pro", "Hello world", "Samsung Galaxy S24 Ultra"):
        assert russian.identify(text).foreign is None, text
    assert english.identify("Привет, как дела?").foreign in ("ru", "uk", "bg", "mk", "sr", "be")
    assert english.identify("Москва").foreign is not None and english.identify("नमस्ते").foreign is not None
    # a sentence is still told apart
    assert english.identify("Ich habe heute keinen Hunger, danke schön.").foreign == "de"
    assert german.identify("Hello, how are you today, my dear friend?").foreign == "en"


def test_a_language_the_model_cannot_read_is_named():
    found = LanguageIdentifier(["en", "de", "fr"]).identify(SPANISH)
    assert found.foreign == "es"
    assert found.message(["en", "de", "fr"]).startswith("the text looks like Spanish (es), which this model does not read")
    one = LanguageIdentifier(["de"])
    assert one.identify(SENTENCES["de"]).foreign is None and one.identify(SENTENCES["de"]).confidence == 1.0
    assert one.identify(SENTENCES["en"]).foreign == "en"
    assert one.identify("12 345 ...").foreign is None  # no letters: nothing to go by, not refused
    for text in ("12 345 ...", "", " \n"):  # nor confident of the only source (was 1.0, /detect's 100)
        assert one.identify(text).confidence == 0.0 and one.identify(text).language == "de"
    assert LanguageIdentifier(["de", "en"]).identify("12 345").confidence == 0.0


def test_sources_lingua_does_not_know():
    assert lingua_language("pt-BR").name == "PORTUGUESE" and lingua_language("xx") is None
    assert language_name("de") == "German" and language_name("xx") == "xx"
    only = LanguageIdentifier(["xx"])  # its only source: every text is in it, unguarded
    assert only.identify(SENTENCES["en"]).language == "xx" and only.identify(SENTENCES["en"]).foreign is None
    with pytest.raises(Unidentifiable, match="does not know xx.*give the source language"):
        LanguageIdentifier(["de", "xx"]).identify(SENTENCES["de"])


def test_src_lang_auto_leaves_foreign_lines_untranslated_with_a_warning(capsys):
    lines = [SENTENCES["de"], "", SENTENCES["en"], SENTENCES["fr"]]
    out = list(readable_lines(lines, LanguageIdentifier(["de", "fr"])))
    assert out == [SENTENCES["de"], "", "", SENTENCES["fr"]]
    err = capsys.readouterr().err
    assert "line 3: not translated: the text looks like English (en)" in " ".join(err.split())
    assert "line 1 is German (de)" in err and "line 4 is French (fr)" in err


def test_auto_tells_apart_the_sources_and_the_zero_shot_languages_lingua_knows():
    """A target-only language lingua does not know (kab) made every `auto` text unidentifiable once
    zero-shot sources were identified too; it is left out of the identifier's languages."""
    from mt.decoding.directions import Directions

    directions = Directions((("en", "de"), ("en", "kab")), {"en": 3, "de": 4, "kab": 5})
    languages = identifiable(directions)
    assert languages == ["en", "de"]
    assert LanguageIdentifier(languages).identify(SENTENCES["en"]).language == "en"


def test_a_requests_language_codes_are_read_as_libretranslate_reads_them():
    """`DE` and LibreTranslate's `zh-Hans`/`zh-Hant`/`pt-BR` (Argos models' zh, zt, pb) were refused."""
    from mt.apps.serve.languages import Languages
    from mt.decoding.directions import Directions

    langs = Languages(Directions((("en", "zh"), ("en", "zt"), ("en", "pb"), ("en", "de")), {}))
    assert [langs.canonical(c) for c in ("EN", "zh-Hans", "ZH-HANT", "pt-BR", "de", "auto", "xx", 3)] == [
        "en", "zh", "zt", "pb", "de", "auto", "xx", 3]
