"""mt.text.casing: a sentence in capitals or title case is searched in the casing the model learned
(each word as its vocabulary writes it best) and a sentence in capitals comes back in capitals; on
conftest's tiny model, whose toy corpus is in sentence case with its nouns in lower case."""

from __future__ import annotations

import shutil

import pytest
from helpers import Served, load, mt, ok

from mt.apps.serve.app import Limits, build_app
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.text.casing import capitalises_nouns, lowered, recased, restored, shouted, spellings, titled
from mt.text.markup_translate import translate as markup_translate
from mt.text.translate import read_cased, search, target_language, translate, unknown_runs
from mt.tokenizer import capitalised, casing_table, lower, upper

pytestmark = pytest.mark.usefixtures("single_thread")

PLAIN = DecodeOptions(recase=False)


@pytest.mark.parametrize(
    "piece, capitals, title",
    [
        ("A MAN IS SLEEPING ON A SOFA.", True, False),
        ("ERROR 404: PAGE NOT FOUND", True, False),
        ("NASA", True, False),
        ("STRAßE GESPERRT", True, False),  # ß has no capital in common use
        ("A", False, False),  # one capital: a word, not a sentence in capitals
        ("A man in the NASA building.", False, False),  # an acronym in a sentence
        ("A Man Is Sleeping On A Sofa", False, True),
        ("NASA Launches New Rocket From Florida", False, True),
        ("A Group of Men Loading Cotton onto a Truck", False, True),  # short words in lower case
        ("Breaking News from the White House", False, True),
        ("US Troops Leave Iraq", False, True),
        ("Ein Mann mit einer roten Schwimmweste sitzt in einem Boot.", False, False),  # German nouns
        ("Der Mann und die Frau im Haus.", False, False),
        ("Barack Obama", False, False),  # a name: two words
        # sentences with names
        ("I love New York.", False, False),
        ("My name is John Smith.", False, False),
        ("We met at Apple in May.", False, False),
        ("I met Tom and Ann at the zoo.", False, False),
        ("John Smith and Mary Jones went to London", False, False),
        ("Der Mann", False, False),
        ("12:45", False, False),
        ("他来了", False, False),
    ],
)
def test_capitals_and_title_case_are_told_from_a_writers_casing(piece, capitals, title):
    assert (shouted(piece), titled(piece)) == (capitals, title)


def test_a_sentence_all_in_lower_case_is_read_with_the_capitals_the_vocabulary_knows(translator):
    """All in lower case (a chat's): the sentence's first word capitalised, as the training text has it,
    and a word the vocabulary writes in fewer pieces with a capital; its translation as the model cases it."""
    tok = translator.src_tok
    assert lowered("der mann sitzt.") and not lowered("ok") and not lowered("Der mann sitzt.")
    assert recased(tok, "der mann sitzt im park. die katze läuft.") == "Der mann sitzt im park. Die katze läuft."
    assert translate(translator, ["die katze läuft."]) == translate(translator, ["Die katze läuft."])
    assert translate(translator, ["die katze läuft."], PLAIN) == [translator.search(["die katze läuft."])[0][0][0]]


def test_a_language_that_capitalises_its_nouns_has_title_case_only_by_its_table(translator):
    assert [capitalises_nouns(code) for code in ("de", "de-CH", "de_AT", "DE", "en", "fr")] == [True] * 4 + [False] * 2
    tok = translator.src_tok
    assert recased(tok, "Der Mann Sitzt Im Park", titles=False) == "Der Mann Sitzt Im Park"  # no table
    table = {"MANN": "Mann", "SITZT": "sitzt", "IM": "im"}
    assert recased(tok, "Der Mann Sitzt Im Park", titles=False, table=table) == "Der Mann sitzt im Park"
    # strictly: a German sentence with a word in lower case after its first is no title
    assert recased(tok, "Der Mann Sitzt im Park", titles=False, table=table) == "Der Mann Sitzt im Park"
    # the toy model's source is German, and its experiment has the table its training text gives
    assert set(tok.casing) == {"de"} and tok.casing["de"]["MANN"] == "mann"
    assert read_cased(translator, ["Der Mann Sitzt Im Park", "DER MANN"], DecodeOptions()) == [
        "Der mann sitzt im park", "Der mann"]


def test_a_casing_table_holds_each_words_commonest_form_inside_sentences(trained_experiment, tmp_path, capsys):
    lines = ["Die Straße ist nass.", "Der Mann sieht die Straße und die Frau.", "Ein Mann und eine Frau.", "Mann oh Mann.",
             "Sie fliegt mit der NASA und der NASA.", "ein einzelnes Wort", "Ja. Die Frau kam. - Die Frau ging.",
             "ein paar Kinder, ein Paar Schuhe", "然后回家 然后回家"]
    table = casing_table(lines)
    assert table["STRASSE"] == "Straße" and table["MANN"] == "Mann" and table["NASA"] == "NASA"
    assert "DIE" in table and table["DIE"] == "die"  # ("Die" only as a sentence's first word, any sentence's)
    assert "WORT" not in table  # met once: too few to tell
    assert "PAAR" not in table  # neither form is the word's most of the time
    assert "然后回家" not in table  # no case
    tok = Translator.load(trained_experiment, trained_experiment.load_config()).src_tok
    assert recased(tok, "DIE STRASSE UND DER MANN", True, table) == "Die Straße und der Mann"
    # from lower case the spelling stays ("strasse" is no "Straße"), the casing is the table's
    assert recased(tok, "die strasse der nasa", True, table).endswith(" der NASA")
    # what `mt train-tokenizer` wrote beside the tokenizer; a damaged one is a one-line error
    copy = Experiment(tmp_path / "exp")
    shutil.copytree(trained_experiment.root, copy.root)
    copy.casing_path.write_text('{"de": ["not", "a", "table"]}', encoding="utf-8")
    damaged = copy.load_tokenizers(True)[0]
    assert damaged.casing == {} == damaged.casing  # said once; the vocabulary reads casing alone
    assert " ".join(capsys.readouterr().err.split()).count("casing.json: not a casing table") == 1
    copy.casing_path.unlink()  # a tokenizer trained before the tables: the vocabulary decides
    assert copy.load_tokenizers(True)[0].casing == {}
    # ... and `mt train-tokenizer` adds them, the tokenizer as it was; then it is done
    from mt.data.train_tokenizer import train_tokenizer

    model = copy.spm_model_path("joint").read_bytes()
    assert set(train_tokenizer(copy, copy.load_config())["casing"]) == {"de"}
    assert copy.load_tokenizers(True)[0].casing == trained_experiment.load_tokenizers(True)[0].casing
    assert copy.spm_model_path("joint").read_bytes() == model
    with pytest.raises(MtError, match="already has a tokenizer"):
        train_tokenizer(copy, copy.load_config())
    # a tokenizer removed beside data and checkpoints made with it is not trained again: every later step
    # said "done already", and translating then failed on the checkpoint's other tokenizer
    shutil.rmtree(copy.tokenizer_dir)
    with pytest.raises(MtError, match="no tokenizer, but .*data was made with one; put the tokenizer back"):
        train_tokenizer(copy, copy.load_config())
    assert not copy.tokenizer_dir.exists() or not any(copy.tokenizer_dir.iterdir())


def test_each_word_is_read_in_the_casing_the_vocabulary_writes_best(translator):
    tok = translator.src_tok
    assert recased(tok, "DER MANN SITZT IM PARK.") == "Der mann sitzt im park."
    assert recased(tok, "DER MANN SITZT. DIE KATZE LÄUFT!") == "Der mann sitzt. Die katze läuft!"  # two sentences
    # (the toy corpus's German has its nouns in lower case: its title case is read as English's is)
    assert recased(tok, "Der Mann Sitzt Im Park") == "Der mann sitzt im park"
    assert recased(tok, "Der Mann Sitzt Im Park", titles=False) == "Der Mann Sitzt Im Park"
    # a word the vocabulary spells piece by piece in either casing (a name) keeps its capital; so does
    # an acronym in a title
    assert recased(tok, "Der Mann Sitzt Im Xaverius") == "Der mann sitzt im Xaverius"
    assert recased(tok, "Der MANN Sitzt Im Park") == "Der MANN sitzt im park"
    assert recased(tok, "Die frau sitzt im Park.") == "Die frau sitzt im Park."  # the writer's casing
    # a sentence starts after a sentence's end and a space, not inside "2.0" or after "5"
    assert recased(tok, "DER MANN 2.0 SITZT") == "Der mann 2.0 sitzt"
    assert recased(tok, "5 MANN SITZT") == "5 mann sitzt"
    # decomposed letters are letters of their word
    assert recased(tok, "DIE KATZE LA\u0308UFT") == "Die katze läuft"
    # code, handles and addresses keep their letters; an abbreviation's stop starts no sentence, nor
    # does a "/" or "..." between words end one
    assert recased(tok, "@max_mann der mann #park df.groupby example.com /usr/mann") == (
        "@max_mann der mann #park df.groupby example.com /usr/mann")
    assert recased(tok, "DER MANN/DIE FRAU Z.B. DER HUND") == "Der mann/die frau Z.B. der hund"
    assert recased(tok, "DER MANN IM A7. DIE FRAU 5 KM/H") == "Der mann im A7. Die frau 5 KM/H"
    assert recased(tok, "DER MANN...DIE FRAU") == "Der mann...die frau"


def test_a_sentence_in_capitals_is_translated_as_its_sentence_case_and_into_capitals(translator):
    read = translate(translator, ["Der mann sitzt im park.", "Die katze läuft."])
    assert translate(translator, ["DER MANN SITZT IM PARK."]) == [read[0].upper()]
    assert read[0] != read[0].upper()  # (the test means something: the model writes lower case)
    # sentence by sentence: only the one in capitals comes back in capitals
    assert translate(translator, ["DER MANN SITZT IM PARK. Die katze läuft."]) == [f"{read[0].upper()} {read[1]}"]
    # an n-best list and alignments too (a text searched whole)
    for options in (DecodeOptions(nbest=2), DecodeOptions(alignment_layer=1)):
        found = search(translator, ["DER MANN SITZT IM PARK."], options)[0]
        sentence_case = search(translator, ["Der mann sitzt im park."], options)[0]
        assert found == [(h[0].upper(), *h[1:]) for h in sentence_case]


def test_recasing_off_reads_every_sentence_as_it_is_written(translator, trained_experiment, capsys, monkeypatch):
    as_written = translator.search(["DER MANN SITZT IM PARK."])[0][0][0]
    assert translate(translator, ["DER MANN SITZT IM PARK."], PLAIN) == [as_written]
    assert as_written != translate(translator, ["DER MANN SITZT IM PARK."])[0]
    code, out, _ = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--no-recase",
                      stdin="DER MANN SITZT IM PARK.\n")
    assert (code, out) == (0, f"{as_written}\n")
    code, out, _ = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root,
                      stdin="DER MANN SITZT IM PARK.\n")
    assert (code, out) == (0, f"{translate(translator, ['DER MANN SITZT IM PARK.'])[0]}\n")


def test_markup_in_capitals_keeps_its_tags_and_is_translated_into_capitals(translator):
    found = markup_translate(translator, ["<b>DER MANN</b> SITZT IM <i>PARK</i>."], "html")[0]
    assert found.count("<b>") == found.count("</b>") == found.count("<i>") == found.count("</i>") == 1
    text = found.replace("<b>", "").replace("</b>", "").replace("<i>", "").replace("</i>", "")
    assert text == text.upper()
    plain = markup_translate(translator, ["Der mann sitzt im park."], "html")[0]
    assert text.split() == plain.upper().split()


def test_a_server_translates_capitals_as_mt_translate_does(trained_experiment, translator):
    limits = Limits(max_wait_ms=20, max_lines=20, max_chars=6000, max_beam=5)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as served:
        answer = ok(f"{served.url}/translate", {"q": "DER MANN SITZT IM PARK.", "source": "de", "target": "en"})
    assert answer["translatedText"] == translate(translator, ["DER MANN SITZT IM PARK."])[0]
    assert answer["translatedText"] == answer["translatedText"].upper()


def test_a_capital_the_vocabulary_lacks_is_read_in_lower_case_in_a_text_in_capitals(translator):
    """"LÄUFT": the toy vocabulary has "ä" but no "Ä"; in capitals the word was kept as it is, as a name
    in another script is, and the model read "Der hund ."."""
    tok = translator.src_tok
    assert tok.unknown_character("Ä") and not tok.unknown_character("ä")
    assert unknown_runs(tok, "DER HUND LÄUFT.") == []
    assert unknown_runs(tok, "Der Hund LÄUFT.") == [(9, 14)]  # not in capitals: read as written
    read = translate(translator, ["Der hund läuft."])[0]
    assert translate(translator, ["DER HUND LÄUFT."]) == [read.upper()]


def test_spelling_costs_count_the_pieces_the_vocabulary_lacks_first(translator):
    tok = translator.src_tok
    (unknown, pieces, _), (known, _, _) = tok.spelling_costs(["LÄUFT", "läuft"])
    assert unknown > 0 == known
    assert tok.spelling_costs(["läuft"] * 3) == [tok.spelling_costs(["läuft"])[0]] * 3


def test_turkish_capitals_are_read_and_written_with_their_dotted_and_dotless_i(translator):
    """In Turkish (and Azerbaijani) "İ" is "i" in lower case and "I" is "ı": Python's own lower() makes
    "İ" an "i" with a combining dot, and its upper() writes "bir" as "BIR", a word no table holds."""
    assert lower("İSTANBUL IĞDIR", "tr") == "istanbul ığdır" and lower("İSTANBUL", "en") != "istanbul"
    assert upper("bir kedi ılık", "tr") == "BİR KEDİ ILIK" and upper("bir", "az-Latn") == "BİR"
    assert upper("bir", "en") == "BIR" and capitalised("istanbul", "tr") == "İstanbul"
    assert capitalised("ırmak", "tr") == "Irmak" and capitalised("istanbul", "en") == "Istanbul"
    lines = ["Dün bir kedi gördük.", "Orada bir kedi vardı.", "Biz İstanbul ve Iğdır gördük.", "Biz İstanbul ve Iğdır."]
    table = casing_table(lines, "tr")
    assert table["BİR"] == "bir" and table["İSTANBUL"] == "İstanbul" and table["IĞDIR"] == "Iğdır"
    assert "BIR" not in table and "BIR" in casing_table(lines)  # (as another language writes it)
    tok = translator.src_tok
    assert recased(tok, "BİR KEDİ VE İSTANBUL", True, table, "tr") == "Bir kedi ve İstanbul"
    assert restored("BİR KEDİ", ("bir kedi", -0.5), "tr") == ("BİR KEDİ", -0.5)
    assert restored("BİR KEDİ", ("bir kedi", -0.5)) == ("BIR KEDI", -0.5)
    old = {"BIR": "bir", "KEDI": "kedi", "VE": "ve"}  # a table written before, by Python's upper()
    assert recased(tok, "BİR KEDİ VE", True, old, "tr") == "Bir kedi ve"
    assert spellings("İSTANBUL", "capitals")[1] == "İstanbul"  # composed, in any language
    assert target_language(translator, DecodeOptions()) == translator.directions.targets()[0]
