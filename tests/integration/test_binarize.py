"""Binarize: drop counts, ids/offsets round trips, atomic data dir, the memory-mapped reader; at scale:
streamed .npy writing, worker processes, cleaning per reason, weights, the manifest checked by train."""

import hashlib
import itertools
import json
import multiprocessing
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mt.data.arrays
import mt.data.binarize
import mt.data.binarize_workers
import mt.data.corpus
from mt.config.schema import DataConfig, ExperimentConfig, ModelConfig, TokenizerConfig
from mt.data.binarize import binarize
from mt.data.dataset import ParallelData, check_data, encode_pairs
from mt.data.stats import rows_text
from mt.data.train_tokenizer import train_tokenizer
from mt.errors import MtError
from mt.experiment.paths import Experiment

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
    cfg_fields[name] = [f"files:{tmp_path / name}"]
    return src, tgt


@pytest.fixture
def setup(tmp_path):
    """An experiment with a trained joint tokenizer and train/valid text files."""
    fields = {}
    texts = {"train": write_split(tmp_path, "train", 0, fields), "valid": write_split(tmp_path, "valid", 1, fields)}
    cfg = ExperimentConfig(
        data=DataConfig(max_len=MAX_LEN, **fields),
        tokenizer=TokenizerConfig(vocab_size=300),
    )
    exp = Experiment(tmp_path / "exp")
    train_tokenizer(exp, cfg)
    return exp, cfg, texts


def test_encode_pairs_drops_and_round_trips(setup):
    exp, cfg, texts = setup
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
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
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    whole, _ = encode_pairs(*texts["train"], src_tok, tgt_tok, MAX_LEN)
    monkeypatch.setattr(mt.data.binarize_workers, "ENCODE_CHUNK", 16)
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
    # train is cleaned (every reason counted), valid is not (only what training cannot use)
    assert train["dropped"] == {"invalid_utf8": 0, "malformed": 0, "empty": 2, "too_long": 1, "ratio": 0, "duplicate": 0}
    assert stats["splits"]["valid"]["dropped"] == {"empty": 2, "too_long": 1}
    assert stats["max_len"] == MAX_LEN
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    assert stats["tokenizer_sha256"] == {"src": src_tok.sha256, "tgt": tgt_tok.sha256}

    data = ParallelData(exp, "valid")
    lines = np.load(exp.lines_path("valid"))
    src, tgt = texts["valid"]
    assert len(data) == len(lines) == stats["splits"]["valid"]["kept"]
    assert data.src_lens.dtype == np.int64 and data.src_lens.sum() == stats["splits"]["valid"]["src_tokens"]
    assert stats["splits"]["valid"]["mean_tgt_len"] == round(data.tgt_lens.mean(), 2)
    for i in (0, 1, len(data) - 1):
        assert data.src(i).tolist() == src_tok.encode([src[lines[i]]])[0]
        assert data.tgt(i).tolist() == tgt_tok.encode([tgt[lines[i]]])[0]
    assert not [p for p in exp.root.iterdir() if p.name.startswith(".data-")]
    # data/ as readable as the experiment's other directories (mkdtemp made it private: 0700)
    assert exp.data_dir.stat().st_mode & 0o777 == exp.tokenizer_dir.stat().st_mode & 0o777


def test_binarize_refuses_existing_data_dir(setup):
    exp, cfg, _ = setup
    binarize(exp, cfg)
    before = exp.data_stats_path.read_bytes()
    with pytest.raises(MtError, match="already binarized; nothing overwritten"):
        binarize(exp, cfg)
    assert exp.data_stats_path.read_bytes() == before


def test_interrupted_binarize_leaves_no_data_dir(setup, monkeypatch):
    exp, cfg, _ = setup
    real_append = mt.data.arrays.SplitWriter.append

    def append_then_fail(self, arrays, lines, direction=0):
        if self.files["lines"].path.name.startswith("valid"):  # train is already written to the temporary directory
            raise KeyboardInterrupt
        real_append(self, arrays, lines, direction)

    monkeypatch.setattr(mt.data.arrays.SplitWriter, "append", append_then_fail)
    with pytest.raises(KeyboardInterrupt):
        binarize(exp, cfg)
    assert not exp.data_dir.exists()
    assert not [p for p in exp.root.iterdir() if p.name.startswith(".data-")]
    monkeypatch.undo()
    assert binarize(exp, cfg)["splits"]["valid"]["kept"] > 0


def test_binarize_without_tokenizer_points_to_train_tokenizer(tmp_path):
    cfg = ExperimentConfig(data=DataConfig(train=["files:a|b"]))
    with pytest.raises(MtError, match="mt train-tokenizer"):
        binarize(Experiment(tmp_path / "exp"), cfg)


def test_parallel_data_missing_points_to_binarize(tmp_path):
    with pytest.raises(MtError, match=r"no binarized test data; run `mt binarize"):
        ParallelData(Experiment(tmp_path / "exp"), "test")


# ---------------------------------------------------------------------------------------------
# At scale: streaming writers, worker processes, cleaning, weights, the manifest


def test_npy_writer_appends_pieces_into_one_loadable_array(tmp_path):
    writer = mt.data.arrays.NpyWriter(tmp_path / "a.npy", np.uint16)
    pieces = [np.arange(5), np.zeros(0, np.int64), np.arange(1000, 1003)]
    for piece in pieces:
        writer.append(piece)
    entry = writer.close()
    expected = np.concatenate(pieces).astype(np.uint16)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), expected)
    assert np.load(tmp_path / "a.npy", mmap_mode="r").dtype == np.uint16
    assert entry["bytes"] == (tmp_path / "a.npy").stat().st_size
    assert entry["sha256"] == hashlib.sha256((tmp_path / "a.npy").read_bytes()).hexdigest()


def test_seen_pairs_finds_duplicates_across_and_within_chunks():
    seen = mt.data.arrays.SeenPairs()
    rng = np.random.default_rng(0)
    stream = rng.integers(0, 300, size=2000).astype(np.uint64)  # many repeats
    masks = [seen.first_seen(stream[i : i + 37]) for i in range(0, len(stream), 37)]
    kept = stream[np.concatenate(masks)]
    assert len(kept) == len(set(kept.tolist())) == len(set(stream.tolist()))
    first_positions = sorted({int(v): i for i, v in reversed(list(enumerate(stream.tolist())))}.values())
    assert np.flatnonzero(np.concatenate(masks)).tolist() == first_positions  # the first of each is kept
    assert len(seen.runs) <= 12  # merged like a binary counter


def copy_tokenizer(exp: Experiment, root) -> Experiment:
    other = Experiment(root)
    shutil.copytree(exp.tokenizer_dir, other.tokenizer_dir)
    return other


def data_files(exp: Experiment) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(exp.data_dir.glob("*.npy"))}


def test_workers_give_the_same_data_as_one_process(setup, tmp_path, monkeypatch):
    before = set(multiprocessing.active_children())  # another module's may live in this test process
    exp, cfg, _ = setup
    # Two sources, one upsampled by 1.5: the random half-copy must not depend on the workers either.
    cfg.data.train = [f"files:{tmp_path / 'train'}*1.5", f"files:{tmp_path / 'valid'}"]
    monkeypatch.setattr(mt.data.binarize_workers, "ENCODE_CHUNK", 16)  # 14 chunks per split: the pool starts
    one = binarize(copy_tokenizer(exp, tmp_path / "one"), cfg, workers=1)
    two = binarize(copy_tokenizer(exp, tmp_path / "two"), cfg, workers=2)
    assert one == two
    assert data_files(Experiment(tmp_path / "one")) == data_files(Experiment(tmp_path / "two"))
    sources = one["splits"]["train"]["sources"]
    assert [s["pairs_in"] for s in sources] == [210, 210]
    # The valid file holds the same captions in another order: deduplication spans sources.
    assert sources[0]["kept"] == 207 and sources[1]["kept"] < 10
    counts_add_up(one["splits"]["train"])
    counts = np.bincount(np.load(Experiment(tmp_path / "two").lines_path("train")), minlength=420)
    assert set(counts[:210].tolist()) == {0, 1, 2} and 60 < (counts[:210] == 2).sum() < 150  # 1.5: once, about half twice
    assert set(counts[210:].tolist()) <= {0, 1} and counts.sum() == one["splits"]["train"]["kept"]
    assert set(multiprocessing.active_children()) <= before


@pytest.fixture
def word_pieces(setup, tmp_path):
    """The setup's corpus with a 90-piece tokenizer without byte fallback: its pieces are word parts
    that can be split several ways (setup's 300 pieces, 256 of them bytes, leave mostly characters,
    which split one way only)."""
    _, cfg, texts = setup
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 90, False
    exp = Experiment(tmp_path / "word-pieces")
    train_tokenizer(exp, cfg)
    return exp, cfg, texts


def decoded_rows(exp: Experiment, cfg) -> list[tuple[str, str]]:
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    data = ParallelData(exp, "train")
    return [(src_tok.decode([data.src(i)])[0], tgt_tok.decode([data.tgt(i)])[0]) for i in range(len(data))]


def test_train_segmentations_write_sampled_copies_that_decode_to_the_text(word_pieces):
    exp, cfg, texts = word_pieces
    cfg.tokenizer.train_segmentations, cfg.tokenizer.sampling_alpha = 3, 0.3
    stats = binarize(exp, cfg)
    train = stats["splits"]["train"]
    assert train["kept"] == 3 * 207 and train["segmentations"] == {"copies": 3, "sampling_alpha": 0.3}
    assert train["pairs_kept"] == 207
    assert rows_text(train) == "207×3" and rows_text(stats["splits"]["valid"]) == "207"
    assert stats["splits"]["valid"]["kept"] == 207 and "segmentations" not in stats["splits"]["valid"]
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    data, lines = ParallelData(exp, "train"), np.load(exp.lines_path("train"))
    # One chunk: the best segmentations first, then each sampled copy of the same pairs in order.
    assert (lines[:207] == lines[207:414]).all() and (lines[:207] == lines[414:]).all()
    assert decoded_rows(exp, cfg) == [(texts["train"][0][line], texts["train"][1][line]) for line in lines]
    differ = 0
    for i in range(len(data)):
        for ids, tok, text in ((data.src(i), src_tok, texts["train"][0]), (data.tgt(i), tgt_tok, texts["train"][1])):
            best = tok.encode([text[lines[i]]])[0]
            if i < 207:
                assert ids.tolist() == best
            else:
                differ += ids.tolist() != best
    assert differ > 0.3 * 2 * 414  # alpha 0.3: most sentences are split another way (94% here)
    valid = ParallelData(exp, "valid")
    valid_lines = np.load(exp.lines_path("valid"))
    assert all(valid.src(i).tolist() == src_tok.encode([texts["valid"][0][valid_lines[i]]])[0] for i in range(len(valid)))


def test_sampled_copies_follow_deduplication_and_upsampling_in_worker_processes(word_pieces, tmp_path, monkeypatch):
    before = set(multiprocessing.active_children())  # another module's may live in this test process
    exp, cfg, _ = word_pieces
    cfg.tokenizer.train_segmentations = 2
    # As in test_workers_give_the_same_data_as_one_process: a 1.5 weight, duplicates across sources.
    cfg.data.train = [f"files:{tmp_path / 'train'}*1.5", f"files:{tmp_path / 'valid'}"]
    monkeypatch.setattr(mt.data.binarize_workers, "ENCODE_CHUNK", 16)
    texts = [line for name in ("train", "valid") for line in zip(*sentence_pairs(0 if name == "train" else 1))]
    runs = {}
    for workers in (1, 2):
        other = copy_tokenizer(exp, tmp_path / f"workers{workers}")
        runs[workers] = binarize(other, cfg, workers=workers)["splits"]["train"]
        lines = np.load(other.lines_path("train"))
        assert decoded_rows(other, cfg) == [texts[line] for line in lines]
        counts = np.bincount(lines, minlength=420)
        assert set(counts[:210].tolist()) == {0, 2, 4} and set(counts[210:].tolist()) <= {0, 2}
    assert runs[1]["kept"] == runs[2]["kept"] and runs[1]["sources"] == runs[2]["sources"]
    assert set(multiprocessing.active_children()) <= before


def counts_add_up(split: dict) -> None:
    """pairs read = pairs kept + every drop reason, for the split and each of its sources."""
    assert split["pairs_kept"] + sum(split["dropped"].values()) == split["pairs_in"]
    for source in split.get("sources", ()):
        assert source["kept"] + sum(source["dropped"].values()) == source["pairs_in"], source
    if "sources" in split:  # per-source tallies, where stats.json keeps them, sum to the split's
        assert sum(s["kept"] for s in split["sources"]) == split["pairs_kept"]
        assert sum(s["rows"] for s in split["sources"]) == split["kept"]


def twice(tmp_path) -> tuple[str, str]:
    """Two sources holding the same pairs: the setup's train files, and a copy of them."""
    for lang in ("de", "en"):
        shutil.copy(tmp_path / f"train.{lang}", tmp_path / f"copy.{lang}")
    return f"files:{tmp_path / 'train'}", f"files:{tmp_path / 'copy'}"


def test_pairs_a_fractional_weight_leaves_out_are_kept_from_a_later_source(setup, tmp_path, monkeypatch):
    exp, cfg, texts = setup
    first, second = twice(tmp_path)
    cfg.data.train = [f"{first}*0.5", second]
    monkeypatch.setattr(mt.data.binarize_workers, "ENCODE_CHUNK", 16)  # many chunks, and the pool with 2 workers
    runs = {w: binarize(copy_tokenizer(exp, tmp_path / f"workers{w}"), cfg, workers=w) for w in (1, 2)}
    assert runs[1] == runs[2]
    train = runs[2]["splits"]["train"]
    # Every distinct pair that passes the filters is kept: about half from the sample, the rest from the copy.
    other = Experiment(tmp_path / "workers2")
    pairs = list(zip(*texts["train"]))
    assert sorted(decoded_rows(other, cfg)) == sorted(pairs[i] for i in range(210) if i not in (5, 7, 9))
    assert train["pairs_in"] == 420 and train["pairs_kept"] == train["kept"] == 207
    counts_add_up(train)
    sample, rest = train["sources"]
    assert 60 < sample["kept"] < 150 and sample["dropped"]["subsampled"] == 207 - sample["kept"]
    assert rest["kept"] == 207 - sample["kept"] and rest["dropped"]["duplicate"] == sample["kept"]
    assert train["dropped"] == {"invalid_utf8": 0, "malformed": 0, "empty": 4, "too_long": 2, "ratio": 0,
                                "subsampled": 207 - sample["kept"], "duplicate": sample["kept"]}
    lines = np.load(other.lines_path("train"))
    assert (lines < 210).sum() == sample["kept"] and (lines >= 210).sum() == rest["kept"]
    assert data_files(other) == data_files(Experiment(tmp_path / "workers1"))


def test_deduplication_keeps_the_copies_of_an_upsampled_pair(setup, tmp_path, capsys):
    exp, cfg, _ = setup
    first, second = twice(tmp_path)
    cfg.data.train = [f"{first}*2", second]
    train = binarize(exp, cfg)["splits"]["train"]
    assert train["kept"] == 2 * 207 and train["pairs_kept"] == 207  # every pair of the *2 source twice
    counts_add_up(train)
    assert [(s["kept"], s["rows"]) for s in train["sources"]] == [(207, 414), (0, 0)]
    assert train["dropped"]["duplicate"] == 207 and "subsampled" not in train["dropped"]
    lines = np.load(exp.lines_path("train"))
    assert set(np.bincount(lines, minlength=210)[:210].tolist()) == {0, 2} and (lines < 210).all()
    assert (lines[:207] == lines[207:]).all()  # the pairs in order, then again
    # The line says what the 414 rows are: not "kept 414 of 420 pairs".
    assert "train: kept 207 of 420 pairs (empty 4, too long 2, duplicate 207); 414 rows written (data.train weights) in " \
        in capsys.readouterr().err


def test_a_sampled_pair_that_fails_the_length_filters_keeps_its_best_segmentation(word_pieces):
    exp, cfg, texts = word_pieces
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    src, tgt = (side[10:30] for side in texts["train"])  # no empty or over-long pair
    best = {"src": src_tok.encode(src), "tgt": tgt_tok.encode(tgt)}
    longest = max(len(ids) for ids in best["src"] + best["tgt"])
    ratio = max(max(len(s), len(t)) / min(len(s), len(t)) for s, t in zip(best["src"], best["tgt"]))
    # Every pair passes in its best split; alpha 0.1 makes most samples longer than that.
    filters = mt.data.binarize_workers.Filters(None, longest, ratio, False, segmentations=2, sampling_alpha=0.1)
    chunk = mt.data.corpus.RawChunk("text", src, tgt, ("de", "en"), 0)
    result = mt.data.binarize_workers.Encoder(src_tok, tgt_tok)(chunk, filters)
    sample = result["samples"][0]
    src_lens, tgt_lens = sample["src_lens"], sample["tgt_lens"]
    assert len(src_lens) == len(tgt_lens) == len(result["src_lens"]) == 20
    assert max(src_lens.max(), tgt_lens.max()) <= longest
    assert (np.maximum(src_lens, tgt_lens) <= ratio * np.minimum(src_lens, tgt_lens)).all()
    offsets = {side: np.concatenate([[0], np.cumsum(sample[f"{side}_lens"])]) for side in ("src", "tgt")}
    rows = {side: [sample[f"{side}_ids"][offsets[side][i]:offsets[side][i + 1]].tolist() for i in range(20)]
            for side in ("src", "tgt")}
    kept_best = [rows["src"][i] == best["src"][i] and rows["tgt"][i] == best["tgt"][i] for i in range(20)]
    assert 0 < sum(kept_best) < 20  # some pairs fell back whole, others were sampled


def crafted_corpus(tmp_path) -> list[str]:
    """Every kind of bad line, in three sources (aligned files, TSV, JSON lines)."""
    long_src = " und ".join(["Ein Mann läuft im Park"] * 30) + "."
    de = [b"Ein Mann l\xc3\xa4uft im Park.",  # 1 kept
          b"Ein Hund \xff sitzt.",  # 2 invalid UTF-8
          b"",  # 3 empty
          b"   ",  # 4 empty once whitespace is trimmed
          long_src.encode(),  # 5 too long
          "Ein Mann läuft im Park und eine Frau wartet am Strand und ein Hund spielt.".encode(),  # 6 ratio
          "Ein Mann läuft im Park.".encode(),  # 7 duplicate of 1
          "Ein  Mann läuft im Park. ".encode(),  # 8 duplicate of 1 once whitespace is collapsed
          "Eine Frau\x07 wartet am Strand.".encode(),  # 9 control character: kept, cleaned
          "Ein kleines Ma\u0308dchen spielt.".encode(),  # 10 decomposed umlaut: kept, NFC
          "Ein kleines Mädchen spielt.".encode()]  # 11 duplicate of 10 after NFC
    en = ["A man walks in the park.", "A dog sits.", "A woman.", "A boy.", "A man.", "Dog.",
          "A man walks in the park.", "A man walks in the park.", "A woman waits on the beach.",
          "A little girl plays.", "A little girl plays."]
    (tmp_path / "crafted.de").write_bytes(b"\n".join(de) + b"\n")
    (tmp_path / "crafted.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "extra.tsv").write_text("Ein Hund\tA dog\textra column\nEin Hund spielt.\tA dog plays.\n", encoding="utf-8")
    (tmp_path / "extra.jsonl").write_text(
        '{"translation": {"de": "Ein Junge tanzt.", "en": "A boy dances."}}\n{"de": "broken\n', encoding="utf-8")
    return [f"files:{tmp_path / 'crafted'}", f"tsv:{tmp_path / 'extra.tsv'}", f"jsonl:{tmp_path / 'extra.jsonl'}"]


def test_cleaning_counts_every_reason(setup, tmp_path, capsys):
    exp, cfg, _ = setup
    cfg.data.train = crafted_corpus(tmp_path)
    cfg.data.max_len_ratio = 3.0
    src_tok, _ = exp.load_tokenizers(cfg.tokenizer.joint)
    assert len(src_tok.encode(["Ein Mann läuft im Park und eine Frau wartet am Strand und ein Hund spielt."])[0]) > 3 * len(
        src_tok.encode(["Dog."])[0])
    stats = binarize(exp, cfg)["splits"]["train"]
    assert stats["pairs_in"] == 11 + 2 + 2
    assert stats["dropped"] == {"invalid_utf8": 1, "malformed": 2, "empty": 2, "too_long": 1, "ratio": 1, "duplicate": 3}
    assert stats["kept"] == stats["pairs_kept"] == 5
    counts_add_up(stats)
    assert stats["cleaning"]["fixed_lines"] == {"control": 1, "unicode": 1, "whitespace": 3}
    examples = stats["cleaning"]["examples"]
    assert examples["invalid_utf8"] == [f"{tmp_path / 'crafted.de'}:2: not valid UTF-8 (byte 0xff)"]
    assert examples["malformed"] == [f"{tmp_path / 'extra.tsv'}:1: expected 2 tab-separated fields, found 3",
                                     f"{tmp_path / 'extra.jsonl'}:2: not a JSON object"]
    assert [s["kept"] for s in stats["sources"]] == [3, 1, 1]
    # Line numbers run over the sources in order; kept pairs are the cleaned text.
    lines = np.load(exp.lines_path("train")).tolist()
    assert lines == [0, 8, 9, 12, 13]
    data = ParallelData(exp, "train")
    assert src_tok.decode([data.src(1), data.src(2)]) == ["Eine Frau wartet am Strand.", "Ein kleines Mädchen spielt."]
    err = capsys.readouterr().err
    assert "crafted.de:2: not valid UTF-8" in err and "duplicate 3" in err
    # valid is not cleaned: its raw lines stay (the scores compare against them)
    assert stats is not None and "cleaning" not in json.loads(exp.data_stats_path.read_text())["splits"]["valid"]


def test_without_cleaning_invalid_utf8_is_an_error(setup, tmp_path):
    exp, cfg, _ = setup
    cfg.data.train = crafted_corpus(tmp_path)[:1]
    cfg.data.clean = False
    with pytest.raises(MtError, match=r"crafted\.de:2: not valid UTF-8 \(byte 0xff\)"):
        binarize(exp, cfg)
    assert not exp.data_dir.exists()


def test_mismatched_line_counts_name_both_files(setup, tmp_path):
    exp, cfg, _ = setup
    (tmp_path / "train.en").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(MtError, match=rf"{tmp_path / 'train.de'} has 210 lines but {tmp_path / 'train.en'} has 2"):
        binarize(exp, cfg)
    assert not exp.data_dir.exists()


def test_interrupted_binarize_with_workers_leaves_the_experiment_usable(setup, monkeypatch):
    before = set(multiprocessing.active_children())  # another module's may live in this test process
    exp, cfg, _ = setup
    exp.root.joinpath(".data-999999999-x1y2").mkdir()  # left by a binarize that was killed
    exp.root.joinpath(".data-999999999-x1y2", ".mt-data-build").touch()  # binarize's mark
    users = exp.root / ".data-2024-backup"  # the name's shape, a user's: was deleted
    (users / "train.de").parent.mkdir()
    (users / "train.de").write_text("mine\n", encoding="utf-8")
    monkeypatch.setattr(mt.data.binarize_workers, "ENCODE_CHUNK", 16)
    real_append, calls = mt.data.arrays.SplitWriter.append, []

    def append_then_interrupt(self, arrays, lines, direction=0):
        calls.append(1)
        if len(calls) == 3:  # the pool is running, with chunks in flight
            raise KeyboardInterrupt
        real_append(self, arrays, lines, direction)

    monkeypatch.setattr(mt.data.arrays.SplitWriter, "append", append_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        binarize(exp, cfg, workers=2)
    assert not exp.data_dir.exists() and set(multiprocessing.active_children()) <= before
    # Its own temporary directory is gone, and so is the killed run's (its process is not alive).
    assert [p.name for p in exp.root.iterdir() if p.name.startswith(".data-")] == [users.name]
    assert (users / "train.de").read_text(encoding="utf-8") == "mine\n"
    monkeypatch.setattr(mt.data.arrays.SplitWriter, "append", real_append)
    stats = binarize(exp, cfg, workers=2)
    assert stats["splits"]["train"]["kept"] == 207


def test_manifest_and_a_retrained_tokenizer_refused_by_train(setup):
    from mt.training.setup import build_training

    exp, cfg, _ = setup
    binarize(exp, cfg)
    manifest = json.loads(exp.manifest_path.read_text())
    src_tok, _ = exp.load_tokenizers(cfg.tokenizer.joint)
    assert manifest["tokenizer_sha256"] == {"src": src_tok.sha256, "tgt": src_tok.sha256}
    assert manifest["splits"]["train"] == {"kept": 207, "src_tokens": manifest["splits"]["train"]["src_tokens"],
                                           "tgt_tokens": manifest["splits"]["train"]["tgt_tokens"]}
    assert set(manifest["files"]) == {p.name for p in exp.data_dir.glob("*.npy")}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((exp.data_dir / name).read_bytes()).hexdigest()
    check_data(exp, manifest["tokenizer_sha256"])

    shutil.rmtree(exp.tokenizer_dir)  # retrained after binarizing: refused while data/ holds the old ids
    cfg.tokenizer.vocab_size = 320
    with pytest.raises(MtError, match="no tokenizer, but .*data was made with one"):
        train_tokenizer(exp, cfg)
    exp.data_dir.rename(exp.root / "data.kept")  # ... so trained beside it, and the data put back
    train_tokenizer(exp, cfg)
    (exp.root / "data.kept").rename(exp.data_dir)
    cfg.model = ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, n_heads=2)
    with pytest.raises(MtError, match="binarized with another tokenizer") as err:
        build_training(exp, cfg)
    assert "\n" not in str(err.value) and "mt binarize" in str(err.value)

    with open(exp.ids_path("train", "src"), "r+b") as handle:  # a changed data file
        handle.seek(-1, 2)
        handle.write(b"\x07")
    with pytest.raises(MtError, match=r"train\.src\.ids\.npy: changed since `mt binarize`"):
        check_data(exp, manifest["tokenizer_sha256"])


def test_cli_train_sources_and_workers(tmp_path):
    """`mt train-tokenizer --train ... --train ...` then `mt binarize --workers 2`, through the CLI."""
    src, tgt = sentence_pairs(0)
    (tmp_path / "a.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in zip(src[:120], tgt[:120])), encoding="utf-8")
    (tmp_path / "b.de").write_text("\n".join(src[120:]) + "\n", encoding="utf-8")
    (tmp_path / "b.en").write_text("\n".join(tgt[120:]) + "\n", encoding="utf-8")

    def mt_cli(*args):
        return subprocess.run([sys.executable, "-m", "mt", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    done = mt_cli("train-tokenizer", "--exp", "exp", "--train", "tsv:a.tsv", "--train", "files:b*2",
                  "--valid", "files:b", "--src-lang", "de", "--tgt-lang", "en", "--vocab-size", "300")
    assert done.returncode == 0, done.stderr
    assert "of 210 training pairs" in done.stderr
    config = (tmp_path / "exp" / "config.yaml").read_text()
    assert f"tsv:{tmp_path / 'a.tsv'}" in config and f"files:{tmp_path / 'b'}*2" in config
    bad = mt_cli("binarize", "--exp", "exp", "--workers", "0")
    assert bad.returncode == 2 and "--workers 0" in bad.stderr
    bad = mt_cli("binarize", "--exp", "exp", "--workers", "100000")  # was a pool of 100,000 processes
    assert bad.returncode == 2 and "--workers 100000: expected 1 to 256" in bad.stderr
    done = mt_cli("binarize", "--exp", "exp", "--workers", "2")
    assert done.returncode == 0, done.stderr
    stats = json.loads((tmp_path / "exp" / "data" / "stats.json").read_text())
    train = stats["splits"]["train"]
    assert [s["pairs_in"] for s in train["sources"]] == [120, 90]
    assert train["sources"][0]["kept"] in (116, 117) and train["sources"][1]["kept"] == 90  # a.tsv holds the bad pairs
    assert train["kept"] == train["sources"][0]["kept"] + 2 * 90 and "train: kept" in done.stderr


def test_a_data_folder_mt_did_not_write_is_never_replaced_even_with_force(setup):
    """A user's corpora in EXP/data/ (`--exp .` at a project's root) were called "already binarized",
    and `--force` moved them aside and deleted them."""
    exp, cfg, _ = setup
    exp.data_dir.mkdir()
    (exp.data_dir / "train.de").write_text("mein Korpus\n", encoding="utf-8")
    for force in (False, True):
        with pytest.raises(MtError, match=r"data: not data `mt binarize` wrote \(no manifest\.json\).*move it out"):
            binarize(exp, cfg, force=force)
    assert [p.name for p in exp.data_dir.iterdir()] == ["train.de"] and not exp.has_data()
    assert not [p for p in exp.root.iterdir() if p.name.startswith(".data-")]


def test_a_missing_file_of_any_split_is_refused_before_the_training_split_is_read(setup, monkeypatch):
    """A mistyped valid path was found after the training split was encoded (hours, on a real corpus)."""
    exp, cfg, _ = setup
    read = []
    real = mt.data.binarize.binarize_split
    monkeypatch.setattr(mt.data.binarize, "binarize_split", lambda *a, **k: read.append(a[2]) or real(*a, **k))
    valid = cfg.data.valid
    cfg.data.valid = [*valid, "files:/no/such/valid"]
    with pytest.raises(MtError, match=r"^data\.valid: /no/such/valid\.\w\w: no such file$"):
        binarize(exp, cfg)
    # a local data file of hf: and a dictionary file of ding: too (were read, or failed, after train)
    for spec, path in (("hf:/no/such/valid.jsonl", "/no/such/valid.jsonl"), ("ding:/no/such/de-en@valid", "/no/such/de-en")):
        cfg.data.valid = [*valid, spec]
        with pytest.raises(MtError, match=rf"^data\.valid: {path}: no such file$"):
            binarize(exp, cfg)
    assert read == [] and not exp.data_dir.exists()


def test_a_side_longer_than_max_len_pieces_can_hold_is_dropped_without_being_encoded(setup):
    """Every line was encoded before the length filter: a line of megabytes took many times its size as Python ids."""
    exp, cfg, _ = setup
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    seen: list[int] = []

    class Watched(type(src_tok)):  # the real tokenizer, its inputs' lengths noted
        def encode(self, lines, *args, **kwargs):
            seen.extend(map(len, lines))
            return super().encode(lines, *args, **kwargs)

    src_tok.__class__ = Watched
    huge = "Hund " * 40_000  # 200,000 characters
    spaced = " " * 20_000 + "Hund"  # long, but one word: encoded and kept
    src, tgt = ["ein Hund", huge, "", spaced], ["a dog", "a dog", huge, "a dog"]
    _, counts = encode_pairs(src, tgt, src_tok, tgt_tok, MAX_LEN)
    assert counts["dropped"] == {"empty": 1, "too_long": 1} and counts["kept"] == 2
    assert max(seen) <= 20_004 and len(huge) not in seen


def test_valid_and_test_pairs_also_in_train_are_counted_and_said(setup, capsys):
    """A test split that overlaps the training data was binarized without a word: its scores flatter."""
    exp, cfg, _ = setup
    cfg.data.test = list(cfg.data.train)  # the training files again
    stats = binarize(exp, cfg)
    test, valid = stats["splits"]["test"], stats["splits"]["valid"]
    assert test["in_train"] == test["pairs_kept"] > 0 and valid["in_train"] < valid["pairs_kept"]
    err = capsys.readouterr().err
    assert f"test: {test['pairs_kept']:,} of its {test['pairs_kept']:,} pairs are also in the training split" in err
    # the training split not deduplicated: counted all the same (was: only with data.dedup)
    cfg.data.dedup = False
    again = binarize(exp, cfg, force=True)["splits"]
    assert (again["test"]["in_train"], again["valid"]["in_train"]) == (test["in_train"], valid["in_train"])


def test_a_test_pair_differing_from_a_training_pair_only_as_cleaning_undoes_is_in_train(setup, tmp_path):
    """Was: valid and test (read strictly) were hashed as written and training pairs as cleaned, so a
    test pair with a trailing space, a doubled space or decomposed letters was not counted."""
    import unicodedata

    exp, cfg, texts = setup
    src, tgt = texts["train"]
    pairs = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip() and len(s) < 60 and " " in s][:20]
    (tmp_path / "spaced.de").write_text("".join(unicodedata.normalize("NFD", s.replace(" ", "  ")) + " \n"
                                                for s, _ in pairs), encoding="utf-8")
    (tmp_path / "spaced.en").write_text("".join(f" {t}\n" for _, t in pairs), encoding="utf-8")
    cfg.data.test = [f"files:{tmp_path / 'spaced'}"]
    test = binarize(exp, cfg)["splits"]["test"]
    assert test["in_train"] == test["pairs_kept"] == len(pairs)


def test_workers_stop_even_when_the_pools_own_terminate_hangs(setup, monkeypatch):
    """Pool.terminate waited for ever on its task thread (blocked writing into a pipe no worker read):
    an interrupted binarize, and CI once, hung. The pool's processes are killed after a while instead."""
    import threading
    import time

    from mt.data.binarize_workers import Workers

    exp, cfg, _ = setup
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    workers = Workers(src_tok, tgt_tok, 2)
    assert list(workers._in_pool(iter([]))) == []  # the pool started, nothing to encode
    pool = workers.pool
    processes = list(pool._pool)
    monkeypatch.setattr(mt.data.binarize_workers, "TERMINATE_SECONDS", 0.5)
    monkeypatch.setattr(type(pool), "terminate", lambda self: threading.Event().wait())  # as it hung
    start = time.perf_counter()
    workers.close()
    assert time.perf_counter() - start < 5 and workers.pool is None
    assert not any(process.is_alive() for process in processes)
