"""Markdown documents (mt.documents.markdown) with conftest's tiny trained experiment: the translation
parses to the same blocks, the same emphasis, links, images and code (each once, URLs and code as
they were), front matter, code blocks and reference definitions untouched; headings, list items,
quotes and table cells carry the plain translation of their text; with a translation that changes
nothing the file comes back byte for byte (a paragraph of several lines on one line)."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
from helpers import mt, toy_corpus

from mt.documents.formats import FORMATS, DocumentError, DocumentOptions
from mt.documents.markdown import parser
from mt.documents.translate import translate_content
from mt.text.translate import translate as translate_text

EN = DocumentOptions("en")
S = toy_corpus(12, seed=37)[0]
W = [s.rstrip(".").split() for s in S]
DOC = f"""---
title: {S[0]}
---

# {W[0][0]} *{W[0][1]}* {" ".join(W[0][2:])}

{W[1][0]} **{W[1][1]}** {" ".join(W[1][2:])} [{S[2]}](https://example.com/a_b "Titel").
{S[3]} `code_x` ![{S[4]}](bild.png)

- {S[5]}
- {W[6][0]} __{W[6][1]}__ {" ".join(W[6][2:])}
  1. {S[7]}

> {" ".join(W[8][:2])}
> {" ".join(W[8][2:])}.

{S[9]}  
{S[10]}

| {W[11][0]} | {W[11][1]} |
|---|:---:|
| {S[0]} | {S[1]} |

```python
print("{S[0]}")
```

    {S[1]}

<div class="box">{S[2]}</div>

Siehe [{S[3]}][ref] und <https://example.com/auto>.

[ref]: https://example.com/ref "Ref"

{W[4][0]} ~~{W[4][1]}~~ {" ".join(W[4][2:])}
===
"""


@pytest.fixture(scope="module")
def translated(units) -> str:
    return translate_content(DOC.encode(), FORMATS["md"], units, EN).decode()


def blocks(text: str) -> list[tuple]:
    """The block tokens as (type, tag, markup, info, level), with what must come back as it was: front
    matter, code and HTML blocks' content."""
    keep = ("front_matter", "fence", "code_block")
    return [
        (t.type, t.tag, t.markup, t.info, t.level, t.content if t.type in keep else "") for t in parser().parse(text)
    ]


def marks(text: str) -> Counter:
    """Every inline element but text, with its markup and attributes (URLs, titles, code)."""
    found: Counter = Counter()
    for token in parser().parse(text):
        for child in token.children or []:
            if child.type not in ("text", "softbreak"):
                attrs = {k: v for k, v in child.attrs.items() if k != "alt"}
                found[(child.type, child.markup, child.content if child.type == "code_inline" else "", str(attrs))] += 1
    return found


def texts(text: str) -> list[str]:
    """Each inline's text as a reader sees it."""
    return [
        " ".join(
            "".join(
                c.content if c.type == "text" else " " for c in t.children or [] if c.type in ("text", "softbreak")
            ).split()
        )
        for t in parser().parse(text)
        if t.type == "inline"
    ]


def test_blocks_front_matter_code_and_references_come_back_as_they_were(translated):
    assert blocks(translated) == blocks(DOC)
    assert translated.startswith(f"---\ntitle: {S[0]}\n---\n")
    assert f'```python\nprint("{S[0]}")\n```\n\n    {S[1]}\n' in translated
    assert '[ref]: https://example.com/ref "Ref"\n' in translated
    env_out: dict = {}
    env_in: dict = {}
    parser().parse(translated, env_out)
    parser().parse(DOC, env_in)
    unmapped = [{k: {**v, "map": None} for k, v in env["references"].items()} for env in (env_out, env_in)]
    assert unmapped[0] == unmapped[1]


def test_emphasis_links_images_and_code_come_back_once_with_their_urls(translated):
    assert marks(translated) == marks(DOC)
    assert '](https://example.com/a_b "Titel")' in translated and "][ref]" in translated
    assert "`code_x`" in translated and "<https://example.com/auto>" in translated and "](bild.png)" in translated


def test_headings_list_items_quotes_and_cells_carry_the_plain_translation(translator, translated):
    plain = [" ".join(t.split()) for t in translate_text(translator, S)]
    found = texts(translated)
    source = texts(DOC)
    for i, text in enumerate(source):
        if text in S:  # an inline of one plain sentence: a list item, a table cell
            assert found[i] == plain[S.index(text)], text
    quote = source.index(" ".join(W[8]) + ".")
    assert found[quote] == " ".join(translate_text(translator, [source[quote]])[0].split())  # two lines, one sentence
    assert found[0] == " ".join(translate_text(translator, [" ".join(W[0])])[0].split())  # the heading, its em placed


def test_a_hard_line_break_and_the_table_are_kept(translated):
    tokens = parser().parse(translated)
    assert sum(c.type == "hardbreak" for t in tokens for c in t.children or []) == 1
    rows = [line for line in translated.split("\n") if line.startswith("|")]
    assert len(rows) == 3 and rows[1] == "|---|:---:|" and all(row.count("|") == 3 for row in rows)


def same(fragments: list[str], fmt: str = "text") -> list[str]:
    """Units that translate nothing: each fragment back as it is."""
    return list(fragments)


def test_a_translation_that_changes_nothing_gives_the_file_back_byte_for_byte():
    out = translate_content(DOC.encode(), FORMATS["md"], same, EN).decode()
    joined = DOC.replace(f".\n{S[3]} `code_x`", f". {S[3]} `code_x`").replace(
        f"> {' '.join(W[8][:2])}\n> ", f"> {' '.join(W[8][:2])} "
    )
    assert out == joined


def test_a_task_lists_boxes_are_kept_as_written_and_not_translated():
    """GitHub's task list: "- [ ] " is the item's prefix (it came back escaped, "- \\[ \\] ", no
    box at all, and the box was sent to the model)."""
    asked: list[str] = []

    def upper(fragments: list[str], fmt: str = "text") -> list[str]:
        asked.extend(fragments)
        return [f.upper() for f in fragments]

    source = "- [ ] buy milk\n- [x] done\n- [X] paid *twice*\n- a [ ] in text\n"
    out = translate_content(source.encode(), FORMATS["md"], upper, EN).decode()
    assert out == "- [ ] BUY MILK\n- [x] DONE\n- [X] PAID *TWICE*\n- A \\[ \\] IN TEXT\n"
    assert not [a for a in asked if a.startswith("[")]


def test_footnote_references_are_kept_as_written_and_their_notes_translated():
    """`[^1]` came back escaped (`\\[^1\\]`), its note's label too, and both were sent to the model."""

    def upper(fragments: list[str], fmt: str = "text") -> list[str]:
        return [f.upper() for f in fragments]

    source = "Note[^1] and more[^long].\n\n[^1]: The note.\n[^long]: Second *one*.\n\nInline^[kept] here.\n"
    out = translate_content(source.encode(), FORMATS["md"], upper, EN).decode()
    assert out == "NOTE[^1] AND MORE[^long].\n\n[^1]: THE NOTE.\n[^long]: SECOND *ONE*.\n\nINLINE^[kept] HERE.\n"


def test_line_endings_are_kept(units):
    out = translate_content(DOC.replace("\n", "\r\n").encode(), FORMATS["md"], units, EN).decode()
    assert out.count("\n") == out.count("\r\n") > 20


def test_pathological_nesting_translates_in_seconds(units):
    hostile = "> " * 500 + "[" * 3000 + "*" * 3000 + "`" * 3000 + "\n\n" + "- " * 500 + "x\n"
    started = time.perf_counter()
    out = translate_content(hostile.encode(), FORMATS["md"], same, EN).decode()
    assert time.perf_counter() - started < 10 and out.count("[") >= 3000


def test_mt_translate_writes_markdown_to_stdout(trained_experiment, units, tmp_path, capsys, monkeypatch):
    source = tmp_path / "liesmich.md"
    source.write_text(DOC, encoding="utf-8")
    code, out, err = mt(
        capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", source, "--threads", "1"
    )
    assert code == 0, err
    assert out == translate_content(DOC.encode(), FORMATS["md"], units, EN).decode()


def test_shortcut_and_collapsed_references_still_resolve_once_their_text_is_translated(units):
    """`[text]` and `[text][]` are named by their text: translated, it named no definition, and the link
    or image showed as brackets. The reference is written out (`[translation][text]`)."""
    doc = (f"Siehe [{S[3]}] und [{S[4]}][].\n\n![{W[5][0]}]\n\n"
           f"[{S[3]}]: https://example.com/a\n[{S[4]}]: https://example.com/b\n[{W[5][0]}]: /logo.png\n")
    out = translate_content(doc.encode(), FORMATS["md"], units, EN).decode()
    found = marks(out)
    assert found == marks(doc)  # the same links and image, with their URLs
    assert sum(n for key, n in found.items() if key[0] in ("link_open", "image")) == 3, found
    assert f"][{S[3]}]" in out and f"][{S[4]}]" in out and f"][{W[5][0]}]" in out


def test_a_text_the_markup_layer_refuses_is_named_by_its_text_not_a_line_number(units):
    """The error said "input line 7" of a call's units: no line of the file."""
    deep = "<span>" * 300 + "Hallo" + "</span>" * 300
    doc = f"Eins zwei.\n\nSiehe {deep} hier.\n"
    with pytest.raises(DocumentError) as exc:
        translate_content(doc.encode(), FORMATS["md"], units, EN)
    message = str(exc.value)
    assert "input line" not in message and "the text 'Siehe" in message and "nested" in message, message


def test_bare_addresses_in_text_come_back_as_written(units):
    """A URL or an e-mail address written bare (no <autolink>) was text to the model, which made words
    of it: GitHub and other renderers link them, and the links were gone."""
    doc = ("See https://github.com/org/repo_name for the source.\n\n"
           "Write to support@example.com or visit www.example.org today.\n")
    out = translate_content(doc.encode(), FORMATS["md"], units, EN).decode()
    for address in ("https://github.com/org/repo_name", "support@example.com", "www.example.org"):
        assert address in out, out


def test_a_github_alert_keeps_its_marker_line_and_code_moved_after_a_period_keeps_its_space():
    """`> [!NOTE]` came back escaped and joined to its text (`> \\[!NOTE\\] Useful...`: no alert); a code
    span the translation placed after a period was glued to it ("now.`ls -l`")."""
    doc = "> [!NOTE]\n> Useful information that users should know.\n\nRun `ls -l` now.\n"
    out = translate_content(doc.encode(), FORMATS["md"], same, EN).decode()
    assert out.startswith("> [!NOTE]\n> Useful information that users should know.\n"), out

    def moved(texts: list[str], fmt: str = "text") -> list[str]:  # the code span placed at the end
        return [re.sub(r"(.*?)\s*(<span data-t=\"0\"></span>)\s*(.*)", r"\1 \3\2", t) for t in texts]

    out = translate_content(doc.encode(), FORMATS["md"], moved, EN).decode()
    assert "Run now. `ls -l`" in out, out


def test_an_addresss_emphasis_marks_stay_escaped():
    """An address is written as it is, but `__init__` in it read as emphasis once the author's escapes
    were gone (`\\_\\_init\\_\\_` came back `__init__`, bold); `repo_name`'s `_` needs none."""
    doc = ("See https://github.com/o/r/blob/main/\\_\\_init\\_\\_.py and https://github.com/org/repo_name here.\n\n"
           "See https://x.org/?a=1&amp;amp;b=2 now.\n")
    out = translate_content(doc.encode(), FORMATS["md"], same, EN).decode()
    assert "https://github.com/o/r/blob/main/\\_\\_init\\_\\_.py" in out and "https://github.com/org/repo_name" in out, out
    assert "https://x.org/?a=1&amp;amp;b=2" in out, out  # an entity's `&` escaped, as the source wrote it


def test_an_html_block_is_translated_in_the_writers_spelling_one_open_across_markdown_is_said(capsys):
    """A README's centred header (`<img ... />`, `<P align='center'>`) came back untranslated without a
    word: only a block the writer gave back byte for byte was translated."""
    source = ('<div align="center">\n  <img src="logo.png" width="120" />\n  <p>a fast tool</p>\n</div>\n\n'
              "<P align='center'>hello there</P>\n\n<details><summary>click here</summary>\n\ninner text\n\n</details>\n")
    def upper(texts: list[str], fmt: str = "text") -> list[str]:  # the text between tags, not the tags
        return [re.sub(r"(^|>)([^<]*)", lambda m: m.group(1) + m.group(2).upper(), t) for t in texts]

    out = translate_content(source.encode(), FORMATS["md"], upper, EN).decode()
    assert "<p>A FAST TOOL</p>" in out and ">HELLO THERE</" in out  # (the writer's spelling: mt's search writes it)
    assert out.endswith("<details><summary>click here</summary>\n\nINNER TEXT\n\n</details>\n")
    assert "line 8: an HTML block left untranslated" in capsys.readouterr().err


def test_a_footnote_nothing_refers_to_is_kept_and_said(capsys):
    """The footnote plugin drops a note nothing refers to: it came back untranslated without a word."""
    source = "Text with a note[^a].\n\n[^a]: used note.\n\n[^c]: unused note.\n"
    out = translate_content(source.encode(), FORMATS["md"], lambda texts, fmt="text": texts, EN).decode()
    assert out == source and "line 5: footnote [^c] is referred to nowhere" in capsys.readouterr().err
    front = "+++\ntitle = 'x'\n+++\n"  # the lines of TOML front matter counted (the warning said line 5)
    assert translate_content((front + source).encode(), FORMATS["md"], lambda texts, fmt="text": texts, EN).decode() == front + source
    assert "line 8: footnote [^c]" in capsys.readouterr().err


def test_a_hard_wrapped_paragraph_is_wrapped_again_at_its_width():
    """Was: written on one line, so that a document wrapped at 60 or 80 columns came back with each
    paragraph one long line. Broken at spaces only; a line that would start a block (`- `, `1.`, `#`)
    escaped, so that the paragraph renders as its one-line translation would."""
    import textwrap

    text = ("The quick brown dog jumps over the lazy fox and then runs away into the forest where nobody "
            "can see it any more, not even the hunter who walks by with his dogs at the end of the day.")
    for first, rest in (("", ""), ("> ", "> "), ("- ", "  ")):
        source = textwrap.fill(text, 70, initial_indent=first, subsequent_indent=rest) + "\n"
        assert translate_content(source.encode(), FORMATS["md"], same, EN).decode() == source  # as it was
    source = textwrap.fill(text, 70) + "\n"
    blocks = lambda texts, fmt="text": [t.replace(" ", " - 1. # ") for t in texts]  # noqa: E731
    out = translate_content(source.encode(), FORMATS["md"], blocks, EN).decode()
    one_line = translate_content(text.encode() + b"\n", FORMATS["md"], blocks, EN).decode()
    assert len(out.splitlines()) > 4 and all(len(line) <= 70 for line in out.splitlines()), out
    md = parser()
    assert md.render(out).replace("\n", " ") == md.render(one_line).replace("\n", " ")
    assert [t.type for t in md.parse(out)] == ["paragraph_open", "inline", "paragraph_close"]


def test_a_rewrapped_line_is_not_broken_in_code_a_tag_or_a_link_destination():
    from mt.documents.markdown import rewrapped

    text = 'aa `b c d e` ff <span title="g h"> ii [j k](https://x.org/l "m n o") pp'
    lines = rewrapped(text, 8, 0, "").split("\n")
    assert " ".join(lines) == text and "`b c d e`" in lines and 'ff <span title="g h">' in lines  # not before a tag
    assert any(line.endswith('(https://x.org/l "m n o")') for line in lines), lines
    assert rewrapped("aaaa - b", 5, 0, "> ") == "aaaa\n> \\- b"  # a list's start escaped, the quote's prefix kept
    # what no backslash escapes is not put at a line's start: an HTML block would end the paragraph there
    for text in ("aaaa <div> b", "aaaa <!-- c --> b", "aaaa [^1]: b"):
        assert rewrapped(text, 5, 0, "").split("\n")[0] != "aaaa", text


def test_emphasis_that_markdown_would_not_read_after_punctuation_next_to_a_letter_is_written_as_html():
    """"**注意：**请这样做。" shows its asterisks: a closing `**` after punctuation and before a letter
    is no delimiter (CommonMark's flanking rules), which Chinese and Japanese text, without spaces,
    meets often. Such emphasis is written as <strong> or <em>; emphasis Markdown reads stays Markdown."""
    from markdown_it import MarkdownIt

    source = b"**Note:** Do this.\n\nSee *the* _x_ end.\n"
    def into(translation):
        return lambda texts, fmt="text": [translation for _ in texts]

    out = translate_content(source, FORMATS["md"], into('<span data-t="0">注意：</span>请这样做。'), DocumentOptions("zh"))
    assert out.decode() == "<strong>注意：</strong>请这样做。\n\n<em>注意：</em>请这样做。\n"
    assert "*" not in MarkdownIt().render(out.decode())
    out = translate_content(source, FORMATS["md"], into('<span data-t="0">Hinweis:</span> Tun Sie das.'), EN)
    assert out.decode() == "**Hinweis:** Tun Sie das.\n\n*Hinweis:* Tun Sie das.\n"
    out = translate_content(source, FORMATS["md"], into('見て<span data-t="0">これ</span>を。'), DocumentOptions("ja"))
    assert out.decode() == "見て**これ**を。\n\n見て*これ*を。\n"  # no punctuation beside it: read as it is
    assert MarkdownIt().render(out.decode()).count("<strong>") == 1


def test_characters_the_source_wrote_as_references_are_written_so_again():
    """`&nbsp;` came back as an invisible U+00A0 and `&copy;` as ©: the same page, but a diff on every
    such line, and a hard space no one can see in the source any more."""
    source = "Es kostet 10&nbsp;Euro &copy; Firma, M&uuml;ller &amp; Sohn.\n".encode()
    out = translate_content(source, FORMATS["md"], lambda texts, fmt="text": [
        "It costs 10\u00a0euros © Company, Müller &amp; Son." if fmt == "html" else "It costs 10\u00a0euros © Company, "
        "Müller & Son." for _ in texts], EN)
    assert out.decode() == "It costs 10&nbsp;euros &copy; Company, M&uuml;ller & Son.\n"  # (& needs none)


def test_references_are_not_written_into_code_or_addresses():
    source = "caf&eacute; and `café` <https://fr.wikipedia.org/wiki/Café>\n".encode()
    out = translate_content(source, FORMATS["md"], lambda texts, fmt="text": list(texts), EN)
    assert out.decode() == "caf&eacute; and `café` <https://fr.wikipedia.org/wiki/Café>\n"
    only_code = "Schreib `&eacute;` als é.\n".encode()  # a reference shown in code sets up nothing
    assert translate_content(only_code, FORMATS["md"], lambda texts, fmt="text": list(texts), EN) == only_code
