"""The lexical shortlist of an experiment: `mt.data.shortlist` learns the toy corpus' word-for-word
translations and saves a table that reloads; `mt run`'s step shortlist is skipped while the table is
fresh and built again when the data change; `mt shortlist` and `mt translate --shortlist` on the
command line, with constraints and alignments, and their one-line refusals."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from helpers import build_experiment, mt, toy_corpus
from helpers.toy import WORDS_DE, WORDS_EN

from mt.apps.run import run_recipe
from mt.data.binarize import binarize
from mt.data.shortlist import build_shortlist, load_table, stale_reason, vmap_lines
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import MtError
from mt.experiment.paths import Experiment


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Experiment:
    exp = build_experiment(tmp_path_factory.mktemp("shortlist"))
    cfg = exp.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 3, 4
    tok = exp.load_tokenizers(True)[0]
    build_shortlist(exp, cfg, tok.vocab_size, tok.vocab_size)
    return exp


def test_the_table_learns_the_corpus_word_translations_and_reloads(built):
    table, tok = load_table(built), built.load_tokenizers(True)[0]
    assert table.candidates.shape == (tok.vocab_size, 3) and len(table.frequent) == 4
    learnt = checked = 0
    for de, en in zip(WORDS_DE, WORDS_EN):
        (source,), target = tok.encode([de]), tok.encode([en])[0]
        if len(source) == 1 and len(target) == 1:  # a word that is one piece on both sides
            checked += 1
            learnt += target[0] in table.candidates[source[0]].tolist()
    assert checked >= 5 and learnt >= 0.8 * checked, f"{learnt} of {checked} words' translations are candidates"
    with np.load(built.shortlist_path, allow_pickle=False) as arrays:  # numpy's own format, no pickle
        assert json.loads(str(arrays["meta"]))["method"] == "ibm1"
    vmap = list(vmap_lines(table, tok.pieces(list(range(tok.vocab_size))), tok.pieces(list(range(tok.vocab_size)))))
    assert vmap[0].startswith("\t") and len(vmap[0].split()) == 4
    assert all(line.count("\t") == 1 and len(line.split("\t")[1].split()) <= 3 for line in vmap[1:])


def test_the_table_is_built_in_chunks_of_token_pairs_and_the_same_whatever_their_size(built, monkeypatch):
    """Chunks of 8,192 sentence pairs held every (source, target) token pair of each: gigabytes for
    documents of hundreds of tokens. Cut by token pairs, a chunk's size is bounded by them."""
    from mt.data import shortlist
    from mt.data.dataset import ParallelData

    data = ParallelData(built, "train")
    picked = np.arange(len(data))
    monkeypatch.setattr(shortlist, "CHUNK_TOKEN_PAIRS", 500)
    chunks = shortlist._chunks(data, picked)
    assert np.array_equal(np.concatenate(chunks), picked) and len(chunks) > 3
    most = int(((data.src_lens + 1) * data.tgt_lens).max())
    assert all(int(((data.src_lens[c] + 1) * data.tgt_lens[c]).sum()) <= 500 + most for c in chunks)
    tok = built.load_tokenizers(True)[0]
    small = shortlist.build_table(built, 3, 4, tok.vocab_size, tok.vocab_size)
    assert np.array_equal(small.candidates, load_table(built).candidates)


def test_the_vocabulary_map_keeps_the_unknown_pieces_row_as_mts_search_reads_it():
    """Without byte fallback an unknown character is `<unk>` in the source, and mt's search adds its
    row's candidates (mt.decoding.shortlist): CTranslate2 must find the same row in the map."""
    from mt.data.shortlist import LexicalTable

    candidates = np.full((6, 2), -1, dtype=np.int32)
    candidates[1] = [4, 5]  # <unk>
    candidates[4] = [5, -1]
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b"]
    lines = list(vmap_lines(LexicalTable(candidates, np.array([4], dtype=np.int32), {}), pieces, pieces))
    assert lines == ["\t▁a\n", "<unk>\t▁a ▁b\n", "▁a\t▁b\n"]


def test_the_vocabulary_map_takes_pieces_of_other_spaces_and_refuses_only_its_separators():
    """A CJK tokenizer without normalization keeps U+3000 and U+00A0 as pieces: they were refused (any
    `isspace`), and with them every export and the CTranslate2 engine of the experiment; CTranslate2
    splits at tab and space only. A piece holding one of those, where the map would write it, is refused."""
    from mt.data.shortlist import LexicalTable

    candidates = np.full((7, 2), -1, dtype=np.int32)
    candidates[4] = [5, 6]
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "\u3000", "\xa0", "▁東京"]
    lines = list(vmap_lines(LexicalTable(candidates, np.array([6], dtype=np.int32), {}), pieces, pieces))
    assert lines == ["\t▁東京\n", "\u3000\t\xa0 ▁東京\n"]
    unused = [*pieces, "a b"]  # never written: no refusal
    assert len(list(vmap_lines(LexicalTable(np.vstack([candidates, [[-1, -1]]]), np.array([6]), {}), unused, unused))) == 2
    candidates[4] = [5, 1]
    with pytest.raises(MtError, match="cannot hold \\('a b'\\)"):
        list(vmap_lines(LexicalTable(candidates, np.array([6]), {}), pieces, ["a b" if p == "<unk>" else p for p in pieces]))


def test_a_table_is_stale_for_other_sizes_and_other_data(built, tmp_path):
    cfg = built.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 3, 4
    assert stale_reason(built, cfg) is None
    cfg.decode.shortlist_top = 5
    assert stale_reason(built, cfg) == "built with top 3, frequent 4"
    copy = Experiment(tmp_path / "copy")
    shutil.copytree(built.root, copy.root)
    cfg.decode.shortlist_top = 3
    good = copy.shortlist_path.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0xFF
    # not a zip, one cut short and one with a flipped byte (these two were zipfile.BadZipFile's tracebacks)
    for damaged in (b"not a table", good[: len(good) // 2], bytes(flipped)):
        copy.shortlist_path.write_bytes(damaged)
        assert "unreadable shortlist" in stale_reason(copy, cfg)
        with pytest.raises(MtError, match="unreadable shortlist"):
            load_table(copy)


def test_mt_run_skips_a_fresh_shortlist_and_builds_it_again_when_the_data_change(tmp_path):
    for split, n in (("train", 200), ("valid", 10), ("test", 10)):
        src, tgt = toy_corpus(n, seed=len(split))
        (tmp_path / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        json.dumps(
            {
                "exp": str(tmp_path / "exp"),
                "steps": ["train-tokenizer", "binarize", "shortlist"],
                "data": {
                    "src_lang": "de",
                    "tgt_lang": "en",
                    **{s: [f"files:{tmp_path / s}"] for s in ("train", "valid", "test")},
                },
                "tokenizer": {"vocab_size": 100, "byte_fallback": False},
                "decode": {"shortlist": True, "shortlist_top": 3},
            }
        ),
        encoding="utf-8",
    )
    run_recipe(recipe, None, {}, print_result=lambda line: None)
    exp = Experiment(tmp_path / "exp")
    first = load_table(exp).meta
    assert first["top"] == 3 and stale_reason(exp, exp.load_config()) is None
    stamp = exp.shortlist_path.stat().st_mtime_ns
    run_recipe(recipe, None, {}, print_result=lambda line: None)  # fresh: not built again
    assert exp.shortlist_path.stat().st_mtime_ns == stamp
    more_src, more_tgt = toy_corpus(100, seed=77)  # the corpus grows; binarize --force makes data/ again
    with (
        open(tmp_path / "train.de", "a", encoding="utf-8") as de,
        open(tmp_path / "train.en", "a", encoding="utf-8") as en,
    ):
        de.write("\n".join(more_src) + "\n")
        en.write("\n".join(more_tgt) + "\n")
    binarize(exp, exp.load_config(), force=True)
    assert stale_reason(exp, exp.load_config()) == "built from other training data"
    run_recipe(recipe, None, {}, print_result=lambda line: None)
    again = load_table(exp).meta
    assert again["train_sha256"] != first["train_sha256"] and again["sentence_pairs"] > first["sentence_pairs"]
    assert stale_reason(exp, exp.load_config()) is None


@pytest.mark.slow
def test_mt_run_evaluating_with_the_shortlist_builds_it_as_configured_first(trained_copy, tmp_path):
    """A recipe whose steps do not name shortlist (none of mt's do) but decodes with it: the table of
    another decode.shortlist_top was used and the scores said done, under a config naming the new size."""
    recipe = tmp_path / "eval.yaml"
    for top in (3, 5):
        recipe.write_text(json.dumps({"steps": ["evaluate"], "decode": {"shortlist": True, "shortlist_top": top}}))
        results: list[str] = []
        run_recipe(recipe, trained_copy.root, {}, print_result=results.append)
        assert load_table(trained_copy).meta["top"] == top
        assert stale_reason(trained_copy, trained_copy.load_config()) is None
        assert any(line.startswith("test: BLEU") for line in results)
        assert json.loads(trained_copy.score_path("test").read_text())["decode"]["shortlist"] is True


@pytest.fixture
def trained_copy(trained_experiment, tmp_path) -> Experiment:
    shutil.copytree(trained_experiment.root, tmp_path / "exp")
    return Experiment(tmp_path / "exp")


def test_the_command_line_builds_it_and_translate_decodes_with_it(trained_copy, tmp_path, capsys, monkeypatch):
    lines = toy_corpus(12, seed=5)[0]
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    translate = ("translate", "--exp", trained_copy.root, "--input", tmp_path / "in.de", "--shortlist", "--threads", "1")
    code, out, err = mt(capsys, monkeypatch, *translate)
    assert code == 1 and "no shortlist yet" in err and f"mt shortlist --exp {trained_copy.root}" in err
    code, out, err = mt(capsys, monkeypatch, "shortlist", "--exp", trained_copy.root, "--top", "2", "--frequent", "3")
    assert code == 0 and out.strip() == str(trained_copy.shortlist_path), err
    assert trained_copy.load_config().decode.shortlist_top == 2  # saved: `mt run` finds it fresh
    code, out, err = mt(capsys, monkeypatch, "shortlist", "--exp", trained_copy.root, "--top", "4")
    assert code == 1 and "add --force" in err and trained_copy.load_config().decode.shortlist_top == 2
    code, out, _ = mt(capsys, monkeypatch, *translate)
    cfg = trained_copy.load_config()
    translator = Translator.load(trained_copy, cfg)
    expected = [hyps[0][0] for hyps in translator.search(lines, DecodeOptions(shortlist=True))]
    assert code == 0 and out.splitlines() == expected
    plain = [hyps[0][0] for hyps in translator.search(lines)]
    code, out, _ = mt(
        capsys,
        monkeypatch,
        "translate",
        "--exp",
        trained_copy.root,
        "--input",
        tmp_path / "in.de",
        "--no-shortlist",
        "--threads",
        "1",
    )
    assert code == 0 and out.splitlines() == plain
    allowed = set(
        translator.shortlist.batch_vocabulary(translator.pad_sources(translator.src_tok.encode(lines))).tolist()
    )
    assert len(allowed) < translator.tgt_tok.vocab_size
    assert all(set(ids) <= allowed for ids in translator.tgt_tok.encode(expected))


def test_constraints_nbest_and_alignments_with_the_shortlist(trained_copy):
    cfg = trained_copy.load_config()
    cfg.decode.shortlist_top, cfg.decode.shortlist_frequent = 2, 0
    tok = trained_copy.load_tokenizers(True)[0]
    build_shortlist(trained_copy, cfg, tok.vocab_size, tok.vocab_size)
    translator = Translator.load(trained_copy, cfg)
    found = translator.search(
        ["Der hund läuft im park.\thouse"], DecodeOptions(constraints=True, shortlist=True, nbest=2)
    )
    assert len(found[0]) == 2 and all("house" in text for text, _ in found[0])
    aligned = translator.search(["Der hund läuft."], DecodeOptions(shortlist=True, alignment_layer=1))
    text, _, alignment = aligned[0][0]
    assert text and alignment and all("-" in pair for pair in alignment.split())
