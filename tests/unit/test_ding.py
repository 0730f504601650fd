"""mt.data.ding: the Ding dictionary's parser, its held-out valid/test split, its parts and its cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import DING_SAMPLE, write, write_big_ding

from mt.config.schema import DataConfig
from mt.config.sources import SPLITS
from mt.data.corpus import load_split
from mt.data.ding import HELD_OUT, clear_cache, ding_part, held_out_splits, read_ding
from mt.errors import MtError

SENTENCES = [
    ("Männer haben eine geringere Lebenserwartung als Frauen.", "Man have a shorter lifespan than women."),
    ("Er kann nichts dafür. Er ist von Natur aus so.", "He can’t help it. It’s in his nature."),
    ("Sie leugnete rundweg.", "She flatly denied."),
    ("„Das müsste leicht zu eruieren sein.“", "'It should be easy to find out.'"),
    ("Nehmen Sie irgendwelche Medikamente?", "Are you taking any medication?"),  # optional words kept
    ("Es hat geschneit, aber der Schnee ist nicht liegengeblieben.", "We had some snow, but it didn’t settle."),
    ("Männer haben eine geringere Lebenserwartung als Frauen.", "Men have a shorter life expectancy than women."),
]
PHRASES = [
    ("Aalleiter", "eel ladder"),
    ("Aalleitern", "eel ladders"),
    ("Aalmolche", "amphiuma salamanders"),
    ("Gütertrennung", "separation of property"),
    # ';' after the German sentence: synonyms, so not a sentence pair; first synonym of each side.
    ("Die Ehegatten leben in Gütertrennung.", "The spouses are living under the regime of separation of property."),
    ("Lebenserwartung", "lifespan"),
    ("nichts dafürkönnen", "cannot help it"),
    ("rundweg", "flatly"),
    ("etw. rundweg leugnen", "to deny sth. flatly"),
    ("Ach ja?", "Oh yes?"),
    ("Medikament", "medicine"),
    ("Schnee", "snow"),
    ("Kontonummer", "account number"),
    ("Kontonummern", "account numbers"),
    ("Aalfang", "eel fishing"),  # once: exact duplicates go
    ("Aalsuppe", "eel soup"),  # 3 German variants, 2 English: only the head pair is trusted
    ("Lebenserwartung", "life expectancy"),
    ("Lebensdauer", "lifespan"),
    ("leugnen", "to deny"),
    ("Sie leugnete rundweg.", "She denied it"),  # a held-out German sentence: never in train
]


@pytest.fixture
def ding_file(tmp_path) -> Path:
    return write(tmp_path / "de-en", DING_SAMPLE)


@pytest.fixture
def big_ding(tmp_path) -> Path:
    return write_big_ding(tmp_path / "big-de-en")


def test_ding_sentences_phrases_and_annotations(ding_file):
    sentences, phrases = read_ding(ding_file)
    assert sentences == SENTENCES
    assert phrases == PHRASES


def test_ding_line_without_separator_names_file_and_line(tmp_path):
    path = write(tmp_path / "broken", "# header\nAal {m} :: eel\nAal {m} = eel\n")
    with pytest.raises(MtError, match=r"broken:3: expected one 'German :: English' separator"):
        read_ding(path)


def test_ding_split_takes_every_sentence(ding_file):
    # 6 distinct German sentences, all held out: the second translation of "Männer ..." may not stay
    # in train, and neither may the phrase whose English side is a held-out sentence's.
    parts = held_out_splits(ding_file, 3, 3)
    valid, test = parts["valid"], parts["test"]
    assert len(valid) == len(test) == 3
    held_de = {de for de, _ in valid} | {de for de, _ in test}
    assert held_de == {de for de, _ in SENTENCES}
    assert parts["train"] == PHRASES[:-1]  # no sentence left; no phrase with a held-out side
    assert parts["sentences"] == []  # train without the phrase pairs (was data.ding_phrases: false)


def test_ding_split_is_deterministic_disjoint_and_order_free(tmp_path, ding_file):
    parts = held_out_splits(ding_file, 2, 2)
    pairs = {split: set(parts[split]) for split in SPLITS}
    assert len(pairs["valid"]) == len(pairs["test"]) == 2
    held = pairs["valid"] | pairs["test"]
    held_sides = {de for de, _ in held} | {en for _, en in held}
    assert len(held_sides) == 8  # valid and test share no side
    assert not any(de in held_sides or en in held_sides for de, en in pairs["train"])
    for pair in set(SENTENCES + PHRASES) - held:  # everything else trains unless it shares a side
        assert (pair in pairs["train"]) == (pair[0] not in held_sides and pair[1] not in held_sides)
    # "sentences" is train's sentence pairs only, in the same order.
    assert parts["sentences"] == [pair for pair in parts["train"] if pair in SENTENCES]
    assert parts["sentences"]
    # "phrases" is the rest of train, in the same order.
    assert parts["phrases"] == [pair for pair in parts["train"] if pair not in SENTENCES]
    assert parts["sentences"] + parts["phrases"] == parts["train"]

    # The choice hangs on a fixed hash of the German side, not on the process or the file order.
    clear_cache()
    assert held_out_splits(ding_file, 2, 2)["valid"] == parts["valid"]
    header, body = DING_SAMPLE.split("\n", 2)[:2], DING_SAMPLE.split("\n", 2)[2].splitlines()
    reversed_file = write(tmp_path / "reversed", "\n".join(header + body[::-1]) + "\n")
    assert {de for de, _ in held_out_splits(reversed_file, 2, 2)["valid"]} == {de for de, _ in pairs["valid"]}


def test_ding_sizes_and_missing_file(ding_file):
    with pytest.raises(MtError, match="only 7 sentence pairs"):
        held_out_splits(ding_file, 5, 5)
    with pytest.raises(MtError, match="only 7 sentence pairs"):
        held_out_splits(ding_file)  # HELD_OUT each: the sample is far too small
    no_test = held_out_splits(ding_file, 1, 0)
    assert len(no_test["valid"]) == 1 and no_test["test"] == []
    with pytest.raises(MtError, match="no such file") as err:
        read_ding(ding_file.parent / "missing")
    assert "ding:FILE" in str(err.value)  # the new way to name the file
    with pytest.raises(MtError, match="no such file"):
        held_out_splits(ding_file.parent / "missing")


def test_ding_parts_and_directions(big_ding):
    parts = held_out_splits(big_ding)
    assert len(parts["valid"]) == len(parts["test"]) == HELD_OUT
    assert len(parts["sentences"]) == 1200 - 2 * HELD_OUT
    assert len(parts["train"]) == 1200 - 2 * HELD_OUT + 30
    assert len(parts["phrases"]) == 30
    for part in ("train", "sentences", "phrases", "valid", "test"):
        de, en = ding_part(big_ding, part, ("de", "en"))
        assert list(zip(de, en)) == parts[part]
        assert ding_part(big_ding, part, ("en", "de")) == (en, de)
    assert all(de.startswith("Das ist Satz") and en.startswith("This is sentence") for de, en in parts["valid"])


def test_ding_cache_follows_mtime(ding_file):
    assert len(read_ding(ding_file)[0]) == 7
    read_ding(ding_file)[0].clear()  # callers get copies; the cache is not theirs to change
    assert len(read_ding(ding_file)[0]) == 7
    # 6 distinct German sides: test gets what valid leaves, 3 of 4 (held-out sides never repeat).
    assert len(held_out_splits(ding_file, 3, 4)["test"]) == 3
    extra = "Regen {m} | Es regnet seit Tagen ohne Pause. :: rain | It has been raining for days.\n"
    stat = ding_file.stat()
    write(ding_file, DING_SAMPLE + extra)
    os.utime(ding_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert len(read_ding(ding_file)[0]) == 8
    # The held-out split follows too (same sizes, so the same cache key but for the mtime): 7 sides now.
    assert len(held_out_splits(ding_file, 3, 4)["test"]) == 4



def test_held_out_splits_callers_get_copies(ding_file):
    held_out_splits(ding_file, 3, 3)["train"].clear()
    assert held_out_splits(ding_file, 3, 3)["train"] == PHRASES[:-1]

def test_clear_cache_forgets_a_file_changed_under_the_same_mtime(ding_file):
    assert len(read_ding(ding_file)[0]) == 7
    assert len(held_out_splits(ding_file, 3, 3)["valid"]) == 3
    stat = ding_file.stat()
    write(ding_file, "Regen {m} | Es regnet seit Tagen ohne Pause. :: rain | It has been raining for days.\n")
    os.utime(ding_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime: the cache cannot tell
    assert len(read_ding(ding_file)[0]) == 7
    clear_cache()
    assert read_ding(ding_file) == ([("Es regnet seit Tagen ohne Pause.", "It has been raining for days.")],
                                    [("Regen", "rain")])
    with pytest.raises(MtError, match="has only 1 sentence pair"):
        held_out_splits(ding_file, 3, 3)


REAL_DING = Path("/usr/share/trans/de-en")


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DING.exists(), reason="Debian's trans-de-en is not installed")
def test_real_ding_counts():
    sentences, phrases = read_ding(REAL_DING)
    assert 15_000 <= len(sentences) <= 21_000  # 18,258 in the 2023-01-30 release
    assert 330_000 <= len(phrases) <= 430_000  # 370,114 in the 2023-01-30 release
    data = DataConfig(train=["ding"], valid=["ding"], test=["ding"])  # a bare `ding` reads this file
    assert {source.paths[0] for split in SPLITS for source in data.sources(split)} == {str(REAL_DING)}
    valid, test = load_split(data.sources("valid")), load_split(data.sources("test"))
    assert len(valid[0]) == HELD_OUT and len(test[0]) == HELD_OUT
    assert not set(valid[0]) & set(test[0])
    train_de, _ = load_split(data.sources("train"))
    assert len(train_de) > 300_000
    assert not set(train_de) & (set(valid[0]) | set(test[0]))
