"""mt.config.resolve without a filesystem: saved config, recipe, flags and frozen fields -> config and changes."""

from __future__ import annotations

import copy

import pytest

from mt.config.recipes import MODEL_PRESETS, Recipe, recipe_config
from mt.config.resolve import BINARIZE_FIELDS, flag_overrides, frozen_by, parse_sets, resolve
from mt.config.schema import ExperimentConfig, ModelConfig
from mt.errors import ConfigError


def saved_config(**train) -> ExperimentConfig:
    cfg = ExperimentConfig()
    for name, value in train.items():
        setattr(cfg.train, name, value)
    return cfg


def recipe(raw: dict, fields: dict) -> Recipe:
    return Recipe("r.yaml", recipe_config(raw, "r.yaml"), fields, {})


def test_a_new_experiment_starts_from_the_defaults():
    cfg, changes = resolve(None, {"tokenizer.vocab_size": 500, "train.max_steps": None})
    assert cfg.tokenizer.vocab_size == 500 and cfg.train.max_steps == ExperimentConfig().train.max_steps
    assert changes == [{"key": "tokenizer.vocab_size", "old": 8000, "new": 500}]


def test_an_existing_experiment_keeps_its_values_and_records_only_changes():
    saved = saved_config(max_steps=70, seed=3)
    before = copy.deepcopy(saved)
    cfg, changes = resolve(saved, {"train.max_steps": "40", "train.seed": 3})  # seed 3: no change
    assert (cfg.train.max_steps, cfg.train.seed) == (40, 3)
    assert changes == [{"key": "train.max_steps", "old": 70, "new": 40}]
    assert saved == before  # the arguments are not changed


def test_a_frozen_field_is_refused_naming_key_origin_and_reason():
    frozen = {"model.d_model": "the checkpoints hold a model built with it"}
    saved = ExperimentConfig()
    cfg, changes = resolve(saved, {"model.d_model": 512, "train.max_steps": 5}, frozen=frozen)  # same value: fine
    assert changes == [{"key": "train.max_steps", "old": 100_000, "new": 5}]
    with pytest.raises(ConfigError) as info:
        resolve(saved, {"model.d_model": 256}, origins={"model.d_model": "--set"}, frozen=frozen)
    message = str(info.value)
    assert message.startswith("--set: model.d_model is fixed at 512 (not 256)") and "checkpoints" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match=r"^--d-model: model\.d_model"):  # default origin: the flag
        resolve(saved, {"model.d_model": 256}, frozen=frozen)


def test_nothing_is_frozen_on_a_new_experiment():
    cfg, _ = resolve(None, {"model.d_model": 256, "model.n_heads": 4})
    assert cfg.model.d_model == 256


def test_a_recipe_starts_a_new_experiment():
    cfg, changes = resolve(None, {"train.max_steps": 9}, recipe=recipe({"preset": "tiny", "decode": {"beam": 2}}, {}))
    assert (cfg.model.d_model, cfg.decode.beam, cfg.train.max_steps) == (64, 2, 9)
    assert changes == [{"key": "train.max_steps", "old": 100_000, "new": 9}]


def test_on_an_existing_experiment_only_what_a_recipe_sets_counts():
    saved = saved_config(max_tokens=1000)
    saved.model.d_model, saved.model.n_heads = 64, 4
    steps = recipe({"train": {"max_steps": 50}}, {"train.max_steps": 50})
    cfg, _ = resolve(saved, {}, recipe=steps)
    assert (cfg.train.max_steps, cfg.model.d_model, cfg.train.max_tokens) == (50, 64, 1000)
    cfg, _ = resolve(saved, {"train.max_steps": 60}, recipe=steps)  # flags beat the recipe
    assert cfg.train.max_steps == 60
    big = recipe({"preset": "big"}, {f"model.{k}": v for k, v in MODEL_PRESETS["big"].items()})
    with pytest.raises(ConfigError, match=r"^r\.yaml: model\.") as info:
        resolve(saved, {}, recipe=big, frozen={"model.d_model": "checkpoints"})
    assert "r.yaml" in str(info.value)


def test_a_base_counts_where_it_differs_from_the_saved_config():
    saved, base = saved_config(max_steps=70), saved_config(max_steps=70, warmup_steps=10)
    cfg, changes = resolve(saved, {}, base=base)
    assert changes == [{"key": "train.warmup_steps", "old": 4000, "new": 10}]
    assert resolve(saved, {"train.warmup_steps": 20}, base=base)[0].train.warmup_steps == 20  # flags win


def test_the_result_is_validated_and_a_bad_value_named_by_the_flag_that_gave_it():
    """Was `flags: data.max_len must be at least 1` for `--max-len -1`: the field, not the flag typed."""
    with pytest.raises(ConfigError, match=r"^--d-model 30: model\.d_model must be divisible by model\.n_heads"):
        resolve(None, {"model.d_model": 30})
    with pytest.raises(ConfigError, match=r"^--max-len -1: data\.max_len must be at least 1$"):
        resolve(None, {"data.max_len": -1})
    with pytest.raises(ConfigError, match=r"^--lr -1\.0: train\.lr_peak must be more than 0"):
        resolve(None, {"train.lr_peak": -1.0}, {"train.lr_peak": "--lr"})
    with pytest.raises(ConfigError, match=r"^--set: train\.max_steps must be 0 or more$"):
        resolve(None, {"train.max_steps": "-3"}, {"train.max_steps": "--set"})
    with pytest.raises(ConfigError, match=r"^r\.yaml with flags: model\.d_model must be divisible"):
        resolve(ExperimentConfig(), {}, recipe=recipe({}, {"model.d_model": 30}))
    with pytest.raises(ConfigError, match=r"^flags: model\.d_model must be divisible"):  # no override names it
        resolve(None, {}, base=ExperimentConfig(model=ModelConfig(d_model=30)))


def test_flag_overrides_preset_then_flags_then_sets():
    overrides, origins = flag_overrides({"model.d_model": 128, "model.n_heads": None, "train.max_steps": 5},
                                        ["train.max_steps=7", "decode.beam = 2"], preset="tiny")
    assert overrides["model.d_model"] == 128 and overrides["model.n_heads"] == MODEL_PRESETS["tiny"]["n_heads"]
    assert overrides["train.max_steps"] == "7" and overrides["decode.beam"] == "2"
    assert origins["model.n_heads"] == "--preset tiny" and origins["train.max_steps"] == "--set"
    assert flag_overrides({"train.seed": None}) == ({"train.seed": None}, {})
    with pytest.raises(ConfigError, match=r"^--preset: unknown preset 'huge'; known: base, big, small, tiny, student, student-tiny$"):
        flag_overrides({}, preset="huge")


def test_parse_sets_refuses_a_set_without_a_value():
    assert parse_sets(None) == {}
    with pytest.raises(ConfigError, match="expected section.field=value"):
        parse_sets(["train.max_steps"])


def test_frozen_by_what_was_made():
    assert frozen_by() == {}
    model = frozen_by(checkpoints="ckpt")
    assert model.pop("train.seed").startswith("the checkpoints hold the random state")
    # binarize's settings too, with data/ removed to save disk (was: changeable, the data rebuilt
    # otherwise than the model was trained on, and a resume went on from its position in the old)
    assert {key: model.pop(key) for key in BINARIZE_FIELDS} == dict.fromkeys(BINARIZE_FIELDS, "ckpt")
    assert model and all(key.startswith("model.") for key in model) and set(model.values()) == {"ckpt"}
    data = frozen_by(data="bin")
    assert {"data.src_lang", "data.max_len", *BINARIZE_FIELDS} <= set(data) and "tokenizer.vocab_size" not in data
    tokenizer = frozen_by(tokenizer="spm")
    assert {"tokenizer.vocab_size", "data.src_lang"} <= set(tokenizer)
    assert not set(BINARIZE_FIELDS) & set(tokenizer)  # binarize's settings may change until binarize runs
    # the tokenizer reads the train split alone: a mistyped valid or test path is corrected until binarize
    assert "data.train" in tokenizer and not {"data.valid", "data.test"} & set(tokenizer)
    assert {"data.valid", "data.test"} <= set(data)


def test_corpus_paths_are_saved_absolute_and_a_relative_saved_one_is_the_same_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frozen = {"data.train": "data/ was binarized with it"}
    cfg, changes = resolve(ExperimentConfig(), {"data.train": "[files:corpus/train]"})
    assert cfg.data.train == [f"files:{tmp_path / 'corpus' / 'train'}"]
    saved = ExperimentConfig()
    saved.data.train = ["files:corpus/train"]  # an experiment saved before paths were made absolute
    cfg, changes = resolve(saved, {"data.train": "[files:corpus/train]"}, frozen=frozen)
    assert changes == [] and cfg.data.train == ["files:corpus/train"]
    with pytest.raises(ConfigError, match="data.train is fixed"):
        resolve(saved, {"data.train": "[files:other/train]"}, frozen=frozen)
