"""Plain text documents (mt.documents.txt) and the document driver (mt.documents.translate) with
conftest's tiny trained experiment: paragraphs, blank lines, indentation, line endings and encodings
come back as they were; a hard-wrapped paragraph is translated whole and wrapped again; every line of
a list is translated as itself; the output is never the input or another file without --force."""

from __future__ import annotations

import codecs

import pytest
from helpers import mt, one_line, toy_corpus

from mt.documents.encoding import TextEncoding, decode, encode, western
from mt.documents.formats import FORMATS, DocumentError, DocumentOptions, by_extension
from mt.documents.translate import translate_content, translate_file
from mt.documents.txt import wrapped
from mt.errors import MtError
from mt.text.translate import translate as translate_text

LINES = toy_corpus(6, seed=23)[0]
EN = DocumentOptions("en")


def test_a_list_of_lines_is_translated_line_by_line_with_paragraphs_and_indents_kept(translator, units):
    text = f"{LINES[0]}\n  {LINES[1]}\n\n\n{LINES[2]}\n \n{LINES[3]}\n"
    out = translate_content(text.encode(), FORMATS["txt"], units, EN).decode()
    plain = translate_text(translator, LINES[:4])
    assert out == f"{plain[0]}\n  {plain[1]}\n\n\n{plain[2]}\n \n{plain[3]}\n"


def test_a_hard_wrapped_paragraph_is_translated_whole_and_wrapped_at_its_width(translator, units):
    paragraph = " ".join(LINES * 2)
    import textwrap

    lines = textwrap.wrap(paragraph, width=40)
    assert wrapped(lines) and not wrapped(LINES[:3])
    out = translate_content(("\n".join(lines) + "\n").encode(), FORMATS["txt"], units, EN).decode()
    expected = translate_text(translator, [paragraph])[0]
    assert " ".join(out.split()) == " ".join(expected.split())
    assert all(len(line) <= 40 or " " not in line for line in out.splitlines())
    assert len(out.splitlines()) > 1


def test_a_hard_wrapped_list_item_keeps_its_hanging_indent():
    """Its continuation lines were refilled at the first line's indent (none)."""
    item = ("1. This numbered item runs over three lines and its second and\n"
            "   third lines hang under its text, as a list is written in plain\n"
            "   text files by people and by fmt.\n")
    out = translate_content(item.encode(), FORMATS["txt"], lambda texts, fmt="text": [t.upper() for t in texts],
                            EN).decode()
    lines = out.splitlines()
    assert len(lines) > 1 and lines[0].startswith("1. THIS") and all(line.startswith("   ") for line in lines[1:])
    assert " ".join(out.split()) == " ".join(item.upper().split())


def upper(texts: list[str], fmt: str = "text") -> list[str]:
    return [t.upper() for t in texts]


@pytest.mark.parametrize("rows", [
    "+------------------+--------------------------+\n| Setting          | Default value            |\n"
    "+------------------+--------------------------+\n| max_tokens       | 4096 tokens per batch    |\n"
    "+------------------+--------------------------+\n",
    "name of the file      size    last modified on\nsetup.py              1204    the first of December\n"
    "README.md             5531    the fifth of December\n",
], ids=["table", "listing"])
def test_a_table_or_an_aligned_listing_is_translated_row_by_row(rows):
    """Was: its rows, every one as wide as the others, looked wrapped, and were joined into one text."""
    assert not wrapped(rows.splitlines())
    assert translate_content(rows.encode(), FORMATS["txt"], upper, EN).decode() == rows.upper()


def test_a_quoted_wrapped_paragraph_keeps_its_mark_on_every_line():
    """Was: joined with its marks, which came back in the middle of lines."""
    quoted = ("> This is a quoted paragraph that was wrapped by the\n"
              "> mail client at a fixed width, and the sentence goes\n"
              "> on over several lines until it ends here.\n")
    asked: list[str] = []
    out = translate_content(quoted.encode(), FORMATS["txt"], lambda texts, fmt="text": asked.extend(texts) or upper(texts),
                            EN).decode()
    assert asked[0] == " ".join(line[2:] for line in quoted.splitlines()) and not any(asked[1:])  # one text, no marks
    assert all(line.startswith("> ") and ">" not in line[1:] for line in out.splitlines())
    assert " ".join(out.replace("> ", "").split()) == " ".join(quoted.replace("> ", "").upper().split())



def test_a_file_s_line_ending_is_that_of_most_of_its_lines():
    """One CRLF among LF lines turned every line into CRLF (a diff of the whole file in a repository)."""
    assert decode(b"a\r\nb\nc\nd\n")[1].newline == "\n"
    assert decode(b"a\r\nb\r\nc\n")[1].newline == "\r\n"
    assert decode(b"a\nb")[1].newline == "\n" and decode(b"a\r\n")[1].newline == "\r\n"
    text, encoding = decode(b"a\r\nb\nc\n")
    assert text == "a\nb\nc\n" and encode(text, encoding) == b"a\nb\nc\n"


@pytest.mark.parametrize("codec, bom", [("utf-8", b""), ("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE)])
def test_line_endings_and_encodings_are_kept(units, codec, bom):
    data = bom + f"{LINES[0]}\r\n\r\n{LINES[1]}\r\n".encode(codec)
    out = translate_content(data, FORMATS["txt"], units, EN)
    assert out.startswith(bom)
    text = out[len(bom) :].decode(codec)
    assert text.count("\r\n") == 3 and "\n" not in text.replace("\r\n", "")


def test_a_legacy_encoding_is_read_and_written_back_in_it():
    data = "Grüße aus Köln, schöne Straße. Ähnliche Öfen, übliche Größe.\n".encode("cp1252")
    text, encoding = decode(data)
    assert text == data.decode("cp1252") and encoding.codec != "utf-8"  # cp1250 or cp1252: the same bytes here
    assert encode(text, encoding) == data


def cyrillic(texts: list[str], fmt: str = "text") -> list[str]:
    """Units whose translation has letters no Western code page writes."""
    return [text.replace("Köln", "Кёльн") for text in texts]


def test_a_translation_its_legacy_encoding_cannot_write_is_written_as_the_format_allows(capsys):
    data = "Grüße aus Köln.\r\n".encode("cp1252")
    out = translate_content(data, FORMATS["txt"], cyrillic, EN)  # plain text: the whole file in UTF-8, said
    assert out == codecs.BOM_UTF8 + "Grüße aus Кёльн.\r\n".encode("utf-8")
    assert "written in UTF-8" in capsys.readouterr().err
    page = '<html><head><meta charset="windows-1252"></head><body><p title="Köln">Grüße aus Köln.</p></body></html>\n'
    out = translate_content(page.encode("cp1252"), FORMATS["html"], cyrillic, EN).decode("cp1252")
    assert '<meta charset="windows-1252">' in out and "Grüße aus &#1050;&#1105;&#1083;&#1100;&#1085;." in out
    text, encoding = decode(data)
    with pytest.raises(DocumentError) as exc:  # a PO file's header names its charset: refused
        encode(cyrillic([text])[0], encoding, FORMATS["po"].unwritable)
    one_line(exc, "cannot write", "convert the file to UTF-8")


def test_formats_are_known_by_extension():
    assert by_extension("a/b.TXT") is FORMATS["txt"] and by_extension("a.de") is None
    assert by_extension("page.xhtml") is None  # written back as HTML, which an XML reader refuses


def test_the_output_is_never_the_input_nor_an_existing_file_without_force(tmp_path, units):
    source = tmp_path / "in.txt"
    source.write_text(LINES[0] + "\n", encoding="utf-8")
    with pytest.raises(DocumentError) as exc:
        translate_file(source, source, FORMATS["txt"], units, EN, force=True)
    one_line(exc, "is the input")
    other = tmp_path / "out.txt"
    other.write_text("mine\n", encoding="utf-8")
    with pytest.raises(MtError, match=r": exists; .*--force") as exc:
        translate_file(source, other, FORMATS["txt"], units, EN)
    one_line(exc, "exists", "--force")
    assert other.read_text(encoding="utf-8") == "mine\n"
    translate_file(source, other, FORMATS["txt"], units, EN, force=True)
    assert other.read_text(encoding="utf-8") != "mine\n"


def test_mt_translate_reads_a_txt_document_by_its_extension(
    trained_experiment, translator, tmp_path, capsys, monkeypatch
):
    source = tmp_path / "story.txt"
    source.write_text(f"{LINES[0]}\n\n{LINES[1]} {LINES[2]}\n", encoding="utf-8")
    code, out, err = mt(
        capsys,
        monkeypatch,
        "translate",
        "--exp",
        trained_experiment.root,
        "--input",
        source,
        "--output",
        tmp_path / "story.en.txt",
        "--threads",
        "1",
    )
    assert code == 0, err
    plain = translate_text(translator, [LINES[0], f"{LINES[1]} {LINES[2]}"])
    assert (tmp_path / "story.en.txt").read_text(encoding="utf-8") == f"{plain[0]}\n\n{plain[1]}\n"
    code, out, err = mt(
        capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", source, "--threads", "1"
    )
    assert code == 0 and out == f"{plain[0]}\n\n{plain[1]}\n"
    code, out, err = mt(
        capsys,
        monkeypatch,
        "translate",
        "--exp",
        trained_experiment.root,
        "--input",
        source,
        "--format",
        "text",
        "--threads",
        "1",
    )  # lines, as before documents
    assert code == 0 and out.splitlines() == [plain[0], "", plain[1]]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--format", "odt"], "--format odt: expected text, html, xml (lines) or txt"),
        (["--format", "txt"], "--format txt: a document is read from a file"),
    ],
)
def test_document_flags_are_refused_in_one_line(trained_experiment, capsys, monkeypatch, flags, needle):
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, *flags)
    assert code != 0 and needle in err and out == ""


def test_line_outputs_read_a_txt_file_as_lines_unless_format_names_the_document(
    trained_experiment, translator, tmp_path, capsys, monkeypatch
):
    source = tmp_path / "a.txt"
    source.write_text(f"{LINES[0]}\n\n{LINES[1]}\n", encoding="utf-8")
    args = ("translate", "--exp", trained_experiment.root, "--input", source, "--threads", "1", "--scores")
    code, out, err = mt(capsys, monkeypatch, *args)
    assert (
        code == 0
        and len(out.splitlines()) == 3
        and out.splitlines()[0].split("\t")[1] == translate_text(translator, [LINES[0]])[0]
    )
    code, out, err = mt(capsys, monkeypatch, *args, "--format", "txt")
    assert code != 0 and "a txt document is written back as a txt document: not with --scores" in err


def test_quote_marks_bullets_and_numbers_of_lines_stay_outside_their_translation(translator, units):
    """Was: a line's `> `, `* ` or `a) ` went to the model with its text, which dropped it (a mail's
    quoted lines and a list's bullets came back bare), unless the paragraph was hard-wrapped."""
    S = LINES
    text = f"> {S[0]}\n> {S[1]}\n\n* {S[2]}\n- {S[0]}\n\na) {S[1]}\n"
    out = translate_content(text.encode(), FORMATS["txt"], units, EN).decode()
    t0, t1, t2 = translate_text(translator, S[:3])
    assert out == f"> {t0}\n> {t1}\n\n* {t2}\n- {t0}\n\na) {t1}\n"


def test_an_aligned_listing_is_translated_cell_by_cell_its_columns_lined_up(translator, units):
    """Was: "Name:   John Smith" one text to the model, which ran label and value together; text whose
    words are spaced out unevenly (justified) is no listing, and stays one text a line. Then each
    translation was put between the source's own gaps, and the columns no longer lined up: the second
    starts after the widest translation of the first, with the narrowest gap the source had there."""
    S = LINES
    w = max(len(S[0]), len(S[2])) + 3  # the second column starts there on every row
    rows = [(S[0], S[1]), (S[2], S[0]), (S[1][:3], "42")]
    text = "\n".join(f"{a:<{w}}{b}" for a, b in rows) + f"\n\n{S[0]}  {S[1]}\n{S[2]}\n"
    out = translate_content(text.encode(), FORMATS["txt"], units, EN).decode()
    t0, t1, t2, t3 = translate_text(translator, [S[0], S[1], S[2], S[1][:3]])
    (j0,) = translate_text(translator, [f"{S[0]}  {S[1]}"])
    column = max(len(t0), len(t2), len(t3)) + 3  # (3: the narrowest gap of the source's first column)
    assert out.split("\n\n")[0] == f"{t0:<{column}}{t1}\n{t2:<{column}}{t0}\n{t3:<{column}}42", out
    assert out.split("\n\n")[1] == f"{j0}\n{t2}\n", out


def test_a_unit_copied_untranslated_is_named_by_its_text(units, capsys):
    """Was: "input line 1", a count of the chunk's units that meant nothing in a .docx, .md or .srt."""
    text = f"{LINES[0]}\n\n東京大学の図書館はとても大きい。\n"
    translate_content(text.encode(), FORMATS["txt"], units, EN)
    err = capsys.readouterr().err
    assert "the text '東京大学の図書館はとても大きい。': 16 characters in a script" in err and "input line" not in err, err


def test_a_legacy_file_that_reads_as_western_text_is_windows_1252_and_the_guess_is_said(capsys):
    """charset_normalizer took a short Latin-1 file for big5 ("Über" as "鈁er") without a word; Russian
    in cp1251, Polish and Czech in cp1250 and Japanese in Shift JIS keep their own code pages."""
    text = "1\n00:00:01,000 --> 00:00:02,000\nÜber uns\n"
    found, encoding = decode(text.encode("latin-1"))
    assert found == text and encoding.codec == "cp1252"
    assert "not UTF-8: read as cp1252, a guess" in capsys.readouterr().err
    for text, codec in (("Привет, как дела? Это тест.\n", "cp1251"), ("Zażółć gęślą jaźń. Łódź jest piękna.\n", "cp1250"),
                        ("Příliš žlutý kůň běžel po silnici.\n", "cp1250"), ("これは日本語のテキストです。\n", "shift_jis")):
        assert decode(text.encode(codec))[0] == text
    assert western("Zażółć gęślą jaźń.".encode("cp1250")) is None  # "Za¿ó³æ": symbols between letters
    # a page labelled Latin-1 whose quotes, dashes and euro sign are Windows-1252's, as browsers read it
    page = '<meta charset="iso-8859-1"><p>“Hello” – 5 € don’t</p>'
    assert decode(page.encode("cp1252"), "html") == (page, TextEncoding("cp1252"))


def test_a_heading_over_a_line_of_text_is_two_lines_not_a_wrapped_paragraph():
    """The longest line always "ended where the next word would not fit": any two-line paragraph whose
    first line was its longest and ended without a period was joined and wrapped again."""
    assert not wrapped(["Installation instructions for Linux systems", "Run the installer and follow the prompts."])
    assert wrapped(["This is a long sentence that was wrapped by fmt at seventy-two", "columns for the mail client."])


@pytest.mark.parametrize("data, named, codec", [
    (codecs.BOM_UTF16_BE + "Hund\n".encode("utf-16-be"), "utf-16", "utf-16-be"),  # the mark says the order
    (codecs.BOM_UTF16_LE + "Hund\n".encode("utf-16-le"), "utf-16-le", "utf-16-le"),  # the mark is not text
    ("Hund\n".encode("utf-16-le"), "utf-16", "utf-16-le"),
    (b"Hund\n", "utf-8-sig", "utf-8"),  # no mark: none written
    (codecs.BOM_UTF8 + b"Hund\n", "utf-8-sig", "utf-8"),
    ("Hündin\n".encode("cp1250"), "windows-1250", "cp1250"),
])
def test_a_named_encoding_reads_and_writes_the_file_as_it_was(data, named, codec):
    """`--encoding utf-16` wrote a big-endian file back little-endian, utf-16-le kept its mark as a
    character of the text, utf-8-sig gave a file without a mark one."""
    text, encoding = decode(data, "txt", named)
    assert text.startswith("H") and encoding.codec == codec and encode(text, encoding) == data


def test_bytes_a_named_encoding_cannot_read_are_named_by_their_line_and_place_in_the_file():
    with pytest.raises(DocumentError) as info:
        decode(codecs.BOM_UTF8 + b"abc\n\xffdef\n", "txt", "utf-8")
    one_line(info, "line 2: not utf-8, as --encoding says", "at byte 7")


def test_columns_line_up_by_screen_width_and_tabs_keep_their_gaps():
    from mt.documents.txt import cells, realigned

    rows = cells(["Name:   Anna    Berlin", "Alter:  42      Köln", "Ort:            Bonn"])
    out = realigned(rows, [["名前：", "アンナ", "ベルリン"], ["Age:", "42", "Cologne"], ["Place:", "Bonn"]])
    # the second column after the widest first (名前：, 6 columns) and the narrowest gap (2); the third
    # after the widest second (アンナ, 6) and its narrowest gap (4): at 8 and 18 on every row
    assert out == ["名前：  アンナ    ベルリン", "Age:    42        Cologne", "Place:            Bonn"]
    tabbed = cells(["a\tb", "ccc\td"])
    assert realigned(tabbed, [["x", "y"], ["zzzzz", "w"]]) == ["x\ty", "zzzzz\tw"]
