"""What a localisation unit keeps exactly (mt.documents.placeholders): placeholders and tags become
markers and wrappers of an html unit, and come back from a translation once, with the spaces the
source had around them."""

from __future__ import annotations

import pytest
from lxml import etree

from mt.documents.placeholders import Protected, placeholders


def protect(text: str) -> Protected:
    p = Protected(placeholders())
    p.html = p.text(text)
    return p


def marker(k: int) -> str:
    return f'<span data-ph="{k}" translate="no"></span>'


def test_placeholders_are_markers_and_a_tag_pair_a_wrapper():
    p = protect("Hallo %s, du hast %(n)d <b>neue</b> {x} & %% <br/>\n")
    assert p.html == (
        f'Hallo {marker(0)}, du hast {marker(1)} <span data-wrap="2">neue</span> {marker(3)} '
        f'&amp; {marker(4)} {marker(5)}<br data-ph="6">'
    )


@pytest.mark.parametrize(
    "source, translated, expected",
    [  # the text layer puts a marker right after a word: the source's spaces come back around it
        ("Hallo %s, willkommen", f"Hello{marker(0)}, welcome", "Hello %s, welcome"),
        ("%d Dateien", f"{marker(0)}files", "%d files"),
        ("in {ort}.", f"in.{marker(0)}", "in. {ort}"),
        ("(%s)", f"({marker(0)})", "(%s)"),
        ("a %s %s b", f"a{marker(0)}{marker(1)} b", "a %s %s b"),
        ("Zeile\nZeile", 'Line<br data-ph="0">line', "Line\nline"),
        ("<b>fett</b> %s", '<span data-wrap="0">bold</span>', "<b>bold</b> %s"),  # a lost one: at the end
    ],
)
def test_a_translation_gets_its_placeholders_back_once_with_the_sources_spaces(source, translated, expected):
    assert protect(source).restore(translated) == expected


def test_xliff_inline_elements_come_back_as_copies_around_and_between_the_words():
    ns = "urn:oasis:names:tc:xliff:document:1.2"
    source = etree.fromstring(
        f'<source xmlns="{ns}">Ein <g id="1">roter</g> Hund <x id="2"/><bpt id="3">&lt;i&gt;</bpt>bellt'
        '<ept id="3">&lt;/i&gt;</ept>.</source>'
    )
    p = Protected(placeholders())
    p.html = p.element(source)
    assert p.html == (f'Ein <span data-wrap="0">roter</span> Hund {marker(1)}<span data-wrap="2">bellt</span>.')
    target = etree.SubElement(etree.Element(f"{{{ns}}}trans-unit", nsmap={None: ns}), f"{{{ns}}}target")
    p.restore(f'A <span data-wrap="0">red</span> dog{marker(1)}<span data-wrap="2">barks</span>.', target)
    written = etree.tostring(target, encoding="unicode").replace(f' xmlns="{ns}"', "")
    assert written == (
        '<target>A <g id="1">red</g> dog <x id="2"/><bpt id="3">&lt;i&gt;</bpt>barks<ept id="3">&lt;/i&gt;</ept>.</target>'
    )


def test_a_format_whose_library_is_missing_is_one_line_naming_the_extra():
    """Was: find_spec("translate.storage") raised ModuleNotFoundError where translate-toolkit was not
    installed, and `mt serve` (listing the formats it takes) stopped with its traceback."""
    from mt.documents.formats import DocumentError, DocumentFormat, load

    for requires in (("no_such_package",), ("no_such_package.storage",)):
        with pytest.raises(DocumentError, match=r"^po documents need no_such_package.*pip install -e '\.\[documents\]'"):
            load(DocumentFormat("po", (".po",), "localisation", requires=requires))
