"""mt.text.translate.as_source_ends: a full stop the model added where the source piece ends in none
(a heading, a label, a clause cut off a long sentence) is taken off; every other ending is left."""

from __future__ import annotations

import pytest

from mt.decoding.options import DecodeOptions
from mt.text.translate import as_source_ends, join


@pytest.mark.parametrize(
    "source, translation, expected",
    [
        ("A dog in the park", "Ein Hund im Park.", "Ein Hund im Park"),
        ("Save file", "Datei speichern. ", "Datei speichern "),  # the spaces after it stay
        ("Chapter 3", "Kapitel 3 .", "Kapitel 3"),
        ("他来了", "Er kam。", "Er kam"),
        ("A dog runs.", "Ein Hund rennt.", "Ein Hund rennt."),
        ("Where is it?", "Wo ist es.", "Wo ist es."),  # the source ends a sentence: what the model wrote
        ('"He left."', "„Er ging.“", "„Er ging.“"),
        ("(A dog sleeps.)", "(Ein Hund schläft.)", "(Ein Hund schläft.)"),
        ('He said "yes"', "Er sagte „ja“.", "Er sagte „ja“"),
        ("To be continued", "Fortsetzung folgt...", "Fortsetzung folgt..."),  # an ellipsis stays
        ("Next", "Weiter!", "Weiter!"),
        ("", ".", "."),
        ("Wow‽", "Wow.", "Wow."),
        # the target's own stop: an ordinal, a Roman numeral, an abbreviation
        ("He finished 3rd", "Er wurde 3.", "Er wurde 3."),
        ("Louis XIV", "Ludwig XIV.", "Ludwig XIV."),
        ("apples, pears etc", "Äpfel, Birnen usw.", "Äpfel, Birnen usw."),
        ("in the US", "in den U.S.", "in den U.S."),
        # and not where the source marks no ordinal, numeral or abbreviation
        ("Chapter 3", "Kapitel 3.", "Kapitel 3"),
        ("He is here", "Er ist da.", "Er ist da"),
        ("Abmelden", "Log out.", "Log out"),
        ("Version 2.0", "Version 2.0.", "Version 2.0"),
        ("DVD", "DVD.", "DVD"),
    ],
)
def test_a_full_stop_the_source_lacks_is_taken_off(source, translation, expected):
    assert as_source_ends(source, (translation, -1.5)) == (expected, -1.5)


def test_a_stop_of_its_own_takes_its_alignment_links_with_it():
    assert as_source_ends("Chapter 3", ("Kapitel 3 .", -1.0, "0-0 1-1 1-2")) == ("Kapitel 3", -1.0, "0-0 1-1")
    assert as_source_ends("Our Park", ("Unser Park.", -1.0, "0-0 1-1")) == ("Unser Park", -1.0, "0-0 1-1")


def test_a_joined_line_ends_each_piece_as_its_source():
    text = "A dog runs. A cat sleeps"
    plans = [[(0, 11), (12, 24)]]
    found = [[("Ein Hund rennt.", -1.0)], [("Eine Katze schläft.", -2.0)]]
    assert join([text], plans, found, None, DecodeOptions()) == [[("Ein Hund rennt. Eine Katze schläft", -1.5)]]


def test_an_nbest_list_keeps_one_of_the_entries_that_ending_makes_equal():
    from mt.text.translate import ended_as

    hyps = [("Ein Hund.", -1.0), ("Ein Hund", -1.5), ("Der Hund.", -2.0)]
    assert ended_as("A dog", hyps) == [("Ein Hund", -1.0), ("Der Hund", -2.0)]
