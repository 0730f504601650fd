"""mt.data.hub through the real datasets library on local files: JSON lines (both record shapes), parquet,
save_to_disk directories; splits, directions, and one-line errors. No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mt.config.schema import DataConfig
from mt.config.sources import SPLITS, parse_source
from mt.data import hub
from mt.data.corpus import chunks, load_split
from mt.errors import MtError


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))


def write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def hf_config(tmp_path: Path, shape: str) -> DataConfig:
    """One local JSON lines file per split, each named by an hf: spec (was hf_name json + hf_data_files)."""
    def record(de: str, en: str) -> dict:
        return {"translation": {"de": de, "en": en}} if shape == "nested" else {"en": en, "de": de}

    files = {
        name: write_jsonl(tmp_path / f"{shape}.{name}.jsonl", [record(f"{name} eins", f"{name} one"),
                                                               record(f"{name} zwei", f"{name} two")])
        for name in ("train", "validation", "test")
    }
    return DataConfig(train=[f"hf:{files['train']}"], valid=[f"hf:{files['validation']}"], test=[f"hf:{files['test']}"])


def test_describe_names_dataset_config_and_split():
    assert hub.describe(parse_source("hf:wmt14:de-en", "train", ("de", "en"))) == "dataset 'wmt14' (de-en) split 'train'"
    assert hub.describe(parse_source("hf:bentrevett/multi30k", "valid", ("de", "en"))) == (
        "dataset 'bentrevett/multi30k' split 'validation'")
    assert hub.describe(parse_source("hf:x@dev", "test", ("de", "en"))) == "dataset 'x' split 'dev'"


@pytest.mark.parametrize("shape", ["nested", "flat"])
def test_hf_local_json(tmp_path, hf_cache, shape):
    data = hf_config(tmp_path, shape)
    assert [source.part for split in SPLITS for source in data.sources(split)] == ["train", "validation", "test"]
    assert load_split(data.sources("train")) == (["train eins", "train zwei"], ["train one", "train two"])
    assert load_split(data.sources("valid")) == (["validation eins", "validation zwei"], ["validation one", "validation two"])
    data.src_lang, data.tgt_lang = "en", "de"
    assert load_split(data.sources("test")) == (["test one", "test two"], ["test eins", "test zwei"])
    data.src_lang = "fr"
    with pytest.raises(MtError, match=rf"{shape}\.test\.jsonl' split 'test'.*language key 'fr'") as err:
        load_split(data.sources("test"))
    assert "\n" not in str(err.value)


def test_hf_load_failure_is_one_line(tmp_path, hf_cache, monkeypatch):
    import os
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError(f"a connection to {args[0]}")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # A local path that is not there: said at once (was: the hub asked about it, the process switched offline)
    for missing in (tmp_path / "absent.jsonl", tmp_path / "absent_dir", "./absent_dir", "absent.csv.gz"):
        with pytest.raises(MtError) as err:
            load_split(DataConfig(train=[f"hf:{missing}"]).sources("train"))
        assert str(err.value) == f"hf:{missing}: no such file or directory"
    assert "HF_HUB_OFFLINE" not in os.environ
    (tmp_path / "broken.jsonl").write_text("not json\n{\"de\": 1\n", encoding="utf-8")
    for streaming in (False, True):  # streamed, the file is read as records are asked for (was a traceback)
        with pytest.raises(MtError, match=r"cannot read dataset '.*broken\.jsonl' split 'train': ") as err:
            load_split(DataConfig(train=[f"hf:{tmp_path / 'broken.jsonl'}"], hf_streaming=streaming).sources("train"))
        assert "\n" not in str(err.value) and "network" not in str(err.value)  # a local file: not the network's
    (tmp_path / "t.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(MtError, match=r"a local dataset file must end in \.json, \.jsonl, \.csv, \.parquet, \.arrow"):
        hub.load(parse_source(f"hf:{tmp_path / 't.txt'}", "train", ("de", "en")))


def test_hub_loader_on_local_datasets_files(tmp_path, hf_cache):
    datasets = pytest.importorskip("datasets")
    rows = {"translation": [{"de": f"satz {i}", "en": f"sentence {i}"} for i in range(5)]}
    datasets.Dataset.from_dict(rows).to_parquet(str(tmp_path / "t.parquet"))
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"de": ["a", "b"], "en": ["A", "B"]}),
                          "validation": datasets.Dataset.from_dict({"de": ["c"], "en": ["C"]})}).save_to_disk(
        str(tmp_path / "saved"))
    write_jsonl(tmp_path / "s.jsonl", [{"de": "gestreamt", "en": "streamed"}])
    data = DataConfig(train=[f"hf:{tmp_path / 't.parquet'}", f"hf:{tmp_path / 'saved'}", f"hf:{tmp_path / 's.jsonl'}",
                             f"hf:{tmp_path / 'saved'}@validation"], hf_streaming=True)
    assert all(source.streaming for source in data.sources("train"))
    src, tgt = load_split(data.sources("train"))
    assert src == [f"satz {i}" for i in range(5)] + ["a", "b", "gestreamt", "c"]
    assert tgt == [f"sentence {i}" for i in range(5)] + ["A", "B", "streamed", "C"]
    data = DataConfig(valid=[f"hf:{tmp_path / 'saved'}"], test=[f"hf:{tmp_path / 'saved'}"])
    assert load_split(data.sources("valid")) == (["c"], ["C"])
    with pytest.raises(MtError, match=r"split 'test': no such split; it has: train, validation") as err:
        load_split(data.sources("test"))
    assert f"hf:{tmp_path / 'saved'}@SPLIT" in str(err.value)


def test_a_directory_of_one_saved_split_is_read_for_that_split_alone(tmp_path, hf_cache):
    """A Dataset saved alone (not a DatasetDict) was read whole for any split: valid and test read the
    training pairs. Its recorded split must be the one asked; a dataset with no recorded split is read
    for any. A local dataset has no :CONFIG (it was dropped silently)."""
    datasets = pytest.importorskip("datasets")
    rows = {"de": ["a", "b"], "en": ["A", "B"]}
    datasets.Dataset.from_dict(rows, split="train").save_to_disk(str(tmp_path / "train-only"))
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "unnamed"))
    train_only = tmp_path / "train-only"
    data = DataConfig(train=[f"hf:{train_only}"], valid=[f"hf:{train_only}"], test=[f"hf:{tmp_path / 'unnamed'}"])
    assert load_split(data.sources("train")) == (["a", "b"], ["A", "B"])
    assert load_split(data.sources("test")) == (["a", "b"], ["A", "B"])
    with pytest.raises(MtError, match=r"split 'validation': the directory holds the 'train' split alone"):
        load_split(data.sources("valid"))
    with pytest.raises(MtError, match="a local dataset has no configurations"):
        load_split([parse_source(f"hf:{train_only}:cfg", "train", ("de", "en"))])


def test_hub_records_are_read_in_chunks_that_name_them(tmp_path, hf_cache):
    path = write_jsonl(tmp_path / "r.jsonl", [{"translation": {"de": f"d{i}", "en": f"e{i}"}} for i in range(5)])
    source = parse_source(f"hf:{path}", "train", ("de", "en"))
    assert [(batch[0], batch[1]) for batch in hub.batches(source, 2)] == [
        (["d0", "d1"], ["e0", "e1"]), (["d2", "d3"], ["e2", "e3"]), (["d4"], ["e4"])]
    read = list(chunks(source, 2))
    assert [(chunk.start, chunk.src) for chunk in read] == [(0, ["d0", "d1"]), (2, ["d2", "d3"]), (4, ["d4"])]
    assert read[1].where(1) == f"dataset {path!r} split 'train' record 4"


def test_a_hub_that_does_not_answer_fails_from_the_cache_at_once(tmp_path, hf_cache, monkeypatch):
    """No retries against a host that refuses connections: offline mode, one line saying why."""
    import socket

    import datasets
    import huggingface_hub.constants

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name in ("HTTPS_PROXY", "https_proxy", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "")  # unset for mt; the test's end puts back what was there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for module, name in ((huggingface_hub.constants, "HF_HUB_OFFLINE"), (datasets.config, "HF_HUB_OFFLINE"),
                         (datasets.config, "HF_DATASETS_OFFLINE")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    with pytest.raises(MtError, match=r"cannot load dataset 'someone/no-such-corpus' split 'train': .*"
                                      r"the hub did not answer, so only the local cache was tried") as err:
        load_split(DataConfig(train=["hf:someone/no-such-corpus"]).sources("train"))
    assert "\n" not in str(err.value)
    assert datasets.config.HF_HUB_OFFLINE and huggingface_hub.constants.HF_HUB_OFFLINE


def test_an_empty_value_is_an_empty_side_not_a_missing_language(tmp_path, hf_cache):
    """Was: JSON's null (a CSV's empty cell) read as "no language key", which stopped a validation split."""
    nested = write_jsonl(tmp_path / "n.jsonl", [{"translation": {"de": "eins", "en": "one"}},
                                                 {"translation": {"de": None, "en": "two"}}])
    flat = tmp_path / "f.csv"
    flat.write_text("de,en\neins,one\n,two\n", encoding="utf-8")
    for path in (nested, flat):
        assert load_split(DataConfig(valid=[f"hf:{path}"]).sources("valid")) == (["eins", ""], ["one", "two"])
    # a cell that pandas reads as missing or as a number is text: "NA" was an empty side, "007" the number 7
    words = tmp_path / "w.csv"
    words.write_text("de,en\nNA,NA\nNone,null\n007,42\n", encoding="utf-8")
    assert load_split(DataConfig(valid=[f"hf:{words}"]).sources("valid")) == (["NA", "None", "007"], ["NA", "null", "42"])



def test_local_hf_files_are_inputs_whose_changes_mt_run_notices(tmp_path, hf_cache):
    """Was: hf: sources were left out of the inputs recorded at binarize, so a local file edited
    since was never noticed."""
    datasets = pytest.importorskip("datasets")
    from mt.config.schema import ExperimentConfig
    from mt.data.dataset import input_files, input_record

    data_file = write_jsonl(tmp_path / "t.jsonl", [{"de": "eins", "en": "one"}])
    datasets.Dataset.from_dict({"de": ["a"], "en": ["A"]}).save_to_disk(str(tmp_path / "saved"))
    cfg = ExperimentConfig(data=DataConfig(train=[f"hf:{data_file}", f"hf:{tmp_path / 'saved'}", "hf:wmt14:de-en"]))
    found = input_files(cfg, "train")
    assert found[0] == data_file and all(p.startswith(str(tmp_path / "saved")) for p in found[1:])
    assert any(p.endswith(".arrow") for p in found) and len(input_record(cfg, ["train"])) == len(found)


def test_a_local_data_file_of_invalid_utf8_names_its_line(tmp_path, hf_cache):
    """Was "cannot read ...: 'utf-8' codec can't decode byte 0xe9 in position 4": no line."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"de": "eins", "en": "one"}\n{"de": "zwei", "en": "two"}\n{"de": "caf\xe9", "en": "cafe"}\n')
    with pytest.raises(MtError, match=rf"^{path}:3: not valid UTF-8"):
        load_split(DataConfig(valid=[f"hf:{path}"]).sources("valid"))
