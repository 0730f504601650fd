"""mt.text.language: which of a model's source languages a text is in (lingua, offline), a text in a
language the model cannot read told apart, sources lingua does not know, and `--src-lang auto`'s lines."""

from __future__ import annotations

import pytest

from mt.text.language import (
    LanguageIdentifier,
    Unidentifiable,
    auto_search,
    identifiable,
    language_name,
    lingua_language,
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


def test_src_lang_auto_copies_the_targets_lines_and_leaves_foreign_ones_untranslated(capsys):
    """A line already in the target language comes back as it is, as `mt serve` gives it (it was
    emptied as foreign by a bilingual model, and translated into itself by a multilingual one)."""
    def search(translator, lines, options=None, first_line=0):  # a stand-in for the model: marks what it was given
        return [[(f"<{line}>", -1.0, "0-0")] for line in lines]

    seen = []
    lines = [SENTENCES["de"], "", SENTENCES["en"], SENTENCES["fr"], SPANISH]
    identified = auto_search(search, LanguageIdentifier(["de", "fr", "en"]), "en", seen.append)
    assert identified(None, lines, None, 0) == [[(f"<{SENTENCES['de']}>", -1.0, "0-0")], [("<>", -1.0, "0-0")],
                                                [(SENTENCES["en"], 0.0, "0-0")], [(f"<{SENTENCES['fr']}>", -1.0, "0-0")],
                                                [("<>", -1.0, "0-0")]]
    assert seen == ["de", "fr"]
    err = " ".join(capsys.readouterr().err.split())
    assert "line 5: not translated: the text looks like Spanish (es)" in err
    assert "line 1 is German (de)" in err and "line 4 is French (fr)" in err
    assert "line 3 is in the target language (en): lines in it come back as they are" in err
    bilingual = auto_search(search, LanguageIdentifier(["de"]), "en")  # English is foreign to it, and its target
    assert bilingual(None, [SENTENCES["en"], SENTENCES["fr"]], None, 10) == [[(SENTENCES["en"], 0.0, "0-0")],
                                                                             [("<>", -1.0, "0-0")]]
    assert "line 12: not translated: the text looks like French (fr)" in " ".join(capsys.readouterr().err.split())


def test_under_a_pivot_each_languages_lines_are_searched_from_it_and_the_pivots_own_without_it():
    """`--src-lang auto --pivot en`: every line went source -> pivot -> target with no source named, an
    English line through en -> en (never trained) first."""
    from mt.decoding.options import DecodeOptions

    asked = []

    def search(translator, lines, options=None, first_line=0, progress=None, names=None):
        asked.append((options.src_lang, options.pivot, lines, names))
        return [[(f"<{line}>", -1.0)] for line in lines]

    from types import SimpleNamespace

    from mt.decoding.directions import Directions

    model = SimpleNamespace(directions=Directions(  # (a model's directions: its language tags)
        (("de", "en"), ("en", "de"), ("en", "fr"), ("fr", "en")), {"de": 4, "en": 5, "fr": 6}))
    identified = auto_search(search, LanguageIdentifier(["de", "en"]), "fr")
    lines = [SENTENCES["de"], SENTENCES["en"], " \t ", SENTENCES["fr"], SENTENCES["de"]]  # (blank: no language)
    found = identified(model, lines, DecodeOptions(tgt_lang="fr", pivot="en"), 4)
    assert found == [[(f"<{SENTENCES['de']}>", -1.0)], [(f"<{SENTENCES['en']}>", -1.0)], [("", 0.0)],
                     [(SENTENCES["fr"], 0.0)], [(f"<{SENTENCES['de']}>", -1.0)]]
    assert asked == [("de", "en", [SENTENCES["de"]] * 2, ["input line 5", "input line 9"]),
                     ("en", None, [SENTENCES["en"]], ["input line 6"])]
    # a language with no trained way into the pivot: straight into the target where that was trained
    # (was: through fr -> de, never trained, without a word), else through the pivot, its first leg said
    from mt.text.language import from_language

    options = DecodeOptions(tgt_lang="en", pivot="de")
    assert (from_language(model, options, "fr").src_lang, from_language(model, options, "fr").pivot) == ("fr", None)
    lone = SimpleNamespace(directions=Directions((("de", "en"), ("en", "de"), ("fr", "en")), {"de": 4, "en": 5, "fr": 6}))
    assert from_language(lone, DecodeOptions(tgt_lang="de", pivot="en"), "fr").pivot == "en"  # fr-en-de: trained


def test_a_short_text_already_in_the_target_comes_back_as_it_is():
    """The guard lets a short text in Latin letters pass ("Der Hund läuft." to an English model's guard),
    so an EN->DE model "translated" German into German; told apart from English, it is German."""
    english = LanguageIdentifier(["en"])
    found = english.identify("Der Hund läuft.", "de")
    assert found.is_in("de") and found.foreign is None and found.foreign_confidence >= 0.9
    assert not english.identify("Der Hund läuft.").is_in("de")  # no target asked: as before
    for text in ("A dog runs.", "Die", "Hotel Berlin", "iPhone 15 Pro", "12 345", ""):
        assert not english.identify(text, "de").is_in("de"), text  # English, or not surely German

    def search(translator, lines, options=None, first_line=0):
        return [[(f"<{line}>", -1.0)] for line in lines]

    assert auto_search(search, english, "de")(None, ["Der Hund läuft.", "A dog runs."]) == [
        [("Der Hund läuft.", 0.0)], [("<A dog runs.>", -1.0)]]


def test_a_line_of_sentences_in_several_languages_is_translated_sentence_by_sentence():
    """"Please read the manual. Lesen Sie bitte ..." into German was judged German whole and came back
    untranslated; each sentence is now translated or kept by its own language."""
    def search(translator, lines, options=None, first_line=0, progress=None, names=None):
        return [[(f"<{line}>" if line else "", -1.0)] for line in lines]

    english = auto_search(search, LanguageIdentifier(["en"]), "de", sentences=True)
    german = "Lesen Sie bitte das Handbuch, bevor Sie das Gerät benutzen."
    lines = [f"Please read the manual carefully.  {german}", f"{german} OK.", "A dog runs. A cat sleeps."]
    assert english(None, lines) == [
        [(f"<Please read the manual carefully.>  {german}", -1.0)],
        [(f"{german} OK.", 0.0)],  # a sentence too short to tell goes with its line
        [("<A dog runs. A cat sleeps.>", -1.0)],  # one language: the line whole, as before
    ]
    # a short sentence the guard cannot call foreign is translated only where lingua is sure of its source
    french = "Je suis très fatigué. Der Hund läuft nach Hause."
    assert english(None, [french]) == [[(french, 0.0)]]
    short = "Where is the station? Lesen Sie bitte das Handbuch, bevor Sie das Gerät benutzen."  # lingua: English
    assert english(None, [short]) == [[(f"<Where is the station?> {short.split('? ')[1]}", -1.0)]]
    # a target that is a variant of a source (pt-BR beside pt) is the ranker's: no line is kept for it
    assert not LanguageIdentifier(["pt"]).identify("O cachorro corre no parque.", "pt-BR").is_in("pt-BR")
    whole = auto_search(search, LanguageIdentifier(["en"]), "de")  # markup, n-best lists: the line whole
    # judged German whole, but each of its sentences foreign: each kept, with a warning (was: a crash)
    german = auto_search(search, LanguageIdentifier(["de"]), "en", sentences=True)
    foreign = "De hond loopt snel door het grote park. Hunden løber hurtigt gennem den store park."
    assert german(None, ["Ein Hund.", foreign]) == [[("<Ein Hund.>", -1.0)], [(foreign, 0.0)]]
    assert whole(None, lines[:1]) == [[(f"<{lines[0]}>", -1.0)]]


def test_addresses_do_not_decide_a_texts_language_and_iso_639_3_codes_are_known():
    """A German sentence with a URL was English (or Slovak) to the guard: copied untranslated or refused;
    a model of FLORES codes (deu_Latn) could not identify at all, or took every text as its own."""
    german = LanguageIdentifier(["de"])
    for text in ("Mehr dazu unter https://www.example.com/documentation/getting-started/installation",
                 "Kontakt: support@example-company.com",
                 "Siehe https://github.com/organization/repository/blob/main/README.md"):
        assert german.identify(text).foreign is None, text
    assert german.identify("https://example.com/a/b/c/d/e/f/g/h").confidence == 0.0  # no words: nothing to go by
    flores = LanguageIdentifier(["eng_Latn", "deu_Latn"])
    assert flores.identify(SENTENCES["de"]).language == "deu_Latn" and not flores.unknown
    found = LanguageIdentifier(["deu"]).identify(SENTENCES["en"])
    assert found.foreign == "en" and found.written_in("eng") and found.written_in("eng_Latn") and not found.written_in("fr")
    assert lingua_language("deu") == lingua_language("de") and language_name("fra_Latn") == "French"
    # FLORES-200's individual languages of a macrolanguage lingua knows by the macrolanguage's code
    assert [language_name(code) for code in ("arb_Arab", "pes_Arab", "zsm_Latn", "cmn_Hans", "nob_Latn")] == [
        "Arabic", "Persian", "Malay", "Chinese", "Bokmal"]


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
    assert [langs.canonical(c) for c in ("EN", "zh-Hans", "ZH-HANT", "pt-BR", "de", "auto", "xx", 3, "zh-TW", "zh_HK")] == [
        "en", "zh", "zt", "pb", "de", "auto", "xx", 3, "zt", "zt"]  # (Taiwan's and Hong Kong's: traditional)
    # a model that spells them pt_BR and zh_Hans (a direction has no hyphen), or has pt alone: refused before
    langs = Languages(Directions((("en", "pt_BR"), ("en", "zh_Hans"), ("en", "es")), {}))
    assert [langs.canonical(c) for c in ("pt-BR", "zh-hans", "es-419", "es-MX", "zh-Hant")] == [
        "pt_BR", "zh_Hans", "es", "es", "zh-Hant"]
    assert Languages(Directions((("en", "pt"),), {})).canonical("pt-BR") == "pt"
    assert Languages(Directions((("en", "zh"),), {})).canonical("zh-TW") == "zh-TW"  # no simplified Chinese for it


def test_a_short_text_judged_by_its_script_says_so_and_is_in_any_language_of_it():
    """"Привет" was "Serbian" to an English model (the script decided, lingua's top language named at
    28%), and a model into Russian refused it as Serbian rather than taking it as its target's."""
    found = LanguageIdentifier(["en", "de"]).identify("Привет")
    assert found.script == "Cyrillic" and found.foreign_confidence >= 0.9
    assert found.message(["en", "de"]).startswith("the text is in Cyrillic script (perhaps ")
    assert found.written_in("ru") and found.written_in("uk") and not found.written_in("ar")
    assert LanguageIdentifier(["en"]).identify("Hello there, how are you today, my friend?").script == ""


def test_argos_codes_and_regional_variants_read_as_their_language_everywhere():
    """LibreTranslate's zt and pb, and pt-BR or PT: sacrebleu scored a zt model's Chinese with 13a (BLEU
    0.0 for 77 with zh), lingua knew neither (auto refused a Portuguese text into pb), and the sentence
    rules were English ("O Exmo. Sr. Dr. João chegou." cut after "Exmo.")."""
    from mt.metrics import sacrebleu_code
    from mt.text.language import lingua_language
    from mt.text.sentences import rules_for, sentence_spans

    assert sacrebleu_code("zt") == "zh" and sacrebleu_code("zh-Hant") == "zh"
    assert lingua_language("pb") == lingua_language("pt") is not None
    assert lingua_language("zt") == lingua_language("zh") is not None
    assert {rules_for(code) for code in ("pb", "pt-BR", "pt_BR", "PT")} == {"pt"}
    text = "O Exmo. Sr. Dr. João chegou. Ele foi."
    assert [text[a:b] for a, b in sentence_spans(text, "pb")] == ["O Exmo. Sr. Dr. João chegou.", "Ele foi."]


def test_a_foreign_sentence_in_a_line_of_the_target_language_is_said(capsys):
    """"Dos hombres ... Der Hund läuft ..." into German came back as it was with only "line 1 is in the
    target language": the Spanish sentence neither translated nor refused with a reason."""
    def search(translator, lines, options=None, first_line=0, progress=None, names=None):
        return [[(f"<{line}>" if line else "", -1.0)] for line in lines]

    english = auto_search(search, LanguageIdentifier(["en"]), "de", sentences=True)
    line = ("Dos hombres jóvenes juegan al fútbol en un campo verde. "
            "Der Hund läuft im Park und die Katze sitzt auf dem Haus.")
    assert english(None, [line]) == [[(line, 0.0)]]
    assert "line 1: a sentence not translated" in " ".join(capsys.readouterr().err.split())
