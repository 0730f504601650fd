"""How mt.documents.markdown writes a translation back, with units chosen by the test: Markdown that a
translation changing nothing gives back with the same blocks, marks and text; translated text that
Markdown would read as markup comes back escaped."""

from __future__ import annotations

from collections import Counter

import pytest

from mt.documents.formats import DocumentOptions
from mt.documents.markdown import parser, translate

EN = DocumentOptions("en")


def same(texts: list[str], fmt: str = "text") -> list[str]:
    return list(texts)


def blocks(text: str) -> list[tuple]:
    return [(t.type, t.tag, t.markup, t.level) for t in parser().parse(text)]


def marks(text: str) -> Counter:
    return Counter(
        (c.type, c.markup, c.content if c.type in ("code_inline", "html_inline") else "", str(c.attrs))
        for t in parser().parse(text)
        for c in t.children or []
        if c.type not in ("text", "softbreak", "text_special")
    )


def texts(text: str) -> list[str]:
    return [
        " ".join(
            "".join(c.content if c.type == "text" else " " for c in t.children or [] if c.type != "hardbreak").split()
        )
        for t in parser().parse(text)
        if t.type == "inline"
    ]


@pytest.mark.parametrize(
    "doc",
    [
        "1. 1\n",
        "# Titel #\n\nSetext\n---\n",
        "1986\\. war ein Jahr\n",
        "Zeile  \n     </div> bleibt Text\n",
        "Zeile\\\n\\# keine Überschrift\n",
        "Ein ` einzelner Backtick und `code` mit ``zwei ` Ticks``\n",
        "> - Liste im Zitat  \n>   mit Umbruch\n>\n> Absatz\n",
        "Text mit \\*Sternen\\*, \\_Strichen\\_, &amp;copy; und <b>fett</b> und <br> Umbruch.\n",
        "| a \\| b | `c` |\n|---|---|\n| [x](/y) | **z** |\n",
        "| Befehl | Was er tut |\n|---|---|\n| `a \\| b` | leitet die Ausgabe um |\n",  # was `a | b`: a row broken
        "<details>\n<summary>Mehr</summary>\n\nText\n\n</details>\n",
    ],
)
def test_a_translation_that_changes_nothing_keeps_blocks_marks_and_text(doc):
    out = translate(doc, same, EN)
    assert (blocks(out), marks(out), texts(out)) == (blocks(doc), marks(doc), texts(doc))


def test_translated_text_that_would_be_markup_is_escaped():
    def said(texts: list[str], fmt: str = "text") -> list[str]:
        return ["1986. *Jahr* [x] _y_ `z` ~~w~~ &copy; <b>" for _ in texts]

    out = translate("Ein Absatz.\n\n| Kopf |\n|---|\n| Zelle |\n", said, EN)
    assert blocks(out) == blocks("Ein Absatz.\n\n| Kopf |\n|---|\n| Zelle |\n")
    assert texts(out) == ["1986. *Jahr* [x] _y_ `z` ~~w~~ &copy; <b>"] * 3
    assert marks(out) == Counter()


def test_toml_front_matter_is_kept_as_yamls_is():
    """Was: read as a paragraph, translated and run onto one line (a site's build broken)."""
    front = '+++\ntitle = "Hallo Welt"\ndate = 2026-12-06\n+++\n'
    out = translate(front + "\nEin Absatz.\n", lambda texts, fmt="text": [t.upper() for t in texts], EN)
    assert out == front + "\nEIN ABSATZ.\n"

