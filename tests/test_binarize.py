"""Binarize: drop counts, ids/offsets round trips, atomic data dir, and the memory-mapped reader."""

import itertools
import json
import random

import numpy as np
import pytest

import mt.binarize
from mt.binarize import ParallelData, binarize, encode_pairs, lines_path
from mt.config import DataConfig, ExperimentConfig, TokenizerConfig
from mt.errors import MtError
from mt.experiment import Experiment
from mt.tokenizer import load_tokenizers, train_tokenizer

SUBJECTS = [("Ein Mann", "A man"), ("Eine Frau", "A woman"), ("Ein kleines Mädchen", "A little girl"),
            ("Ein Junge", "A boy"), ("Ein Hund", "A dog"), ("Ein Radfahrer", "A cyclist")]
VERBS = [("läuft", "walks"), ("sitzt", "sits"), ("wartet", "waits"), ("spielt", "plays"), ("tanzt", "dances")]
PLACES = [("auf der Straße", "on the street"), ("im Park", "in the park"), ("am Strand", "on the beach"),
          ("vor einem Geschäft", "in front of a shop"), ("unter einem großen Baum", "under a big tree"),
          ("in der Küche", "in the kitchen"), ("auf einer Bühne", "on a stage")]
MAX_LEN = 80


def sentence_pairs(seed: int) -> tuple[list[str], list[str]]:
    """Caption-like German/English pairs from word lists, plus one empty and one over-long pair."""
    combos = list(itertools.product(SUBJECTS, VERBS, PLACES))
    random.Random(seed).shuffle(combos)
    src = [" ".join(p[0] for p in parts) + "." for parts in combos]
    tgt = [" ".join(p[1] for p in parts) + "." for parts in combos]
    src[5], tgt[7] = "", " "  # empty on either side
    src[9] = " und ".join(src[9:20])  # far above MAX_LEN tokens
    return src, tgt


def write_split(tmp_path, name, seed, cfg_fields):
    src, tgt = sentence_pairs(seed)
    for lang, lines in (("de", src), ("en", tgt)):
        path = tmp_path / f"{name}.{lang}"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cfg_fields[f"{name}_{'src' if lang == 'de' else 'tgt'}"] = str(path)
    return src, tgt


@pytest.fixture
def setup(tmp_path):
    """An experiment with a trained joint tokenizer and train/valid text files."""
    fields = {}
    texts = {"train": write_split(tmp_path, "train", 0, fields), "valid": write_split(tmp_path, "valid", 1, fields)}
    cfg = ExperimentConfig(
        data=DataConfig(source="files", max_len=MAX_LEN, **fields),
        tokenizer=TokenizerConfig(vocab_size=300),
    )
    exp = Experiment(tmp_path / "exp")
    train_tokenizer(exp, cfg)
    return exp, cfg, texts


def test_encode_pairs_drops_and_round_trips(setup):
    exp, cfg, texts = setup
    src_tok, tgt_tok = load_tokenizers(exp, cfg)
    src, tgt = texts["train"]
    arrays, counts = encode_pairs(src, tgt, src_tok, tgt_tok, MAX_LEN)
    assert counts == {"pairs_in": 210, "kept": 207, "dropped": {"empty": 2, "too_long": 1}}
    assert arrays["src_ids"].dtype == np.uint16 and arrays["src_offsets"].dtype == np.int64
    assert list(arrays["lines"]) == [i for i in range(210) if i not in (5, 7, 9)]
    assert len(arrays["src_offsets"]) == len(arrays["tgt_offsets"]) == 208
    for k, line in enumerate(arrays["lines"][:50]):
        for side, tok, text in (("src", src_tok, src), ("tgt", tgt_tok, tgt)):
            offsets = arrays[f"{side}_offsets"]
            ids = arrays[f"{side}_ids"][offsets[k] : offsets[k + 1]]
            assert ids.tolist() == tok.encode([text[line]])[0]
            assert tok.decode([ids]) == [text[line]]


def test_encode_pairs_in_chunks_matches_one_chunk(setup, monkeypatch):
    exp, cfg, texts = setup
    src_tok, tgt_tok = load_tokenizers(exp, cfg)
    whole, _ = encode_pairs(*texts["train"], src_tok, tgt_tok, MAX_LEN)
    monkeypatch.setattr(mt.binarize, "ENCODE_CHUNK", 16)
    chunked, _ = encode_pairs(*texts["train"], src_tok, tgt_tok, MAX_LEN)
    for key in whole:
        np.testing.assert_array_equal(whole[key], chunked[key])


def test_binarize_writes_stats_and_readable_data(setup):
    exp, cfg, texts = setup
    stats = binarize(exp, cfg)
    assert set(stats["splits"]) == {"train", "valid"}
    assert json.loads(exp.data_stats_path.read_text()) == stats
    train = stats["splits"]["train"]
    assert train["pairs_in"] == 210 and train["kept"] == 207
    assert train["dropped"] == {"empty": 2, "too_long": 1}
    assert stats["max_len"] == MAX_LEN
    src_tok, tgt_tok = load_tokenizers(exp, cfg)
    assert stats["tokenizer_sha256"] == {"src": src_tok.sha256, "tgt": tgt_tok.sha256}

    data = ParallelData(exp, "valid")
    lines = np.load(lines_path(exp, "valid"))
    src, tgt = texts["valid"]
    assert len(data) == len(lines) == stats["splits"]["valid"]["kept"]
    assert data.src_lens.dtype == np.int64 and data.src_lens.sum() == stats["splits"]["valid"]["src_tokens"]
    assert stats["splits"]["valid"]["mean_tgt_len"] == round(data.tgt_lens.mean(), 2)
    for i in (0, 1, len(data) - 1):
        assert data.src(i).tolist() == src_tok.encode([src[lines[i]]])[0]
        assert data.tgt(i).tolist() == tgt_tok.encode([tgt[lines[i]]])[0]
    assert not [p for p in exp.root.iterdir() if p.name.startswith(".data-")]


def test_binarize_refuses_existing_data_dir(setup):
    exp, cfg, _ = setup
    binarize(exp, cfg)
    before = exp.data_stats_path.read_bytes()
    with pytest.raises(MtError, match="already binarized; nothing overwritten"):
        binarize(exp, cfg)
    assert exp.data_stats_path.read_bytes() == before


def test_interrupted_binarize_leaves_no_data_dir(setup, monkeypatch):
    exp, cfg, _ = setup
    real_write = mt.binarize._write_split

    def write_then_fail(exp_, tmp_dir, split, arrays):
        if split == "valid":  # train is already written to the temporary directory
            raise KeyboardInterrupt
        real_write(exp_, tmp_dir, split, arrays)

    monkeypatch.setattr(mt.binarize, "_write_split", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        binarize(exp, cfg)
    assert not exp.data_dir.exists()
    assert not [p for p in exp.root.iterdir() if p.name.startswith(".data-")]
    monkeypatch.undo()
    assert binarize(exp, cfg)["splits"]["valid"]["kept"] > 0


def test_binarize_without_tokenizer_points_to_train_tokenizer(tmp_path):
    cfg = ExperimentConfig(data=DataConfig(train_src="a", train_tgt="b"))
    with pytest.raises(MtError, match="mt train-tokenizer"):
        binarize(Experiment(tmp_path / "exp"), cfg)


def test_parallel_data_missing_points_to_binarize(tmp_path):
    with pytest.raises(MtError, match=r"no binarized test data; run `mt binarize"):
        ParallelData(Experiment(tmp_path / "exp"), "test")
