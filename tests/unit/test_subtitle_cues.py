"""How subtitle cues are grouped, cut back at their markers and wrapped (mt.documents.cues), with units
that give each fragment back as it came (a translation that moves nothing) or a chosen translation."""

from __future__ import annotations

from mt.documents.cues import Cue, Tag, grouped, spread, translate_cues, wrap


def same(texts: list[str], fmt: str = "text") -> list[str]:
    """Units that translate nothing: each text or fragment back as it is."""
    return list(texts)


def cue(text: str, start: float, end: float | None = None) -> Cue:
    return Cue(text, start, start + 1 if end is None else end)


def test_cues_are_grouped_until_a_sentence_ends_a_gap_or_five_cues():
    cues = [
        cue("Ein Mann", 0),
        cue("fährt Rad.", 1.1),  # ends a sentence
        cue("Eine Frau", 3),
        cue("läuft", 6.5),  # 2.5 s after the cue before
        cue("♪", 7.6),  # no letter: in no group
        cue("- Ja?\n- Nein.", 8),  # a dialogue: alone
        *[cue(f"wort{i}", 9 + i) for i in range(7)],
    ]
    assert grouped(cues, vtt=False) == [[0, 1], [2], [3], [5], [6, 7, 8, 9, 10], [11, 12]]


def test_a_translation_that_moves_nothing_gives_every_cue_back_as_it_was():
    texts = [
        "Ein <i>Mann</i> fährt",
        "ein <b>rotes</b> Rad",
        "auf der Straße.",
        "<i>Ganz kursiv.</i>",
        "- Ja?\n- <i>Nein.</i>",
        '{\\an8}Oben <font color="#ff0000">rot</font>.',
    ]
    cues = [cue(t, i) for i, t in enumerate(texts)]
    assert translate_cues(cues, same, vtt=False) == texts
    vtt = ["<v Roger>Hallo &amp; <c.loud>tschüss</c> <00:00:03.000>bald", "<ruby>漢<rt>kan</rt></ruby> Zeichen."]
    assert translate_cues([cue(t, i) for i, t in enumerate(vtt)], same, vtt=True) == vtt


def test_a_cue_left_without_a_word_takes_words_by_the_source_proportions():
    tags: list[Tag] = []
    tokens = [("text", "one two three four five six"), ("mark", 1), ("mark", 2)]  # both markers at the end
    parts = spread(tokens, tags, [10, 10, 10])
    assert [" ".join(v for _, v in part).split() for part in parts] == [
        ["one", "two"],
        ["three", "four"],
        ["five", "six"],
    ]
    few = spread([("text", "one two"), ("mark", 1), ("mark", 2)], tags, [1, 1, 1])
    assert [" ".join(v for _, v in part).split() for part in few] == [["one"], ["two"], []]


def test_an_element_cut_by_a_marker_stays_once_in_the_cue_it_came_from():
    tags = [Tag("<i>", "i", "</i>", cue=1)]
    tokens = [("text", "a "), ("open", 0), ("text", "b "), ("mark", 1), ("text", "c"), ("close", 0), ("text", " d")]
    first, second = spread(tokens, tags, [2, 2])
    assert first == [("text", "a "), ("text", "b ")]
    assert second == [("open", 0), ("text", "c"), ("close", 0), ("text", " d")]


def test_lines_are_balanced_at_most_42_characters_on_at_most_the_lines_allowed():
    words = [(w, len(w), False) for w in ("word " * 12).split()]  # 59 characters (no word glued to the one before)
    assert wrap(words, 42, 2) == ["word word word word word word", "word word word word word word"]
    assert wrap(words[:3], 42, 2) == ["word word word"]
    lines = wrap(words * 2, 42, 2)  # 119 characters: two lines wider than 42 rather than three
    assert len(lines) == 2 and max(len(line) for line in lines) <= 60
    assert wrap([("<i>word</i>", 4, False)] * 8, 42, 2) == [" ".join(["<i>word</i>"] * 8)]  # tags are not counted


def test_speaker_turns_sounds_and_songs_keep_their_lines_and_marks():
    """A second speaker's line (a dash on the second line only, a name), a sound on a line of its own
    and a song's lines were joined into one and wrapped again: the turn fell mid-line, two speakers on
    one line; a song's notes went to the model, which dropped them; "5 < 6 and 7 > 2" was a tag."""
    texts = [
        "Where is the dog?\n- The dog is in the garden.",
        "JOHN: Hello, everyone.\nMARY: Hi, John.",
        "[DOOR SLAMS]\nWho is there?",
        "♪ Somewhere over the rainbow ♪\n♪ Way up high ♪",
        "5 < 6 and 7 > 2.",
    ]
    cues = [cue(t, 3 * i) for i, t in enumerate(texts)]
    assert translate_cues(cues, same, vtt=False) == texts
    seen = []

    def upper(texts: list[str], fmt: str = "text") -> list[str]:  # a "translation": what the model was given
        seen.extend(texts)
        return [t.upper() for t in texts]

    out = translate_cues([cue("♪ The house is big ♪", 0), cue("5 < 6 and 7 > 2.", 3)], upper, vtt=False)
    assert out == ["♪ THE HOUSE IS BIG ♪", "5 < 6 AND 7 > 2."] and "The house is big" in seen
