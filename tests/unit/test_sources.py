"""mt.config.sources: the one grammar of corpus specs for data.train/valid/test, DataConfig.sources and
.cleaning, absolute_spec, and the refusal of the old corpus fields with the new lists spelled out."""

from __future__ import annotations

import dataclasses
import re

import pytest

from mt.config.schema import DataConfig, ExperimentConfig, from_dict, set_field, validate
from mt.config.sources import (
    DING_PATH,
    LEGACY_FIELDS,
    SPLITS,
    Source,
    absolute_spec,
    by_file_names,
    legacy_message,
    parse_source,
)
from mt.errors import ConfigError, MtError

DE_EN = ("de", "en")


def test_every_kind_parses():
    assert parse_source("files:corpus/train", "train", DE_EN) == Source(
        "files", "files:corpus/train", ("corpus/train.de", "corpus/train.en"), DE_EN)
    assert parse_source("files:corpus/train", "valid", ("en", "de")).paths == ("corpus/train.en", "corpus/train.de")
    assert parse_source("tsv:x.tsv", "test", DE_EN) == Source("tsv", "tsv:x.tsv", ("x.tsv",), DE_EN, sides_named=False)
    assert parse_source("jsonl:c.jsonl", "valid", DE_EN) == Source("jsonl", "jsonl:c.jsonl", ("c.jsonl",), DE_EN)
    assert parse_source("hf:wmt14:de-en", "train", DE_EN) == Source(
        "hf", "hf:wmt14:de-en", ("wmt14",), DE_EN, part="train", hf_config="de-en")
    assert parse_source("ding", "train", DE_EN) == Source("ding", "ding", (DING_PATH,), DE_EN, part="train")
    assert parse_source("ding:my/de-en", "test", ("en", "de")) == Source(
        "ding", "ding:my/de-en", ("my/de-en",), ("en", "de"), part="test")
    # The name is the spec as written (trimmed), weight included: messages and stats show it.
    source = parse_source("  tsv:a.tsv*2 ", "train", DE_EN)
    assert (source.name, source.paths, source.weight) == ("tsv:a.tsv*2", ("a.tsv",), 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        source.weight = 3.0


def test_file_pairs_with_a_bar():
    assert parse_source("files:a.de|b.en", "train", DE_EN).paths == ("a.de", "b.en")
    assert parse_source("files: a.de | b.en ", "valid", DE_EN).paths == ("a.de", "b.en")
    # Named files are taken as they are: the language order does not swap them.
    assert parse_source("files:a.de|b.en", "test", ("en", "de")).paths == ("a.de", "b.en")
    for half in ("files:a.de|", "files:|b.en", "files:|"):
        with pytest.raises(ConfigError, match=r"files:SRC\|TGT needs both files"):
            parse_source(half, "train", DE_EN)


def test_tsv_columns_named_by_language():
    assert parse_source("tsv:x.tsv.gz:en-de", "train", DE_EN).columns == (1, 0)
    assert parse_source("tsv:x.tsv.gz:en-de", "train", ("en", "de")).columns == (0, 1)
    assert parse_source("tsv:x.tsv.gz:en-de*2", "train", DE_EN).paths == ("x.tsv.gz",)
    assert parse_source("tsv:x.tsv", "train", ("en", "de")).columns == (0, 1)  # unnamed: SOURCE<TAB>TARGET
    with pytest.raises(ConfigError, match=r"data\.valid: 'tsv:x\.tsv:en-fr': names columns en-fr, not de"):
        parse_source("tsv:x.tsv:en-fr", "valid", DE_EN)


def test_hf_split_defaults_to_the_lists_split():
    assert [parse_source("hf:bentrevett/multi30k", split, DE_EN).part for split in SPLITS] == [
        "train", "validation", "test"]
    named = parse_source("hf:wmt14:de-en@newstest2014", "test", DE_EN)
    assert (named.paths, named.hf_config, named.part) == (("wmt14",), "de-en", "newstest2014")
    assert parse_source("hf:opus@train*0.5", "train", DE_EN).part == "train"
    assert parse_source("hf:x", "train", DE_EN, streaming=True).streaming
    assert not parse_source("hf:x", "train", DE_EN).streaming
    assert not parse_source("tsv:x", "train", DE_EN, streaming=True).streaming  # hub sources only
    with pytest.raises(ConfigError, match=r"nothing after '@' \(the split\)"):
        parse_source("hf:x@", "train", DE_EN)


def test_ding_parts_and_direction():
    assert [parse_source("ding", split, DE_EN).part for split in SPLITS] == list(SPLITS)
    assert parse_source("ding@sentences", "train", DE_EN).part == "sentences"
    assert parse_source("ding:my/de-en@valid", "test", DE_EN) == Source(
        "ding", "ding:my/de-en@valid", ("my/de-en",), DE_EN, part="valid")
    with pytest.raises(ConfigError, match=r"unknown Ding part 'dev'; expected train, sentences, phrases, valid, test"):
        parse_source("ding@dev", "train", DE_EN)
    with pytest.raises(ConfigError, match=r"nothing after '@' \(the part\)"):
        parse_source("ding@", "train", DE_EN)
    for langs in (("fr", "en"), ("de", "de"), ("en", "fr")):
        with pytest.raises(ConfigError, match=rf"German-English: data\.src_lang/tgt_lang must be de/en or en/de, "
                                              rf"not {langs[0]}/{langs[1]}"):
            parse_source("ding", "valid", langs)


def test_weights_in_train_only():
    assert [parse_source(spec, "train", DE_EN).weight for spec in ("tsv:a", "tsv:a*2", "tsv:a * 0.5", "ding*3")] == [
        1.0, 2.0, 0.5, 3.0]
    for split in ("valid", "test"):
        with pytest.raises(ConfigError, match=rf"data\.{split}: 'tsv:a\*2': a \*WEIGHT applies to training data only"):
            parse_source("tsv:a*2", split, DE_EN)
    for zero in ("tsv:x*0", "tsv:x*0.0", "tsv:x*1e400", "tsv:x*1e9"):  # inf crashed binarize; 1e9 filled the disk
        with pytest.raises(ConfigError, match="a weight must be above 0"):
            parse_source(zero, "train", DE_EN)


@pytest.mark.parametrize("spec", ["files:dir/train*-1", "files:dir/train * -0.5", "tsv:a.tsv:en-de*-2", "ding*-1e3"])
def test_a_negative_weight_is_refused_not_read_as_a_file_name(spec):
    with pytest.raises(ConfigError) as err:
        parse_source(spec, "train", DE_EN)
    weight = spec.rpartition("*")[2].strip()
    assert str(err.value) == f"data.train: {spec!r}: a weight must be above 0 and at most 1000 (*{weight})"
    assert absolute_spec(spec).endswith(spec[spec.rindex("*"):])  # kept whole, for parse_source to refuse


@pytest.mark.parametrize("spec, message", [
    ("csv:x", "unknown kind 'csv'"),
    ("dingx", "unknown kind 'dingx'"),
    ("Files:a", "unknown kind 'Files'"),
    ("", "unknown kind ''"),
    ("files:", "files: needs a path"),
    ("files", "files: needs a path"),
    ("tsv: ", "tsv: needs a path"),
    ("jsonl:", "jsonl: needs a path"),
    ("hf:", "hf: needs a name"),
    ("hf:@test", "hf: needs a name"),
])
def test_bad_specs_name_the_spec(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_source(spec, "train", DE_EN)
    assert str(err.value).startswith(f"data.train: {spec!r}: ")
    assert "\n" not in str(err.value)
    if "unknown kind" in message:  # the grammar comes with it
        assert "tsv:FILE[:L1-L2]" in str(err.value) and "ding[:FILE][@PART]" in str(err.value)


def test_data_config_sources_and_cleaning():
    data = DataConfig(train=["files:a", "tsv:b.tsv*2"], test=["hf:x"], hf_streaming=True)
    assert [(s.kind, s.weight) for s in data.sources("train")] == [("files", 1.0), ("tsv", 2.0)]
    assert data.sources("valid") == []  # an empty list: the split is not configured
    assert [(s.part, s.streaming) for s in data.sources("test")] == [("test", True)]
    data.src_lang, data.tgt_lang = "en", "de"  # parsed on each call: the direction is the config's now
    assert data.sources("train")[0].paths == ("a.en", "a.de")
    with pytest.raises(MtError, match="unknown split 'dev'; expected one of: train, valid, test"):
        data.sources("dev")
    assert not DataConfig().sources("train")
    assert (data.cleaning("train"), data.cleaning("valid"), data.cleaning("test")) == ("nfc", None, None)
    data.normalize = "nfkc"
    assert data.cleaning("train") == "nfkc"
    data.clean = False
    assert data.cleaning("train") is None


def test_source_specs_in_config(tmp_path, monkeypatch):
    cfg = ExperimentConfig()
    # A YAML list in a recipe, "[a, b]" or "a,b" from a flag
    assert set_field(cfg, "data.train", ["files:a", "tsv:b.tsv*2"]) == ["files:a", "tsv:b.tsv*2"]
    assert set_field(cfg, "data.train", "[hf:wmt14:de-en*0.5, ding]") == ["hf:wmt14:de-en*0.5", "ding"]
    assert set_field(cfg, "data.train", "jsonl:c.jsonl,ding*3") == ["jsonl:c.jsonl", "ding*3"]
    assert set_field(cfg, "data.valid", "files:a.de|a.en") == ["files:a.de|a.en"]  # '|', not ',', pairs files
    assert set_field(cfg, "data.train", None) == []
    source = parse_source("hf:wmt14:de-en*0.5", "train", DE_EN)
    assert (source.kind, source.paths, source.hf_config, source.weight) == ("hf", ("wmt14",), "de-en", 0.5)
    source = parse_source("ding", "train", DE_EN)
    assert (source.kind, source.paths, source.weight) == ("ding", (DING_PATH,), 1.0)
    for split, bad, message in (("train", "csv:x", "unknown kind 'csv'"), ("train", "files:", "needs a path"),
                                ("train", "tsv:x*0", "above 0"), ("test", "tsv:x*2", "training data only"),
                                ("valid", "ding@dev", "unknown Ding part")):
        cfg = ExperimentConfig()
        setattr(cfg.data, split, ["files:ok", bad])
        pattern = rf"^recipe\.yaml: data\.{split}: {re.escape(repr(bad))}: .*{message}"
        with pytest.raises(ConfigError, match=pattern) as err:
            validate(cfg, "recipe.yaml")
        assert "\n" not in str(err.value)
    validate(ExperimentConfig(data=DataConfig(train=["files:a", "ding@sentences*2"], valid=["hf:x"])), "ok.yaml")
    # A bad spec is an error when the config loads, not when the data is read.
    with pytest.raises(ConfigError, match=r"^x\.yaml: data\.valid: 'tsv:v\.tsv\*2': a \*WEIGHT"):
        from_dict({"data": {"valid": ["tsv:v.tsv*2"]}}, "x.yaml")
    with pytest.raises(ConfigError, match=r"data\.train: 'ding'.*not fr/en"):
        from_dict({"data": {"src_lang": "fr", "train": ["ding"]}}, "x.yaml")
    loaded = from_dict({"data": {"train": ["tsv:a.tsv:en-de*2"], "test": "files:t"}}, "x.yaml")
    assert (loaded.data.train, loaded.data.test) == (["tsv:a.tsv:en-de*2"], ["files:t"])


def test_absolute_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local.jsonl").write_text("{}\n")
    assert absolute_spec("tsv:x.tsv.gz:en-de*2") == f"tsv:{tmp_path}/x.tsv.gz:en-de*2"
    assert absolute_spec("hf:bentrevett/multi30k") == "hf:bentrevett/multi30k"  # not a local path
    assert absolute_spec("hf:wmt14:de-en@validation") == "hf:wmt14:de-en@validation"
    assert absolute_spec("hf:local.jsonl@test") == f"hf:{tmp_path}/local.jsonl@test"  # a local path
    assert absolute_spec("files:a.de|sub/b.en") == f"files:{tmp_path}/a.de|{tmp_path}/sub/b.en"
    assert absolute_spec("files:corpus/train") == f"files:{tmp_path}/corpus/train"
    assert absolute_spec("jsonl:c.jsonl*0.5") == f"jsonl:{tmp_path}/c.jsonl*0.5"
    assert absolute_spec("ding:my/de-en@sentences*3") == f"ding:{tmp_path}/my/de-en@sentences*3"
    for kept in ("ding", "ding@valid", "ding*2", "tsv:/abs/x.tsv", "files:/abs/a|/abs/b"):
        assert absolute_spec(kept) == kept
    # An unknown ~user stays as written, as parse_source reads it (pathlib raised RuntimeError)
    assert absolute_spec("files:~no-such-user-mt/corpus") == f"files:{tmp_path}/~no-such-user-mt/corpus"
    assert absolute_spec("hf:~no-such-user-mt/data").startswith("hf:")
    # The result parses to the same source but for its paths.
    spec = "tsv:x.tsv:en-de*2"
    relative, absolute = parse_source(spec, "train", DE_EN), parse_source(absolute_spec(spec), "train", DE_EN)
    assert (absolute.paths, absolute.columns, absolute.weight) == ((f"{tmp_path}/x.tsv",), relative.columns, 2.0)


def test_a_path_starting_with_a_tilde_is_in_the_home_directory(tmp_path, monkeypatch):
    """Was: files:~/corpus/train read ./~/corpus/train (or its absolute form under the working directory)."""
    import json

    from mt.apps.backtranslate import read_mono
    from mt.data.corpus import load_split

    home, work = tmp_path / "home", tmp_path / "work"
    (home / "corpus").mkdir(parents=True)
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    for lang, line in (("de", "Hallo Welt"), ("en", "hello world")):
        (home / "corpus" / f"train.{lang}").write_text(line + "\n", encoding="utf-8")
    (home / "c.tsv").write_text("Hallo Welt\thello world\n", encoding="utf-8")
    (home / "c.jsonl").write_text(json.dumps({"de": "Hallo Welt", "en": "hello world"}) + "\n", encoding="utf-8")
    (home / "mono.en").write_text("hello world\n", encoding="utf-8")
    for spec in ("files:~/corpus/train", "files:~/corpus/train.de|~/corpus/train.en", "tsv:~/c.tsv", "jsonl:~/c.jsonl"):
        source = parse_source(spec, "train", DE_EN)
        assert all(path.startswith(str(home)) for path in source.paths), (spec, source.paths)
        assert load_split([source]) == (["Hallo Welt"], ["hello world"]), spec
    assert parse_source("ding:~/de-en", "test", DE_EN).paths == (f"{home}/de-en",)
    assert absolute_spec("files:~/corpus/train*2") == f"files:{home}/corpus/train*2"
    assert absolute_spec("tsv:~/c.tsv:de-en") == f"tsv:{home}/c.tsv:de-en"
    assert absolute_spec("hf:~/c.jsonl@test") == f"hf:{home}/c.jsonl@test"
    assert read_mono(["text:~/mono.en"], "en", ("en", "de"))[:2] == (["hello world"], 0)


def legacy_error(old: dict) -> str:
    with pytest.raises(ConfigError) as err:
        from_dict({"data": old}, "x.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("x.yaml: ") and "old corpus schema" in message
    assert message == legacy_message({key: value for key, value in old.items() if key in LEGACY_FIELDS}, "x.yaml")
    return message


@pytest.mark.parametrize("old, written", [
    ({"source": "files", "train_prefix": "corpus/train"}, "data.train: [files:corpus/train]"),
    ({"train_src": "a.de", "train_tgt": "a.en", "valid_prefix": "v", "test_prefix": "t"},
     "data.train: [files:a.de|a.en]; data.valid: [files:v]; data.test: [files:t]"),
    ({"source": "hf", "hf_name": "bentrevett/multi30k"},
     "data.train: [hf:bentrevett/multi30k]; data.valid: [hf:bentrevett/multi30k]; data.test: [hf:bentrevett/multi30k]"),
    ({"source": "hf", "hf_name": "wmt14", "hf_config": "de-en", "hf_splits": {"train": "train", "valid": "dev"}},
     "data.train: [hf:wmt14:de-en]; data.valid: [hf:wmt14:de-en@dev]"),
    ({"source": "ding"}, "data.train: [ding]; data.valid: [ding]; data.test: [ding]"),
    ({"source": "ding", "ding_phrases": False}, "data.train: [ding@sentences]; data.valid: [ding]; data.test: [ding]"),
    ({"source": "ding", "ding_path": "my/de-en", "ding_test_size": 0},
     "data.train: [ding:my/de-en]; data.valid: [ding:my/de-en]"),
    ({"train_sources": ["tsv:a.tsv*2", "ding"], "valid_prefix": "v"},
     "data.train: [tsv:a.tsv*2, ding]; data.valid: [files:v]"),
    ({"source": "files"}, "data.train: [files:PREFIX]"),
])
def test_legacy_config_refused_with_the_new_lists(old, written):
    message = legacy_error(old)
    assert f"write {written} (" in message
    assert ", ".join(f"data.{key}" for key in old) in message  # names every old field it found
    # What it writes is a valid config (but for the placeholder PREFIX).
    lists = dict(part.split(": ", 1) for part in written.split("; "))
    if "PREFIX" not in written:
        from_dict({"data": {key.removeprefix("data."): value for key, value in lists.items()}}, "new.yaml")


def test_legacy_fields_are_refused_even_beside_new_ones():
    message = legacy_error({"train": ["files:a"], "ding_valid_size": 100})
    assert "data.ding_valid_size" in message and "data.train," not in message
    assert set(LEGACY_FIELDS) >= {"source", "train_prefix", "hf_data_files", "ding_phrases", "train_sources"}
    for name in LEGACY_FIELDS:
        assert legacy_error({name: None}).startswith(f"x.yaml: data.{name} ")


def test_legacy_hf_data_files_become_local_hub_files():
    old = {"source": "hf", "hf_name": "json", "hf_data_files": {"train": "a.jsonl", "test": "t.jsonl"}}
    message = legacy_error(old)
    assert "data.train: [hf:a.jsonl]" in message and "data.test: [hf:t.jsonl]" in message


def test_legacy_half_named_files_are_not_spelled_with_none():
    assert "None" not in legacy_error({"train_src": "a.de"})


def test_a_local_hub_file_with_its_directions_is_made_absolute(tmp_path, monkeypatch):
    """Was: hf:sub/x.jsonl~en-de was looked for as a file named `x.jsonl~en-de`, so it stayed relative in
    the saved config and a later step run from another directory found no such file."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    assert absolute_spec("hf:sub/x.jsonl~en-de") == f"hf:{tmp_path}/sub/x.jsonl~en-de"
    assert absolute_spec("hf:sub/x.jsonl~en-de, de-en*2") == f"hf:{tmp_path}/sub/x.jsonl~en-de, de-en*2"
    assert absolute_spec("files:~/corpus") != "files:~/corpus"  # a ~ in a path is still the home's


@pytest.mark.parametrize("spec, public", [
    ("tsv:/home/alice/private/corpus.tsv", "tsv:corpus.tsv"),
    ("bt:files:/home/alice/mono/news", "bt:files:news"),
    ("files:~/data/train", "files:train"),
    ("files:/home/me/a.de|/home/me/b.en", "files:a.de|b.en"),  # was files:b.en: the source side gone
    ("jsonl:/x/y.jsonl*2", "jsonl:y.jsonl*2"),
    ("files:/x/train~de-en,fr-en *2", "files:train~de-en,fr-en*2"),
    ("hf:/data/local:conf@train", "hf:local:conf@train"),
    ("hf:Helsinki-NLP/opus-100:de-en", "hf:Helsinki-NLP/opus-100:de-en"),  # a dataset of the Hub
    ("ding", "ding"),
])
def test_a_published_spec_names_each_local_file_by_its_name_alone(spec, public):
    """A model card showed tsv:, jsonl: and bt: corpora with their full local paths."""
    assert by_file_names(spec) == public
