"""mt.data.corpus on tiny real files: sources read as chunks, decoding and cleaning, whole splits
(load_split), several sources in one split (Ding among them), the tokenizer's bounded sample."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import DING_SAMPLE, write_big_ding

from mt.config.schema import DataConfig
from mt.config.sources import parse_source
from mt.data import corpus
from mt.data.corpus import load_split
from mt.data.ding import clear_cache, ding_part
from mt.errors import MtError


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------------------------
# Files


def test_explicit_files_and_prefix(tmp_path):
    write(tmp_path / "train.de", "a\nb\n")
    write(tmp_path / "train.en", "A\nB\n")
    with gzip.open(tmp_path / "valid.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("c\n")
    write(tmp_path / "valid.en", "C\n")
    data = DataConfig(train=[f"files:{tmp_path / 'train.de'}|{tmp_path / 'train.en'}"],
                      valid=[f"files:{tmp_path / 'valid'}"])
    assert load_split(data.sources("train")) == (["a", "b"], ["A", "B"])
    assert load_split(data.sources("valid")) == (["c"], ["C"])  # PREFIX.de.gz found when PREFIX.de is absent
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data.sources("valid")) == (["C"], ["c"])
    assert load_split(data.sources("test")) == ([], [])  # an unconfigured split has no sources


def test_describe_names_files_and_datasets(tmp_path):
    data = DataConfig(train=["files:c/a", "files:c/a.de|c/a.en", "tsv:b.tsv:en-de*2", "hf:wmt14:de-en", "jsonl:j.jsonl"])
    assert corpus.describe(data.sources("train")) == "c/a.de, c/a.en, b.tsv, hf:wmt14:de-en, j.jsonl"
    assert corpus.describe([]) == ""


def test_every_file_loader_plain_and_gzip(tmp_path):
    write(tmp_path / "a.de", "eins\nzwei\n")
    with gzip.open(tmp_path / "a.en.gz", "wb") as handle:  # PREFIX.en.gz when PREFIX.en is absent
        handle.write(b"one\ntwo\n")
    with gzip.open(tmp_path / "b.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("three\tdrei\nfour\tvier\n")  # columns named by the spec: en, de
    write(tmp_path / "c.tsv", "fünf\tfive\r\n")
    write_jsonl(tmp_path / "d.jsonl", [{"translation": {"de": "sechs", "en": "six"}}, {"en": "seven", "de": "sieben", "id": 7}])
    specs = [f"files:{tmp_path / 'a'}", f"tsv:{tmp_path / 'b.tsv.gz'}:en-de*2", f"tsv:{tmp_path / 'c.tsv'}",
             f"jsonl:{tmp_path / 'd.jsonl'}"]
    data = DataConfig(train=specs)
    assert [(s.kind, s.weight) for s in data.sources("train")] == [("files", 1), ("tsv", 2), ("tsv", 1), ("jsonl", 1)]
    de = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben"]
    en = ["one", "two", "three", "four", "five", "six", "seven"]
    assert load_split(data.sources("train")) == (de, en)  # raw lines, every source in order, weights ignored
    data.src_lang, data.tgt_lang = "en", "de"
    data.train = [spec for spec in specs if "c.tsv" not in spec]  # its columns are SOURCE<TAB>TARGET
    assert load_split(data.sources("train")) == (en[:4] + en[5:], de[:4] + de[5:])


def test_chunks_are_bounded_and_numbered(tmp_path):
    write(tmp_path / "n.de", "".join(f"d{i}\n" for i in range(5)))
    write(tmp_path / "n.en", "".join(f"e{i}\n" for i in range(5)))
    write(tmp_path / "n.tsv", "".join(f"d{i}\te{i}\n" for i in range(5)))
    for spec in (f"files:{tmp_path / 'n'}", f"tsv:{tmp_path / 'n.tsv'}"):
        read = list(corpus.chunks(parse_source(spec, "train", ("de", "en")), 2))
        assert [(chunk.start, len(chunk)) for chunk in read] == [(0, 2), (2, 2), (4, 1)]
        decoded = [corpus.decode_chunk(chunk, None) for chunk in read]
        assert sum((d.src for d in decoded), []) == [f"d{i}" for i in range(5)]
        assert sum((d.tgt for d in decoded), []) == [f"e{i}" for i in range(5)]
        assert read[2].where(0) == f"{read[2].origin[0]}:5"  # 1-based line numbers across chunks


def test_records_that_break_are_errors_when_strict_and_counted_when_cleaning(tmp_path):
    write(tmp_path / "x.tsv", "gut\tgood\nnur eine Spalte\nzu\tviele\tSpalten\n")
    write(tmp_path / "y.jsonl", '{"de": "ja", "en": "yes"}\n[1, 2]\n{"de": "nein"}\n{"de": 5, "en": "five"}\nnot json\n')
    data = DataConfig(train=[f"tsv:{tmp_path / 'x.tsv'}", f"jsonl:{tmp_path / 'y.jsonl'}"])
    with pytest.raises(MtError, match=r"x\.tsv:2: expected 2 tab-separated fields, found 1"):
        load_split(data.sources("train"))
    tsv, jsonl = (next(corpus.chunks(source)) for source in data.sources("train"))
    decoded = corpus.decode_chunk(jsonl, data.cleaning("train"))
    assert (decoded.src, decoded.tgt, decoded.dropped["malformed"]) == (["ja"], ["yes"], 4)
    assert decoded.examples["malformed"] == [
        f"{tmp_path / 'y.jsonl'}:2: not a JSON object", f"{tmp_path / 'y.jsonl'}:3: no language key 'en'",
        f"{tmp_path / 'y.jsonl'}:4: language key 'de' holds int, expected text", f"{tmp_path / 'y.jsonl'}:5: not a JSON object"]
    assert corpus.decode_chunk(tsv, "nfc").dropped["malformed"] == 2
    # null is an empty side, as through hf: (was "no language key 'de'", the key being there)
    write(tmp_path / "n.jsonl", '{"de": null, "en": "five"}\n{"de": "sechs", "en": "six"}\n')
    [chunk] = corpus.chunks(DataConfig(train=[f"jsonl:{tmp_path / 'n.jsonl'}"]).sources("train")[0])
    decoded = corpus.decode_chunk(chunk, "nfc")
    assert (decoded.src, decoded.dropped["empty"], decoded.dropped["malformed"]) == (["sechs"], 1, 0)
    # a record after a byte-order mark (a file saved with one, joined with `cat`): was "not a JSON object"
    write(tmp_path / "b.jsonl", '{"de": "eins", "en": "one"}\n\ufeff{"de": "zwei", "en": "two"}\n')
    assert load_split(DataConfig(valid=[f"jsonl:{tmp_path / 'b.jsonl'}"]).sources("valid")) == (
        ["eins", "zwei"], ["one", "two"])


def test_a_jsonl_record_nested_too_deep_or_with_a_lone_surrogate_is_a_bad_pair_not_a_crash(tmp_path):
    """Were a RecursionError traceback, and sentencepiece's "Unable to cast Python instance"."""
    lines = ['{"de": "ja", "en": "yes"}', "[" * 100000, '{"de": "haus \\ud800 rot", "en": "house red"}']
    write(tmp_path / "z.jsonl", "\n".join(lines) + "\n")
    data = DataConfig(train=[f"jsonl:{tmp_path / 'z.jsonl'}"])
    [chunk] = corpus.chunks(data.sources("train")[0])
    decoded = corpus.decode_chunk(chunk, data.cleaning("train"))
    assert (decoded.src, decoded.dropped["malformed"], decoded.dropped["invalid_utf8"]) == (["ja"], 1, 1)
    assert decoded.examples["invalid_utf8"] == [
        f"{tmp_path / 'z.jsonl'}:3: not valid Unicode (an unpaired surrogate at character 6)"]
    with pytest.raises(MtError, match=r"z\.jsonl:2: not a JSON object"):  # valid/test: strict
        load_split(data.sources("train"))


def test_clean_text_steps():
    fixed = {"control": 0, "unicode": 0, "whitespace": 0}
    assert corpus.clean_text(" a\x00b \t c\u00a0 ", "none", fixed) == "a b c"  # NBSP is whitespace to str.split
    assert corpus.clean_text("Ma\u0308dchen", "nfc", fixed) == "Mädchen"
    assert corpus.clean_text("Ｆｕｌｌ ﬁ", "nfc", fixed) == "Ｆｕｌｌ ﬁ"  # compatibility forms: NFKC only
    assert corpus.clean_text("Ｆｕｌｌ ﬁ", "nfkc", fixed) == "Full fi"
    assert fixed == {"control": 1, "unicode": 2, "whitespace": 1}
    # a byte-order mark inside a file (files joined with cat): was kept, an invisible character of the text
    assert corpus.clean_text("\ufeffb", "nfc", fixed) == "b" and fixed["control"] == 2
    assert corpus.clean_text("foo\ufeffbar", "nfc", fixed) == "foobar"  # within a word: deleted, no space


def test_cleaning_drops_empty_sides_and_strict_keeps_text_as_it_is(tmp_path):
    write(tmp_path / "e.de", "  Ma\u0308dchen \nleer\n\x00\n")
    write(tmp_path / "e.en", "girl\n \t\nnull\n")
    [chunk] = corpus.chunks(DataConfig(train=[f"files:{tmp_path / 'e'}"]).sources("train")[0])
    cleaned = corpus.decode_chunk(chunk, "nfc")
    assert (cleaned.src, cleaned.tgt, cleaned.kept) == (["Mädchen"], ["girl"], [0])
    assert cleaned.dropped == {"invalid_utf8": 0, "malformed": 0, "empty": 2}
    strict = corpus.decode_chunk(chunk, None)
    assert strict.src == ["  Ma\u0308dchen ", "leer", "\x00"] and strict.tgt == ["girl", " \t", "null"]


def test_invalid_utf8_skipped_with_its_line_when_cleaning(tmp_path):
    write(tmp_path / "t.de", b"gut\nschlecht \xc3\x28\nauch gut\n")
    write(tmp_path / "t.en", "good\nbad\nalso good\n")
    data = DataConfig(train=[f"files:{tmp_path / 't'}"])
    [chunk] = corpus.chunks(data.sources("train")[0])
    decoded = corpus.decode_chunk(chunk, data.cleaning("train"))
    assert decoded.src == ["gut", "auch gut"] and decoded.kept == [0, 2]
    assert decoded.examples["invalid_utf8"] == [f"{tmp_path / 't.de'}:2: not valid UTF-8 (byte 0xc3)"]
    with pytest.raises(MtError, match=r"t\.de:2: not valid UTF-8"):
        load_split(data.sources("train"))  # strict: the raw lines, for scoring


@pytest.mark.parametrize("gz", [False, True])
def test_streamed_files_with_mismatched_counts_name_both(tmp_path, gz):
    # Plain files are counted before reading; gzip ones are found out when one of them ends first.
    write(tmp_path / "m.de", "\n".join(str(i) for i in range(50_001)) + "\n")
    with (gzip.open(tmp_path / "m.en.gz", "wt") if gz else open(tmp_path / "m.en", "w")) as handle:
        handle.write("\n".join(str(i) for i in range(50_003)) + "\n")
    data = DataConfig(train=[f"files:{tmp_path / 'm'}"])
    en = tmp_path / ("m.en.gz" if gz else "m.en")
    with pytest.raises(MtError, match=rf"{tmp_path / 'm.de'} has 50001 lines but {en} has 50003") as err:
        list(corpus.chunks(data.sources("train")[0]))
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# Ding among the sources


@pytest.fixture
def big_ding(tmp_path) -> Path:
    clear_cache()
    yield write_big_ding(tmp_path / "de-en")
    clear_cache()


def test_ding_as_one_of_several_sources(tmp_path, big_ding):
    write(tmp_path / "extra.tsv", "Guten Morgen.\tGood morning.\n")
    data = DataConfig(train=[f"ding:{big_ding}", f"tsv:{tmp_path / 'extra.tsv'}"], valid=[f"ding:{big_ding}"],
                      test=[f"ding:{big_ding}"])
    de, en = load_split(data.sources("train"))
    assert (de[:-1], en[:-1]) == ding_part(big_ding, "train", ("de", "en"))  # the held-out pairs stay out
    assert (de[-1], en[-1]) == ("Guten Morgen.", "Good morning.")
    assert len(de) == 1200 - 2 * 500 + 30 + 1  # 200 sentences left, the 30 phrases and the extra pair
    valid, test = load_split(data.sources("valid")), load_split(data.sources("test"))
    assert valid == ding_part(big_ding, "valid", ("de", "en")) and len(valid[0]) == len(test[0]) == 500
    assert not (set(valid[0]) | set(test[0])) & set(de)
    data.train = [f"ding:{big_ding}@sentences"]  # was data.ding_phrases: false
    assert load_split(data.sources("train")) == (de[:200], en[:200])
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data.sources("valid")) == (valid[1], valid[0])
    data.test = [f"ding:{big_ding}@valid"]  # a part named in another split's list
    assert load_split(data.sources("test")) == (valid[1], valid[0])


def test_ding_source_errors(tmp_path):
    small = write(tmp_path / "small", DING_SAMPLE)  # 7 sentence pairs: fewer than valid and test hold out
    with pytest.raises(MtError, match="500 valid \\+ 500 test pairs are held out, but the dictionary has only 7"):
        load_split(DataConfig(valid=[f"ding:{small}"]).sources("valid"))
    with pytest.raises(MtError, match="no such file.*ding:FILE"):
        list(corpus.chunks(DataConfig(train=[f"ding:{tmp_path / 'missing'}"]).sources("train")[0]))


# ---------------------------------------------------------------------------------------------
# The tokenizer's sample


def test_sample_is_bounded_uniform_and_weighted(tmp_path):
    n = 30_000  # more than a chunk
    write(tmp_path / "a.tsv", "".join(f"a{i}\tA{i}\n" for i in range(n)))
    write(tmp_path / "b.tsv", "".join(f"b{i}\tB{i}\n" for i in range(n)))
    data = DataConfig(train=[f"tsv:{tmp_path / 'a.tsv'}", f"tsv:{tmp_path / 'b.tsv'}*3"])
    sources, clean = data.sources("train"), data.cleaning("train")
    sample = corpus.sample_pairs(sources, 2000, clean)
    assert sample.pairs_read == 2 * n and len(sample.src) == 2000 and len(set(sample.src)) == 2000
    assert all(s.upper() == t for s, t in zip(sample.src, sample.tgt))
    share_b = sum(s.startswith("b") for s in sample.src) / 2000
    assert 0.70 < share_b < 0.80  # weight 3 against 1
    assert corpus.sample_pairs(sources, 2000, clean).src == sample.src  # seeded
    assert corpus.sample_pairs(sources, 2000, clean, seed=2).src != sample.src
    spread = [int(s[1:]) for s in sample.src if s.startswith("a")]
    assert min(spread) < n / 10 and max(spread) > n * 9 / 10  # from all over, not the first lines
    assert corpus.sample_pairs(sources, 10 * n, clean).pairs_read == 2 * n  # all of a small corpus


def test_sample_cleans_what_it_keeps_and_counts_what_it_drops(tmp_path):
    write(tmp_path / "c.tsv", "gut\tgood\nkaputt\n  Ma\u0308dchen  \tgirl\n\t\n")
    sources = DataConfig(train=[f"tsv:{tmp_path / 'c.tsv'}"]).sources("train")
    sample = corpus.sample_pairs(sources, 10, "nfc")
    assert (sample.src, sample.tgt, sample.pairs_read) == (["gut", "Mädchen"], ["good", "girl"], 4)
    assert (sample.dropped["malformed"], sample.dropped["empty"]) == (1, 1)
    assert sample.examples["malformed"] == [f"{tmp_path / 'c.tsv'}:2: expected 2 tab-separated fields, found 1"]
    with pytest.raises(MtError, match=r"c\.tsv:2: expected 2 tab-separated fields"):
        corpus.sample_pairs(sources, 10, None)  # strict


def test_a_corpus_that_is_a_pipe_is_refused_in_one_line(tmp_path):
    """Was: counted (which drained it), then opened again: the read waited for ever."""
    import os

    os.mkfifo(tmp_path / "train.de")
    (tmp_path / "train.en").write_text("a dog\n", encoding="utf-8")
    [source] = DataConfig(train=[f"files:{tmp_path / 'train'}"]).sources("train")
    with pytest.raises(MtError, match=r"train\.de: a pipe: mt reads a corpus more than once"):
        next(corpus.chunks(source))
