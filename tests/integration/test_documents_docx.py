"""Word documents (mt.documents.word) with conftest's tiny trained experiment, built in the tests with
python-docx and read back with it: every paragraph of the body, tables (nested ones too), headers,
footers and footnotes is translated as plain text would be, bold runs and hyperlinks come back once,
images, tabs, breaks, footnote references and comments stay, every other part is saved as it was;
what is not a safe Word document is a one-line error."""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from typing import Callable

import docx
import pytest
from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import XmlPart
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.oxml.parser import OxmlElement
from helpers import mt, one_line, toy_corpus

from mt.documents.formats import FORMATS, DocumentError, DocumentOptions, by_extension
from mt.documents.translate import translate_content
from mt.documents.word import check_zip
from mt.text.translate import translate as translate_text

S = toy_corpus(14, seed=31)[0]
EN = DocumentOptions("en")
URL = "https://example.org/a?b=1&c=2"
DOCX = FORMATS["docx"]


def png() -> bytes:
    """A 2x2 red PNG, written here."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def add_hyperlink(paragraph, text: str, url: str) -> None:
    """A w:hyperlink to `url` (its relationship in the document part) around a run in the Hyperlink style."""
    rid = paragraph.part.relate_to(url, RT.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rid)
    run = OxmlElement("w:r")
    run.append(parse_xml(f'<w:rPr {nsdecls("w")}><w:u w:val="single"/><w:color w:val="0000FF"/></w:rPr>'))
    t = OxmlElement("w:t")
    t.text = text
    run.append(t)
    link.append(run)
    paragraph._p.append(link)


def add_footnotes(document, text: str) -> None:
    """A footnotes part holding one footnote (python-docx writes none itself), referenced from the body."""
    xml = (
        f'<w:footnotes {nsdecls("w")}><w:footnote w:id="1"><w:p><w:r><w:t>{text}</w:t></w:r></w:p>'
        "</w:footnote></w:footnotes>"
    )
    part = XmlPart(PackURI("/word/footnotes.xml"), CT.WML_FOOTNOTES, parse_xml(xml), document.part.package)
    document.part.relate_to(part, RT.FOOTNOTES)


def build() -> bytes:
    """A document with each thing a .docx translates or keeps (the module docstring)."""
    d = docx.Document()
    d.add_heading(S[0], level=1)
    p = d.add_paragraph(f"{S[1]} ")
    words = S[2].rstrip(".").split()
    p.add_run(" ".join(words[:2])).bold = True
    p.add_run(" " + " ".join(words[2:]) + ".")
    p = d.add_paragraph(f"{S[3]} ")
    add_hyperlink(p, S[4], URL)
    p = d.add_paragraph(S[5])
    p.add_run().add_tab()
    run = p.add_run(S[6])
    run.add_break()
    p.add_run(S[7]).add_picture(io.BytesIO(png()))
    footnote = p.add_run()
    footnote._r.append(parse_xml(f'<w:footnoteReference {nsdecls("w")} w:id="1"/>'))
    table = d.add_table(rows=2, cols=2)
    for cell, text in zip(table._cells, S[8:12]):
        cell.text = text
    inner = table.cell(1, 1).add_table(rows=1, cols=1)
    inner.cell(0, 0).text = S[12]
    commented = d.add_paragraph(S[13])
    d.add_comment(commented.runs, text=S[0], author="A")
    section = d.sections[0]
    section.different_first_page_header_footer = True
    section.header.paragraphs[0].text = S[1]
    section.first_page_header.paragraphs[0].text = S[2]
    section.footer.paragraphs[0].text = S[3]
    d.add_section().header.is_linked_to_previous = True
    add_footnotes(d, S[4])
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def translated(document, units, options: DocumentOptions = EN):
    """`document` (python-docx's) saved and translated with `units`, read back with python-docx."""
    data = io.BytesIO()
    document.save(data)
    return docx.Document(io.BytesIO(translate_content(data.getvalue(), DOCX, units, options)))


def resaved(data: bytes) -> dict[str, bytes]:
    """Each part of a package as python-docx saves it untouched."""
    out = io.BytesIO()
    docx.Document(io.BytesIO(data)).save(out)
    return entries(out.getvalue())


def entries(data: bytes) -> dict[str, bytes]:
    package = zipfile.ZipFile(io.BytesIO(data))
    return {name: package.read(name) for name in package.namelist()}


def runs_text(paragraph) -> str:
    """A paragraph's text from its w:t elements (tabs, breaks and images left out), links' included."""
    return "".join(t.text or "" for t in paragraph._p.iter(qn("w:t")))


def test_a_document_is_translated_with_its_structure_formatting_and_parts_kept(translator, units):
    data = build()
    out = translate_content(data, DOCX, units, EN)
    source, result = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out))
    plain = dict(zip(S, translate_text(translator, S)))

    # the body: the same paragraphs with their styles, each translated as its text is
    assert [p.style.name for p in result.paragraphs] == [p.style.name for p in source.paragraphs]
    body = [runs_text(p) for p in result.paragraphs]
    assert body[0] == plain[S[0]] and body[4] == plain[S[13]] and body[5] == ""
    assert body[1] == translate_text(translator, [f"{S[1]} {S[2]}"])[0]
    assert body[2] == translate_text(translator, [f"{S[3]} {S[4]}"])[0]
    assert body[3] == translate_text(translator, [f"{S[5]}\t{S[6]}\n{S[7]}"])[0].replace("\t", "").replace("\n", "")

    # bold and the hyperlink once, with their formatting and address
    bold = [bool(r.bold) for r in result.paragraphs[1].runs]
    assert bold.count(True) >= 1 and "".join("b" if b else "." for b in bold).strip(".").count(".") == 0
    (link,) = result.paragraphs[2].hyperlinks
    assert link.address == URL and link.runs[0].font.underline and link.text
    assert link.runs[0].font.color.rgb == source.paragraphs[2].hyperlinks[0].runs[0].font.color.rgb

    # what holds no text: the tab, the break, the image, the footnote reference, the comment
    p3 = result.paragraphs[3]._p
    for tag in ("w:tab", "w:br", "w:drawing", "w:footnoteReference"):
        assert len(p3.findall(f".//{qn(tag)}")) == 1, tag
    assert len(result.inline_shapes) == 1
    assert [c.text for c in result.comments] == [S[0]]
    assert result.paragraphs[4]._p.find(qn("w:commentRangeStart")) is not None

    # tables, the nested one too
    (table,) = result.tables
    assert [c.paragraphs[0].text for c in table._cells] == [plain[s] for s in S[8:12]]
    assert table.cell(1, 1).tables[0].cell(0, 0).text == plain[S[12]]

    # headers and footers, the second section's still linked to the first's; the footnote
    first, second = result.sections
    assert first.header.paragraphs[0].text == plain[S[1]] and first.first_page_header.paragraphs[0].text == plain[S[2]]
    assert first.footer.paragraphs[0].text == plain[S[3]] and second.header.is_linked_to_previous
    notes = entries(out)["word/footnotes.xml"].decode()
    assert plain[S[4]] in notes and S[4] not in notes

    # every other part as python-docx saves it
    before, after = resaved(data), entries(out)
    assert before.keys() == after.keys()
    changed = {"word/document.xml", "word/footnotes.xml"} | {n for n in after if "header" in n or "footer" in n}
    assert all(after[name] == before[name] for name in after if name not in changed | {"word/styles.xml"})
    # the styles name the target language, and nothing else of them changed
    assert after["word/styles.xml"].replace(b'w:val="en"', b"") == before["word/styles.xml"].replace(b'w:val="en-US"', b"")


def test_runs_of_other_formatting_become_spans_and_the_dominant_one_plain_text(units):
    from mt.documents.word import paragraph

    d = docx.Document()
    p = d.add_paragraph("eins zwei drei ")
    p.add_run("vier").italic = True
    p.add_run(" fünf").italic = True
    p.add_run(" <sechs> & ")
    p.add_run().add_tab()
    unit = paragraph(p._p)
    assert unit is not None
    assert unit.html == (
        'eins zwei drei <span data-run="0">vier fünf</span> &lt;sechs&gt; &amp; <br data-run="1">'
    )
    assert paragraph(d.add_paragraph("   ")._p) is None


def upper_recording() -> tuple[list[str], Callable[..., list[str]]]:
    """Units that write each text in capitals, and the list of the texts they were asked."""
    asked: list[str] = []

    def upper(texts: list[str], fmt: str = "text") -> list[str]:
        asked.extend(texts)
        return [t.upper() for t in texts]

    return asked, upper


def test_a_tab_parts_the_words_around_it_and_a_non_breaking_hyphen_is_a_character_of_the_text():
    """Was: both empty markers, which joined their neighbours: "Chapter 1<tab>5" reached the model as
    "Chapter 15", "COVID<nbh>19" as "COVID19"."""
    d = docx.Document()
    p = d.add_paragraph("Name:")
    p.add_run().add_tab()
    p.add_run("John Smith")
    p = d.add_paragraph("Call 555")
    p.add_run()._r.append(parse_xml(f'<w:noBreakHyphen {nsdecls("w")}/>'))
    p.add_run("1234 today")
    asked, upper = upper_recording()
    out = translated(d, upper, DocumentOptions("en"))
    assert asked == ['Name:<br data-run="0">John Smith', "Call 555\u20111234 today"]
    assert [p.text for p in out.paragraphs] == ["NAME:\tJOHN SMITH", "CALL 555\u20111234 TODAY"]
    assert out.paragraphs[0]._p.xpath(".//w:tab")


def test_soft_hyphens_are_left_out_of_the_words_they_broke():
    """A soft hyphen (where Word may break a word) was a marker: it parted the word it was in for the
    model ("Donau" "dampf") and moved with a word of the translation; in a run of its own too."""
    d = docx.Document()
    p = d.add_paragraph("Das Donau")
    p.runs[0]._r.append(parse_xml(f'<w:softHyphen {nsdecls("w")}/>'))
    p.runs[0]._r.append(parse_xml(f'<w:t {nsdecls("w")}>dampfschiff</w:t>'))
    p.add_run()._r.append(parse_xml(f'<w:softHyphen {nsdecls("w")}/>'))
    p.add_run("fahrt ist lang.")
    asked, upper = upper_recording()
    out = translated(d, upper, DocumentOptions("en"))
    assert asked == ["Das Donaudampfschifffahrt ist lang."]
    assert [p.text for p in out.paragraphs] == ["DAS DONAUDAMPFSCHIFFFAHRT IST LANG."]
    assert not out.paragraphs[0]._p.xpath(".//w:softHyphen")


def test_text_boxes_are_translated_and_fields_kept(translator, units):
    d = docx.Document()
    p = d.add_paragraph(f"{S[0]} ")
    vml = 'xmlns:v="urn:schemas-microsoft-com:vml"'
    box = (
        f"<w:r {nsdecls('w')} {vml}><w:pict><v:shape><v:textbox><w:txbxContent><w:p><w:r><w:t>{S[1]}</w:t>"
        "</w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r>"
    )
    p._p.append(parse_xml(box))
    field = [
        f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="begin"/></w:r>',
        f'<w:r {nsdecls("w")}><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>',
        f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="separate"/></w:r>',
        f"<w:r {nsdecls('w')}><w:t>7</w:t></w:r>",
        f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="end"/></w:r>',
    ]
    footer = d.sections[0].footer.paragraphs[0]
    footer.text = f"{S[2]} "
    for run in field:
        footer._p.append(parse_xml(run))
    out = translated(d, units)
    t0, t1, t2 = translate_text(translator, S[:3])
    outer = out.paragraphs[0]._p
    (inner,) = outer.findall(f".//{qn('w:txbxContent')}/{qn('w:p')}")
    assert "".join(t.text for t in inner.iter(qn("w:t"))) == t1 and outer.xpath("string(w:r/w:t)") == t0 + " "
    runs = out.sections[0].footer.paragraphs[0]._p.findall(qn("w:r"))
    assert runs[0].find(qn("w:t")).text == t2 + " "
    assert [r.xpath("string(.)") for r in runs[1:]] == ["", " PAGE ", "", "7", ""]


def test_a_span_whose_words_were_aligned_to_none_comes_back_as_an_empty_run():
    d = docx.Document()
    p = d.add_paragraph("eins zwei ")
    p.add_run("drei").italic = True

    def units(texts, fmt="text"):
        return [t.replace('<span data-run="0">drei</span>', 'three <span data-run="0"></span>') for t in texts]

    out = translated(d, units)
    assert [(r.text, bool(r.italic)) for r in out.paragraphs[0].runs] == [("eins zwei three ", False), ("", True)]


def test_a_footnote_mark_in_a_superscript_run_stays_after_its_word(units):
    """A superscript "1" after a word reached the model glued to the word ("park1"), and came back as a
    superscript run of other words, the "1" gone."""
    d = docx.Document()
    p = d.add_paragraph(S[0].rstrip("."))
    p.add_run("1").font.superscript = True
    p.add_run(". " + S[1])
    out = translated(d, units)
    runs = [(r.text, bool(r.font.superscript)) for r in out.paragraphs[0].runs]
    assert [text for text, up in runs if up] == ["1"], runs
    before = "".join(text for text, _ in runs[: runs.index(("1", True))])
    assert before.strip() and before[-1].isalnum(), runs  # right after a word of the translation


def test_a_paragraph_the_translation_does_not_change_is_left_as_it_was(tmp_path):
    data = build()
    out = translate_content(data, DOCX, lambda texts, fmt="text": list(texts), EN)
    assert entries(out) == resaved(data)


def test_word_documents_are_known_by_extension():
    assert by_extension("a/b.DOCX") is DOCX and DOCX.binary


def zipped(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for name, body in files.items():
            package.writestr(name, body)
    return out.getvalue()


def test_hostile_and_broken_packages_are_refused_in_one_line(units):
    data = build()
    good = entries(data)
    macros = good["[Content_Types].xml"].replace(
        b"openxmlformats-officedocument.wordprocessingml.document.main+xml", b"ms-word.document.macroEnabled.main+xml"
    )
    cases = [
        (b"PK\x03\x04 not really", "not a zip package"),
        (b"Hallo Welt", "not a zip package"),
        (zipped({"word/document.xml": good["word/document.xml"]}), "without [Content_Types].xml"),
        (zipped({**good, "word/document.xml": b"<w:document><w:body>"}), "word/document.xml: not well-formed XML"),
        (zipped({"[Content_Types].xml": good["[Content_Types].xml"]}), "not a Word document"),
        (zipped({**good, "word/media/bomb.bin": bytes(8 * 2**20)}), "times its packed size"),
        (zipped({**good, "[Content_Types].xml": macros}), "its main part's content type is 'application/vnd.ms-word"),
    ]
    for content, needle in cases:
        with pytest.raises(DocumentError) as exc:
            translate_content(content, DOCX, units, EN)
        one_line(exc, needle)
    with pytest.raises(DocumentError) as exc:
        check_zip(data, max_unpacked=1000)
    one_line(exc, "more than the 1000 allowed")
    check_zip(data)


def test_mt_translate_writes_a_docx_given_an_output(trained_experiment, tmp_path, capsys, monkeypatch):
    source = tmp_path / "brief.docx"
    source.write_bytes(build())
    args = ("translate", "--exp", trained_experiment.root, "--input", source, "--threads", "1")
    code, out, err = mt(capsys, monkeypatch, *args)
    assert code != 0 and "name the file to write with --output" in err and out == ""
    code, out, err = mt(capsys, monkeypatch, *args, "--output", tmp_path / "brief.en.docx")
    assert code == 0 and out == "", err
    assert len(docx.Document(str(tmp_path / "brief.en.docx")).paragraphs) == 6


def test_a_link_whose_words_were_aligned_to_none_goes_around_a_word():
    """An empty w:hyperlink loses its link: the text layer's empty link goes around the nearest word
    (as Markdown's and subtitles' elements do), where a formatted run may stay empty (above)."""
    d = docx.Document()
    p = d.add_paragraph("Siehe ")
    add_hyperlink(p, "den Link", URL)
    p.add_run(" am Ende.")

    def units(texts, fmt="text"):
        return ['See <a data-link="0"></a> the end. the link' if "data-link" in t else t for t in texts]

    out = translated(d, units)
    (link,) = out.paragraphs[0].hyperlinks
    assert link.address == URL and link.text == "See"
    assert out.paragraphs[0].text == "See  the end. the link"


def test_words_outside_a_link_keep_the_paragraphs_own_formatting_when_the_link_is_its_longest_part():
    """The paragraph's dominant formatting was counted over its links' text too: where the link was most of
    it, a word the alignment placed outside every span came out blue and underlined, and no link."""
    d = docx.Document()
    p = d.add_paragraph("Siehe ")
    add_hyperlink(p, "die vollständige Dokumentation hier", URL)
    p.add_run(".")

    def units(texts, fmt="text"):
        assert texts == ['Siehe <a data-link="0"><span data-run="1">die vollständige Dokumentation hier</span></a>.']
        return ['See please <a data-link="0"><span data-run="1">the full documentation here</span></a>.']

    out = translated(d, units)
    runs = out.paragraphs[0]._p.findall(qn("w:r"))  # the paragraph's own runs, the link's not among them
    assert "".join(r.text for r in out.paragraphs[0].runs) == "See please ."
    assert all(r.find(qn("w:rPr")) is None for r in runs), [r.xml for r in runs]
    (link,) = out.paragraphs[0].hyperlinks
    assert link.text == "the full documentation here" and link.runs[0].font.underline


@pytest.mark.parametrize("target, attribute, value", [("en", "w:val", "en"), ("ja", "w:eastAsia", "ja"),
                                                      ("ar", "w:bidi", "ar"), ("zt", "w:eastAsia", "zh-TW")])
def test_translated_runs_and_the_styles_name_the_target_language(units, target, attribute, value):
    """Copied w:rPr kept the source's w:lang, and so did the styles: Word spell-checked and hyphenated an
    English translation as German."""
    d = docx.Document()
    p = d.add_paragraph()
    run = p.add_run(S[0])
    run._r.get_or_add_rPr().append(parse_xml(f'<w:lang {nsdecls("w")} w:val="de-DE"/>'))
    d.add_paragraph("   ")  # nothing to translate: left as it was, its language too
    out = translated(d, units, DocumentOptions(target))
    langs = out.paragraphs[0]._p.findall(".//" + qn("w:lang"))
    assert langs and all(lang.get(qn(attribute)) == value for lang in langs)
    defaults = out.styles.element.find(qn("w:docDefaults")).find(qn("w:rPrDefault")).find(qn("w:rPr"))
    assert defaults.find(qn("w:lang")).get(qn(attribute)) == value
    assert all(lang.get(qn(attribute)) == value for lang in out.styles.element.iter(qn("w:lang")))
    assert out.paragraphs[1].text == "   " and not out.paragraphs[1]._p.findall(".//" + qn("w:lang"))
    # a right-to-left language's paragraphs read right to left: the full stop on the left, aligned right
    bidi = out.paragraphs[0]._p.find(qn("w:pPr")).find(qn("w:bidi")) if target == "ar" else None
    assert (bidi is not None) == (target == "ar") and (bidi is None or bidi.get(qn("w:val")) is None)
    assert out.paragraphs[1]._p.find(qn("w:pPr")) is None or out.paragraphs[1]._p.find(qn("w:pPr")).find(qn("w:bidi")) is None


def test_a_document_without_styles_gets_none_added(units):
    """python-docx's `styles` added its own template's styles part (another Normal style, fonts and
    spacing) to a document that had none, changing how it looked."""
    data = io.BytesIO()
    d = docx.Document()
    d.add_paragraph(S[0])
    d.save(data)
    parts = {}
    with zipfile.ZipFile(data) as package:
        for name in package.namelist():
            parts[name] = package.read(name)
    del parts["word/styles.xml"]
    rels = parts["word/_rels/document.xml.rels"].decode()
    parts["word/_rels/document.xml.rels"] = re.sub(r'<Relationship [^>]*Target="styles.xml"/>', "", rels).encode()
    types = parts["[Content_Types].xml"].decode()
    parts["[Content_Types].xml"] = re.sub(r'<Override PartName="/word/styles.xml"[^>]*/>', "", types).encode()
    bare = io.BytesIO()
    with zipfile.ZipFile(bare, "w") as package:
        for name, content in parts.items():
            package.writestr(name, content)
    out = translate_content(bare.getvalue(), DOCX, units, EN)
    names = zipfile.ZipFile(io.BytesIO(out)).namelist()
    assert "word/styles.xml" not in names and "styles.xml" not in zipfile.ZipFile(io.BytesIO(out)).read(
        "word/_rels/document.xml.rels").decode()
    assert docx.Document(io.BytesIO(out)).paragraphs[0].text != S[0]


@pytest.mark.parametrize("simple", [False, True])
def test_a_hyperlink_field_s_shown_text_is_translated_as_a_link(translator, units, simple):
    """A HYPERLINK field (complex, as documents converted from .doc have them, or w:fldSimple) shows prose
    that Word never regenerates: it came back untranslated, kept as a page number's result is."""
    words = S[5].rstrip(".").split()
    d = docx.Document()
    p = d.add_paragraph(" ".join(words[:2]) + " ")
    code = f' HYPERLINK "{URL.replace("&", "&amp;")}" '
    shown = " ".join(words[2:])
    if simple:
        attribute = code.replace('"', "&quot;")
        p._p.append(parse_xml(f'<w:fldSimple {nsdecls("w")} w:instr="{attribute}"><w:r><w:t>{shown}</w:t></w:r></w:fldSimple>'))
    else:
        for run in (
            '<w:fldChar w:fldCharType="begin"/>', f'<w:instrText xml:space="preserve">{code}</w:instrText>',
            '<w:fldChar w:fldCharType="separate"/>', f"<w:t>{shown}</w:t>", '<w:fldChar w:fldCharType="end"/>',
        ):
            p._p.append(parse_xml(f'<w:r {nsdecls("w")}>{run}</w:r>'))
        # as Word writes it: spelling marks around the shown text, a bookmark in it
        result = p._p.findall(qn("w:r"))[-2]
        result.addprevious(parse_xml(f'<w:proofErr {nsdecls("w")} w:type="spellStart"/>'))
        result.addprevious(parse_xml(f'<w:bookmarkStart {nsdecls("w")} w:id="0" w:name="_GoBack"/>'))
        result.addnext(parse_xml(f'<w:proofErr {nsdecls("w")} w:type="spellEnd"/>'))
        result.addnext(parse_xml(f'<w:bookmarkEnd {nsdecls("w")} w:id="0"/>'))
    p.add_run(".")
    out = translated(d, units).paragraphs[0]._p
    (expected,) = translate_text(translator, [S[5]])
    shown_text = "".join(t.text for t in out.iter(qn("w:t")))
    assert " ".join(shown_text.split()) == expected and shown not in shown_text
    if simple:
        (field,) = out.findall(qn("w:fldSimple"))
        assert field.get(qn("w:instr")) == code.replace("&amp;", "&") and field.xpath("string(.)").strip()
    else:
        kinds = [f.get(qn("w:fldCharType")) for f in out.iter(qn("w:fldChar"))]
        assert kinds == ["begin", "separate", "end"] and out.xpath("string(.//w:instrText)") == code.replace("&amp;", "&")
        assert len(out.findall(qn("w:bookmarkStart"))) == 1 and len(out.findall(qn("w:bookmarkEnd"))) == 1


def test_an_images_alternative_text_and_a_links_tooltip_are_translated():
    """A screen reader reads an image's alternative text aloud, and a link shows its tooltip: both were
    left in the source language beside a translated document."""
    d = docx.Document()
    p = d.add_paragraph(S[0])
    p.add_run().add_picture(io.BytesIO(png()))
    picture = p._p.find(".//" + qn("wp:docPr"))
    picture.set("descr", "Ein Hund im Park")
    picture.set("title", "Hund")
    add_hyperlink(p, S[1], URL)
    p._p.find(qn("w:hyperlink")).set(qn("w:tooltip"), "Mehr lesen")
    asked = []

    def units(texts, fmt="text"):
        asked.append((fmt, list(texts)))
        return [text.upper() for text in texts]

    out = translated(d, units)
    assert ("text", ["Ein Hund im Park", "Hund", "Mehr lesen"]) in asked
    assert out.paragraphs[0]._p.find(".//" + qn("wp:docPr")).get("descr") == "EIN HUND IM PARK"
    assert out.paragraphs[0]._p.find(".//" + qn("wp:docPr")).get("title") == "HUND"
    assert out.paragraphs[0]._p.find(qn("w:hyperlink")).get(qn("w:tooltip")) == "MEHR LESEN"
