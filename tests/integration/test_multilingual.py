"""One model for several directions (data.directions, Johnson et al. 2017): the config and the corpus
grammar, the tokenizer's tags and balanced sample, binarize's tagged sources, balanced batches, and
every command on a tiny model trained on en-de, de-en, en-fr and fr-en of a multi-way toy corpus:
the tag picks the output language, de-fr is zero-shot (a warning) or pivoted, a target without a tag
is refused naming the directions, evaluate scores each direction, serve answers each pair, export
carries the tags. A bilingual experiment is unchanged: the rest of the suite, and
tests/integration/test_saved_experiment.py, run on bilingual ones.
"""

from __future__ import annotations

import html
import json
import re
import zipfile

import numpy as np
import pytest
import torch
from helpers import LINES, WORDS_DE, WORDS_FR, mt, one_thread, toy_multiway

from mt.config.schema import ExperimentConfig, set_field, validate
from mt.config.sources import parse_source
from mt.data.batching import balanced_epoch
from mt.data.binarize import binarize
from mt.data.dataset import ParallelData
from mt.data.train_tokenizer import balanced_counts, train_tokenizer
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.experiment.config import open_experiment
from mt.experiment.paths import Experiment
from mt.tokenizer import EOS_ID
from mt.training.loop import train

DIRECTIONS = ["en-de", "de-en", "en-fr", "fr-en"]
GERMAN, FRENCH = set(WORDS_DE) - set(WORDS_FR), set(WORDS_FR) - set(WORDS_DE)
SPANISH = "Dos hombres jóvenes juegan al fútbol en un campo verde."  # a language none of the models reads


# -- the config and the grammar -----------------------------------------------------------------
def test_directions_and_the_sources_they_read():
    cfg = ExperimentConfig()
    cfg.data.directions = ["en-de", "de-en"]
    cfg.data.train = ["files:/c/train", "files:/c/extra~en-de*2"]
    validate(cfg, "test")
    assert cfg.data.pairs() == [("en", "de"), ("de", "en")] and cfg.data.languages() == ["en", "de"]
    assert [s.paths for s in cfg.data.sources("train", ("en", "de"))] == [("/c/train.en", "/c/train.de"),
                                                                          ("/c/extra.en", "/c/extra.de")]
    assert [(s.paths, s.weight) for s in cfg.data.sources("train", ("de", "en"))] == [(("/c/train.de", "/c/train.en"), 1.0)]
    assert parse_source("files:~/corpus/train", "train", ("de", "en")).paths[0].endswith("/corpus/train.de")  # a path's ~
    # A ~ suffix of two directions, unquoted in YAML's [a, b] or in a flag's a,b: not split at its comma.
    for written in ("[files:/c/x~en-de,de-en, files:/c/y]", "files:/c/x~en-de,de-en,files:/c/y"):
        set_field(cfg, "data.train", written)
        assert cfg.data.train == ["files:/c/x~en-de,de-en", "files:/c/y"], written


def test_a_source_of_some_directions_is_checked_as_read_in_those():
    """Was "names columns en-fr, not de": the documented tsv:news.tsv:en-fr~en-fr,fr-en*2 was parsed for
    en-de too (and a ding source for en-fr), where it is not read, and refused."""
    cfg = ExperimentConfig()
    cfg.data.directions = DIRECTIONS
    cfg.data.train = ["tsv:/c/news.tsv:en-fr~en-fr,fr-en*2", "ding~de-en,en-de", "files:/c/all"]
    validate(cfg, "test")
    assert [s.kind for s in cfg.data.sources("train", ("en", "de"))] == ["ding", "files"]
    (news, _) = cfg.data.sources("train", ("fr", "en"))
    assert news.kind == "tsv" and news.weight == 2.0


def test_a_weighted_tilde_suffix_stays_one_source_in_a_flow_list_a_flag_and_a_recipe(tmp_path):
    """Was "'de-en*2': unknown kind 'de-en'": the documented files:PREFIX~en-de,de-en*2 split at its comma."""
    from mt.config.recipes import load_recipe

    cfg = ExperimentConfig()
    cfg.data.directions = ["en-de", "de-en"]
    for written in ("[files:/c/x~en-de,de-en*2, files:/c/y]", "files:/c/x~en-de,de-en*2,files:/c/y",
                    "[files:/c/x~en-de, de-en * 2, files:/c/y]"):
        set_field(cfg, "data.train", written)
        validate(cfg, "test")
        assert len(cfg.data.train) == 2 and cfg.data.train[1] == "files:/c/y", written
        assert [(s.paths[0], s.weight) for s in cfg.data.sources("train", ("de", "en"))] == \
            [("/c/x.de", 2.0), ("/c/y.de", 1.0)], written
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("data:\n  directions: [en-de, de-en]\n  train: [files:/c/x~en-de,de-en*2, files:/c/y]\n"
                      "  valid: [files:/c/v]\n  test: [files:/c/t]\n", encoding="utf-8")
    cfg, _ = load_recipe(recipe)
    assert [(s.paths[0], s.weight) for s in cfg.data.sources("train", ("en", "de"))] == \
        [("/c/x.en", 2.0), ("/c/y.en", 1.0)]


@pytest.mark.parametrize("change, needle", [
    ({"directions": ["en-de", "en-de"]}, "names a direction twice"),
    ({"directions": ["en-en"]}, "not a direction"),
    ({"directions": ["ende"]}, "not a direction"),
    ({"directions": ["en-de"], "train": ["files:/c/x~fr-de"]}, "names fr-de, not a direction of data.directions (en-de)"),
    ({"train": ["files:/c/x~en-de"]}, "data.directions, which is not set"),
    ({"directions": ["en-de", "de-en"], "test": ["files:/c/t~en-de"]}, "data.test: no source for de-en"),  # was a KeyError
])
def test_bad_directions_are_one_line(change, needle):
    cfg = ExperimentConfig()
    cfg.data.__dict__.update(change)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(cfg, "test")


def test_several_directions_need_one_vocabulary():
    cfg = ExperimentConfig()
    cfg.data.directions, cfg.tokenizer.joint = ["en-de", "de-en"], False
    with pytest.raises(ConfigError, match="tokenizer.joint"):
        validate(cfg, "test")


def test_temperature_balances_without_repeats_and_batches_with():
    assert balanced_counts({"en": 100, "de": 100}, 5) == {"en": 100, "de": 100}
    assert balanced_counts({"en": 1000, "de": 100}, 1) == {"en": 1000, "de": 100}
    assert balanced_counts({"en": 1000, "de": 100}, 5) == {"en": 158, "de": 100}  # 1000^0.2 / 100^0.2 = 1.58
    # a small language bounds the sample, without repeats: said (a --vocab-size "too large" was all one saw)
    from mt.data.train_tokenizer import small_sample_note

    sizes = {"en": 333_333, "de": 333_333, "xx": 1_000}
    note = small_sample_note(sizes, balanced_counts(sizes, 5), 5)
    assert note.startswith("the tokenizer trains on 7,392 of the 667,666 sentences read: xx's 1,000") and "a lower" in note
    assert small_sample_note({"en": 100, "de": 100}, {"en": 100, "de": 100}, 5) is None
    directions = np.array([0] * 90 + [1] * 10)
    assert balanced_epoch(directions, 1, seed=1, epoch=0) is None  # as the data come
    epoch = balanced_epoch(directions, 5, seed=1, epoch=0)
    counts = np.bincount(directions[epoch])
    assert counts.sum() == 100 and 55 < counts[0] < 65  # 90^0.2 : 10^0.2 = 1.55 : 1
    assert (balanced_epoch(directions, 5, seed=1, epoch=0) == epoch).all()  # a resume reads the same
    assert not (balanced_epoch(directions, 5, seed=1, epoch=1) == epoch).all()


# -- a tiny multilingual experiment --------------------------------------------------------------
@pytest.fixture(scope="module")
def multi(tmp_path_factory, worker_id):
    """The experiment, trained once per test session (~20 s) and copied into each xdist worker's own
    folder: a module fixture of workers is built once in each (the tests write into it: engines, files)."""
    import shutil

    from filelock import FileLock

    if worker_id == "master":  # no xdist
        return _train_multi(tmp_path_factory.mktemp("multilingual"))
    shared = tmp_path_factory.getbasetemp().parent / "multilingual-shared"  # this session's, every worker's
    with FileLock(f"{shared}.lock"):
        if not (shared / "trained").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            _train_multi(shared)
            (shared / "trained").touch()
    root = tmp_path_factory.mktemp("multilingual")
    shutil.copytree(shared / "exp", root / "exp")
    return Experiment(root / "exp")


def _train_multi(root):
    for split, n in (("train", 400), ("valid", 30), ("test", 30)):
        for lang, lines in toy_multiway(n, seed=len(split)).items():
            (root / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    exp, cfg, _ = open_experiment(root / "exp", flags={
        "data.directions": DIRECTIONS, "data.train": [f"files:{root / 'train'}"],
        "data.valid": [f"files:{root / 'valid'}"], "data.test": [f"files:{root / 'test'}"],
        "tokenizer.vocab_size": 100, "tokenizer.byte_fallback": False,
        "model.enc_layers": 1, "model.dec_layers": 1, "model.d_model": 32, "model.d_ff": 64, "model.n_heads": 2,
        "train.max_steps": 700, "train.max_tokens": 600, "train.warmup_steps": 20, "train.lr_peak": 0.005,
        "train.valid_every": 350, "train.valid_bleu": True, "train.save_every": 1000, "decode.max_len_b": 12,
        "decode.beam": 2})
    with one_thread():
        train_tokenizer(exp, cfg)
        binarize(exp, cfg)
        train(exp, cfg)
    return exp


def test_validation_bleu_scores_each_row_against_its_own_direction(multi):
    """train.valid_bleu ran (twice), and its references follow the rows through every direction's
    sources: each sampled row's reference is the line its target ids came from."""
    from types import SimpleNamespace

    from mt.data.dataset import ParallelData
    from mt.training.loop import bleu_sample

    records = [json.loads(line) for line in multi.train_log_path.read_text().splitlines()]
    assert len([r for r in records if "valid_bleu" in r]) == 2
    cfg = multi.load_config()
    _, tgt_tok = multi.load_tokenizers(True)
    data = ParallelData(multi, "valid")
    sample = bleu_sample(SimpleNamespace(exp=multi, cfg=cfg, valid_data=data, tgt_tok=tgt_tok))
    assert len(set(data.directions[sample.indices].tolist())) == len(DIRECTIONS)  # rows of every direction
    assert sample.refs == tgt_tok.decode([data.tgt(int(i)).tolist() for i in sample.indices])
    # each direction's rows scored with its own target's BLEU tokenizer (zh's is not 13a), then averaged
    assert sample.targets == [tgt for _, tgt in cfg.data.pairs()]
    assert sorted(sample.by_direction) == list(range(len(DIRECTIONS)))
    assert all(data.directions[sample.indices[k]] == d for d, rows in sample.by_direction.items() for k in rows)


def test_the_tokenizer_keeps_each_tag_whole(multi):
    tok, _ = multi.load_tokenizers(True)
    for lang in ("en", "de", "fr"):
        tag = tok.tag_id(lang)
        assert tag is not None and tok.pieces([tag]) == [f"<2{lang}>"]
        assert tag in tok.encode([f"<2{lang}> Der Hund."])[0]  # never split into pieces
    assert tok.tag_id("es") is None


def test_binarize_puts_the_target_tag_first_and_records_each_pair_direction(multi):
    tok, _ = multi.load_tokenizers(True)
    data = ParallelData(multi, "train")
    assert np.bincount(data.directions).tolist() == [400, 400, 400, 400]
    for i in (0, 400, 800, 1200):
        target = DIRECTIONS[data.directions[i]].split("-")[1]
        assert int(data.src(i)[0]) == tok.tag_id(target)
        assert int(data.tgt(i)[0]) not in {tok.tag_id(lang) for lang in ("en", "de", "fr")}
    stats = json.loads(multi.data_stats_path.read_text())
    assert stats["splits"]["test"]["directions"] == dict.fromkeys(DIRECTIONS, 30)


@pytest.mark.slow
def test_the_tag_picks_the_output_language(multi):
    translator = Translator.load(multi, multi.load_config())
    english = toy_multiway(30, seed=99)["en"]
    words = {}
    for tgt in ("de", "fr"):
        out = [h[0][0] for h in translator.search(english, DecodeOptions(src_lang="en", tgt_lang=tgt))]
        words[tgt] = [w.strip(".").lower() for line in out for w in line.split()]
    german = {tgt: sum(w in GERMAN for w in ws) for tgt, ws in words.items()}
    french = {tgt: sum(w in FRENCH for w in ws) for tgt, ws in words.items()}
    assert german["de"] > 2 * german["fr"] and french["fr"] > 2 * french["de"], (german, french)


@pytest.mark.slow
def test_directions_not_trained_warn_pivot_or_are_refused(multi, capsys):
    translator = Translator.load(multi, multi.load_config())
    german = toy_multiway(4, seed=98)["de"]
    translator.search(german, DecodeOptions(src_lang="de", tgt_lang="fr"))
    assert "de-fr was not trained (zero-shot" in capsys.readouterr().err
    pivoted = translator.search(german, DecodeOptions(src_lang="de", tgt_lang="fr", pivot="en"))
    assert len(pivoted) == 4 and "zero-shot" not in capsys.readouterr().err
    # a document under --src-lang auto: its German units' direction said too (was: nothing on stderr)
    from mt.documents.units import TranslatorUnits
    from mt.text.language import LanguageIdentifier, identifiable

    fresh = Translator.load(multi, multi.load_config())
    units = TranslatorUnits(fresh, DecodeOptions(tgt_lang="fr"), identifier=LanguageIdentifier(identifiable(fresh.directions)))
    assert units.readable("Der Hund läuft schnell durch den großen Park und die Katze schläft.") == "de"
    assert "de-fr was not trained (zero-shot" in capsys.readouterr().err
    # a line with an address under --pivot: as plain text (markup's route aligns, which a pivot cannot:
    # it stopped `mt translate --pivot` at the first line with a URL)
    from mt.text.markup_translate import text_search

    lines = [f"{german[0]} https://example.com", german[1]]
    assert len(text_search(translator, lines, DecodeOptions(src_lang="de", tgt_lang="fr", pivot="en"))) == 2
    with pytest.raises(ConfigError, match="no <2es>; it translates en-de, de-en, en-fr, fr-en"):
        translator.search(german, DecodeOptions(src_lang="de", tgt_lang="es"))
    with pytest.raises(ConfigError, match=r"^xx-en: this model knows no language xx \(--src-lang\)"):
        translator.search(german, DecodeOptions(src_lang="xx", tgt_lang="en"))  # not a zero-shot pair
    with pytest.raises(ConfigError, match=r"give the target language \(--tgt-lang\)"):
        translator.search(german, DecodeOptions(src_lang="en"))
    with pytest.raises(ConfigError, match="the pivot is a third language"):
        translator.search(german, DecodeOptions(src_lang="de", tgt_lang="fr", pivot="fr"))
    with pytest.raises(ConfigError, match="the pivot is a third language"):  # de's one target, resolved: en
        translator.search(german, DecodeOptions(src_lang="de", pivot="en"))


@pytest.mark.slow
def test_text_and_markup_pivot_as_they_translate_each_leg(multi):
    """`mt translate --pivot` read a web address as words, and stopped on html or a document (markup's
    aligned search cannot pivot: "--alignments ... need one translation", no such flag given): each leg
    is now translated as text or markup is, the address and the tags kept."""
    from mt.text.markup_translate import searcher

    translator = Translator.load(multi, multi.load_config())
    german = toy_multiway(3, seed=96)["de"]
    asked = DecodeOptions(src_lang="de", tgt_lang="fr", pivot="en")
    lines = [f"{german[0]} https://example.com/a", german[1]]
    found = [hyps[0][0] for hyps in searcher("text")(translator, lines, asked)]
    middle = [hyps[0][0] for hyps in searcher("text")(translator, lines, DecodeOptions(src_lang="de", tgt_lang="en"))]
    assert "https://example.com/a" in middle[0] and "https://example.com/a" in found[0]
    onward = searcher("text")(translator, middle, DecodeOptions(src_lang="en", tgt_lang="fr"))
    assert found == [hyps[0][0] for hyps in onward]
    html = searcher("html")(translator, [f"<b>{german[2]}</b>"], asked)[0][0][0]
    assert html.startswith("<b>") and html.endswith("</b>") and html.count("<b>") == 1


@pytest.mark.slow
def test_a_documents_units_in_the_pivot_language_take_one_leg_under_auto(multi):
    """`mt translate --src-lang auto --pivot en` on a document: an English unit went en -> en (never
    trained) -> fr; each language's units are now searched from it."""
    from mt.documents.units import TranslatorUnits
    from mt.text.language import LanguageIdentifier, identifiable
    from mt.text.markup_translate import searcher

    translator = Translator.load(multi, multi.load_config())
    identifier = LanguageIdentifier(identifiable(translator.directions))
    german, english = "Die katze läuft im park.", "The cat runs in the park."
    assert [identifier.identify(text).language for text in (german, english)] == ["de", "en"]
    units = TranslatorUnits(translator, DecodeOptions(tgt_lang="fr", pivot="en"), identifier=identifier)
    found = units([german, english, ""])

    def alone(text, options):
        return searcher("text")(translator, [text], options)[0][0][0]

    assert found == [alone(german, DecodeOptions(src_lang="de", tgt_lang="fr", pivot="en")),
                     alone(english, DecodeOptions(src_lang="en", tgt_lang="fr")), ""]


@pytest.mark.slow
def test_the_command_line_speaks_directions(multi, capsys, monkeypatch, tmp_path):
    text = tmp_path / "in.en"
    text.write_text("\n".join(toy_multiway(3, seed=97)["en"]) + "\n", encoding="utf-8")
    code, de, err = mt(capsys, monkeypatch, "translate", "--exp", multi.root, "-i", text, "--tgt-lang", "de")
    assert code == 0, err
    code, fr, err = mt(capsys, monkeypatch, "translate", "--exp", multi.root, "-i", text, "--src-lang", "en",
                       "--tgt-lang", "fr")
    assert code == 0 and de != fr and len(fr.splitlines()) == 3, err
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", multi.root, "-i", text)
    assert code == 2 and out == "" and err.strip() == \
        "error: give the target language (--tgt-lang): this model translates en-de, de-en, en-fr, fr-en"
    code, out, err = mt(capsys, monkeypatch, "evaluate", "--exp", multi.root, "--json")
    assert code == 0, err
    scores = json.loads(out)
    assert list(scores["directions"]) == DIRECTIONS
    assert scores["bleu"] == pytest.approx(sum(d["bleu"] for d in scores["directions"].values()) / 4, abs=1e-3)
    assert all((multi.root / "translations" / f"test.{d}.hyp").is_file() for d in DIRECTIONS)
    toy = toy_multiway(2, seed=96)
    mixed = tmp_path / "mixed.txt"  # --src-lang auto: each line identified; Spanish is not translated
    mixed.write_text(f"{toy['de'][0]}\n{toy['fr'][1]}\n{SPANISH}\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", multi.root, "-i", mixed, "--src-lang", "auto",
                        "--tgt-lang", "en", "--format", "text")  # lines (a .txt is a document by default)
    translator = Translator.load(multi, multi.load_config())
    found = translator.search([toy["de"][0], toy["fr"][1]], DecodeOptions(tgt_lang="en"))
    assert code == 0 and out.splitlines() == [found[0][0][0], found[1][0][0], ""], err
    assert "line 3: not translated: the text looks like Spanish (es)" in " ".join(err.split())
    code, out, _ = mt(capsys, monkeypatch, "evaluate", "--exp", multi.root)
    assert [line.split()[0] for line in out.splitlines()[1:6]] == [*DIRECTIONS, "average"]
    code, out, _ = mt(capsys, monkeypatch, "info", "--exp", multi.root)
    assert "en-de, de-en, en-fr, fr-en" in out
    from mt.apps.report.page import sample_table  # the report's samples: each direction's, with its languages

    page = sample_table(multi, 2)
    assert all(f"test {d}: 2 of 30 sentences" in page for d in DIRECTIONS) and "reference (fr)" in page


@pytest.mark.slow
def test_serve_lists_the_pairs_and_honours_source_and_target(multi):
    from helpers import Served, call, ok

    from mt.apps.serve.app import Limits, build_app

    translator = Translator.load(multi, multi.load_config())
    with Served(build_app(translator, Limits(max_wait_ms=0), threads=1)) as served:
        assert ok(f"{served.url}/languages") == [
            {"code": "en", "name": "English", "targets": ["de", "fr"]},
            {"code": "de", "name": "German", "targets": ["en"]},
            {"code": "fr", "name": "French", "targets": ["en"]}]
        english = toy_multiway(3, seed=96)["en"]
        for tgt in ("de", "fr"):
            answer = ok(f"{served.url}/translate", {"q": english, "source": "en", "target": tgt})["translatedText"]
            assert answer == [h[0][0] for h in translator.search(english, DecodeOptions(src_lang="en", tgt_lang=tgt))]
        toy = toy_multiway(2, seed=96)
        mixed = [toy["de"][0], toy["fr"][1]]  # auto: each text identified among en, de, fr
        auto = ok(f"{served.url}/translate", {"q": mixed, "source": "auto", "target": "en"})
        assert [d["language"] for d in auto["detectedLanguage"]] == ["de", "fr"]
        assert auto["translatedText"] == [h[0][0] for h in translator.search(mixed, DecodeOptions(tgt_lang="en"))]
        # auto, a text already in the target: as it is (was translated fr -> fr, a direction never trained)
        same = ok(f"{served.url}/translate", {"q": [toy["fr"][0], toy["de"][1]], "source": "auto", "target": "fr"})
        assert [d["language"] for d in same["detectedLanguage"]] == ["fr", "de"]
        assert same["translatedText"][0] == toy["fr"][0] and same["translatedText"][1] != toy["de"][1]
        detected = ok(f"{served.url}/detect", {"q": toy["fr"][0]})
        assert detected[0]["language"] == "fr" and sorted(d["language"] for d in detected) == ["de", "en", "fr"]
        status, _, data = call(f"{served.url}/translate", {"q": SPANISH, "source": "auto", "target": "en"})
        assert status == 400 and data["error"].startswith("es is not supported: the text looks like Spanish (es)")
        status, _, data = call(f"{served.url}/v1/translate", {"text": "Hallo.", "source": "de", "target": "es"})
        assert status == 400 and data["error"].startswith("target 'es'") and "en-de, de-en" in data["error"]
        status, _, data = call(f"{served.url}/v1/translate", {"text": "Hallo.", "source": "xx", "target": "en"})
        assert status == 400 and data["error"].startswith("source 'xx': xx-en: this model knows no language xx (source)")
        status, _, data = call(f"{served.url}/translate", {"q": "Hallo.", "source": "xx", "target": "en"})
        assert status == 400 and data["error"].startswith("xx is not supported")
        for pair in ({"source": "en", "target": ["de"]}, {"source": ["en"], "target": "de"}):
            status, _, data = call(f"{served.url}/translate", {"q": "Hallo.", **pair})
            assert status == 400 and "expected a language code" in data["error"]
        v1 = ok(f"{served.url}/v1/translate", {"text": english, "source": "en", "target": "fr"})
        assert [t["text"] for t in v1["translations"]] == \
            [h[0][0] for h in translator.search(english, DecodeOptions(src_lang="en", tgt_lang="fr"))]


@pytest.mark.slow
def test_the_openapi_schema_lists_every_source_the_server_takes(multi):
    """Was: /v1's source enum listed the trained sources only, while the server takes auto and zero-shot ones."""
    from helpers import Served, call, ok

    from mt.apps.serve.app import Limits, build_app

    cfg = multi.load_config()
    cfg.data.directions = ["en-de", "en-fr"]  # as if trained from English only: de and fr are zero-shot sources
    with Served(build_app(Translator.load(multi, cfg), Limits(max_wait_ms=0), threads=1)) as served:
        paths = ok(f"{served.url}/openapi.json")["paths"]
        for route, field in (("/translate", "q"), ("/v1/translate", "text"), ("/v1/attention", "text")):
            schema = paths[route]["post"]["requestBody"]["content"]["application/json"]["schema"]
            # to a language it was trained to write (de, fr; en only ever read is refused as a target)
            taken = [lang for lang in ("auto", "en", "de", "fr", "es", "xx")
                     if call(f"{served.url}{route}", {field: "Hallo.", "source": lang,
                                                      "target": "fr" if lang == "de" else "de"})[0] == 200]
            listed = [lang for lang in schema["properties"]["source"]["enum"] if lang is not None]  # /v1: null, not given
            assert sorted(listed) == sorted(taken) == ["auto", "de", "en", "fr"], route
            assert (None in schema["properties"]["source"]["enum"]) == route.startswith("/v1")
            assert call(f"{served.url}{route}", {field: "Hallo.", "source": None, "target": "de"})[0] == (
                200 if route.startswith("/v1") else 400
            ), route
            # a language it only ever read is no target (it wrote something else, unsaid, with 200)
            status, _, data = call(f"{served.url}{route}", {field: "Hallo.", "source": "de", "target": "en"})
            assert status in (400, 422) and "never trained to write en" in data["error"], (route, data)


@pytest.mark.slow
def test_a_ctranslate2_export_translates_as_mt_with_the_tag(multi, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[export]'")
    from mt.apps.export.directory import export

    cfg = multi.load_config()
    export(multi, cfg, tmp_path / "ct2")
    readme = (tmp_path / "ct2" / "README.txt").read_text()
    assert "<2de> de, <2fr> fr" in readme.replace("<2en> en, ", "") and '["<2de>"] + [src_sp.id_to_piece(i) for i in ids]' in readme
    translator = Translator.load(multi, cfg)
    ct2 = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    english = toy_multiway(20, seed=95)["en"]
    same = 0
    for line in english:
        ours = translator.search([line], DecodeOptions(beam=1, src_lang="en", tgt_lang="fr"))[0][0][0]
        pieces = ["<2fr>", *translator.src_tok.pieces(translator.src_tok.encode([line])[0])]
        limit = int(cfg.decode.max_len_a * len(pieces) + cfg.decode.max_len_b)
        result = ct2.translate_batch([pieces], beam_size=1, return_end_token=True, min_decoding_length=0,
                                     max_decoding_length=limit, max_input_length=cfg.model.max_positions)
        theirs = translator.tgt_tok.decode([translator.tgt_tok.piece_ids(result[0].hypotheses[0])])[0]
        same += ours == theirs
    assert same >= 18, f"{same} of 20 greedy translations agree"


@pytest.mark.slow
def test_an_argos_export_is_one_package_per_direction_each_with_its_tag(multi, tmp_path):
    pytest.importorskip("argostranslate", reason="argostranslate is not installed: pip install -e '.[argos]'")
    from helpers import argos_translate, downloaded

    from mt.apps.export.directory import export

    cfg = multi.load_config()
    files = export(multi, cfg, tmp_path / "argos", fmt="argos")["files"]
    assert files == [f"translate-{d.replace('-', '_')}.argosmodel" for d in sorted(DIRECTIONS)]
    with zipfile.ZipFile(tmp_path / "argos" / "translate-en_fr.argosmodel") as archive:
        config = json.loads(archive.read("translate-en_fr/model/config.json"))
        metadata = json.loads(archive.read("translate-en_fr/metadata.json"))
    assert config["add_source_bos"] and config["bos_token"] == "<2fr>" and config["decoder_start_token"] == "<s>"
    assert (metadata["from_code"], metadata["to_code"]) == ("en", "fr")
    english = toy_multiway(20, seed=95)["en"]
    result = argos_translate(tmp_path / "home", [tmp_path / "argos" / f for f in files],
                             {"en-fr": ("en", "fr", english), "en-de": ("en", "de", english)})
    assert [tuple(row[:2]) for row in result["installed"]] == sorted(tuple(d.split("-")) for d in DIRECTIONS)
    assert downloaded(tmp_path / "home") == []
    translator = Translator.load(multi, cfg)
    for target in ("fr", "de"):
        ours = [translator.search([line], DecodeOptions(beam=1, src_lang="en", tgt_lang=target))[0][0][0]
                for line in english]
        theirs = result["translations"][f"en-{target}"]
        # Where they differ mt stopped at its length limit (decode.max_len_b 12) and Argos at 256 tokens.
        assert all(b.startswith(a) for a, b in zip(ours, theirs)), [(a, b) for a, b in zip(ours, theirs) if a != b]
        assert sum(a == b for a, b in zip(ours, theirs)) >= 15, target


def test_a_hugging_face_export_reads_the_tag_and_translates_as_mt(multi, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[huggingface]'")
    from mt.apps.export.directory import export

    cfg = multi.load_config()
    export(multi, cfg, tmp_path / "hf", fmt="huggingface")
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    assert all(f"| `>>{lang}<<` | {lang} |" in card for lang in ("en", "de", "fr"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "hf")).eval()
    translator = Translator.load(multi, cfg)
    english = toy_multiway(20, seed=95)["en"]
    tag = translator.src_tok.tag_id("fr")
    batch = tokenizer([f">>fr<< {line}" for line in english])
    assert batch["input_ids"] == [[tag, *ids, EOS_ID] for ids in translator.src_tok.encode(english)]
    same = 0
    for line, ids in zip(english, batch["input_ids"]):
        ours = translator.search([line], DecodeOptions(beam=1, src_lang="en", tgt_lang="fr"))[0][0][0]
        limit = int(cfg.decode.max_len_a * (len(ids) - 1) + cfg.decode.max_len_b)
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([ids]), num_beams=1, max_new_tokens=limit)
        same += ours == tokenizer.decode(out[0], skip_special_tokens=True).strip()
    assert same >= 18, f"{same} of 20 greedy translations agree"


@pytest.mark.slow
def test_distill_translates_every_direction_into_a_multilingual_student(multi, tmp_path):
    from mt.apps.distill import distill
    from mt.experiment.paths import Experiment

    student = Experiment(tmp_path / "student")
    manifest = distill([multi], student, DecodeOptions(beam=1), chunk_lines=150)
    assert len(manifest["corpus"]) == 4 and manifest["lines"] == 1600
    for direction in DIRECTIONS:
        src, tgt = direction.split("-")
        for lang in (src, tgt):
            lines = (tmp_path / "student" / "distill" / f"train.{direction}.{lang}").read_text().splitlines()
            assert len(lines) == 400
    cfg = student.load_config()
    assert cfg.data.directions == DIRECTIONS
    assert [s.directions for s in cfg.data.sources("train", ("en", "fr"))] == [(("en", "fr"),)]


def test_a_bilingual_experiment_refuses_another_direction(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    assert translator.search(["Der Hund."], DecodeOptions(src_lang="de", tgt_lang="en"))[0][0][0] is not None
    with pytest.raises(ConfigError, match=r"^target fr \(--tgt-lang\): this model translates de-en only"):
        translator.search(["Der Hund."], DecodeOptions(tgt_lang="fr"))
    # Was "en-en: this model translates de-en only": the source asked, and the model's direction.
    with pytest.raises(ConfigError, match=r"^source en \(--src-lang\): this model translates de-en only"):
        translator.search(["Der Hund."], DecodeOptions(src_lang="en"))
    with pytest.raises(ConfigError, match=r"^en-de: this model translates de-en only"):
        translator.search(["Der Hund."], DecodeOptions(src_lang="en", tgt_lang="de"))
    with pytest.raises(MtError):
        translator.search(["Der Hund."], DecodeOptions(src_lang="de", tgt_lang="en", pivot="fr"))


def test_src_lang_auto_on_a_bilingual_experiment_translates_its_own_language_only(trained_experiment, capsys,
                                                                                 monkeypatch, tmp_path):
    text = tmp_path / "in.txt"
    english = "A man in a blue shirt is riding his bicycle down a busy street."
    text.write_text(f"{LINES[0]}\n{english}\n{LINES[1]}\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "-i", text,
                        "--src-lang", "auto", "--format", "text")
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    found = translator.search([LINES[0], LINES[1]], DecodeOptions())
    # English, the target, comes back as it is (was: an empty line, "not translated")
    assert code == 0 and out.splitlines() == [found[0][0][0], english, found[1][0][0]], err
    assert "line 2 is in the target language (en)" in " ".join(err.split()) and "not translated" not in err
    # As a document (a .txt by default), the target's line stays as it was, and a foreign one with a warning.
    text.write_text(f"{LINES[0]}\n{english}\n{LINES[1]}\n{SPANISH}\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "-i", text,
                        "--src-lang", "auto")
    assert code == 0 and out.splitlines() == [found[0][0][0], english, found[1][0][0], SPANISH], err
    assert "not translated: 'Dos hombres" in " ".join(err.split()) and "A man in a blue" not in err


def test_src_lang_auto_identifies_the_text_of_markup_not_its_tags_and_addresses(trained_experiment, capsys,
                                                                                 monkeypatch, tmp_path):
    """Was: the raw line was identified, class names and URLs included: a German line in English-named
    markup was Latin or English to lingua, and came out empty."""
    lines = ['<div class="main-navigation-wrapper"><a href="https://www.example.com/contact-us/support">'
             'Ein Mann fährt Fahrrad.</a></div>',
             '<p class="highlighted-section"><img src="photo-of-the-week.png" alt="Photo of the week"> '
             'Zwei Hunde spielen im Schnee.</p>']
    text = tmp_path / "in.html.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "-i", text,
                        "--src-lang", "auto", "--format", "html")
    from mt.text.markup_translate import translate as translate_markup

    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    assert code == 0 and out.splitlines() == translate_markup(translator, lines, "html"), err
    assert "not translated" not in err


def test_pivot_legs_must_be_trained_and_a_language_into_itself_is_no_direction():
    """Was: --pivot took zero-shot legs (and advised --pivot for them); en-en was a zero-shot direction."""
    from mt.decoding.directions import Directions

    directions = Directions((("en", "de"), ("de", "en"), ("en", "fr")), {"en": 3, "de": 4, "fr": 5})
    directions.check_pivot("de", "fr", "en")  # de-en, en-fr: both trained
    with pytest.raises(ConfigError, match=r"^--pivot en: fr-en was not trained; this model translates en-de"):
        directions.check_pivot("fr", "de", "en")
    with pytest.raises(ConfigError, match=r"^--pivot fr: de-fr was not trained"):
        directions.check_pivot("de", "en", "fr")
    with pytest.raises(ConfigError, match=r"^en-en: source and target are the same language"):
        directions.tag("en", "en")
    assert directions.tag("fr", "de") == 4  # zero-shot: taken, with a warning


def test_a_corpus_whose_languages_only_its_direction_says_needs_one_direction(tmp_path):
    """Was: files:SRC|TGT and an unnamed tsv were read the same way round for every direction, wrong pairs
    under every other tag. Refused where a split is read to be learnt or scored; a saved config loads."""
    from mt.config.sources import check_sides

    for spec in ("files:/c/a.en|/c/a.de", "tsv:/c/n.tsv", "files:/c/a.en|/c/a.de~en-de,de-en", "bt:tsv:/c/n.tsv*2"):
        with pytest.raises(ConfigError, match=r"^data.train: .*add ~SRC-TGT for the one direction it holds"):
            check_sides(parse_source(spec, "train", ("en", "de"), multilingual=True), "train", 2)
        check_sides(parse_source(spec, "train", ("en", "de"), multilingual=True), "train", 1)  # one: its own
    for spec in ("files:/c/a.en|/c/a.de~en-de", "tsv:/c/n.tsv:en-de", "files:/c/t", "tsv:/c/n.tsv~en-de"):
        check_sides(parse_source(spec, "train", ("en", "de"), multilingual=True), "train", 2)
    toy = toy_multiway(80, seed=3)
    for lang in ("en", "de", "fr"):
        (tmp_path / f"c.{lang}").write_text("\n".join(toy[lang]) + "\n", encoding="utf-8")
    cfg = ExperimentConfig()
    cfg.data.directions = ["en-de", "en-fr"]
    cfg.data.train = [f"files:{tmp_path / 'c'}"]
    cfg.data.test = [f"files:{tmp_path / 'c.en'}|{tmp_path / 'c.de'}"]
    cfg.tokenizer.vocab_size, cfg.tokenizer.byte_fallback = 60, False
    validate(cfg, "test")  # a config saved before the check still loads
    exp = Experiment(tmp_path / "exp")
    train_tokenizer(exp, cfg)
    with pytest.raises(ConfigError, match=r"^data.test: .*two files name no languages"):
        binarize(exp, cfg)
    assert not exp.data_dir.exists()


def test_src_lang_auto_reads_a_zero_shot_source_as_the_server_does(multi, tmp_path, capsys, monkeypatch):
    """A language the model only writes is read zero-shot (was: "not translated", while /translate took it)."""
    import shutil

    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml

    copy = tmp_path / "exp"
    shutil.copytree(multi.root, copy)
    cfg = Experiment(copy).load_config()
    cfg.data.directions = ["en-de", "de-en", "en-fr"]  # fr: a target only
    write_text_atomic(Experiment(copy).config_path, save_yaml(cfg))
    french = tmp_path / "fr.txt"
    french.write_text(toy_multiway(1, seed=96)["fr"][0] + "\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", copy, "-i", french, "--src-lang", "auto",
                        "--tgt-lang", "en", "--format", "text")
    assert code == 0 and out.strip() and "not translated" not in err, err
    assert "fr-en was not trained (zero-shot" in " ".join(err.split())  # as --src-lang fr says (was: no word)


def test_the_same_text_into_two_languages_is_two_pairs_not_a_duplicate():
    from mt.data.binarize_workers import pair_hash

    assert pair_hash("Okay.", "Okay.", (5,)) != pair_hash("Okay.", "Okay.", (6,))  # <2de> and <2fr> sources
    assert pair_hash("Okay.", "Okay.", (5,)) == pair_hash("Okay.", "Okay.", (5,))


@pytest.mark.slow
def test_the_report_of_a_multilingual_experiment_shows_each_direction(multi, tmp_path):
    import shutil

    from mt.apps.evaluate import evaluate_split
    from mt.apps.report.page import build_report

    exp = Experiment(tmp_path / "exp")
    shutil.copytree(multi.root, exp.root)
    evaluate_split(exp, exp.load_config(), "test")
    page = build_report(exp, samples=1)
    assert "mt report: exp (en → de, de → en, en → fr, fr → en)" in page  # was the config's default de → en
    assert all(f"test {d}" in page for d in DIRECTIONS) and "test (mean of 4)" in page
    attention = page.split("<h2>Attention</h2>", 1)[1]
    source = re.search(r"<th>source</th><td>(.*?)</td>", attention).group(1)
    translator = Translator.load(exp, exp.load_config())
    expected = translator.search([source], DecodeOptions(src_lang="en", tgt_lang="de"))[0][0][0]
    assert f"<th>translation</th><td>{html.escape(expected, quote=False)}</td>" in attention  # read with <2de>


def test_a_direction_or_split_without_usable_pairs_is_one_line(tmp_path):
    """Was a KeyError traceback: a direction with no usable pair (empty files, or every pair over
    data.max_len), and a whole split without one, never reached the refusal."""
    for split, n in (("train", 60), ("valid", 10)):
        for lang, lines in toy_multiway(n, seed=len(split)).items():
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for lang in ("en", "de", "fr"):
        (tmp_path / f"empty.{lang}").write_text("", encoding="utf-8")
        (tmp_path / f"long.{lang}").write_text(" ".join(["Hund"] * 40) + ".\n", encoding="utf-8")
    exp, cfg, _ = open_experiment(tmp_path / "exp", flags={
        "data.directions": ["en-de", "en-fr"], "data.train": [f"files:{tmp_path / 'train'}"],
        "data.valid": [f"files:{tmp_path / 'valid'}"], "data.max_len": 20,
        "tokenizer.vocab_size": 60, "tokenizer.byte_fallback": False})
    with one_thread():
        train_tokenizer(exp, cfg)
    cases = [("train", [f"files:{tmp_path / 'train'}~en-de", f"files:{tmp_path / 'empty'}~en-fr"], "the train split has no usable pairs for en-fr"),
             ("valid", [f"files:{tmp_path / 'valid'}~en-de", f"files:{tmp_path / 'long'}~en-fr"], "the valid split has no usable pairs for en-fr"),
             ("valid", [f"files:{tmp_path / 'long'}"], "the valid split has no usable pairs (2 pairs read, all dropped: too long 2)")]
    for split, specs, needle in cases:
        setattr(cfg.data, split, specs)
        with pytest.raises(MtError) as info:
            binarize(exp, cfg, workers=1)
        message = str(info.value)
        assert needle in message and "\n" not in message, message
        assert not exp.has_data()
        cfg.data.train, cfg.data.valid = [f"files:{tmp_path / 'train'}"], [f"files:{tmp_path / 'valid'}"]


@pytest.mark.slow
def test_a_language_tag_written_in_the_text_is_left_out_and_said(multi, capsys):
    """"<2fr> ..." in a source line was read as the tag itself: a second target, against --tgt-lang."""
    translator = Translator.load(multi, multi.load_config())
    german = toy_multiway(2, seed=96)["de"]
    options = DecodeOptions(src_lang="de", tgt_lang="en")
    plain = translator.search(german, options)
    capsys.readouterr()
    found = translator.search([f"<2fr> {german[0]}", german[1], "<2de>"], options)
    assert [hyps[0][0] for hyps in found] == [hyps[0][0] for hyps in plain] + [""]  # was: French, and a sentence
    assert "input line 1: <2fr> in the text is the model's language tag: left out" in capsys.readouterr().err
    # lines cut into sentences: the warning names the line, not the piece's place among all lines' pieces
    from mt.text.translate import search

    search(translator, [f"{german[0]} {german[1]}", f"{german[1]} <2fr> {german[0]}"], options, first_line=10)
    err = capsys.readouterr().err
    assert "input line 12: <2fr> in the text" in err and "input line 14" not in err, err


def test_a_model_of_several_sources_cuts_each_text_by_its_own_languages_sentence_rules(multi):
    """Was: by its first source's (English's): "Am 3. Oktober" was two sentences."""
    from mt.text.translate import segment

    translator = Translator.load(multi, multi.load_config())
    assert translator.directions.sources()[0] == "en"
    text = "Am 3. Oktober ist Feiertag, und wir fahren alle zusammen weg. Wir kommen am Montag zurück."
    assert len(segment(translator, [text], DecodeOptions(tgt_lang="en"))[0]) == 2
    assert len(segment(translator, [text], DecodeOptions(src_lang="en", tgt_lang="de"))[0]) == 3  # as asked


def test_an_evaluation_stopped_midway_leaves_its_scores_with_their_translations(multi, tmp_path, monkeypatch):
    """Each direction's translations were written as soon as it was searched: a run stopped in the
    second left the first's new translations beside the earlier run's scores."""
    import shutil

    from mt.apps.evaluate import evaluate_split
    from mt.experiment.paths import Experiment

    copy = Experiment(tmp_path / "exp")
    shutil.copytree(multi.root, copy.root)
    cfg = copy.load_config()
    translator = Translator.load(copy, cfg)
    with one_thread():
        evaluate_split(copy, cfg, "test", translator)
    before = {path.name: path.read_bytes() for path in copy.root.glob("translations/test.*.hyp")}
    scores = copy.score_path("test").read_bytes()
    search, calls = translator.search, []

    def other_then_stopped(lines, *args, **kwargs):  # another model's first direction, then a Ctrl-C
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return [[("anders", -1.0)] for _ in search(lines, *args, **kwargs)]

    monkeypatch.setattr(translator, "search", other_then_stopped)
    with pytest.raises(KeyboardInterrupt):
        evaluate_split(copy, cfg, "test", translator)
    assert {path.name: path.read_bytes() for path in copy.root.glob("translations/test.*.hyp")} == before
    assert copy.score_path("test").read_bytes() == scores and len(before) == 4
