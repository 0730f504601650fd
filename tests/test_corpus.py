"""mt.corpus on tiny real files: text (.gz, CRLF, prefixes), local hub datasets, the Ding dictionary."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from mt import corpus
from mt.config import DataConfig
from mt.corpus import has_split, load_split, read_ding, read_parallel_files
from mt.errors import MtError

# ---------------------------------------------------------------------------------------------
# Text files


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_plain_gz_and_crlf(tmp_path):
    src = write(tmp_path / "train.de", "Hallo Welt\r\n  zwei  Leerzeichen \r\n\r\nletzte ohne Ende")
    with gzip.open(tmp_path / "train.en.gz", "wb") as handle:
        handle.write("hello world\n  two  spaces \n\nlast without end\n".encode("utf-8"))
    de, en = read_parallel_files(src, tmp_path / "train.en.gz")
    # Only the line ending goes: inner/outer spaces and empty lines stay, so lines stay aligned.
    assert de == ["Hallo Welt", "  zwei  Leerzeichen ", "", "letzte ohne Ende"]
    assert en == ["hello world", "  two  spaces ", "", "last without end"]


def test_only_newline_ends_a_line(tmp_path):
    # U+2028 and form feeds are line breaks to str.splitlines(); in a corpus they are just text.
    src = write(tmp_path / "a.de", "\ufeffeins\u2028zwei\x0cdrei\nvier\n")
    assert corpus.read_lines(src) == ["eins\u2028zwei\x0cdrei", "vier"]


def test_explicit_files_and_prefix(tmp_path):
    write(tmp_path / "train.de", "a\nb\n")
    write(tmp_path / "train.en", "A\nB\n")
    with gzip.open(tmp_path / "valid.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("c\n")
    write(tmp_path / "valid.en", "C\n")
    data = DataConfig(
        train_src=str(tmp_path / "train.de"), train_tgt=str(tmp_path / "train.en"),
        valid_prefix=str(tmp_path / "valid"),
    )
    assert load_split(data, "train") == (["a", "b"], ["A", "B"])
    assert load_split(data, "valid") == (["c"], ["C"])  # PREFIX.de.gz found when PREFIX.de is absent
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data, "valid") == (["C"], ["c"])


def test_mismatched_counts_name_both_files(tmp_path):
    src = write(tmp_path / "x.de", "a\nb\nc\n")
    tgt = write(tmp_path / "x.en", "A\nB\n")
    with pytest.raises(MtError) as err:
        read_parallel_files(src, tgt)
    message = str(err.value)
    assert str(src) in message and str(tgt) in message
    assert "3" in message and "2" in message
    assert "\n" not in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.de", b"gut\nauch gut\nschlecht \xff hier\n")
    write(tmp_path / "bad.en", "a\nb\nc\n")
    with pytest.raises(MtError, match=r"bad\.de:3: not valid UTF-8"):
        read_parallel_files(bad, tmp_path / "bad.en")


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(MtError, match=r"nope\.de: no such file"):
        corpus.read_lines(tmp_path / "nope.de")
    write(tmp_path / "fake.gz", "not gzip at all\n")
    with pytest.raises(MtError, match=r"fake\.gz"):
        corpus.read_lines(tmp_path / "fake.gz")


def test_unconfigured_split(tmp_path):
    write(tmp_path / "t.de", "a\n")
    data = DataConfig(train_src=str(tmp_path / "t.de"), train_tgt=str(tmp_path / "t.de"))
    assert has_split(data, "train") and not has_split(data, "test")
    with pytest.raises(MtError, match="--test-src/--test-tgt"):
        load_split(data, "test")
    data.valid_src = str(tmp_path / "t.de")  # half-named: the split counts, and the error says what is missing
    assert has_split(data, "valid")
    with pytest.raises(MtError, match="--valid-tgt"):
        load_split(data, "valid")
    with pytest.raises(MtError, match="unknown split"):
        load_split(data, "dev")


# ---------------------------------------------------------------------------------------------
# Hub datasets, through the real datasets.load_dataset on local JSON lines


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))


def write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def hf_config(tmp_path: Path, shape: str) -> DataConfig:
    def record(de: str, en: str) -> dict:
        return {"translation": {"de": de, "en": en}} if shape == "nested" else {"en": en, "de": de}

    files = {
        name: write_jsonl(tmp_path / f"{shape}.{name}.jsonl", [record(f"{name} eins", f"{name} one"),
                                                               record(f"{name} zwei", f"{name} two")])
        for name in ("train", "validation", "test")
    }
    return DataConfig(source="hf", hf_name="json", hf_data_files=files)


@pytest.mark.parametrize("shape", ["nested", "flat"])
def test_hf_local_json(tmp_path, hf_cache, shape):
    data = hf_config(tmp_path, shape)
    assert all(has_split(data, split) for split in corpus.SPLITS)
    assert load_split(data, "train") == (["train eins", "train zwei"], ["train one", "train two"])
    assert load_split(data, "valid") == (["validation eins", "validation zwei"], ["validation one", "validation two"])
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data, "test") == (["test one", "test two"], ["test eins", "test zwei"])
    data.src_lang = "fr"
    with pytest.raises(MtError, match=r"'json'.*'fr'"):
        load_split(data, "test")


def test_hf_load_failure_is_one_line(tmp_path, hf_cache):
    data = DataConfig(source="hf", hf_name="json", hf_data_files={"train": str(tmp_path / "absent.jsonl")})
    with pytest.raises(MtError, match=r"cannot load dataset 'json'") as err:
        load_split(data, "train")
    assert "\n" not in str(err.value)
    assert not has_split(DataConfig(source="hf"), "train")


# ---------------------------------------------------------------------------------------------
# Ding

# Lines in the shapes of Debian's trans-de-en (GPL-2+; a few lines quoted, some shortened), plus
# crafted ones for duplicates, unaligned variants and a second translation of one sentence.
DING_SAMPLE = """\
# Version :: devel 2023-01-30
# License :: GPL Version 2 or later; GNU General Public License
Aalleiter {f}; Aaltreppe {f}; Aalpass {m} (Wasserbau) | Aalleitern {pl}; Aaltreppen {pl}; Aalpässe {pl} :: eel ladder (water engineering) | eel ladders
Aalmolche {pl}; Fischmolche {pl} (Amphiuma) (zoologische Gattung) [zool.] <Aalmolch> :: amphiuma salamanders; amphiumas; congo eels [coll.]; congo snakes [coll.] (zoological genus)
Gütertrennung {f} [jur.] | Die Ehegatten leben in Gütertrennung.; Es besteht Gütertrennung. :: (regime of) separation of property (between spouses) | The spouses are living under the regime of separation of property.
Lebenserwartung {f} [biol.] | Männer haben eine geringere Lebenserwartung als Frauen. :: lifespan; lifetime | Man have a shorter lifespan than women.
nichts dafürkönnen {vi} (es nicht bewusst steuern können) [psych.] | Er kann nichts dafür. Er ist von Natur aus so. :: cannot help it | He can’t help it. It’s in his nature.
rundweg; entschieden {adv} | etw. rundweg leugnen | Sie leugnete rundweg. :: flatly | to deny sth. flatly | She flatly denied.
Ach ja?; Ah ja? {interj} (Ausdruck von Zweifel) | „Das müsste leicht zu eruieren sein.“ :: Oh yes? (used to express doubt) | 'It should be easy to find out.'
Medikament {n} | Nehmen Sie (irgendwelche) Medikamente? :: medicine | Are you taking any medication?
Schnee {m} [meteo.] | Es hat geschneit, aber der Schnee ist nicht liegengeblieben. :: snow | We had some snow, but it didn’t settle [Br.].
Kontonummer {f} /Kto.-Nr./ [fin.] | Kontonummern {pl} :: account number /acct. no./ | account numbers
Aalfang {m} :: eel fishing
Aalfang {m} :: eel fishing
Aalsuppe {f} [cook.] | Aalsuppen {pl} | Das ist eine Suppe. :: eel soup | eel soups
Lebenserwartung {f} | Männer haben eine geringere Lebenserwartung als Frauen. :: life expectancy | Men have a shorter life expectancy than women.
Lebensdauer {f} :: lifespan
leugnen {vt} | Sie leugnete rundweg.; Sie stritt es ab. :: to deny | She denied it; She flatly denied it.
"""

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


def ding_config(path: Path, valid: int, test: int, **kwargs) -> DataConfig:
    return DataConfig(source="ding", ding_path=str(path), ding_valid_size=valid, ding_test_size=test, **kwargs)


def test_ding_sentences_phrases_and_annotations(ding_file):
    sentences, phrases = read_ding(ding_file)
    assert sentences == SENTENCES
    assert phrases == PHRASES


def test_ding_split_takes_every_sentence(ding_file):
    # 6 distinct German sentences, all held out: the second translation of "Männer ..." may not stay
    # in train, and neither may the phrase whose English side is a held-out sentence's.
    data = ding_config(ding_file, 3, 3)
    valid, test = load_split(data, "valid"), load_split(data, "test")
    assert len(valid[0]) == len(test[0]) == 3
    held_de = set(valid[0]) | set(test[0])
    assert held_de == {de for de, _ in SENTENCES}
    train_de, train_en = load_split(data, "train")
    assert list(zip(train_de, train_en)) == PHRASES[:-1]  # no sentence left; no phrase with a held-out side
    data.ding_phrases = False
    assert load_split(data, "train") == ([], [])


def test_ding_split_is_deterministic_disjoint_and_order_free(tmp_path, ding_file):
    data = ding_config(ding_file, 2, 2)
    splits = {split: load_split(data, split) for split in corpus.SPLITS}
    pairs = {split: set(zip(*lines)) for split, lines in splits.items()}
    assert len(pairs["valid"]) == len(pairs["test"]) == 2
    held = pairs["valid"] | pairs["test"]
    held_sides = {de for de, _ in held} | {en for _, en in held}
    assert len(held_sides) == 8  # valid and test share no side
    assert not any(de in held_sides or en in held_sides for de, en in pairs["train"])
    for pair in set(SENTENCES + PHRASES) - held:  # everything else trains unless it shares a side
        assert (pair in pairs["train"]) == (pair[0] not in held_sides and pair[1] not in held_sides)

    # The choice hangs on a fixed hash of the German side, not on the process or the file order.
    corpus._parse_ding_cached.cache_clear()
    corpus._ding_splits.cache_clear()
    assert load_split(data, "valid") == splits["valid"]
    header, body = DING_SAMPLE.split("\n", 2)[:2], DING_SAMPLE.split("\n", 2)[2].splitlines()
    reversed_file = write(tmp_path / "reversed", "\n".join(header + body[::-1]) + "\n")
    moved = ding_config(reversed_file, 2, 2)
    assert {de for de in load_split(moved, "valid")[0]} == {de for de, _ in pairs["valid"]}


def test_ding_directions_and_errors(ding_file):
    data = ding_config(ding_file, 1, 1)
    de, en = load_split(data, "valid")
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data, "valid") == (en, de)
    data.src_lang = "fr"
    with pytest.raises(MtError, match="--src-lang/--tgt-lang"):
        load_split(data, "train")
    with pytest.raises(MtError, match="only 7 sentence pairs"):
        load_split(ding_config(ding_file, 5, 5), "valid")
    no_test = ding_config(ding_file, 1, 0)
    assert has_split(no_test, "train") and not has_split(no_test, "test")
    with pytest.raises(MtError, match="ding_test_size"):
        load_split(no_test, "test")
    with pytest.raises(MtError, match="no such file"):
        read_ding(ding_file.parent / "missing")


def test_ding_cache_follows_mtime(ding_file):
    assert len(read_ding(ding_file)[0]) == 7
    read_ding(ding_file)[0].clear()  # callers get copies; the cache is not theirs to change
    assert len(read_ding(ding_file)[0]) == 7
    extra = "Regen {m} | Es regnet seit Tagen ohne Pause. :: rain | It has been raining for days.\n"
    write(ding_file, DING_SAMPLE + extra)
    stat = ding_file.stat()
    os.utime(ding_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert len(read_ding(ding_file)[0]) == 8


REAL_DING = Path("/usr/share/trans/de-en")


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DING.exists(), reason="Debian's trans-de-en is not installed")
def test_real_ding_counts():
    sentences, phrases = read_ding(REAL_DING)
    assert 15_000 <= len(sentences) <= 21_000  # 18,258 in the 2023-01-30 release
    assert 330_000 <= len(phrases) <= 430_000  # 370,114 in the 2023-01-30 release
    data = DataConfig(source="ding", ding_path=str(REAL_DING))
    valid, test = load_split(data, "valid"), load_split(data, "test")
    assert len(valid[0]) == data.ding_valid_size and len(test[0]) == data.ding_test_size
    assert not set(valid[0]) & set(test[0])
    train_de, _ = load_split(data, "train")
    assert len(train_de) > 300_000
    assert not set(train_de) & (set(valid[0]) | set(test[0]))


# ---------------------------------------------------------------------------------------------
# Several training sources, each read as a stream: specs, loaders, cleaning, sampling


def test_source_specs_in_config(tmp_path, monkeypatch):
    from mt.config import ExperimentConfig, absolute_source, set_field, split_source, validate
    from mt.errors import ConfigError

    cfg = ExperimentConfig()
    # A YAML list in a recipe, "[a, b]" or "a,b" from a flag
    assert set_field(cfg, "data.train_sources", ["files:a", "tsv:b.tsv*2"]) == ["files:a", "tsv:b.tsv*2"]
    assert set_field(cfg, "data.train_sources", "[hf:wmt14:de-en*0.5, ding]") == ["hf:wmt14:de-en*0.5", "ding"]
    assert set_field(cfg, "data.train_sources", "jsonl:c.jsonl,ding*3") == ["jsonl:c.jsonl", "ding*3"]
    assert set_field(cfg, "data.train_sources", None) == []
    assert split_source("hf:wmt14:de-en*0.5") == ("hf", "wmt14:de-en", 0.5)
    assert split_source("ding") == ("ding", "", 1.0)
    monkeypatch.chdir(tmp_path)
    assert absolute_source("tsv:x.tsv.gz:en-de*2") == f"tsv:{tmp_path}/x.tsv.gz:en-de*2"
    assert absolute_source("hf:bentrevett/multi30k") == "hf:bentrevett/multi30k"  # not a local path
    for bad, message in (("csv:x", "unknown kind 'csv'"), ("files:", "needs a path"), ("tsv:x*0", "above 0")):
        cfg.data.train_sources = [bad]
        with pytest.raises(ConfigError, match=message):
            validate(cfg, "recipe.yaml")
    cfg.data.train_sources, cfg.data.train_prefix = ["ding"], "corpus/train"
    with pytest.raises(ConfigError, match="set one or the other"):
        validate(cfg, "recipe.yaml")


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
    data = DataConfig(train_sources=specs)
    assert has_split(data, "train")
    assert [(s.kind, s.weight) for s in corpus.sources(data, "train")] == [("files", 1), ("tsv", 2), ("tsv", 1), ("jsonl", 1)]
    de = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben"]
    en = ["one", "two", "three", "four", "five", "six", "seven"]
    assert load_split(data, "train") == (de, en)  # raw lines, every source in order, weights ignored
    data.src_lang, data.tgt_lang = "en", "de"
    data.train_sources = [spec for spec in specs if "c.tsv" not in spec]  # its columns are SOURCE<TAB>TARGET
    assert load_split(data, "train") == (en[:4] + en[5:], de[:4] + de[5:])


def test_records_that_break_are_errors_when_strict_and_counted_when_cleaning(tmp_path):
    write(tmp_path / "x.tsv", "gut\tgood\nnur eine Spalte\nzu\tviele\tSpalten\n")
    write(tmp_path / "y.jsonl", '{"de": "ja", "en": "yes"}\n[1, 2]\n{"de": "nein"}\n{"de": 5, "en": "five"}\nnot json\n')
    data = DataConfig(train_sources=[f"tsv:{tmp_path / 'x.tsv'}", f"jsonl:{tmp_path / 'y.jsonl'}"])
    with pytest.raises(MtError, match=r"x\.tsv:2: expected 2 tab-separated fields, found 1"):
        load_split(data, "train")
    tsv, jsonl = (next(corpus.chunks(source, data, "train")) for source in corpus.sources(data, "train"))
    decoded = corpus.decode_chunk(jsonl, "nfc")
    assert (decoded.src, decoded.tgt, decoded.dropped["malformed"]) == (["ja"], ["yes"], 4)
    assert decoded.examples["malformed"] == [
        f"{tmp_path / 'y.jsonl'}:2: not a JSON object", f"{tmp_path / 'y.jsonl'}:3: no language key 'en'",
        f"{tmp_path / 'y.jsonl'}:4: language key 'de' holds int, expected text", f"{tmp_path / 'y.jsonl'}:5: not a JSON object"]
    assert corpus.decode_chunk(tsv, "nfc").dropped["malformed"] == 2


def test_clean_text_steps():
    fixed = {"control": 0, "unicode": 0, "whitespace": 0}
    assert corpus.clean_text(" a\x00b \t c\u00a0 ", "none", fixed) == "a b c"  # NBSP is whitespace to str.split
    assert corpus.clean_text("Ma\u0308dchen", "nfc", fixed) == "Mädchen"
    assert corpus.clean_text("Ｆｕｌｌ ﬁ", "nfc", fixed) == "Ｆｕｌｌ ﬁ"  # compatibility forms: NFKC only
    assert corpus.clean_text("Ｆｕｌｌ ﬁ", "nfkc", fixed) == "Full fi"
    assert fixed == {"control": 1, "unicode": 2, "whitespace": 1}


def test_invalid_utf8_skipped_with_its_line_when_cleaning(tmp_path):
    write(tmp_path / "t.de", b"gut\nschlecht \xc3\x28\nauch gut\n")
    write(tmp_path / "t.en", "good\nbad\nalso good\n")
    data = DataConfig(train_prefix=str(tmp_path / "t"))
    [chunk] = corpus.chunks(corpus.sources(data, "train")[0], data, "train")
    decoded = corpus.decode_chunk(chunk, "nfc")
    assert decoded.src == ["gut", "auch gut"] and decoded.kept == [0, 2]
    assert decoded.examples["invalid_utf8"] == [f"{tmp_path / 't.de'}:2: not valid UTF-8 (byte 0xc3)"]
    with pytest.raises(MtError, match=r"t\.de:2: not valid UTF-8"):
        load_split(data, "train")  # strict: the raw lines, for scoring


@pytest.mark.parametrize("gz", [False, True])
def test_streamed_files_with_mismatched_counts_name_both(tmp_path, gz):
    # Plain files are counted before reading; gzip ones are found out when one of them ends first.
    write(tmp_path / "m.de", "\n".join(str(i) for i in range(50_001)) + "\n")
    with (gzip.open(tmp_path / "m.en.gz", "wt") if gz else open(tmp_path / "m.en", "w")) as handle:
        handle.write("\n".join(str(i) for i in range(50_003)) + "\n")
    data = DataConfig(train_sources=[f"files:{tmp_path / 'm'}"])
    en = tmp_path / ("m.en.gz" if gz else "m.en")
    with pytest.raises(MtError, match=rf"{tmp_path / 'm.de'} has 50001 lines but {en} has 50003") as err:
        list(corpus.chunks(corpus.sources(data, "train")[0], data, "train"))
    assert "\n" not in str(err.value)


def test_hub_loader_on_local_datasets_files(tmp_path, hf_cache):
    datasets = pytest.importorskip("datasets")
    rows = {"translation": [{"de": f"satz {i}", "en": f"sentence {i}"} for i in range(5)]}
    datasets.Dataset.from_dict(rows).to_parquet(str(tmp_path / "t.parquet"))
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"de": ["a", "b"], "en": ["A", "B"]}),
                          "validation": datasets.Dataset.from_dict({"de": ["c"], "en": ["C"]})}).save_to_disk(
        str(tmp_path / "saved"))
    write_jsonl(tmp_path / "s.jsonl", [{"de": "gestreamt", "en": "streamed"}])
    data = DataConfig(train_sources=[f"hf:{tmp_path / 't.parquet'}", f"hf:{tmp_path / 'saved'}", f"hf:{tmp_path / 's.jsonl'}"],
                      hf_streaming=True)
    src, tgt = load_split(data, "train")
    assert src == [f"satz {i}" for i in range(5)] + ["a", "b", "gestreamt"]
    assert tgt == [f"sentence {i}" for i in range(5)] + ["A", "B", "streamed"]
    data = DataConfig(source="hf", hf_name=str(tmp_path / "saved"))
    assert load_split(data, "valid") == (["c"], ["C"])
    with pytest.raises(MtError, match=r"has no split 'test'; it has: train, validation"):
        load_split(data, "test")


def test_ding_as_one_of_several_sources(tmp_path, ding_file):
    write(tmp_path / "extra.tsv", "Guten Morgen.\tGood morning.\n")
    legacy = ding_config(ding_file, 2, 2)
    data = ding_config(ding_file, 2, 2, train_sources=[f"ding:{ding_file}", f"tsv:{tmp_path / 'extra.tsv'}"])
    de, en = load_split(data, "train")
    assert (de[:-1], en[:-1]) == load_split(legacy, "train")  # the held-out pairs stay out
    assert (de[-1], en[-1]) == ("Guten Morgen.", "Good morning.")
    assert load_split(data, "valid") == load_split(legacy, "valid")


def test_sample_is_bounded_uniform_and_weighted(tmp_path):
    n = 30_000  # more than a chunk
    write(tmp_path / "a.tsv", "".join(f"a{i}\tA{i}\n" for i in range(n)))
    write(tmp_path / "b.tsv", "".join(f"b{i}\tB{i}\n" for i in range(n)))
    data = DataConfig(train_sources=[f"tsv:{tmp_path / 'a.tsv'}", f"tsv:{tmp_path / 'b.tsv'}*3"])
    sample = corpus.sample_pairs(data, "train", 2000)
    assert sample.pairs_read == 2 * n and len(sample.src) == 2000 and len(set(sample.src)) == 2000
    assert all(s.upper() == t for s, t in zip(sample.src, sample.tgt))
    share_b = sum(s.startswith("b") for s in sample.src) / 2000
    assert 0.70 < share_b < 0.80  # weight 3 against 1
    assert corpus.sample_pairs(data, "train", 2000).src == sample.src  # seeded
    spread = [int(s[1:]) for s in sample.src if s.startswith("a")]
    assert min(spread) < n / 10 and max(spread) > n * 9 / 10  # from all over, not the first lines
    assert corpus.sample_pairs(data, "train", 10 * n).pairs_read == 2 * n  # all of a small corpus
