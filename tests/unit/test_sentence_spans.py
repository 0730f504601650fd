"""mt.text.sentences: sentence spans into the text itself, reassembly that keeps every character
between them, and long sentences cut at clauses, then spaces, then anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mt.text.sentences import cut_long, line_span, reassemble, rules_for, sentence_spans


def pieces(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


@pytest.mark.parametrize(
    ("lang", "text", "expected"),
    [
        ("en", "A man rides a bicycle. Two dogs play in the snow. A woman reads.",
         ["A man rides a bicycle.", "Two dogs play in the snow.", "A woman reads."]),
        ("en", "Dr. Smith paid 3.5 dollars. He left... Then he came back!",
         ["Dr. Smith paid 3.5 dollars.", "He left...", "Then he came back!"]),
        ("de", "Das ist z. B. ein Test. Er kam am 3. Mai.", ["Das ist z. B. ein Test.", "Er kam am 3. Mai."]),
        ("ja", "今日は晴れです。明日は雨です。", ["今日は晴れです。", "明日は雨です。"]),
        # a lower-case word after a full stop goes on (an abbreviation sentencex does not know); not
        # after a question mark
        # brackets around a whole sentence stay outside it; not those of part of one
        ("en", "(A dog is sleeping.)\n[A cat runs.]\n(It is (very) late) and dark.\nBoth (a) and (b) are here. (See above).",
         ["A dog is sleeping.", "A cat runs.", "(It is (very) late) and dark.", "Both (a) and (b) are here.",
          "(See above)."]),
        ("en", "The dog ran 3 mi. on Sun. afternoon. It was fun. What? no way.",
         ["The dog ran 3 mi. on Sun. afternoon.", "It was fun.", "What?", "no way."]),
        # an abbreviation written before a number ("approx. 5", "vol. 2", "No. 5"); a number after a
        # word's stop starts a sentence
        ("en", "It costs approx. 5 euros. See p. 12 and vol. 2. He sang No. 5. I like it. 5 stars!",
         ["It costs approx. 5 euros.", "See p. 12 and vol. 2.", "He sang No. 5.", "I like it.", "5 stars!"]),
        # but not after a word (lower-cased text, a name in lower case, a file name)
        ("en", "a dog runs. a cat sleeps.", ["a dog runs.", "a cat sleeps."]),
        ("en", "I bought a new phone. iPhone sales rose. It is readme.txt. it is short.",
         ["I bought a new phone.", "iPhone sales rose.", "It is readme.txt.", "it is short."]),
        # German ordinals (after an article or a contracted preposition); a year or a number after a
        # noun still ends its sentence
        ("de", "Der 2. Weltkrieg endete 1945. Im 19. Jahrhundert war das anders.",
         ["Der 2. Weltkrieg endete 1945.", "Im 19. Jahrhundert war das anders."]),
        ("de-AT", "Am 1. Jänner. Er spielt beim 1. FC Köln.", ["Am 1. Jänner.", "Er spielt beim 1. FC Köln."]),
        ("de", "Er trägt die Nummer 10. Ein Mann telefoniert.", ["Er trägt die Nummer 10.", "Ein Mann telefoniert."]),
        ("en", "He finished 2. Then he left.", ["He finished 2.", "Then he left."]),
        # initials where sentencex's own rules cut after them; English's rules are left as they are
        ("fr", "Je vois M. Dupont et J.-P. Sartre. Ils parlent.", ["Je vois M. Dupont et J.-P. Sartre.", "Ils parlent."]),
        ("es", "Vi a J. García ayer. Llegó tarde.", ["Vi a J. García ayer.", "Llegó tarde."]),
        ("en", "I like plan B. It works. I saw J. Smith.", ["I like plan B.", "It works.", "I saw J. Smith."]),
    ],
)
def test_sentences_are_found(lang, text, expected):
    assert pieces(text, sentence_spans(text, lang)) == expected


def test_whitespace_and_line_breaks_between_sentences_are_kept():
    text = "  One man.\tTwo dogs!  \r\n\nThree cats?  "
    spans = sentence_spans(text, "en")
    assert pieces(text, spans) == ["One man.", "Two dogs!", "Three cats?"]
    assert reassemble(text, spans, ["1", "2", "3"]) == "  1\t2  \r\n\n3  "
    assert reassemble(text, spans, pieces(text, spans)) == text


def test_a_sentence_never_crosses_a_line_break():
    assert pieces("a man\nrides a bike.", sentence_spans("a man\nrides a bike.", "en")) == ["a man", "rides a bike."]


def test_blank_texts_have_no_sentences():
    assert sentence_spans("", "en") == [] and sentence_spans(" \n\t", "en") == [] and line_span("  ") == []
    assert line_span(" a. b. ") == [(1, 6)]


def test_a_language_without_rules_is_segmented_as_english():
    assert rules_for("en") == "en"
    assert len(sentence_spans("One man. Two dogs.", "zz-unknown")) == 2


def test_a_long_sentence_is_cut_at_clauses_first():
    text = "a b c d, e f g h; i j k l"
    spans = cut_long(text, (0, len(text)), lambda s: len(s.split()), 4)
    assert pieces(text, spans) == ["a b c d,", "e f g h;", "i j k l"]


def test_numbers_times_and_addresses_are_not_cut_at_their_marks():
    text = "revenue of 1,250,000 at 12:45 from https://example.com/a,b today"
    spans = cut_long(text, (0, len(text)), lambda s: len(s.split()), 4)
    kept = pieces(text, spans)
    assert " ".join(kept) == text  # cut at spaces only
    for whole in ("1,250,000", "12:45", "https://example.com/a,b"):
        assert any(whole in piece for piece in kept), kept
    cjk = "我们今天去公园，明天去学校；后天在家" * 3
    assert all(p.endswith(("，", "；")) for p in pieces(cjk, cut_long(cjk, (0, len(cjk)), len, 30))[:-1])


def test_without_clauses_at_spaces_and_without_spaces_anywhere():
    words = " ".join(["word"] * 50)
    spans = cut_long(words, (0, len(words)), lambda s: len(s.split()), 8)
    assert all(len(p.split()) <= 8 for p in pieces(words, spans))
    assert " ".join(pieces(words, spans)) == words
    cjk = "猫" * 1000
    spans = cut_long(cjk, (0, len(cjk)), len, 30)
    assert all(len(p) <= 30 for p in pieces(cjk, spans)) and "".join(pieces(cjk, spans)) == cjk


def test_a_short_sentence_is_left_whole():
    assert cut_long("a b, c", (0, 6), lambda s: len(s.split()), 3) == [(0, 6)]


def test_segment_tokens_below_one_is_refused_in_the_flags_words():
    from mt.decoding.options import DecodeOptions
    from mt.errors import ConfigError

    with pytest.raises(ConfigError, match="--segment-tokens 0"):
        DecodeOptions(segment_tokens=0)


def test_sentences_of_an_unspaced_text_get_a_space_between_spaced_translations():
    """Chinese and Japanese sentences have nothing between them: their English translations were glued
    ("I like cats.Do you like dogs?Yes!"), as were the halves of a sentence cut at "，"."""
    from mt.text.placement import Mapping

    text = "我喜欢猫。你喜欢狗吗？是的！"
    spans = sentence_spans(text, "zh")
    english = ["I like cats.", "Do you like dogs?", "Yes!"]
    assert len(spans) == 3 and reassemble(text, spans, english) == "I like cats. Do you like dogs? Yes!"
    assert reassemble(text, spans, ["猫が好き。", "犬が好き？", "はい！"]) == "猫が好き。犬が好き？はい！"  # unspaced both
    assert reassemble(text, spans, ["Ich mag Katzen.", "", "Ja!"]) == "Ich mag Katzen. Ja!"  # an empty piece
    for quoted in ("他说：“你好。”她笑了。", "我喜欢猫!你喜欢狗吗?"):  # a quote or an ASCII mark before the cut
        cut = sentence_spans(quoted, "zh")
        assert len(cut) == 2 and reassemble(quoted, cut, ["A.", "B."]) == "A. B.", (quoted, cut)
    spaced = "One. Two."
    assert reassemble(spaced, sentence_spans(spaced, "en"), ["Eins.", "Zwei."]) == "Eins. Zwei."  # as it was
    mapping = Mapping(text, spans, english, ["", "", ""])
    assert [mapping.output[a:b] for a, b in mapping.out] == english  # the pieces' output offsets agree


def test_a_long_word_cut_in_its_middle_gets_no_space():
    """A URL or an ID of a spaced text cut anywhere (no clause, no space) is put back whole."""
    text = "https://example.com/" + "a" * 60
    spans = cut_long(text, (0, len(text)), lambda piece: len(piece) // 2, 20)
    assert len(spans) > 1 and reassemble(text, spans, [text[a:b] for a, b in spans]) == text


@pytest.mark.parametrize("text, expected", [
    ("* A dog runs.", ["A dog runs."]),
    ("> > Thanks for the dog.", ["Thanks for the dog."]),
    ("  • An indented bullet.", ["An indented bullet."]),
    ("a) First item.", ["First item."]),
    ("# A heading", ["A heading"]),
    ("A. Smith went home.", ["A. Smith went home."]),  # an initial, not a list's letter
    ("-5 degrees today.", ["-5 degrees today."]),  # a sign, not a bullet
])
def test_a_lines_mark_stays_outside_its_first_sentence(text, expected):
    """Was: sent to the model with the text, which dropped the bullet or quote mark."""
    assert pieces(text, sentence_spans(text, "en")) == expected


@pytest.mark.parametrize("lang, text, expected", [
    ("de", "3. Oktober ist Feiertag.", ["3. Oktober ist Feiertag."]),  # a date, not a list's number
    ("en", "e. g. this works.", ["e. g. this works."]),
    ("en", "1) A man sits.", ["A man sits."]),
    # a word that starts sentences after an ordinal or an initial: the cut stands
    ("de", "Das Spiel endete am 3. Danach gingen wir heim.", ["Das Spiel endete am 3.", "Danach gingen wir heim."]),
    ("de", "Wir treffen uns am 3. Am 4. fahren wir.", ["Wir treffen uns am 3.", "Am 4. fahren wir."]),
    ("fr", "Il vit au point A. Elle vit au point B.", ["Il vit au point A.", "Elle vit au point B."]),
    ("fr", "Par J. A. Dupont. Oui.", ["Par J. A. Dupont.", "Oui."]),  # an initial after an initial
])
def test_marks_and_joins_leave_dates_abbreviations_and_sentence_starts_alone(lang, text, expected):
    assert pieces(text, sentence_spans(text, lang)) == expected


def test_web_and_mail_addresses_are_found_without_the_punctuation_after_them():
    from mt.text.sentences import address_spans

    cases = {
        "See https://github.com/org/repo for the source.": ["https://github.com/org/repo"],
        "Write to support@example.com or visit www.example.org today.": ["support@example.com", "www.example.org"],
        "(see https://en.wikipedia.org/wiki/Foo_(bar)).": ["https://en.wikipedia.org/wiki/Foo_(bar)"],
        "Go to https://x.org/a?b=1&c=2.": ["https://x.org/a?b=1&c=2"],
        "请访问https://x.cn获取": ["https://x.cn"],
        "Mail a.b+c@mail.example.co.uk!": ["a.b+c@mail.example.co.uk"],
        "Version 1.2.3, foo@bar, 12:45 and e.g. this.": [],
        # the words of a script written without spaces beside it are not the address's
        "请发邮件至info@example.com。": ["info@example.com"],
        "자세한 내용은 https://example.com에서 확인": ["https://example.com"],
        # the whole of what follows a mail address without a space: git's path, mailto's query
        "Clone git@github.com:org/repo.git now.": ["git@github.com:org/repo.git"],
        "Write to mailto:john@example.com?subject=Hi today.": ["mailto:john@example.com?subject=Hi"],
        "Mail müller@firma.de now, or josé@x.org.": ["müller@firma.de", "josé@x.org"],
        "이메일a@b.com로": ["a@b.com"],
        # a bare domain, by its top-level domain: not a file name, nor sentences without a space between
        "Visit example.com or heise.de/news.": ["example.com", "heise.de/news"],
        "Go to news.müller-bau.de, or x.com:8080?q=1#top!": ["news.müller-bau.de", "x.com:8080?q=1#top"],
        "请访问baidu.com获取": ["baidu.com"],
        "See README.md and setup.py, Makefile.in, it was fine.It rained.": [],
        # a top-level domain that is a word too, alone after one label: abbreviations, sentences run together
        "W Polsce są m.in. Kraków, p.es. Roma, n.ro 5, el fin.es bueno, gut.es regnete, heise.de": [],
    }
    for text, expected in cases.items():
        assert [text[a:b] for a, b in address_spans(text)] == expected, text
    import time

    started = time.perf_counter()  # the mail pattern backtracked: 18 s for 80,000 characters
    assert address_spans("a-" * 40_000) == [] and time.perf_counter() - started < 1
    started = time.perf_counter()  # and the punctuation after one: 1.7 s for 20,000 characters
    assert address_spans("see https://x.org/" + "." * 19_970 + "a") and time.perf_counter() - started < 1


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZw.@:/-_ 1é東ß(")), max_size=30))
def test_the_quick_check_for_addresses_never_misses_one(text):
    """address_spans answers a text MAYBE_ADDRESS does not match without the full pattern: every
    address must hold what it looks for."""
    from mt.text.sentences import ADDRESSES, MAYBE_ADDRESS

    if ADDRESSES.search(text):
        assert MAYBE_ADDRESS.search(text), text
    for found in ("www.x.org", "a@b.cd", "http://localhost", "example.com", "heise.de/news", "WWW.X.ORG"):
        assert MAYBE_ADDRESS.search(found)
