"""Whole HTML pages (mt.documents.page) with conftest's tiny trained experiment: the title, the body's
text and the readable attributes translated, lang set to the target, scripts, styles, code, comments
and every other attribute as they were, every element back once and in its place."""

from __future__ import annotations

import lxml.html
import pytest
from helpers import mt, toy_corpus

from mt.decoding.options import DecodeOptions
from mt.documents.formats import FORMATS, DocumentOptions
from mt.documents.translate import translate_content
from mt.documents.units import TranslatorUnits
from mt.text.translate import translate as translate_text

S = toy_corpus(6, seed=31)[0]
W = S[1].rstrip(".").split()
PAGE = f"""<!DOCTYPE html>
<html lang="de" class="page"><head>
<meta charset="utf-8"><title>{S[0]}</title>
<meta name="description" content="{S[5]}">
<style>p {{ color: red; }}</style>
<script>var s = "{S[0]} <b>";</script>
</head>
<body>
<!-- {S[2]} -->
<h1 id="top">{S[2]}</h1>
<p>{W[0]} <b class="x">{W[1]}</b> {" ".join(W[2:])}. <a href="/a?b=1&amp;c=2">{S[3]}</a></p>
<p><img src="i.png" alt="{S[4]}" width="3"> <code>{S[3]}</code></p>
<pre>{S[0]}
  {S[1]}</pre>
</body>
</html>
"""


@pytest.fixture(scope="module")
def translated(translator) -> str:
    units = TranslatorUnits(translator, DecodeOptions())
    return translate_content(PAGE.encode(), FORMATS["html"], units, DocumentOptions("en")).decode()


def tags(page: str) -> list[tuple[str, dict]]:
    root = lxml.html.document_fromstring(page)
    return [(el.tag, {k: v for k, v in el.attrib.items() if k not in ("lang", "alt", "content")}) for el in root.iter()]


def test_every_element_comes_back_once_in_order_with_its_attributes(translated):
    assert translated.startswith("<!DOCTYPE html>\n<html") and translated.endswith("</html>\n")
    assert tags(translated) == tags(PAGE)


def test_title_text_and_readable_attributes_are_translated(translator, translated):
    root = lxml.html.document_fromstring(translated)
    # What plain text gets for the same sentences in the same batches (a tiny model's near-ties can
    # break differently in another batch): the page's pieces in order, then its attributes.
    title, h1, p1, p2 = translate_text(translator, [S[0], S[2], S[1], S[3]])
    description, alt = translate_text(translator, [S[5], S[4]])
    assert root.get("lang") == "en" and root.get("class") == "page"
    assert root.findtext(".//title") == title
    assert root.find(".//h1").text_content() == h1
    assert root.find(".//img").get("alt") == alt
    assert root.find(".//meta[@name='description']").get("content") == description
    assert root.find(".//a").text_content() == p2 and root.find(".//a").get("href") == "/a?b=1&c=2"
    assert root.find(".//p").text_content() == f"{p1} {p2}"


def test_scripts_styles_code_pre_and_comments_are_kept(translated):
    for kept in (
        f'<script>var s = "{S[0]} <b>";</script>',
        "<style>p { color: red; }</style>",
        f"<code>{S[3]}</code>",
        f"<pre>{S[0]}\n  {S[1]}</pre>",
        f"<!-- {S[2]} -->",
    ):
        assert kept in translated


def test_mt_translate_writes_a_page_by_its_extension(trained_experiment, translated, tmp_path, capsys, monkeypatch):
    source = tmp_path / "index.html"
    source.write_text(PAGE, encoding="utf-8")
    code, out, err = mt(
        capsys,
        monkeypatch,
        "translate",
        "--exp",
        trained_experiment.root,
        "--input",
        source,
        "--output",
        tmp_path / "index.en.html",
        "--threads",
        "1",
    )
    assert code == 0, err
    assert (tmp_path / "index.en.html").read_text(encoding="utf-8") == translated
    # gzipped, as mt reads lines: the page inside it (was: read as lines, its tags translated as words)
    import gzip

    for name in ("index.html.gz", "INDEX.HTML.GZ"):
        packed = tmp_path / name
        packed.write_bytes(gzip.compress(PAGE.encode()))
        code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", packed,
                            "--threads", "1")
        assert code == 0 and out == translated, err
    broken = tmp_path / "broken.html.gz"
    broken.write_bytes(PAGE.encode())
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", broken)
    assert code == 1 and out == "" and f"{broken}: not a readable gzip file" in err, err


def test_a_page_in_a_legacy_encoding_is_written_back_in_it(translator):
    page = (
        f'<html><head><meta charset="windows-1252"><title>Größe</title></head><body><p>{S[1]} <code>Öl</code></p></body></html>\n'
    )
    units = TranslatorUnits(translator, DecodeOptions())
    out = translate_content(page.encode("cp1252"), FORMATS["html"], units, DocumentOptions("en"))
    assert '<meta charset="windows-1252">' in out.decode("cp1252")
    with pytest.raises(UnicodeDecodeError):
        out.decode("utf-8")


def test_src_lang_auto_identifies_a_pages_text_not_its_styles_and_scripts(translator):
    """Was: the whole page, CSS and JavaScript included, was identified: a German page was English to
    lingua, left untranslated with a warning, and labelled English."""
    from mt.text.language import LanguageIdentifier

    page = """<!DOCTYPE html>
<html lang="de"><head><meta charset="utf-8"><title>Ein Mann fährt Fahrrad.</title>
<style>.navigation-menu-wrapper { display: flex; } .footer-copyright-notice { color: gray; }
.main-content-area .article-body p { line-height: 1.5; } .button-primary:hover { background: blue; }</style>
<script>// toggle the navigation menu when the button is clicked
document.querySelector(".button-primary").addEventListener("click", () => document.body.classList.toggle("open"));</script>
</head><body><div class="main-content-area"><p>Zwei Hunde spielen im Schnee.</p></div></body></html>
"""
    auto = TranslatorUnits(translator, DecodeOptions(), identifier=LanguageIdentifier(["de"]))
    named = TranslatorUnits(translator, DecodeOptions())
    out = translate_content(page.encode(), FORMATS["html"], auto, DocumentOptions("en")).decode()
    assert out == translate_content(page.encode(), FORMATS["html"], named, DocumentOptions("en")).decode()
    assert "Zwei Hunde spielen im Schnee." not in out



def test_a_page_that_says_us_ascii_gets_character_references_for_what_ascii_cannot_write():
    """Was: written in UTF-8 under its us-ascii label, which browsers read as windows-1252 mojibake."""
    page = '<!DOCTYPE html>\n<html><head><meta charset="us-ascii"><title>Cafe</title></head><body><p>Cafe</p></body></html>\n'
    out = translate_content(page.encode("ascii"), FORMATS["html"],
                            lambda texts, fmt="text": [t.replace("Cafe", "Café") for t in texts], DocumentOptions("fr"))
    assert out.isascii() and out.decode("ascii").count("Caf&#233;") == 2 and b'charset="us-ascii"' in out


def test_a_page_of_spaces_comes_back_as_it_was():
    page = "  \n\t\n"
    assert translate_content(page.encode(), FORMATS["html"], lambda texts, fmt="text": texts,
                             DocumentOptions("en")).decode() == page


def test_a_buttons_label_is_translated_other_inputs_values_are_not():
    """`<input type="submit" value="Send message">` is the label people read; it was left untranslated."""
    page = '<form><input type="submit" value="send"><input type="text" name="q" value="query"></form>'
    out = translate_content(page.encode(), FORMATS["html"], lambda texts, fmt="text": [t.upper() if fmt == "text" else t for t in texts],
                            DocumentOptions("en")).decode()
    assert 'value="SEND"' in out and 'value="query"' in out
