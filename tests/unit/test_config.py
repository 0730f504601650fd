"""mt.config.schema, mt.config.recipes and the config half of mt.experiment.paths: recipes, presets, strict keys, types and
choices, durations, and overrides on an existing experiment (recorded, or refused once a field is in use)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import get_type_hints

import pytest
import torch
import yaml
from helpers import REPO

from mt.config import schema as cfglib
from mt.config.recipes import MODEL_PRESETS, RECIPE_KEYS, STEPS, load_recipe, recipe_config, recipe_fields
from mt.config.schema import ExperimentConfig, ModelConfig, from_dict
from mt.config.sources import SPLITS, absolute_spec
from mt.config.values import coerce, literal_choices, parse_duration
from mt.errors import ConfigError
from mt.experiment.config import ConfigChange
from mt.experiment.paths import Experiment
from mt.model.transformer import Transformer

RECIPES_DIR = REPO / "recipes"
RECIPES = sorted(RECIPES_DIR.glob("*.yaml")) + sorted(RECIPES_DIR.glob("*.yml"))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- recipes ------------------------------------------------------------------------------------
def test_recipes_dir_holds_recipes():
    files = [p for p in RECIPES_DIR.iterdir() if p.is_file()] if RECIPES_DIR.is_dir() else []
    if files:
        assert RECIPES, f"{RECIPES_DIR} has files but no *.yaml recipe"


def expected_fields(path: Path) -> dict:
    """What a recipe sets, read from its YAML (not through mt.config.recipes): section.field -> value as the
    config holds it (corpus paths absolute, durations in seconds), its preset expanded first."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    expected = {f"model.{k}": v for k, v in MODEL_PRESETS[raw["preset"]].items()} if "preset" in raw else {}
    for section, values in raw.items():
        for name, value in values.items() if section not in RECIPE_KEYS else ():
            if section == "data" and name in SPLITS:
                value = [absolute_spec(spec) for spec in value]
            elif name == "max_time" and value is not None:
                value = parse_duration(value)
            expected[f"{section}.{name}"] = value
    return expected


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_loads(path: Path):
    cfg, run = load_recipe(path)
    assert isinstance(cfg, ExperimentConfig)
    cfglib.validate(cfg, str(path))
    assert run.get("exp"), f"{path.name}: no exp: directory"
    assert set(run.get("steps", STEPS)) <= set(STEPS)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# mt run"), f"{path.name} should open with the command that runs it"
    expected = expected_fields(path)
    assert recipe_fields(path) == expected  # the fields that count as overrides on an existing experiment
    for key, value in expected.items():  # what the recipe sets is what the config holds
        section, _, name = key.partition(".")
        assert getattr(getattr(cfg, section), name) == value, key


RECIPE = """\
# mt run recipe.yaml
exp: experiments/demo
steps: [train-tokenizer, binarize, train, average, evaluate]
translate_examples: ["Ein Hund.", "Zwei Katzen."]
data:
  src_lang: en
  tgt_lang: de
  train: [files:corpus/train, "tsv:more.tsv:de-en*2", ding@sentences]
  test: [files:corpus/test.en|/abs/test.de, hf:wmt14:de-en]
tokenizer:
  vocab_size: 500
preset: tiny
model:
  dropout: 0.2
train:
  max_steps: 30
  max_time: 12m
  lr_peak: 1    # an int where a float is expected is fine
decode:
  beam: 2
"""


def test_recipe_in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg, run = load_recipe(write(tmp_path / "recipe.yaml", RECIPE))
    assert {k: run[k] for k in ("exp", "steps", "translate_examples")} == {
        "exp": "experiments/demo", "steps": [s for s in STEPS if s not in ("distill", "backtranslate", "shortlist")], "translate_examples": ["Ein Hund.", "Zwei Katzen."]}
    assert (cfg.data.src_lang, cfg.data.tgt_lang, cfg.tokenizer.vocab_size) == ("en", "de", 500)
    assert cfg.model.d_model == MODEL_PRESETS["tiny"]["d_model"] and cfg.model.dropout == 0.2  # recipe beats preset
    assert cfg.train.max_time == 720.0 and cfg.train.lr_peak == 1.0 and isinstance(cfg.train.lr_peak, float)
    assert cfg.decode.beam == 2 and cfg.train.warmup_steps == 4000  # unset fields keep their defaults
    # Relative corpus paths are taken from where mt runs, and stored absolute.
    assert cfg.data.train == [f"files:{tmp_path / 'corpus' / 'train'}", f"tsv:{tmp_path / 'more.tsv'}:de-en*2",
                              "ding@sentences"]
    assert cfg.data.test == [f"files:{tmp_path / 'corpus' / 'test.en'}|/abs/test.de", "hf:wmt14:de-en"]


def test_recipe_fields_are_only_what_it_sets(tmp_path):
    path = write(tmp_path / "r.yaml", "preset: tiny\ntrain:\n  max_steps: 7\n")
    fields = recipe_fields(path)
    assert fields == {**{f"model.{k}": v for k, v in MODEL_PRESETS["tiny"].items()}, "train.max_steps": 7}


@pytest.mark.parametrize("text, needles", [
    ("trian:\n  max_steps: 5\n", ["trian", "unknown section"]),
    ("train:\n  max_stpes: 5\n", ["train.max_stpes", "max_steps"]),  # names the key and lists the real ones
    ("model:\n  d_model: 64\n  n_heads: 5\n", ["d_model", "n_heads"]),
    ("preset: huge\n", ["huge", "tiny"]),
    ("steps: [train, deploy]\n", ["deploy"]),
    ("steps: [train, train-tokenizer, binarize]\n", ["binarize must come before train"]),  # failed midway
    ("steps: [train-tokenizer, distill, binarize]\n", ["distill must come before train-tokenizer"]),
    ("steps: [train-tokenizer, binarize, train, train]\n", ["train twice"]),
    ("train: 5\n", ["train", "mapping"]),
    ("- a list\n", ["mapping"]),
    ("train:\n  max_steps: [1\n", ["not valid YAML"]),
    # a section given twice: PyYAML kept the last, the first one's fields lost without a word
    ("data:\n  max_len: 50\nmodel:\n  d_model: 64\ndata:\n  dedup: false\n",
     ["bad.yaml:5:", "'data' given twice", "first on line 1"]),
    ("train:\n  max_steps: 5\n  max_steps: 6\n", ["bad.yaml:3:", "'max_steps' given twice"]),
    ("train: {max_steps: 5, max_steps: 6}\n", ["bad.yaml:1:", "'max_steps' given twice"]),  # on one line too
])
def test_bad_recipe_names_the_key_and_file(tmp_path, text, needles):
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    for needle in needles:
        assert needle in message


def test_missing_recipe(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_recipe(tmp_path / "nope.yaml")


# -- presets ------------------------------------------------------------------------------------
def test_presets():
    defaults = dataclasses.asdict(ModelConfig())
    assert all(defaults[k] == v for k, v in MODEL_PRESETS["base"].items())  # the defaults are the paper's base
    assert MODEL_PRESETS["big"] == dict(enc_layers=6, dec_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3)
    for name, fields in MODEL_PRESETS.items():
        cfg = recipe_config({"preset": name}, "test")
        assert {k: getattr(cfg.model, k) for k in fields} == fields
        assert fields["d_model"] % fields["n_heads"] == 0, name


# -- types --------------------------------------------------------------------------------------
@pytest.mark.parametrize("section, values, key", [
    ("train", {"max_steps": "abc"}, "train.max_steps"),
    ("train", {"max_steps": 1.5}, "train.max_steps"),
    ("train", {"max_steps": True}, "train.max_steps"),
    ("train", {"lr_peak": "fast"}, "train.lr_peak"),
    ("model", {"pre_norm": "maybe"}, "model.pre_norm"),
    ("tokenizer", {"vocab_size": None}, "tokenizer.vocab_size"),
    ("data", {"train": {"files": "x"}}, "data.train"),
    ("data", {"valid": ["files:x*2"]}, "data.valid"),
    ("train", {"max_time": "soon"}, "train.max_time"),
])
def test_type_errors_name_the_key(section, values, key):
    with pytest.raises(ConfigError) as info:
        from_dict({section: values}, "recipe.yaml")
    assert key in str(info.value) and "recipe.yaml" in str(info.value)


def test_a_yaml_boolean_in_a_text_field_is_refused_not_read_as_false(tmp_path):
    """`tgt_lang: no` (Norwegian) is YAML's false: it became the language "False" and files `train.False`."""
    with pytest.raises(ConfigError) as info:
        load_recipe(write(tmp_path / "r.yaml", "data:\n  src_lang: en\n  tgt_lang: no\n"))
    message = str(info.value)
    assert "data.tgt_lang" in message and "YAML boolean false" in message and "quote it" in message
    cfg, _ = load_recipe(write(tmp_path / "q.yaml", "data:\n  src_lang: en\n  tgt_lang: 'no'\n"))
    assert cfg.data.tgt_lang == "no"


def test_types_are_converted():
    cfg = from_dict({"train": {"max_steps": "30", "lr_peak": 1, "max_time": "1.5h"},
                     "model": {"pre_norm": "true"}, "data": {"src_lang": 5}}, "test")
    assert cfg.train.max_steps == 30 and cfg.train.lr_peak == 1.0 and cfg.train.max_time == 5400.0
    assert cfg.model.pre_norm is True and cfg.data.src_lang == "5"


def test_max_time_0_is_off_as_the_other_budgets(tmp_path):
    assert from_dict({"train": {"max_time": 0}}, "recipe.yaml").train.max_time is None
    for text in ("0", "0s", "0h", 0.0):
        assert cfglib.set_field(ExperimentConfig(), "train.max_time", text, "--max-time") is None
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({"train.max_time": "2h"})
    assert ConfigChange(exp).resolve({"train.max_time": "0"}).train.max_time is None  # `--max-time 0`: no limit
    assert exp.load_config().train.max_time is None and overrides_of(exp)[-1]["new"] is None
    with pytest.raises(ConfigError, match=r"^recipe.yaml: train.max_time must be 0 \(off\) or more$"):
        from_dict({"train": {"max_time": -5}}, "recipe.yaml")


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("12m", 720), ("1.5h", 5400), (" 2h ", 7200),
                                           (90, 90), (1.5, 1.5), (".5m", 30)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "5x", "-1m", "1h30m", "ninety", "1.2.3s"])
def test_parse_duration_rejects(text):
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text)


# -- an experiment's config -----------------------------------------------------------------------
def overrides_of(exp: Experiment) -> list[dict]:
    if not exp.overrides_path.exists():
        return []
    return [json.loads(line) for line in exp.overrides_path.read_text().splitlines()]


def test_new_experiment_writes_every_field(tmp_path):
    exp = Experiment(tmp_path / "exp")
    cfg = ConfigChange(exp).resolve({"tokenizer.vocab_size": 500, "train.max_steps": None})
    saved = yaml.safe_load(exp.config_path.read_text())
    assert saved == dataclasses.asdict(cfg) and saved["tokenizer"]["vocab_size"] == 500
    assert exp.load_config() == cfg
    assert [(r["key"], r["old"], r["new"]) for r in overrides_of(exp)] == [("tokenizer.vocab_size", 8000, 500)]


def test_resolve_without_persist_writes_nothing_new(tmp_path):
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({"decode.beam": 2}, persist=False)
    assert not exp.root.exists()


def test_overrides_are_recorded(tmp_path):
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({})
    cfg = ConfigChange(exp).resolve({"train.max_steps": 40, "train.seed": 1})  # seed 1 is no change
    assert cfg.train.max_steps == 40 and exp.load_config().train.max_steps == 40
    record = overrides_of(exp)[-1]
    assert (record["key"], record["old"], record["new"], record["persisted"]) == ("train.max_steps", 100_000, 40, True)
    assert {"time", "command"} <= set(record) and len(overrides_of(exp)) == 1
    # Decoding options for one call: neither saved nor recorded (a read-only experiment serves).
    cfg = ConfigChange(exp).resolve({"decode.beam": 1}, persist=False)
    assert cfg.decode.beam == 1 and exp.load_config().decode.beam == 4
    assert len(overrides_of(exp)) == 1


def test_used_fields_are_frozen(tmp_path):
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({})
    exp.tokenizer_dir.mkdir()
    ConfigChange(exp).resolve({"tokenizer.vocab_size": 500})  # a tokenizer dir without a model: not trained yet
    (exp.tokenizer_dir / "spm.model").write_bytes(b"x")
    before = exp.config_path.read_text(), overrides_of(exp)
    for key, value in [("tokenizer.vocab_size", 600), ("data.src_lang", "fr"), ("data.train", ["files:x"])]:
        with pytest.raises(ConfigError) as info:
            ConfigChange(exp).resolve({key: value}, origins={key: "--set"})
        assert key in str(info.value) and "--set" in str(info.value) and "tokenizer" in str(info.value)
    assert (exp.config_path.read_text(), overrides_of(exp)) == before
    ConfigChange(exp).resolve({"tokenizer.vocab_size": 500, "data.max_len": 100})  # same value; binarize's field
    ConfigChange(exp).resolve({"tokenizer.train_segmentations": 4})  # binarize's too, though under tokenizer
    exp.data_dir.mkdir()
    exp.manifest_path.write_text("{}")  # binarized (its manifest is the mark)
    for key, value in [("data.max_len", 50), ("tokenizer.train_segmentations", 2), ("tokenizer.sampling_alpha", 0.5)]:
        with pytest.raises(ConfigError, match=f"{key} is fixed at .*was binarized with it"):
            ConfigChange(exp).resolve({key: value})
    ConfigChange(exp).resolve({"model.d_model": 64, "model.n_heads": 4, "train.seed": 2})  # no checkpoint yet
    exp.checkpoints_dir.mkdir()
    (exp.checkpoints_dir / "last.pt").write_bytes(b"x")
    with pytest.raises(ConfigError, match="model.d_model is fixed at 64"):
        ConfigChange(exp).resolve({"model.d_model": 128})
    # A resume continues the checkpoint's random state and data order: a new seed would change nothing.
    before = exp.config_path.read_text(), overrides_of(exp)
    with pytest.raises(ConfigError, match=r"^--set: train.seed is fixed at 2 \(not 5\): the checkpoints hold "
                                          r"the random state and data order it seeded") as info:
        ConfigChange(exp).resolve({"train.seed": "5"}, origins={"train.seed": "--set"})
    assert info.value.exit_code == 2 and (exp.config_path.read_text(), overrides_of(exp)) == before
    ConfigChange(exp).resolve({"train.seed": 2})  # the same seed: no change
    cfg = ConfigChange(exp).resolve({"train.max_steps": 5, "decode.beam": 2})  # training and decoding may change
    assert (cfg.train.max_steps, cfg.decode.beam) == (5, 2)


def test_recipe_on_an_existing_experiment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({**{f"model.{k}": v for k, v in MODEL_PRESETS["tiny"].items()}, "train.max_tokens": 1000})
    (exp.checkpoints_dir).mkdir()
    (exp.checkpoints_dir / "last.pt").write_bytes(b"x")
    recipe = write(tmp_path / "r.yaml", "train:\n  max_steps: 50\n")
    cfg = ConfigChange(exp).resolve({}, recipe=recipe)
    # Only what the recipe sets counts: the model and max_tokens keep the experiment's values.
    assert cfg.train.max_steps == 50 and cfg.model.d_model == 64 and cfg.train.max_tokens == 1000
    cfg = ConfigChange(exp).resolve({"train.max_steps": 60}, recipe=recipe)  # flags beat the recipe
    assert cfg.train.max_steps == 60
    with pytest.raises(ConfigError) as info:
        ConfigChange(exp).resolve({}, recipe=write(tmp_path / "big.yaml", "preset: big\n"))
    assert "big.yaml" in str(info.value) and "model." in str(info.value)


def test_recipe_starts_a_new_experiment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exp = Experiment(tmp_path / "exp")
    cfg = ConfigChange(exp).resolve({"train.max_steps": 9}, recipe=write(tmp_path / "r.yaml", RECIPE))
    assert cfg.model.d_model == 64 and cfg.train.max_steps == 9 and cfg.decode.beam == 2
    assert exp.load_config() == cfg


def test_a_failed_first_step_leaves_nothing(tmp_path):
    exp = Experiment(tmp_path / "exp")
    change = ConfigChange(exp)
    change.resolve({"tokenizer.vocab_size": 500})
    with pytest.raises(RuntimeError), change.undo_if_fails():
        exp.tokenizer_dir.mkdir()
        raise RuntimeError("sentencepiece failed")
    assert not exp.root.exists()
    # An experiment that existed before keeps its config as it was before the failed command...
    exp = Experiment(tmp_path / "exp")
    ConfigChange(exp).resolve({})
    again = ConfigChange(Experiment(tmp_path / "exp"))
    again.resolve({"train.max_steps": 3})
    with pytest.raises(RuntimeError), again.undo_if_fails():
        raise RuntimeError("boom")
    assert exp.root.exists() and exp.load_config().train.max_steps == 100000
    # ...unless the step made something with the new config before failing: then it describes that.
    third = ConfigChange(Experiment(tmp_path / "exp"))
    third.resolve({"train.max_steps": 3})
    with pytest.raises(RuntimeError), third.undo_if_fails():
        exp.checkpoints_dir.mkdir()
        (exp.checkpoints_dir / "step_1.pt").write_bytes(b"saved")
        raise RuntimeError("disk full")
    assert exp.load_config().train.max_steps == 3


def test_a_failed_first_step_in_a_directory_of_other_files_takes_back_only_its_own(tmp_path):
    """A directory that held a user's files kept the failed step's config.yaml: the next command took
    it for an experiment with that config."""
    root = tmp_path / "work"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("mine\n", encoding="utf-8")
    exp = Experiment(root)
    change = ConfigChange(exp)
    change.resolve({"tokenizer.vocab_size": 500})
    assert exp.config_path.exists()
    with pytest.raises(RuntimeError), change.undo_if_fails():
        exp.tokenizer_dir.mkdir()  # made empty by the step
        raise RuntimeError("sentencepiece failed")
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == ["notes", "notes/todo.txt"]


def test_average_last_below_one_is_refused_by_name(tmp_path):
    path = write(tmp_path / "r.yaml", "decode:\n  average_last: 0\n")
    with pytest.raises(ConfigError, match="decode.average_last must be at least 1") as info:
        load_recipe(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("field, value", [("dropout", "1.5"), ("attention_dropout", "-0.1"), ("activation_dropout", "1.01")])
def test_a_dropout_rate_outside_0_1_is_refused_by_name(tmp_path, field, value):
    """Not a ValueError from inside the model when it is built."""
    path = write(tmp_path / "r.yaml", f"model:\n  {field}: {value}\n")
    with pytest.raises(ConfigError, match=r"model.dropout, model.attention_dropout and model.activation_dropout "
                                          r"must be in \[0, 1\]") as info:
        load_recipe(path)
    assert str(path) in str(info.value)


def test_unknown_cooldown_shape_is_refused_by_name(tmp_path):
    path = write(tmp_path / "r.yaml", "train:\n  cooldown: 0.2\n  cooldown_shape: cosine\n")
    with pytest.raises(ConfigError, match="train.cooldown_shape must be linear or 1-sqrt") as info:
        load_recipe(path)
    assert str(path) in str(info.value)
    assert load_recipe(write(tmp_path / "ok.yaml", "train:\n  cooldown_shape: 1-sqrt\n"))[0].train.cooldown_shape == "1-sqrt"


def test_unknown_precision_is_refused_by_name(tmp_path):
    path = write(tmp_path / "r.yaml", "train:\n  precision: fp8\n")
    with pytest.raises(ConfigError, match="train.precision must be fp32, bf16, fp16 or auto") as info:
        load_recipe(path)
    assert str(path) in str(info.value)
    assert load_recipe(write(tmp_path / "ok.yaml", "train:\n  precision: auto\n"))[0].train.precision == "auto"


CHOICE_FIELDS = [(f"{section.name}.{name}", hint)
                 for section in dataclasses.fields(ExperimentConfig)
                 for name, hint in get_type_hints(type(getattr(ExperimentConfig(), section.name))).items()
                 if literal_choices(hint)]


def test_the_choice_fields_are_literals():
    assert {key for key, _ in CHOICE_FIELDS} >= {
        "data.normalize", "tokenizer.model_type", "train.cooldown_shape", "train.best_metric",
        "train.precision", "decode.length_penalty", "decode.stop"}


@pytest.mark.parametrize("key, hint", CHOICE_FIELDS, ids=[key for key, _ in CHOICE_FIELDS])
def test_a_choice_outside_the_literal_is_one_line_naming_field_and_choices(key, hint):
    choices = literal_choices(hint)
    with pytest.raises(ConfigError) as info:
        cfglib.set_field(ExperimentConfig(), key, "nope", where="r.yaml")
    message = str(info.value)
    assert message.startswith(f"r.yaml: {key} must be ") and message.endswith("not 'nope'") and "\n" not in message
    assert all(choice in message for choice in choices)
    for choice in choices:  # every choice is accepted, as given or as a flag's text
        assert cfglib.set_field(ExperimentConfig(), key, choice) == choice


def test_inference_flags_are_checked_like_fields():
    assert coerce(None, cfglib.Quantize, "--quantize") is None
    assert coerce("bf16", cfglib.InferencePrecision, "--precision") == "bf16"
    with pytest.raises(ConfigError, match=r"^--quantize must be int8, not 'int4'$"):
        coerce("int4", cfglib.Quantize, "--quantize")
    with pytest.raises(ConfigError, match=r"^--precision must be fp32, bf16 or fp16, not 'auto'$"):
        coerce("auto", cfglib.InferencePrecision, "--precision")


def test_a_flag_unsets_an_optional_number_with_null():
    from mt.config.schema import set_field

    cfg = ExperimentConfig()
    cfg.train.max_time, cfg.train.lr_peak = 3600.0, 5e-3
    assert set_field(cfg, "train.max_time", "null") is None and cfg.train.max_time is None
    assert set_field(cfg, "train.lr_peak", "None") is None and cfg.train.lr_peak is None
    assert set_field(cfg, "train.early_dropout", "0.2") == 0.2
    assert set_field(cfg, "train.early_dropout", "") is None
    assert set_field(cfg, "train.max_time", "2h") == 7200.0
    assert set_field(cfg, "data.src_lang", "none") == "none"  # a text field keeps the text
    with pytest.raises(ConfigError, match="train.max_steps"):
        set_field(cfg, "train.max_steps", "null")  # not optional


def test_max_len_must_fit_the_position_table(tmp_path):
    """A kept pair has up to data.max_len tokens a side, and training feeds max_len + 1 positions
    (source + EOS, BOS + target): refused when the config is read, in one line naming both fields."""
    path = write(tmp_path / "r.yaml", "data:\n  max_len: 64\nmodel:\n  max_positions: 64\n")
    with pytest.raises(ConfigError, match=r"data\.max_len \(64\).*model\.max_positions \(64\)") as info:
        load_recipe(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert load_recipe(write(tmp_path / "ok.yaml", "data:\n  max_len: 63\nmodel:\n  max_positions: 64\n"))
    # The bound is the model's: max_len + 1 positions fit, one more does not.
    model = Transformer(32, 32, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1, max_positions=64).eval()
    with torch.no_grad():
        model(torch.full((1, 63 + 1), 5), torch.full((1, 63 + 1), 5))
        with pytest.raises(ValueError, match="max_positions=64"):
            model(torch.full((1, 64 + 1), 5), torch.full((1, 64 + 1), 5))


@pytest.mark.parametrize("key, value, needle", [
    ("train.max_steps", ".nan", "train.max_steps: expected an integer"),  # was a ValueError from int()
    ("train.max_steps", ".inf", "train.max_steps: expected an integer"),
    ("train.max_steps", "1e400", "train.max_steps: expected an integer"),
    ("model.activation_dropout", ".nan", "model.activation_dropout: expected a finite number"),
    ("decode.max_len_a", ".inf", "decode.max_len_a: expected a finite number"),  # silently empty translations
    ("decode.max_len_b", "99999999999999999999", "decode.max_len_b (--max-len-b) must be from 0 to 100000"),
    ("decode.beam", "100000", "decode.beam (--beam) must be from 1 to 256"),  # was killed for memory
    ("train.lr_peak", "-1", "train.lr_peak must be more than 0"),  # trained to a perplexity of 5e21
    ("train.lr_scale", "0", "train.lr_scale must be more than 0"),
    ("train.adam_beta1", "5", "train.adam_beta1 and adam_beta2 must be in [0, 1)"),  # torch's ValueError
    ("train.adam_eps", "0", "train.adam_eps must be more than 0"),
    ("tokenizer.vocab_size", "99999999999", "tokenizer.vocab_size must be from 16 to 1,000,000"),
    ("tokenizer.train_segmentations", "99999999999", "tokenizer.train_segmentations must be from 1 to 100"),
    ("tokenizer.character_coverage", "0.5", "tokenizer.character_coverage must be from 0.98 to 1.0"),  # was
    ("tokenizer.character_coverage", "2", "tokenizer.character_coverage must be from 0.98 to 1.0"),  # SentencePiece's
    ("model.n_heads", "0", "model.enc_layers, dec_layers, d_model, d_ff and n_heads must be at least 1"),
    ("data.tgt_lang", "de", "data.src_lang ('de') and data.tgt_lang ('de') must be two different languages"),  # copied
    ("data.src_lang", "''", "data.src_lang ('') and data.tgt_lang ('en') must be two different languages"),
    ("train.seed", "-1", "train.seed must be from 0 to"),  # was numpy's ValueError, a traceback in training
    ("decode.workers", "100000", "decode.workers (--workers) must be from 0 (one per thread) to 256"),  # processes
    ("train.seed", "4294967296", "train.seed must be from 0 to"),
])
def test_numbers_out_of_range_or_not_finite_are_refused_by_name(tmp_path, key, value, needle):
    section, name = key.split(".")
    path = write(tmp_path / "r.yaml", f"{section}:\n  {name}: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    assert needle in str(info.value) and str(path) in str(info.value)


def test_a_length_limit_that_leaves_room_for_eos_alone_is_refused(tmp_path):
    """Was: --max-len-a 0 --max-len-b 1 (or 0) gave an empty translation of every line, with a score."""
    path = write(tmp_path / "r.yaml", "decode:\n  max_len_a: 0\n  max_len_b: 1\n")
    with pytest.raises(ConfigError, match="the length counts </s>, so every translation would be empty"):
        load_recipe(path)
    load_recipe(write(tmp_path / "ok.yaml", "decode:\n  max_len_a: 0\n  max_len_b: 2\n"))


@pytest.mark.parametrize("key", [1, None, True])
def test_a_section_name_yaml_reads_as_no_word_is_one_line_error(key):
    from mt.config.schema import from_dict

    with pytest.raises(ConfigError) as exc:  # was: TypeError from hasattr
        from_dict({key: {"beam": 2}}, "recipe.yaml")
    assert str(exc.value) == f"recipe.yaml: section names are words, not {key!r} (quote it if it is one)"


def test_a_recipes_paths_start_at_the_home_directory_as_corpus_paths_do(tmp_path, monkeypatch):
    """Was: `exp: ~/experiments/x` made a directory named `~` in the current one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path / "r.yaml", "exp: ~/experiments/x\nteacher: [~/t.yaml, ~/t2]\nreverse: ~/r\n")
    _, run = load_recipe(path)
    home = str(tmp_path / "home")
    assert run["exp"] == f"{home}/experiments/x" and run["teacher"] == [f"{home}/t.yaml", f"{home}/t2"]
    assert run["reverse"] == f"{home}/r"


def test_a_recipe_may_merge_a_mapping_and_override_its_keys(tmp_path):
    """YAML's merge key (`<<: *base`) is no key given twice: refusing duplicates broke it."""
    path = write(tmp_path / "r.yaml", "base: &b {max_steps: 5, lr_peak: 0.001}\ntrain: {<<: *b, max_steps: 7}\n")
    from mt.config.recipes import read_yaml_mapping

    assert read_yaml_mapping(path, "recipe")["train"] == {"max_steps": 7, "lr_peak": 0.001}
