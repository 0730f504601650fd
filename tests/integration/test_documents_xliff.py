"""XLIFF files (mt.documents.localisation) with conftest's tiny trained experiment, built in the tests
with translate-toolkit and read back with it: each unit's source is translated into its target as plain
text would be, with its inline elements (<g>, <x/>, <bpt>/<ept>, 2.0's <pc>, <ph/>) and placeholders
back exactly once; IDs, notes and untranslatable units kept; targets marked for review, the target
language set; translated units left alone unless asked; hostile or broken XML is a one-line error."""

from __future__ import annotations

import codecs
from collections import Counter

import pytest
from helpers import one_line, toy_corpus
from lxml import etree
from translate.storage import xliff, xliff2

from mt.documents.formats import FORMATS, DocumentError, DocumentOptions, by_extension
from mt.documents.translate import translate_content
from mt.text.translate import translate as translate_text

S = toy_corpus(5, seed=43)[0]
W = S[1].rstrip(".").split()
XLIFF = FORMATS["xliff"]
EN = DocumentOptions("en")


def inline(source, markup: str) -> None:
    """Give a unit's <source> mixed content (parsed in the source's namespace)."""
    ns = etree.QName(source).namespace
    parsed = etree.fromstring(f'<source xmlns="{ns}">{markup}</source>')
    source.text = parsed.text
    source.extend(list(parsed))


SKELETON_1_2 = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
    b'<file original="app" source-language="de" datatype="plaintext"><body/></file></xliff>\n'
)


def build_1() -> xliff.xlifffile:
    """An XLIFF 1.2 file: a plain unit with a note, one with inline elements and placeholders, one
    translated already, one not to translate."""
    store = xliff.xlifffile.parsestring(SKELETON_1_2)
    plain = store.addsourceunit(S[0], filename="app")
    plain.setid("start.title")
    plain.addnote("the page title", origin="developer")
    marked = store.addsourceunit("x", filename="app")
    marked.setid("start.body")
    inline(
        marked.get_source_dom(),
        f'{W[0]} <g id="1">{" ".join(W[1:3])}</g> <x id="2"/> {{0}} %s '
        f'<bpt id="3">&lt;b&gt;</bpt>{" ".join(W[3:])}<ept id="3">&lt;/b&gt;</ept>.',
    )
    done = store.addsourceunit(S[2], filename="app")
    done.setid("done")
    done.settarget("Kept.")
    fixed = store.addsourceunit(S[3], filename="app")
    fixed.setid("fixed")
    fixed.marktranslatable(False)
    return store


def build_2() -> xliff2.Xliff2File:
    """An XLIFF 2.0 file: a plain unit and one with <pc> and <ph/>."""
    store = xliff2.Xliff2File(sourcelanguage="de")
    store.addsourceunit(S[0]).setid("a")
    marked = store.addsourceunit("x")
    marked.setid("b")
    inline(marked.get_source_dom(), f'{W[0]} <pc id="1">{" ".join(W[1:3])}</pc> <ph id="2"/> {" ".join(W[3:])}.')
    return store


def elements(node) -> Counter:
    """The inline elements under a <source> or <target>: (name, attributes) -> count."""
    return Counter((etree.QName(e).localname, tuple(sorted(e.attrib.items()))) for e in node.iterdescendants())


def test_units_are_translated_with_inline_elements_ids_and_notes_kept(translator, units):
    source = build_1()
    out = xliff.xlifffile.parsestring(translate_content(bytes(source), XLIFF, units, EN))
    assert [u.getid() for u in out.units] == [u.getid() for u in source.units]
    assert [u.getnotes() for u in out.units] == [u.getnotes() for u in source.units]
    plain, marked, done, fixed = out.units
    assert plain.target == translate_text(translator, [S[0]])[0]
    target = marked.get_target_dom()
    assert elements(target) == elements(marked.get_source_dom())
    text = "".join(target.itertext())
    assert text.count("{0}") == 1 and text.count("%s") == 1 and "<b>" in text
    for unit in (plain, marked):
        assert unit.get_target_dom().get("state") == "needs-review-translation" and not unit.isapproved()
    assert done.target == "Kept." and done.get_target_dom().attrib == source.units[2].get_target_dom().attrib
    assert fixed.get_target_dom() is None
    assert out.gettargetlanguage() == "en" and out.getsourcelanguage() == "de"


def test_xliff_2_segments_are_translated_and_marked_translated(translator, units):
    source = build_2()
    out = xliff2.Xliff2File.parsestring(translate_content(bytes(source), XLIFF, units, EN))
    assert [u.getid() for u in out.units] == ["a", "b"]
    plain, marked = out.units
    assert plain.target == translate_text(translator, [S[0]])[0]
    assert elements(marked.get_target_dom()) == elements(marked.get_source_dom())
    assert plain.xmlelement.get("state") == "translated" and out.gettargetlanguage() == "en"


def test_translated_units_are_translated_again_only_when_asked(translator, units):
    data = translate_content(bytes(build_1()), XLIFF, units, DocumentOptions("en", retranslate=True))
    done = xliff.xlifffile.parsestring(data).units[2]
    assert done.target == translate_text(translator, [S[2]])[0]
    assert done.get_target_dom().get("state") == "needs-review-translation"


@pytest.mark.parametrize("state", ["new", "needs-translation"])
def test_a_target_marked_as_no_translation_is_translated(translator, units, state):
    """Editors copy the source into an untranslated unit's target and say so by its state: those units
    were kept as they were, and the file came back unchanged."""
    store = build_1()
    copied = store.units[2]
    copied.settarget(S[2])
    copied.get_target_dom().set("state", state)
    out = xliff.xlifffile.parsestring(translate_content(bytes(store), XLIFF, units, EN)).units[2]
    assert out.target == translate_text(translator, [S[2]])[0]
    assert out.get_target_dom().get("state") == "needs-review-translation"
    store = build_2()
    store.units[0].settarget(S[0])
    store.units[0].xmlelement.set("state", "initial")
    store.units[1].settarget("Kept.")  # no state: a translation, kept
    out2 = xliff2.Xliff2File.parsestring(translate_content(bytes(store), XLIFF, units, EN))
    assert out2.units[0].target == translate_text(translator, [S[0]])[0] and out2.units[1].target == "Kept."


def test_a_utf_16_file_without_a_byte_order_mark_declares_its_byte_order(units):
    """Read by charset-normalizer's guess ("utf_16_le"): the declaration said UTF-8, and UTF-16 alone
    needs a byte-order mark in XML."""
    text = bytes(build_1()).decode().replace("Kept.", "Kept: café.")
    data = text.replace('encoding="UTF-8"', 'encoding="UTF-8"').encode("utf-16-le")
    out = translate_content(data, XLIFF, units, EN)
    assert not out.startswith(codecs.BOM_UTF16_LE)
    head = out.decode("utf-16-le").split("\n", 1)[0]
    assert 'encoding="UTF-16LE"' in head, head
    assert etree.fromstring(out).tag.endswith("xliff")  # libxml2 reads it by its declaration


@pytest.mark.parametrize("declaration", ['<?xml version="1.0"?>\n', ""])
def test_a_utf_16_file_without_an_encoding_declared_says_utf_16_when_translated(translator, units, declaration):
    """Its byte-order mark says UTF-16; translate-toolkit wrote the declaration encoding="UTF-8" into the
    UTF-16 bytes, which expat (and mt serve's own XML check) refuse."""
    import codecs
    import xml.dom.minidom

    text = bytes(build_1()).decode().split("\n", 1)[1]  # without translate-toolkit's declaration
    data = codecs.BOM_UTF16_LE + (declaration + text).encode("utf-16-le")
    out = translate_content(data, XLIFF, units, EN)
    assert out.startswith(codecs.BOM_UTF16_LE)
    head = out[2:].decode("utf-16-le").split("\n", 1)[0]
    assert "UTF-8" not in head.upper() and ("UTF-16" in head or "encoding" not in head), head
    parsed = xml.dom.minidom.parseString(out)  # expat: the declaration agrees with the bytes
    assert parsed.documentElement.tagName == "xliff"
    assert xliff.xlifffile.parsestring(out).units[0].target == translate_text(translator, [S[0]])[0]


def test_known_by_extension_and_encodings_kept(units):
    assert by_extension("a.xlf") is XLIFF and by_extension("a.XLIFF") is XLIFF
    text = bytes(build_1()).decode().replace('encoding="UTF-8"', 'encoding="UTF-16"').replace("\n", "\r\n")
    out = translate_content(text.encode("utf-16"), XLIFF, units, EN)
    assert out.startswith(b"\xff\xfe") and 'encoding="UTF-16"' in out.decode("utf-16")
    assert xliff.xlifffile.parsestring(out).units[0].target


ENTITY_FILE = (
    '<?xml version="1.0"?><!DOCTYPE xliff [<!ENTITY e SYSTEM "file:///etc/hostname">'
    '<!ENTITY a "aaaaaaaaaaaaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file original="a" '
    'source-language="de" datatype="plaintext"><body><trans-unit id="1"><source>Haus &e; &b;</source>'
    "</trans-unit></body></file></xliff>"
)


def test_entities_are_never_expanded(units):
    out = translate_content(ENTITY_FILE.encode(), XLIFF, units, EN).decode()
    target = out[out.index("<target") :]
    assert "&e;" in target and "&b;" in target and "aaaa" not in target


@pytest.mark.parametrize(
    "text, needle",
    [
        ('<xliff version="1.2"><file><body>', "not well-formed XML"),
        ("<html><body><p>Haus</p></body></html>", "not an XLIFF file: its root element is <html>"),
        ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"/>', "no <file> element"),
        ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file original="a" source-language="de" '
         'target-language="fr" datatype="plaintext"><body/></file></xliff>',
         "a <file>'s target-language is 'fr', not 'en'"),
        ('<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="de" trgLang="fr-CA"><file id="f">'
         '<unit id="u"><segment><source>Hallo</source></segment></unit></file></xliff>', "its trgLang is 'fr-CA'"),
    ],
)
def test_broken_files_are_refused_in_one_line(units, text, needle):
    with pytest.raises(DocumentError) as exc:
        translate_content(text.encode(), XLIFF, units, EN)
    one_line(exc, needle)


@pytest.mark.parametrize("encoding, needle", [
    ("ISO-8859-1", "its XML declaration says ISO-8859-1, but it has 'Привет', which ISO-8859-1 does not write"),  # UTF-8 bytes under another name
    ("x-unknown-enc", "names the encoding 'x-unknown-enc', which is not one Python knows"),
])
def test_a_declaration_the_bytes_belie_is_refused_in_one_line(units, encoding, needle):
    """Was: UnicodeEncodeError or LookupError, a traceback from `mt translate`."""
    text = (f'<?xml version="1.0" encoding="{encoding}"?>\n<xliff version="1.2" '
            'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="de" datatype="plaintext" '
            'original="x"><body><trans-unit id="1"><source>Привет</source></trans-unit></body></file></xliff>\n')
    with pytest.raises(DocumentError) as exc:
        translate_content(text.encode("utf-8"), XLIFF, units, EN)
    one_line(exc, needle)


def test_a_declared_legacy_encoding_gets_character_references_for_what_it_cannot_write():
    """An XLIFF file in ISO-8859-1 and a translation with "œ" and "€" (translate-toolkit's writer
    raised UnicodeEncodeError); and an ASCII file is written in the encoding it declares."""
    source = ('<?xml version="1.0" encoding="ISO-8859-1"?>\n<xliff version="1.2" '
              'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="de" target-language="fr" '
              'datatype="plaintext" original="x"><body><trans-unit id="1"><source>Café</source></trans-unit>'
              '</body></file></xliff>\n')
    for text, translation in ((source, "Œuvre à 5 €"), (source.replace("Café", "Cafe"), "Café")):
        out = translate_content(text.encode("latin-1"), FORMATS["xliff"],
                                lambda texts, fmt="text", t=translation: [t for _ in texts], DocumentOptions("fr"))
        target = etree.fromstring(out).xpath("//*[local-name()='target']")[0]
        assert target.text == translation and b"ISO-8859-1" in out.split(b"\n")[0]


def test_a_segmented_unit_gets_a_target_segment_for_each_seg_source_segment(translator, units):
    """Was: the target (one text, no segments) went before <seg-source>, against XLIFF 1.2's order, and
    CAT tools (Trados, memoQ, Okapi) read no translation from it; the file was indented anew, spaces
    put into seg-source between its segments."""
    from lxml import etree

    a, b = toy_corpus(2, seed=77)[0]
    source = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
              '<file original="x" source-language="de" datatype="plaintext"><body>'
              f'<trans-unit id="7"><source>{a} {b}</source><seg-source><mrk mtype="seg" mid="1">{a}</mrk> '
              f'<mrk mtype="seg" mid="2">{b}</mrk></seg-source></trans-unit></body></file></xliff>\n')
    out = translate_content(source.encode(), FORMATS["xliff"], units, DocumentOptions("en")).decode()
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    unit = etree.fromstring(out.encode()).find(".//x:trans-unit", ns)
    assert [etree.QName(child).localname for child in unit] == ["source", "seg-source", "target"]
    marks = unit.find("x:target", ns).findall("x:mrk", ns)
    assert [(m.get("mtype"), m.get("mid")) for m in marks] == [("seg", "1"), ("seg", "2")]
    assert [m.text for m in marks] == translate_text(translator, [a, b])
    assert f'<mrk mtype="seg" mid="1">{a}</mrk> <mrk mtype="seg" mid="2">{b}</mrk></seg-source>' in out


def test_a_segmented_units_target_keeps_what_lies_around_and_inside_its_segments(translator, units):
    """The target is seg-source's copy with each segment's text translated: the text and inline elements
    between and around the segments, and a segment of a placeholder alone, come back (were dropped);
    a CAT tool's pre-segmented target of empty segments is no translation (it was left alone)."""
    a, b = toy_corpus(2, seed=78)[0]
    source = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
              '<file original="x" source-language="de" datatype="plaintext"><body><trans-unit id="7">'
              f'<source>1. {a} <x id="1"/> {b}</source><seg-source>1. <g id="2"><mrk mtype="seg" mid="1">{a}</mrk></g> '
              f'<mrk mtype="seg" mid="2"><x id="1"/></mrk> <mrk mtype="seg" mid="3">{b}</mrk></seg-source>'
              '<target><mrk mtype="seg" mid="1"/> <mrk mtype="seg" mid="2"/> <mrk mtype="seg" mid="3"/></target>'
              '</trans-unit></body></file></xliff>\n')
    out = translate_content(source.encode(), FORMATS["xliff"], units, DocumentOptions("en")).decode()
    ta, tb = translate_text(translator, [a, b])
    assert (f'leveraged-mt">1. <g id="2"><mrk mtype="seg" mid="1">{ta}</mrk></g> <mrk mtype="seg" mid="2">'
            f'<x id="1"/></mrk> <mrk mtype="seg" mid="3">{tb}</mrk></target>') in out


def test_a_group_marked_not_to_translate_keeps_its_units_as_they_are():
    """translate="no" on a <group> was read on the unit alone: its units were translated."""
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="de" trgLang="en"><file id="f">'
        '<group id="g" translate="no"><unit id="a"><segment><source>Nicht hier</source></segment></unit>'
        '<unit id="b" translate="yes"><segment><source>Aber hier</source></segment></unit></group>'
        '<unit id="c"><segment><source>Und hier</source></segment></unit></file></xliff>\n'
    )
    asked: list[str] = []

    def upper(texts: list[str], fmt: str = "text") -> list[str]:
        asked.extend(texts)
        return [t.upper() for t in texts]

    out = translate_content(text.encode(), FORMATS["xliff"], upper, EN).decode()
    assert asked == ["Aber hier", "Und hier"] and "<target>NICHT" not in out and "<target>UND HIER</target>" in out


def test_a_standalone_declaration_is_kept():
    """`standalone="yes"` was dropped from the XML declaration."""
    text = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<xliff version="1.2" '
            b'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="de" target-language="en" '
            b'datatype="plaintext" original="a"><body><trans-unit id="1"><source>Hallo</source></trans-unit>'
            b'</body></file></xliff>\n')
    upper = lambda texts, fmt="text": [t.upper() for t in texts]  # noqa: E731
    assert translate_content(text, FORMATS["xliff"], upper, EN).startswith(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>')
    plain = translate_content(text.replace(b' standalone="yes"', b""), FORMATS["xliff"], upper, EN)
    assert plain.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')


def test_comments_and_a_doctype_before_the_root_keep_their_line_breaks():
    """lxml writes what comes before the root element on one line: the comments of a file's header ran
    into each other and into <xliff>."""
    head = '<?xml version="1.0" encoding="UTF-8"?>\r\n<!-- Generated by a tool -->\r\n\r\n<!-- Licence: CC0 -->\r\n'
    body = ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="de" '
            'target-language="en" datatype="plaintext" original="a"><body><trans-unit id="1"><source>Hallo</source>'
            '</trans-unit></body></file></xliff>\r\n')
    upper = lambda texts, fmt="text": [t.upper() for t in texts]  # noqa: E731
    out = translate_content((head + body).encode(), FORMATS["xliff"], upper, EN).decode()
    assert out.startswith(head + "<xliff ") and "<target" in out, out
    plain = translate_content(body.encode(), FORMATS["xliff"], upper, EN).decode()  # none: as before
    assert plain.startswith('<?xml version="1.0" encoding="UTF-8"?>\r\n<xliff '), plain


def test_a_target_added_to_a_laid_out_unit_is_on_a_line_of_its_own():
    """A target mt added was written on its source's line, glued to what followed it (`</target><note>`,
    `</target></trans-unit>`), in XLIFF 1.2 and 2.0 alike."""
    upper = lambda texts, fmt="text": [t.upper() for t in texts]  # noqa: E731
    one = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\n'
           '  <file source-language="de" target-language="en" datatype="plaintext" original="a">\n    <body>\n'
           '      <trans-unit id="1">\n        <source>Hallo</source>\n        <note>n</note>\n      </trans-unit>\n'
           '      <trans-unit id="2">\n        <source>Welt</source>\n      </trans-unit>\n    </body>\n  </file>\n</xliff>\n')
    out = translate_content(one.encode(), FORMATS["xliff"], upper, EN).decode()
    assert '<source>Hallo</source>\n        <target state="needs-review-translation"' in out, out
    assert ">HALLO</target>\n        <note>n</note>" in out and ">WELT</target>\n      </trans-unit>" in out, out
    two = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" '
           'srcLang="de" trgLang="en">\n  <file id="f">\n    <unit id="u">\n      <segment>\n'
           '        <source>Hallo</source>\n      </segment>\n    </unit>\n  </file>\n</xliff>\n')
    out = translate_content(two.encode(), FORMATS["xliff"], upper, EN).decode()
    assert "<source>Hallo</source>\n        <target>HALLO</target>\n      </segment>" in out, out
    compact = one.replace("\n        ", "").replace("\n      </trans-unit>", "</trans-unit>")  # on one line: as it was
    assert "</source><target" in translate_content(compact.encode(), FORMATS["xliff"], upper, EN).decode()


def test_a_source_laid_out_over_several_lines_is_one_text_unless_its_space_is_preserved():
    """XML text's line breaks are its writer's layout: "Ein Hund läuft\\n  im Park." was searched as two
    sentences, each a <br> apart; under xml:space="preserve" a line break is the text's own."""
    seen = []

    def record(texts, fmt="text"):
        seen.extend(texts)
        return texts

    unit = '<trans-unit id="{0}"{1}>\n<source>\n    Ein Hund läuft\n    im Park.\n</source>\n</trans-unit>\n'
    data = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
            '<file source-language="de" datatype="plaintext" original="a"><body>\n'
            + unit.format(1, "") + unit.format(2, ' xml:space="preserve"') + "</body></file></xliff>\n")
    out = xliff.xlifffile.parsestring(translate_content(data.encode(), XLIFF, record, EN))
    assert "<br" not in seen[0] and " ".join(seen[0].split()) == "Ein Hund läuft im Park."
    assert seen[1].count("<br") == 3
    assert " ".join(out.units[0].target.split()) == "Ein Hund läuft im Park."
    assert out.units[1].target == "\n    Ein Hund läuft\n    im Park.\n"
