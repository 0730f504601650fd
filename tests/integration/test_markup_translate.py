"""Markup translated by conftest's tiny trained experiment (mt.text.markup_translate): a fragment's text
is the translation plain text gets, its tags all come back once with their attributes around the
aligned words, the output parses; `mt translate --format html|xml`, one fragment a line."""

from __future__ import annotations

import subprocess

import pytest
from helpers import balanced, markup_tags, markup_text, mt, toy_corpus

from mt.text.markup_translate import translate
from mt.text.translate import translate as translate_text

S1, S2, S3 = toy_corpus(3, seed=11)[0]
W = S1.rstrip(".").split()  # 3 to 9 words


@pytest.fixture
def mt_translate(capsys, monkeypatch):
    """`mt translate --exp EXP FLAGS` with `stdin`, in this process: as a finished process would say it."""

    def run(exp, stdin: str, *flags: str) -> subprocess.CompletedProcess:
        code, out, err = mt(capsys, monkeypatch, "translate", "--exp", exp.root, "--threads", "1", *flags, stdin=stdin)
        return subprocess.CompletedProcess([], code, out.encode(), err.encode())

    return run


def test_a_fragment_without_tags_is_translated_as_plain_text(translator):
    line = f"{S1} {S2}  {S3}"
    (plain,) = translate_text(translator, [line])
    assert translate(translator, [line], "html") == [plain]
    (t2,) = translate_text(translator, [S2])
    assert translate(translator, [f"<p>{line}</p>", f"  {S2}"], "html") == [f"<p>{plain}</p>", f"  {t2}"]
    assert translate(translator, [f"<doc><p>{line}</p></doc>"], "xml") == [f"<doc><p>{plain}</p></doc>"]


# Each source's text without its tags (a <br> as a line break) is TEXT: what plain text gives for it.
CASES = [
    (f"{W[0]} <b>{W[1]}</b> {' '.join(W[2:])}.", S1),
    (f'<p><a href="/p?a=1&amp;b=2" title="x">{W[0]} {W[1]}</a> <i>{" ".join(W[2:])}.</i></p>', S1),
    (f'<span class="c" data-k="v">{S1}</span> <b>{S2} <i>{S3}</i></b>', f"{S1} {S2} {S3}"),
    (f"{S1}<br>{S2}<br/>{S3}", f"{S1}\n{S2}\n{S3}"),
    (f"{W[0]} <!-- note --> {' '.join(W[1:])}. <img src='a.png' alt='pic'>", f"{W[0]}  {' '.join(W[1:])}. "),
    (f"<b>{W[0]} <i>{W[1]} <u>{' '.join(W[2:])}.</u></i></b>", S1),
]


@pytest.mark.parametrize("source, text", CASES)
def test_tags_come_back_once_around_the_translation_plain_text_gets(translator, source, text):
    (out,) = translate(translator, [source], "html")
    assert balanced(out) and markup_tags(out) == markup_tags(source), out
    assert markup_text(out) == translate_text(translator, [text])[0].replace("\n", ""), out


def test_blocks_are_translated_apart_and_kept_elements_verbatim(translator):
    source = (f"<div><p>{S1}</p><ul><li>{S2}</li><li>{S3}</li></ul></div><pre>{S1}</pre>"
              f"<script>if (a < b && c) {{}}</script><p translate=\"no\">{S2}</p>"
              f"<p>{S3} <code>{S1}</code> <span class=\"notranslate\">{S2}</span></p>")
    (out,) = translate(translator, [source], "html")
    t1, t2, t3 = translate_text(translator, [S1, S2, S3])
    assert out.startswith(f"<div><p>{t1}</p><ul><li>{t2}</li><li>{t3}</li></ul></div><pre>{S1}</pre>"
                          f"<script>if (a < b && c) {{}}</script><p translate=\"no\">{S2}</p><p>")
    assert f"<code>{S1}</code>" in out and f'<span class="notranslate">{S2}</span>' in out
    assert balanced(out) and markup_tags(out) == markup_tags(source)


def test_entities_are_text_to_the_model_and_escaped_again(translator):
    (out,) = translate(translator, [f"<p>{S1} &amp; &lt;{S2}&gt;</p>"], "html")
    (plain,) = translate_text(translator, [f"{S1} & <{S2}>"])
    assert out == "<p>" + plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</p>"


def test_mt_translate_format_html_and_xml_one_fragment_a_line(trained_experiment, translator, mt_translate):
    lines = [f"<p>{S1} <b>{S2}</b></p>", "", f"  {S3}<br>{S1}"]
    done = mt_translate(trained_experiment, "\n".join(lines) + "\n", "--format", "html")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split("\n") == [*translate(translator, lines, "html"), ""]
    xml = [f'<s id="1">{S1} <g id="2">{S2}</g><x id="3"/></s>']
    done = mt_translate(trained_experiment, xml[0] + "\n", "--format", "xml")
    assert done.returncode == 0 and done.stdout.decode() == translate(translator, xml, "xml")[0] + "\n"


def test_mt_translate_writes_a_line_break_in_the_markup_as_a_reference_one_line_out_for_one_in(
    trained_experiment, mt_translate
):
    """Was: `&#10;` in a text or an attribute came out as a line break, two output lines for one."""
    lines = [f'<p title="a&#10;b">{S1}&#10;{S2}</p>', f"<p>{S3}&#13;&#10;{S1}</p>", f"<p>{S2}</p>"]
    done = mt_translate(trained_experiment, "\n".join(lines) + "\n", "--format", "html")
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().split("\n")
    assert len(out) == 4 and out[-1] == "" and '<p title="a&#10;b">' in out[0], out
    assert "&#10;" in out[0].split(">", 1)[1] and "&#13;&#10;" in out[1], out
    xml = [f'<s note="a&#10;b">{S1}</s>']
    done = mt_translate(trained_experiment, xml[0] + "\n", "--format", "xml")
    assert done.returncode == 0 and done.stdout.decode().count("\n") == 1 and 'note="a&#10;b"' in done.stdout.decode()


@pytest.mark.parametrize("flags, code, words", [
    (("--format", "html", "--nbest", "2"), 2, "--format html writes one translated fragment a line: not with --nbest"),
    (("--format", "markdown"), 2, "--format markdown: expected text, html, xml (lines) or"),
    # named as the readers name a line (was "input line 2", and libxml's "a line 1": its line in the fragment)
    (("--format", "xml"), 1, "error: <stdin>:2: not well-formed XML: Opening and ending tag mismatch: a\n"),
    (("--format", "xml", "--input", "-"), 1, "error: <stdin>:2: not well-formed XML"),
])
def test_mt_translate_format_refusals(trained_experiment, flags, code, words, capsys, monkeypatch):
    done, _, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--threads", "1", *flags,
                      stdin="<a>ok</a>\n<a>unclosed\n")
    assert done == code and words in err, err


def test_what_the_vocabulary_cannot_write_inside_a_readable_sentence_is_kept_as_it_is(translator, capsys):
    """A name in another script, an emoji or a symbol was spelt in byte pieces to the model, which lost
    it and most of the sentence; now each run is kept as it is, as an address is, once."""
    from mt.text.markup_translate import text_search
    from mt.text.translate import mostly_unreadable, unknown_runs

    tok = translator.src_tok
    words = S1.rstrip(".").split()
    line = f"{' '.join(words[:2])} Новый Город {' '.join(words[2:])} 😀 🇩🇪 👨‍👩‍👧 x\u0301y."
    runs = [line[a:b] for a, b in unknown_runs(tok, line)]
    assert runs == ["Новый Город", "😀 🇩🇪 👨‍👩‍👧"]
    assert mostly_unreadable(tok, "東京大学の図書館はとても大きい。") and unknown_runs(tok, S1) == []
    # a word kept whole, not its unknown letters alone ("Wa" and "sa" read around a kept "łę")
    assert ["x Wałęsa y"[a:b] for a, b in unknown_runs(tok, "x Wałęsa y")] == ["Wałęsa"]
    # an emoji glued to a word takes no word with it ("Thanks😊": the word is read)
    assert [f"{W[0]}😊 x"[a:b] for a, b in unknown_runs(tok, f"{W[0]}😊 x")] == ["😊"]
    [[(out, _)]] = text_search(translator, [line])
    for run in runs:
        assert out.count(run) == 1, out
    assert "input line 1: 10 letters the model cannot read (not in its vocabulary) kept as they are" in (
        capsys.readouterr().err
    )
    (html,) = translate(translator, [f"<p>{' '.join(words[:2])} <b>東京</b> {' '.join(words[2:])}</p>"], "html")
    assert html.count("東京") == 1 and html.count("<b>") == 1, html
    assert "input line 1: 2 letters the model cannot read" in capsys.readouterr().err
    # a sentence in a script the model cannot read beside one it can: kept as it is, and said
    [[(copied, _)]] = text_search(translator, [f"{S1} 東京大学の図書館はとても大きい。"])
    assert copied.count("東京大学の図書館はとても大きい") == 1
    assert "15 letters the model cannot read" in capsys.readouterr().err
    # letters in a web address are the address's: no warning for them
    text_search(translator, [f"{S1} https://ru.wikipedia.org/wiki/Москва"])
    assert "letters the model cannot read" not in capsys.readouterr().err
    # a line the model cannot read at all is copied whole, with the warning it had
    assert text_search(translator, ["東京大学の図書館はとても大きい。"]) == [[("東京大学の図書館はとても大きい。", 0.0)]]
    assert "16 characters in a script the model cannot read" in capsys.readouterr().err
