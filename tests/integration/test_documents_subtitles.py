"""Subtitles (mt.documents.subtitles, mt.documents.cues) with conftest's tiny trained experiment: files
made with srt and webvtt-py come back with the same cues, numbers, identifiers, timings, settings, notes
and styles; a sentence over three cues is translated once (the plain translation, spread over the
cues); inline tags come back once; dialogue lines, encodings and line endings are kept; files the
libraries cannot read are one-line errors naming the line."""

from __future__ import annotations

import codecs
import html
import re
from datetime import timedelta

import pytest
import srt
import webvtt
from helpers import mt, one_line, toy_corpus
from webvtt.models import Style

from mt.documents.formats import FORMATS, DocumentError, DocumentOptions
from mt.documents.translate import translate_content
from mt.text.translate import translate as translate_text

EN = DocumentOptions("en")
TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")


@pytest.fixture(scope="module")
def sentences(translator) -> list[str]:
    """Toy sentences of six words or more whose translation has three words or more (one for each
    cue a sentence is spread over)."""
    candidates = [s for s in toy_corpus(60, seed=41)[0] if len(s.split()) >= 6]
    plain = translate_text(translator, candidates)
    return [s for s, t in zip(candidates, plain) if len(t.split()) >= 3]


def seen(text: str) -> str:
    """A cue's text as shown: tags out, lines joined."""
    return " ".join(html.unescape(TAG.sub("", text)).split())


def at(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def srt_file(s: list[str]) -> str:
    a = s[0].split()
    third = len(a) // 3
    e = s[4].rstrip(".").split()
    cues = [
        srt.Subtitle(10, at(1), at(2), " ".join(a[:third])),
        srt.Subtitle(11, at(2.1), at(3), " ".join(a[third : 2 * third])),
        srt.Subtitle(12, at(3.2), at(4.5), " ".join(a[2 * third :])),
        srt.Subtitle(13, at(8), at(10), f"<i>{s[1]}</i>", proprietary="X1:100 X2:200 Y1:10 Y2:20"),
        srt.Subtitle(20, at(10.5), at(12), f"- {s[2]}\n- {s[3]}"),
        srt.Subtitle(21, at(15), at(17), f"{{\\an8}}{' '.join(e[:2])} <b>{e[2]}</b>\n{' '.join(e[3:])}."),
        srt.Subtitle(22, at(18), at(19), "♪"),
    ]
    return srt.compose(cues, reindex=False)


def test_srt_cues_come_back_with_their_numbers_timings_and_positions(units, sentences):
    source = srt_file(sentences)
    out = translate_content(source.encode(), FORMATS["srt"], units, EN).decode()
    before, after = list(srt.parse(source)), list(srt.parse(out))
    assert [(c.index, c.start, c.end, c.proprietary) for c in after] == [
        (c.index, c.start, c.end, c.proprietary) for c in before
    ]
    assert all(c.content.strip() for c in after) and after[-1].content == "♪"
    assert re.findall(r"(?m)^(?:\d+|\d\d:.*)$", out) == re.findall(r"(?m)^(?:\d+|\d\d:.*)$", source)


def test_a_sentence_over_three_cues_is_translated_once_and_spread_over_them(translator, units, sentences):
    out = list(srt.parse(translate_content(srt_file(sentences).encode(), FORMATS["srt"], units, EN).decode()))
    plain = translate_text(translator, sentences[:5])
    assert " ".join(seen(c.content) for c in out[:3]) == " ".join(plain[0].split())
    assert all(seen(c.content) for c in out[:3])
    assert out[3].content.startswith("<i>") and out[3].content.endswith("</i>")
    assert seen(out[3].content) == " ".join(plain[1].split())
    assert out[4].content.split("\n") == [f"- {plain[2]}", f"- {plain[3]}"]  # a dialogue keeps its lines
    assert out[5].content.startswith("{\\an8}") and seen(out[5].content) == " ".join(plain[4].split())


def test_inline_tags_come_back_once_and_lines_stay_readable(units, sentences):
    source = srt_file(sentences)
    out = translate_content(source.encode(), FORMATS["srt"], units, EN).decode()
    for tag in ("<i>", "</i>", "<b>", "</b>", "{\\an8}"):
        assert out.count(tag) == source.count(tag) == 1, tag
    for cue in srt.parse(out):
        lines = cue.content.split("\n")
        assert len(lines) <= 2 and all(len(seen(line)) <= 42 or " " not in seen(line) for line in lines)


def vtt_file(s: list[str]) -> str:
    a = s[5].split()
    first = webvtt.Caption(
        "00:00:01.000", "00:00:02.500", f"<v Roger>{' '.join(a[:3])}", identifier="intro", settings="align:start line:0"
    )
    first.comments = ["eine Notiz"]
    second = webvtt.Caption("00:00:02.600", "00:00:04.000", f"<c.loud>{' '.join(a[3:])}</c>")
    third = webvtt.Caption("00:01:00.000", "00:01:02.000", s[6], identifier="3", settings="region:fred")
    vtt = webvtt.WebVTT(
        captions=[first, second, third],
        styles=[Style("::cue(.loud) { color: red }")],
        header_text="Titel",
        metadata=["Kind: captions", "Language: de"],
    )
    return vtt.content


def frame(text: str) -> list[str]:
    """A WebVTT file's blocks without the cues' text: what must come back byte for byte."""
    return [
        "\n".join(lines[: next(i for i, line in enumerate(lines) if "-->" in line) + 1])
        if any("-->" in line for line in lines)
        else block
        for block in text.split("\n\n")
        for lines in [block.split("\n")]
    ]


def test_vtt_header_notes_styles_identifiers_and_settings_are_kept(translator, units, sentences):
    source = vtt_file(sentences)
    out = translate_content(source.encode(), FORMATS["vtt"], units, EN).decode()
    assert "Language: de\n" in source and "Language: en\n" in out  # the header names the translation's language
    assert frame(out) == frame(source.replace("Language: de\n", "Language: en\n", 1))
    before, after = webvtt.from_string(source), webvtt.from_string(out)
    assert [(c.identifier, c.start, c.end, str(c.settings), c.comments) for c in after.captions] == [
        (c.identifier, c.start, c.end, str(c.settings), c.comments) for c in before.captions
    ]
    assert [s.text for s in after.styles] == [s.text for s in before.styles]
    cues = after.captions
    assert cues[0].raw_text.startswith("<v Roger>") and cues[1].raw_text.startswith("<c.loud>")
    assert cues[1].raw_text.endswith("</c>")
    plain = translate_text(translator, sentences[5:7])
    assert f"{seen(cues[0].raw_text)} {seen(cues[1].raw_text)}" == " ".join(plain[0].split())
    assert seen(cues[2].raw_text) == " ".join(plain[1].split())


@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF8])
def test_srt_encoding_and_crlf_line_endings_are_kept(units, sentences, bom):
    data = bom + srt_file(sentences).replace("\n", "\r\n").encode("utf-8")
    out = translate_content(data, FORMATS["srt"], units, EN)
    assert out.startswith(bom) and out[len(bom) :].decode().count("\n") == out[len(bom) :].decode().count("\r\n")
    assert len(list(srt.parse(out[len(bom) :].decode()))) == 7


CUE = "00:00:01,000 --> 00:00:02,000"


@pytest.mark.parametrize(
    "fmt, text, needles",
    [
        ("srt", "1\n00:00:01,000 -> 00:00:02,000\nHallo\n", ["line 1:", "not a SubRip cue"]),
        ("srt", f"1\n{CUE}\nA\n\nzwei\n00:00:03,000 --> 00:00:04,000\nB\n", ["line 6:", "cue 1", "without its number"]),
        (
            "srt",
            f"1\n{CUE}\nA\n\n2\n00:00:03,000 -> 00:00:04,000\nB\n\n3\n00:00:05,000 --> 00:00:06,000\nC\n",
            ["line 5:", "not a SubRip cue", "'2 / 00:00:03,000 -> 00:00:04,000'"],
        ),
        ("srt", "Hallo Welt\n", ["line 1:", "not a SubRip cue", "WEBVTT"]),
        ("srt", f"1\n{CUE}\nA\n\n2\nB\n", ["line 5:", "after cue 1", "not a cue", "'2'"]),
        ("vtt", "WEBVTT\n\n1\n00:00:01.000 --> 00:00:0x.000\nHallo\n", ["line 4:", "webvtt-py cannot read"]),
        ("vtt", "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nA\n00:00:02,000 --> 00:00:03,000\nB\n", ["line 5:"]),
        # a mistyped arrow: its cue was left untranslated without a word, after the last cue or between two
        ("vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\nA\n\n00:03.000 -> 00:04.000\nB\n", ["line 6:", "'00:03.000 -> 00:04.000'"]),
        ("vtt", "WEBVTT\n\n00:01.000 -> 00:02.000\nA\n\n00:03.000 --> 00:04.000\nB\n", ["line 3:", "cannot read"]),
    ],
)
def test_files_the_libraries_cannot_read_are_one_line_errors_naming_the_line(units, fmt, text, needles):
    with pytest.raises(DocumentError) as exc:
        translate_content(text.encode(), FORMATS[fmt], units, EN)
    one_line(exc, *needles)


def test_files_without_cues_come_back_as_they_are(units):
    for fmt, text in (("srt", ""), ("srt", "\n\n"), ("vtt", "WEBVTT\n"), ("vtt", "WEBVTT\n\nNOTE nur eine Notiz\n")):
        assert translate_content(text.encode(), FORMATS[fmt], units, EN).decode() == text


def test_mt_translate_writes_a_translated_srt_file(trained_experiment, units, sentences, tmp_path, capsys, monkeypatch):
    source = tmp_path / "film.srt"
    source.write_text(srt_file(sentences), encoding="utf-8")
    target = tmp_path / "film.en.srt"
    args = ("translate", "--exp", trained_experiment.root, "--input", source, "--output", target, "--threads", "1")
    code, out, err = mt(capsys, monkeypatch, *args)
    assert code == 0 and out == "", err
    assert (
        target.read_text(encoding="utf-8") == translate_content(source.read_bytes(), FORMATS["srt"], units, EN).decode()
    )


def test_a_vtt_headers_language_becomes_the_target():
    """`Language: de` in the header stayed: players and YouTube took the translation for German."""
    source = "WEBVTT\nKind: captions\nLanguage: de\n\n00:00:01.000 --> 00:00:02.000\nLanguage: de ist hier Text.\n"
    out = translate_content(source.encode(), FORMATS["vtt"], lambda texts, fmt="text": texts, DocumentOptions("en"))
    assert out.decode() == source.replace("Language: de\n\n", "Language: en\n\n")


def test_a_translation_of_fewer_words_than_its_cues_leaves_none_of_them_empty():
    """A sentence over two cues translated as one word left the second cue empty: nothing on screen
    while the speaker went on (and an empty SRT block, which some players refuse)."""
    text = ("1\n00:00:01,000 --> 00:00:02,000\nIch glaube, dass wir\n\n2\n00:00:02,000 --> 00:00:04,000\n"
            "morgen gehen sollten.\n\n3\n00:00:05,000 --> 00:00:06,000\nGut.\n")
    short = lambda texts, fmt="text": ["Ja." for _ in texts]  # noqa: E731
    cues = list(srt.parse(translate_content(text.encode(), FORMATS["srt"], short, EN).decode()))
    assert [c.content for c in cues] == ["Ja.", "Ja.", "Ja."]
    assert [c.start for c in cues] == [timedelta(seconds=s) for s in (1, 2, 5)]  # the timings as they were


def test_chinese_and_japanese_lines_break_between_characters_and_count_two_columns_each():
    """A two-line cue translated into Chinese came back as one line of 41 characters, about 82 columns
    wide: lines broke only at spaces, and a character counted as one column."""
    chinese = "一个男人在公园里和他的狗一起散步，孩子们在草地上踢足球，天空很蓝。"
    japanese = "彼は「今日はとても楽しかったです」と言いながら、駅の方へゆっくり歩いていきました。"
    source = ("1\n00:00:01,000 --> 00:00:04,000\nA man walks his dog in the park while the children\n"
              "play football on the grass under a blue sky.\n\n")
    for translation in (chinese, japanese):
        out = translate_content(source.encode(), FORMATS["srt"], lambda texts, fmt="text": [translation] * len(texts),
                                DocumentOptions("zh"))
        (cue,) = srt.parse(out.decode())
        lines = cue.content.split("\n")
        assert len(lines) == 2 and "".join(lines) == translation  # no space put between characters
        assert all(sum(2 if "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" else 1 for c in line) <= 46
                   for line in lines), lines
        assert not lines[1].startswith(("、", "。", "，", "」")) and not lines[0].endswith("「")
    arrow = translate_content(source.encode(), FORMATS["srt"], lambda texts, fmt="text": ["步骤1-->步骤2"] * len(texts),
                              DocumentOptions("zh"))
    assert next(srt.parse(arrow.decode())).content == "步骤1->步骤2"  # SRT's timing arrow, never in a cue's text
    words = "Ein Mann geht mit seinem Hund im Park spazieren, während die Kinder Fußball spielen."
    out = translate_content(source.encode(), FORMATS["srt"], lambda texts, fmt="text": [words] * len(texts), EN)
    assert " ".join(next(srt.parse(out.decode())).content.split("\n")) == words  # spaced text as before
