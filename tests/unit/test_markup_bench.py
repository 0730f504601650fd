"""The markup benchmark's pure helpers (bench/markup.py) without a model or an aligner: the tagged
fragments, reading outputs back, the MinT-style fuzzy match, symmetrising and the gold spans."""

from __future__ import annotations

import random

from bench.markup import Fragment, fuzzy, gold, read, symmetrise, tagged, with_tags, words_in


def test_tagged_fragments_read_back_as_their_sentence_and_elements():
    rng = random.Random(1)
    for text in ["A man in an orange hat starring at something.", "Two dogs & a cat <run> fast, then stop.", "One"]:
        for _ in range(20):
            fragment = tagged(text, rng)
            back = read(fragment.markup)
            assert back.text == text and back.tags == fragment.tags  # in document order, a parent first
            assert 1 <= len(fragment.tags) <= 2


def test_an_output_that_is_not_well_formed_has_no_elements_but_its_text():
    back = read("<b>a <i>b</b> c</i>")
    assert back.tags is None and back.text.split() == ["a", "b", "c"]


def test_with_tags_nests_equal_spans_in_order_and_escapes():
    text = "x < y & z"
    out = with_tags(text, [("b", (), 0, len(text)), ("a", (("href", 'u"v'),), 0, len(text)), ("i", (), 4, 5)])
    assert out == '<b><a href="u&quot;v">x &lt; <i>y</i> &amp; z</a></b>'


def test_fuzzy_goes_around_the_nearest_words_else_around_the_whole_translation():
    text = "A man in an orange hat."
    fragment = Fragment(text, [("b", (), 12, 22)], [None], "")
    translation = "Ein Mann mit einem orangen Hut."
    assert fuzzy(fragment, translation, ["Orangener Hut."]) == ("Ein Mann mit einem <b>orangen Hut</b>.", 0)
    assert fuzzy(fragment, translation, ["Ein Baum steht."]) == (f"<b>{translation}</b>", 1)


def test_symmetrising_grows_the_intersection_by_neighbours_in_the_union():
    forward, reverse = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)}
    assert symmetrise(forward, reverse, "intersection") == {(0, 0), (1, 1)}
    assert symmetrise(forward, reverse, "grow-diag-final-and") == {(0, 0), (1, 1), (2, 1), (2, 2)}


def test_the_gold_is_the_hull_of_the_aligned_words_punctuation_left_out():
    source, target = "a busy street .", "eine Straße , und Straße"
    tag = ("b", (), 2, 6)  # busy
    assert gold(source, tag, target, {(0, 0), (1, 1), (1, 4), (2, 3)}) == {1, 3, 4}  # not the comma (2)
    assert gold(source, tag, target, {(0, 0), (2, 3)}) == set()  # aligned to nothing: left out
    assert words_in(target, 5, 12) == {1}  # Straße, and the space before it
