"""`mt export --format argos`: the package installs into Argos Translate and translates as mt does.

The tiny trained model is exported, the package installed with `argostranslate.package.install_from_path`
into an Argos over a temporary home (helpers/argos.py: a subprocess, every download address closed), and
real sentences translated by Argos with ARGOS_BEAM_SIZE=1: each equals mt's greedy translation where mt
ended before its own length limit, for a joint vocabulary and for separate ones (Argos reads one
SentencePiece model). Argos splits with the package's own splitter and fetches nothing.
The splitter (mt.apps.export.argos_sbd) is checked through MiniSBD itself, the zip's layout and
metadata against what Argos reads, and the command line's files, refusals and --force.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
import torch
from helpers import argos_translate, downloaded, mt, one_thread, tiny_experiment, toy_corpus

from mt.apps.export.argos import ARGOS_POSITIONS
from mt.apps.export.argos_sbd import model_bytes
from mt.apps.export.directory import export
from mt.decoding.translator import Translator
from mt.errors import ConfigError, MtError
from mt.search.single_path import greedy_search
from mt.search.steps import max_lengths
from mt.tokenizer import EOS_ID

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[test,argos]'")
pytest.importorskip("onnx", reason="onnx is not installed: pip install -e '.[test,argos]'")
pytest.importorskip("argostranslate", reason="Argos Translate is not installed: pip install -e '.[test,argos]'")

SENTENCES = 200


@pytest.fixture(scope="module")
def exported(trained_experiment, tmp_path_factory):
    out = tmp_path_factory.mktemp("argos") / "packages"
    summary = export(trained_experiment, trained_experiment.load_config(), out, fmt="argos")
    return trained_experiment, out, summary


def _mt_greedy(exp, lines: list[str]) -> list[tuple[str, bool]]:
    """mt's greedy translation of each line, and whether it ended before mt's length limit."""
    cfg = exp.load_config()
    translator = Translator.load(exp, cfg)
    out = []
    with one_thread():
        for ids in translator.src_tok.encode(lines):
            src = torch.tensor([ids + [EOS_ID]])
            limit = int(max_lengths(src, cfg.decode.max_len_a, cfg.decode.max_len_b, translator.model.max_positions - 1)[0])
            tokens = greedy_search(translator.model, src, cfg.decode.max_len_a, cfg.decode.max_len_b)[0].tokens
            out.append((translator.tgt_tok.decode([tokens])[0], len(tokens) + 1 < limit))
    return out


def test_the_package_is_what_argos_reads(exported):
    exp, out, summary = exported
    assert summary["files"] == ["translate-de_en.argosmodel"]
    assert sorted(p.name for p in out.iterdir()) == [".mt-export.json", "translate-de_en.argosmodel"]
    with zipfile.ZipFile(out / "translate-de_en.argosmodel") as archive:
        names = sorted(archive.namelist())
        metadata = json.loads(archive.read("translate-de_en/metadata.json"))
        config = json.loads(archive.read("translate-de_en/model/config.json"))
        readme = archive.read("translate-de_en/README.md").decode("ascii")  # Argos reads it as cp1252 on Windows
    assert names == ["translate-de_en/README.md", "translate-de_en/metadata.json", "translate-de_en/minisbd/de.onnx",
                     "translate-de_en/model/config.json", "translate-de_en/model/model.bin",
                     "translate-de_en/model/shared_vocabulary.json", "translate-de_en/sentencepiece.model"]
    assert metadata == {"package_version": "1.0", "argos_version": "1.11.0", "from_code": "de", "from_name": "German",
                        "to_code": "en", "to_name": "English", "type": "translate", "links": []}
    assert config["add_source_eos"] and not config["add_source_bos"]
    assert "ARGOS_BEAM_SIZE=1" in readme and "length penalty: 0.2" in readme


def test_argos_installs_it_and_translates_as_mt_greedy_without_downloading(exported, tmp_path):
    exp, out, _ = exported
    lines = toy_corpus(SENTENCES, seed=321)[0]
    result = argos_translate(tmp_path / "home", [out / "translate-de_en.argosmodel"], {"de-en": ("de", "en", lines)})
    assert [row[:2] for row in result["installed"]] == [["de", "en"]]
    splitter, model = result["splitters"]["de-en"]
    assert splitter == "MiniSBDSentencizer" and model.endswith("translate-de_en/minisbd/de.onnx"), (splitter, model)
    assert downloaded(tmp_path / "home") == [], "Argos or MiniSBD fetched a model"
    ours = _mt_greedy(exp, lines)
    kept = [(text, theirs) for (text, ended), theirs in zip(ours, result["translations"]["de-en"]) if ended]
    assert len(kept) >= 0.5 * SENTENCES, "most outputs must end before mt's length limit for the test to mean anything"
    assert len({text for text, _ in kept}) >= 0.2 * len(kept), "the model must tell inputs apart"
    differing = [(text, theirs) for text, theirs in kept if text != theirs]
    assert not differing, f"{len(differing)} of {len(kept)} differ, e.g. {differing[:3]}"


@pytest.mark.slow
def test_separate_vocabularies_argos_decodes_the_output_with_the_source_model(tmp_path):
    """Argos reads one SentencePiece model: the source one turns the target pieces into the same text."""
    exp, cfg = tiny_experiment(
        tmp_path, {"train": 800, "valid": 20, "test": 20}, model=dict(enc_layers=2, dec_layers=2, dropout=0.0),
        train=dict(max_steps=250, max_tokens=1000, lr_peak=3e-3, warmup_steps=20, log_every=50, valid_every=10_000,
                   save_every=10_000), decode=dict(max_len_b=10), tokenizer={"joint": False, "vocab_size": 48})
    from mt.training.loop import train

    with one_thread():
        train(exp, cfg)
    export(exp, cfg, tmp_path / "out", fmt="argos")
    lines = toy_corpus(60, seed=17)[0]
    result = argos_translate(tmp_path / "home", [tmp_path / "out" / "translate-de_en.argosmodel"],
                             {"de-en": ("de", "en", lines)})
    kept = [(text, theirs) for (text, ended), theirs in zip(_mt_greedy(exp, lines), result["translations"]["de-en"])
            if ended]
    assert len(kept) >= 40 and len({text for text, _ in kept}) >= 20, kept
    assert all(text == theirs for text, theirs in kept), [(a, b) for a, b in kept if a != b]


def test_the_splitter_is_read_by_minisbd_and_splits_sentences(tmp_path):
    minisbd = pytest.importorskip("minisbd", reason="minisbd is not installed: pip install -e '.[test,argos]'")
    (tmp_path / "de.onnx").write_bytes(model_bytes("de"))
    detector = minisbd.SBDetect(str(tmp_path / "de.onnx"), use_gpu=False)
    cases = {
        "Der Mann läuft. Die Frau sitzt im Park!": ["Der Mann läuft.", "Die Frau sitzt im Park!"],
        'Er sagte: "Komm." Dann ging er.  Wohin?': ['Er sagte: "Komm."', "Dann ging er.", "Wohin?"],
        "Das kostet 3.50 Euro, z.B. im Park. 2024 war gut.": ["Das kostet 3.50 Euro, z.B. im Park.", "2024 war gut."],
        "Dr. Smith kam.": ["Dr.", "Smith kam."],  # a rule, not a trained splitter: docs/exporting.md
        "Ein Satz ohne Punkt": ["Ein Satz ohne Punkt"],
        "这是第一句。这是第二句！": ["这是第一句。", "这是第二句！"],
        "Это кот. это тоже кот.": ["Это кот. это тоже кот."],
        # a closing quote after 。 stays with its sentence (was cut off into the next), and the marks of
        # Urdu, Greek and full-width stops end one (a paragraph was one sentence)
        "「こんにちは。」と彼は言った。次の文。": ["「こんにちは。」", "と彼は言った。", "次の文。"],
        "یہ ایک کتاب ہے۔ وہ گھر گیا۔": ["یہ ایک کتاب ہے۔", "وہ گھر گیا۔"],
        "Τι κάνεις\u037e Καλά είμαι.": ["Τι κάνεις\u037e", "Καλά είμαι."],
        "这是第一句．这是第二句．": ["这是第一句．", "这是第二句．"],
        "Er kam; Dann ging er.": ["Er kam; Dann ging er."],  # a semicolon is none
        # German quotes close a sentence as English ones do; an ordinal's stop ends none, a year's does
        "Er sagte: „Komm.“ Dann ging er.": ["Er sagte: „Komm.“", "Dann ging er."],
        "Sie sagte »Nein.« Er ging.": ["Sie sagte »Nein.«", "Er ging."],
        "Am 3. Mai kam er. Am 12. Juni ging er im Jahr 2024. Dann nicht.": [
            "Am 3. Mai kam er.", "Am 12. Juni ging er im Jahr 2024.", "Dann nicht."],
    }
    for text, sentences in cases.items():
        assert detector.sentences(text) == sentences, text
    (tmp_path / "en.onnx").write_bytes(model_bytes("en"))  # English writes no ordinal with a stop
    english = minisbd.SBDetect(str(tmp_path / "en.onnx"), use_gpu=False)
    assert english.sentences("He won in 2. Then he left.") == ["He won in 2.", "Then he left."]


def test_positions_reach_argos_limits_and_the_refusals(exported, tmp_path):
    exp, out, _ = exported
    ctranslate2 = pytest.importorskip("ctranslate2")
    with zipfile.ZipFile(out / "translate-de_en.argosmodel") as archive:
        archive.extractall(tmp_path)
    translator = ctranslate2.Translator(str(tmp_path / "translate-de_en" / "model"), device="cpu", intra_threads=1)
    long_source = ["▁der"] * (ARGOS_POSITIONS - 2)  # CTranslate2 cuts at 1024 with </s>; the table holds them all
    assert translator.translate_batch([long_source], beam_size=1, max_decoding_length=256, max_input_length=1024)
    with pytest.raises(ConfigError, match="--license is for --format huggingface"):
        export(exp, exp.load_config(), tmp_path / "x", fmt="argos", license="mit")
    with pytest.raises(ConfigError, match="--quantize 'int4'"):
        export(exp, exp.load_config(), tmp_path / "x", fmt="argos", quantize="int4")
    with pytest.raises(MtError, match="exists; choose another --output or add --force"):
        export(exp, exp.load_config(), out, fmt="argos")


def test_cli_writes_the_packages_and_force_replaces_them(trained_experiment, tmp_path, capsys, monkeypatch):
    out = tmp_path / "argos"
    exp = str(trained_experiment.root)
    code, stdout, stderr = mt(capsys, monkeypatch, "export", "--exp", exp, "--format", "argos", "--output", str(out))
    assert code == 0, stderr
    assert stdout.strip() == str(out) and "translate-de_en.argosmodel" in stderr
    (out / "NOTES.md").write_text("mine\n")
    code, _, stderr = mt(capsys, monkeypatch, "export", "--exp", exp, "--format", "argos", "--output", str(out), "--force",
                         "--quantize", "int8")
    assert code == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == [".mt-export.json", "NOTES.md", "translate-de_en.argosmodel"]
    assert json.loads((out / ".mt-export.json").read_text()) == {"format": "argos",
                                                                  "files": ["translate-de_en.argosmodel"]}
    assert [p.name for p in tmp_path.iterdir()] == ["argos"], "no temporary directory left beside it"


def test_every_file_is_on_disk_before_the_export_is_renamed_into_place(trained_experiment, tmp_path, monkeypatch):
    """The package and MANIFEST are flushed before the rename that commits them, and the folder after
    it (was: never, and --force then removed the earlier export at once: a crash could leave neither)."""
    flushed: list[str] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    renamed: list[tuple[str, list[str]]] = []
    rename = os.rename

    def noting(source, target) -> None:
        renamed.append((str(target), list(flushed)))
        rename(source, target)

    monkeypatch.setattr(os, "fsync", recording)
    monkeypatch.setattr(os, "rename", noting)
    out = tmp_path / "argos"
    export(trained_experiment, trained_experiment.load_config(), out, fmt="argos")
    (target, before), = [(t, b) for t, b in renamed if t == str(out)]
    names = {Path(path).name for path in before}
    assert {"translate-de_en.argosmodel", ".mt-export.json"} <= names, before
    assert str(tmp_path) in flushed[len(before):], "the folder holding the export, after the rename"

