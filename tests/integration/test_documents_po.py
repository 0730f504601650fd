"""Gettext PO files (mt.documents.localisation) with conftest's tiny trained experiment, built in the
tests with translate-toolkit and read back with it: each msgid is translated into its msgstr as plain
text would be, plural forms fill the header's nplurals, placeholders and tags come back exactly once
(translate-toolkit's own checks and msgfmt --check agree), IDs, contexts, locations, comments and flags
are kept, translated entries are marked fuzzy, translated ones are left alone unless asked; encodings
and line endings are kept; a file that is no PO file is a one-line error."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import mt, one_line, toy_corpus
from translate.filters.checks import StandardChecker
from translate.misc.multistring import multistring
from translate.storage import pypo

from mt.documents.formats import FORMATS, DocumentError, DocumentOptions, by_extension
from mt.documents.translate import translate_content
from mt.text.translate import translate as translate_text

S = toy_corpus(6, seed=41)[0]
W = S[0].rstrip(".").split()
PO = FORMATS["po"]
EN = DocumentOptions("en")


def build(plural_forms: str | None = "nplurals=3; plural=(n==1 ? 0 : n>=2 && n<=4 ? 1 : 2);", language: str = ""):
    """A catalogue with a plain entry, one with placeholders and tags, a plural one, one translated
    already and an obsolete one, as translate-toolkit writes it."""
    store = pypo.pofile()
    store.init_headers(charset="UTF-8", **({"Language": language} if language else {}))
    if plural_forms:
        store.updateheader(add=True, Plural_Forms=plural_forms)
    plain = store.addsourceunit(S[1])
    plain.addlocation("src/app.c:10")
    plain.addnote("shown on the start page", origin="developer")
    plain.setcontext("start")
    marked = store.addsourceunit(f"{W[0]} %s {' '.join(W[1:3])} %(count)d {{name}} <b>{' '.join(W[3:])}</b>.\n")
    marked.settypecomment("c-format")
    marked.addlocation("src/app.c:20")
    plural = store.addsourceunit(multistring([f"%d {S[2]}", f"%d {S[3]}"]))
    plural.settypecomment("c-format")
    plural.target = multistring(["", "", ""])
    done = store.addsourceunit(S[4])
    done.target = "Kept as the translator wrote it."
    old = store.addsourceunit(S[5])
    old.target = "old"
    old.makeobsolete()
    return store


def result(store, units, options=EN) -> pypo.pofile:
    out = translate_content(bytes(store), PO, units, options)
    return pypo.pofile.parsestring(out)


def test_entries_are_translated_with_their_ids_comments_and_flags_kept(translator, units):
    source = build()
    out = result(source, units)
    assert [u.getid() for u in out.units] == [u.getid() for u in source.units]
    for before, after in zip(source.units, out.units):
        assert after.getlocations() == before.getlocations() and after.getnotes() == before.getnotes()
        assert after.getcontext() == before.getcontext() and after.isobsolete() == before.isobsolete()
    header, plain, marked, plural, done, old = out.units
    assert plain.target == translate_text(translator, [S[1]])[0]
    assert plain.isfuzzy() and marked.isfuzzy() and plural.isfuzzy() and not done.isfuzzy()
    assert marked.hastypecomment("c-format") and marked.hastypecomment("fuzzy")
    assert done.target == "Kept as the translator wrote it." and old.target == "old"
    assert out.parseheader()["Language"] == "en"


def test_placeholders_and_tags_come_back_once_and_translate_toolkit_checks_agree(units):
    marked = result(build(), units).units[2]
    target = str(marked.target)
    for placeholder in ("%s", "%(count)d", "{name}", "<b>", "</b>"):
        assert target.count(placeholder) == 1, target
    assert target.index("<b>") < target.index("</b>") and target.endswith("\n")
    failures = StandardChecker().run_filters(marked)
    assert not {"printf", "pythonbraceformat", "xmltags", "newlines"} & failures.keys(), failures


def test_plural_forms_fill_the_headers_nplurals_or_the_target_languages(translator, units):
    plural = result(build(), units).units[3]
    one, many = translate_text(translator, [S[2], S[3]])
    assert [str(form) for form in plural.target.strings] == [f"%d {one}", f"%d {many}", f"%d {many}"]
    out = result(build(plural_forms=None), units)
    assert out.getheaderplural() == ("2", "(n != 1)") and len(out.units[3].target.strings) == 2


def test_a_header_with_more_plural_forms_than_any_language_is_refused(units):
    """Each plural entry's translation is copied nplurals times: a header's number is bounded, or a
    file of a few hundred bytes could ask for any memory."""
    with pytest.raises(DocumentError) as exc:
        translate_content(bytes(build(plural_forms="nplurals=100000000; plural=0;")), PO, units, EN)
    one_line(exc, "nplurals=100000000", "more than 6")


def test_translated_entries_are_translated_again_only_when_asked(translator, units):
    out = result(build(language="en_US"), units, DocumentOptions("en", retranslate=True))
    done = out.units[4]
    assert done.target == translate_text(translator, [S[4]])[0] and done.isfuzzy()
    assert out.parseheader()["Language"] == "en_US"  # the variant the file names is kept


def test_a_file_for_another_target_language_is_refused(units):
    """A file for French translated into English was written with English msgstrs under "Language: fr"
    and French plural forms; XLIFF's target-language likewise."""
    with pytest.raises(DocumentError) as exc:
        translate_content(bytes(build(language="fr")), PO, units, EN)
    one_line(exc, "its header's Language is 'fr', not 'en'")
    from mt.documents.localisation import check_target_language

    for named, target in (("pt_BR", "pb"), ("pt-PT", "pt"), ("zh_TW", "zt"), ("zh-Hant-HK", "zt"), ("zh_CN", "zh"),
                          ("iw", "he"), ("nb-NO", "no")):
        check_target_language(named, target, "Language")  # the same language, in another code
    for named, target in (("zh-Hant", "zh"), ("zh_CN", "zt"), ("pt", "es")):
        with pytest.raises(DocumentError):
            check_target_language(named, target, "Language")


def test_a_fuzzy_entry_is_kept_as_the_translator_wrote_it_and_said(units, capsys):
    """A fuzzy msgstr (msgmerge's guess, a draft) is the translator's to review: kept, but counted in a
    warning, so that a file that comes back unchanged says why."""
    store = build()
    store.units[4].markfuzzy(True)
    out = result(store, units)
    assert out.units[4].target == "Kept as the translator wrote it." and out.units[4].isfuzzy()
    assert "1 fuzzy entry kept as written" in " ".join(capsys.readouterr().err.split())
    result(build(), units)
    assert "fuzzy" not in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")
def test_msgfmt_checks_the_translation(units, tmp_path):
    path = tmp_path / "de.po"
    path.write_bytes(translate_content(bytes(build()), PO, units, EN))
    done = subprocess.run(
        ["msgfmt", "--check", "--use-fuzzy", "-o", str(tmp_path / "de.mo"), str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_legacy_encoding_and_windows_line_endings_are_kept(units):
    text = bytes(build()).decode().replace("charset=UTF-8", "charset=ISO-8859-1")
    text = text.replace(S[4], f"{S[4]} Grüße")
    data = text.replace("\n", "\r\n").encode("latin-1")
    out = translate_content(data, PO, units, EN)
    assert "Grüße".encode("latin-1") in out and out.count(b"\r\n") == out.count(b"\n") > 20
    assert b"charset=ISO-8859-1" in out and b'msgstr "Kept as the translator wrote it."' in out


@pytest.mark.parametrize(
    "text, needle",
    [
        ('msgid "Haus\nmsgstr ""\n', "line 1"),
        ("Hallo Welt\n", "Syntax error on line 1"),
        ('msgid "a"\nmsgstr "b"\nmsgid', "line 3"),
        ('#, fuzzy\nmsgid "file"\nmsgid_plural "files"\nmsgstr "Datei"\n', "translate-toolkit"),  # was a traceback
    ],
)
def test_a_file_that_is_no_po_file_is_refused_in_one_line(units, text, needle):
    with pytest.raises(DocumentError) as exc:
        translate_content(text.encode(), PO, units, EN)
    one_line(exc, "not a PO file", needle)


def test_mt_translate_writes_a_po_file_to_stdout(trained_experiment, translator, tmp_path, capsys, monkeypatch):
    # a template (.pot), gettext's usual input, too: it was translated line by line as plain text,
    # `msgid "..."` and all, without a word
    for name in ("de.po", "messages.pot"):
        assert by_extension(name) is PO
        source = tmp_path / name
        source.write_bytes(bytes(build()))
        code, out, err = mt(
            capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", source, "--threads", "1"
        )
        assert code == 0, err
        assert pypo.pofile.parsestring(out.encode()).units[1].target == translate_text(translator, [S[1]])[0]


def test_an_ascii_file_is_written_in_the_charset_its_header_declares(capsys):
    """Bytes that are ASCII read as UTF-8 too, but a PO file's readers go by its header's charset: the
    translation is written in it (was: UTF-8 under an ISO-8859-1 header, mojibake for msgconv), and
    where that charset cannot write the translation the header says UTF-8."""
    po = b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n\nmsgid "Coffee open"\nmsgstr ""\n'
    out = translate_content(po, FORMATS["po"], lambda texts, fmt="text": ["Café ouvert" for _ in texts],
                            DocumentOptions("fr"))
    assert b"charset=ISO-8859-1" in out and 'msgstr "Café ouvert"' in out.decode("latin-1")
    out = translate_content(po, FORMATS["po"], lambda texts, fmt="text": ["Œuvre ouverte" for _ in texts],
                            DocumentOptions("fr"))
    assert b"charset=UTF-8" in out and 'msgstr "Œuvre ouverte"' in out.decode("utf-8")
    assert "its header's charset changed to UTF-8" in capsys.readouterr().err


def test_a_file_without_a_header_gets_one_that_names_utf_8():
    """translate-toolkit's template header said charset=CHARSET, which msgfmt refuses."""
    out = translate_content(b'msgid "Coffee open"\nmsgstr ""\n', FORMATS["po"],
                            lambda texts, fmt="text": ["Café ouvert" for _ in texts], DocumentOptions("fr"))
    text = out.decode("utf-8")
    assert '"Content-Type: text/plain; charset=UTF-8\\n"' in text and '"Language: fr\\n"' in text
    assert 'msgstr "Café ouvert"' in text and "CHARSET" not in text


def test_a_tab_inside_a_message_is_kept_between_its_translated_parts(units):
    """A tab inside a sentence became a space: the message's columns, or a label and its value, ran
    together."""
    store = pypo.pofile()
    store.init_headers(charset="UTF-8")
    store.addsourceunit(f"{W[0]} {W[1]}\t{' '.join(W[2:])}.")
    out = pypo.pofile.parsestring(translate_content(bytes(store), PO, units, EN))
    (unit,) = [u for u in out.units if not u.isheader()]
    assert unit.target.count("\t") == 1 and all(part.strip() for part in unit.target.split("\t")), unit.target


def test_a_file_without_a_header_in_a_legacy_encoding_is_written_as_its_new_header_says():
    """The header added says UTF-8; the file was written in the encoding it was read in (msgfmt: invalid)."""
    out = translate_content('msgid "Größe ändern"\nmsgstr ""\n'.encode("latin-1"), FORMATS["po"],
                            lambda texts, fmt="text": ["Redimensionner la taille" for _ in texts], DocumentOptions("fr"))
    assert '"Content-Type: text/plain; charset=UTF-8\\n"' in out.decode("utf-8") and 'msgid "Größe ändern"' in out.decode()


def test_a_keyboard_accelerator_is_kept_on_the_translation():
    """"&File" and "Save _As" came back without their markers: the menu lost its keys."""
    from mt.documents.localisation import accelerator

    store = pypo.pofile()
    store.init_headers(charset="UTF-8")
    for source in ("&File", "Save _As...", "Tom & Jerry", "file_name here", "&Open &Recent"):
        store.addsourceunit(source)
    asked: list[str] = []
    answers = {"File": "Datei", "Save As...": "Speichern unter...", "Tom &amp; Jerry": "Tom &amp; Jerry",
               "file_name here": "Dateiname hier", "&amp;Open &amp;Recent": "Zuletzt geöffnet"}

    def units(texts, fmt="text"):
        asked.extend(texts)
        return [answers[t] for t in texts]

    out = pypo.pofile.parsestring(translate_content(bytes(store), PO, units, EN))
    targets = [str(u.target) for u in out.units if not u.isheader()]
    assert asked == list(answers)  # the markers are not the model's to read
    assert targets == ["&Datei", "_Speichern unter...", "Tom & Jerry", "Dateiname hier", "Zuletzt geöffnet"]
    from mt.documents.localisation import with_accelerator
    from mt.documents.placeholders import placeholders

    kept = placeholders()
    assert accelerator("Print &Preview", kept) == ("&", "P", "Print Preview") and accelerator("&amp; x", kept) is None
    assert accelerator("E&xit", kept) == ("&", "x", "Exit")
    assert accelerator("<b>&Help</b>", kept) == ("&", "H", "<b>Help</b>")
    assert accelerator("_Open %(file_name)s", kept) == ("_", "O", "Open %(file_name)s")  # its "_" is the placeholder's
    for text in ("R&D", "Q&A", "AT&T", "This is _important_ text", "target=_blank", "$_POST", "__init__"):
        assert accelerator(text, kept) is None, text
    # never inside a placeholder or a tag: msgfmt -c refused "<&b>" and "%(&name)s"

    assert with_accelerator("<b>Ein Park</b>", "&", "P", placeholders()) == "<b>Ein &Park</b>"
    assert with_accelerator("%(name)s öffnen", "&", "O", placeholders()) == "%(name)s &öffnen"
    assert with_accelerator("{file_name} öffnen", "_", "O", placeholders()) == "{file_name} _öffnen"


def test_argos_codes_are_written_as_language_tags_with_their_plural_forms():
    """A file translated into LibreTranslate's pb or zt said "Language: pb" (no language tag), with
    English plural forms where Brazilian Portuguese has (n > 1) and Chinese one form."""
    po = b'msgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    out = translate_content(po, PO, lambda texts, fmt="text": list(texts), DocumentOptions("pb")).decode("utf-8")
    assert "Language: pt_BR" in out and "plural=(n > 1)" in out
    out = translate_content(po, PO, lambda texts, fmt="text": list(texts), DocumentOptions("zt")).decode("utf-8")
    assert "Language: zh_TW" in out and "nplurals=1" in out
