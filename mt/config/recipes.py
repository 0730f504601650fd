"""Recipes and presets: a recipe file (YAML) -> its config, the fields it sets and its run keys.

A recipe is the config's sections plus `preset` (a model size, expanded into model fields that the
recipe's own model section overrides) and the keys `mt run` uses (`exp`, `steps`,
`translate_examples`). Relative corpus paths in it are taken from where `mt` runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mt.config.schema import ExperimentConfig, from_dict
from mt.config.sources import SPLITS, absolute_spec
from mt.errors import ConfigError

MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # The paper's Table 3.
    "base": dict(enc_layers=6, dec_layers=6, d_model=512, d_ff=2048, n_heads=8, dropout=0.1),
    "big": dict(enc_layers=6, dec_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
    # CPU-sized: the Multi30k benchmark preset (3+3 layers, d_model 256).
    "small": dict(enc_layers=3, dec_layers=3, d_model=256, d_ff=1024, n_heads=4, dropout=0.1),
    "tiny": dict(enc_layers=2, dec_layers=2, d_model=64, d_ff=256, n_heads=4, dropout=0.1),
    # Distillation students (mt distill): a deep encoder and a shallow decoder, as Bergamot's CPU students
    # (browsermt/students): decoding time goes with the decoder, which runs once per output token.
    "student": dict(enc_layers=6, dec_layers=2, d_model=256, d_ff=1024, n_heads=4, dropout=0.1),
    "student-tiny": dict(enc_layers=6, dec_layers=1, d_model=128, d_ff=512, n_heads=4, dropout=0.1),
}

RECIPE_KEYS = {"exp", "preset", "steps", "translate_examples", "teacher", "reverse", "mono", "bt_search"}
# distill: a student recipe's first step (`teacher:` names the teacher's recipe or experiment); backtranslate:
# `reverse:` (a recipe or experiment of the reverse direction) translates `mono:` (specs) with `bt_search`
# (beam, sample or noise) into this experiment's synthetic pairs (see mt.apps.run).
STEPS = ("distill", "backtranslate", "train-tokenizer", "binarize", "shortlist", "train", "average", "evaluate")
BT_SEARCHES = ("beam", "sample", "noise")
# The steps whose output each step reads: a recipe lists them before it, and when one of them runs,
# so does it (`mt run --dry-run`).
READS = {
    "train-tokenizer": ("distill", "backtranslate"),
    "binarize": ("distill", "backtranslate", "train-tokenizer"),
    "shortlist": ("binarize",),
    "train": ("binarize",),
    "average": ("train",),
    "evaluate": ("train", "average", "shortlist"),
}


@dataclass
class Recipe:
    """A recipe file, read and checked."""

    name: str  # the file, for messages
    config: ExperimentConfig
    fields: dict[str, Any]  # section.field -> value: what the recipe sets itself (its preset expanded)
    run: dict[str, Any]  # exp, preset, steps, translate_examples


def preset_fields(name: Any, where: str) -> dict[str, Any]:
    """A model preset as section.field -> value; an unknown name is a one-line error naming `where`."""
    if not isinstance(name, str) or name not in MODEL_PRESETS:
        raise ConfigError(f"{where}: unknown preset {name!r}; known: {', '.join(MODEL_PRESETS)}")
    return {f"model.{key}": value for key, value in MODEL_PRESETS[name].items()}


def recipe_config(raw: dict[str, Any], where: str) -> ExperimentConfig:
    """A recipe's mapping -> its config: the defaults, then its preset, then its sections."""
    cfg = ExperimentConfig()
    if raw.get("preset") is not None:
        for key, value in preset_fields(raw["preset"], where).items():
            setattr(cfg.model, key.partition(".")[2], value)
    return from_dict({key: value for key, value in raw.items() if key not in RECIPE_KEYS}, where, base=cfg)


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping: PyYAML keeps the last, so a
    recipe with two `data:` sections lost the first one's fields without a word."""


def _unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    lines: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden here
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = lines.get(key)
        except TypeError:  # an unhashable key: construct_mapping names it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"{key!r} given twice in one mapping (first on line {first + 1})", key_node.start_mark
            )
        lines[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=True)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """The mapping a YAML file (a recipe, an experiment's config) holds. Unreadable files, bytes that
    are not UTF-8, bad YAML and anything but a mapping are one-line errors naming the file (and line)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}): a damaged {what}?") from None
    try:
        raw = yaml.load(text, Loader=UniqueKeyLoader)  # safe: a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if getattr(mark, "line", None) is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{path}{at}: not valid YAML ({problem})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        kinds = {"list": "a list", "str": "a string", "int": "a number", "float": "a number", "bool": "true/false"}
        kind = kinds.get(type(raw).__name__, f"a {type(raw).__name__}")
        raise ConfigError(f"{path}: the {what} must be a mapping of sections, not {kind}")
    return raw


def read_recipe(path: Path) -> Recipe:
    """Read a recipe: its config (corpus paths made absolute), the fields it sets, its run keys.

    On an existing experiment the fields it sets, and only these, count as overrides: a field the
    recipe leaves out keeps the experiment's value instead of going back to the default.
    """
    raw = read_yaml_mapping(path, "recipe")
    cfg = recipe_config(raw, str(path))
    absolute_data_paths(cfg)
    run = {key: raw[key] for key in RECIPE_KEYS if key in raw}
    for key in ("exp", "teacher", "reverse"):  # paths: `~/experiments/x` is the home's, as corpus paths are
        if isinstance(run.get(key), str):
            run[key] = os.path.expanduser(run[key])
        elif isinstance(run.get(key), list):
            run[key] = [os.path.expanduser(entry) if isinstance(entry, str) else entry for entry in run[key]]
    steps = run.get("steps", [])
    if not isinstance(steps, list):
        raise ConfigError(f"{path}: steps must be a list, e.g. [{', '.join(STEPS)}]")
    for i, step in enumerate(steps):
        if step not in STEPS:
            raise ConfigError(f"{path}: unknown step {step!r}; steps are: {', '.join(STEPS)}")
        if step in steps[:i]:
            raise ConfigError(f"{path}: steps: {step} twice")
        later = next((other for other in steps[i + 1 :] if other in READS.get(step, ())), None)
        if later is not None:  # it would read what that step has not written yet
            raise ConfigError(f"{path}: steps: {later} must come before {step}, which reads its output")
    teachers = run.get("teacher")
    if "distill" in steps and not teachers:
        raise ConfigError(
            f"{path}: the step distill needs `teacher:`, a teacher recipe (.yaml) or experiment, or a list"
        )
    if teachers is not None and not (
        isinstance(teachers, str)
        or (isinstance(teachers, list) and teachers and all(isinstance(t, str) for t in teachers))
    ):
        raise ConfigError(f"{path}: teacher must be a recipe (.yaml) or experiment path, or a list of them")
    if "backtranslate" in steps and not (isinstance(run.get("reverse"), str) and run.get("mono")):
        raise ConfigError(
            f"{path}: the step backtranslate needs `reverse:`, a recipe (.yaml) or experiment of the "
            f"reverse direction, and `mono:`, a list of text:FILE or parallel specs"
        )
    if not (isinstance(run.get("mono", []), list) and all(isinstance(m, str) for m in run.get("mono", []))):
        raise ConfigError(f"{path}: mono must be a list of specs (text:FILE, or a parallel spec)")
    if run.get("bt_search", "beam") not in BT_SEARCHES:
        raise ConfigError(f"{path}: bt_search {run['bt_search']!r}: one of {', '.join(BT_SEARCHES)}")
    if not isinstance(run.get("translate_examples", []), list):
        raise ConfigError(f"{path}: translate_examples must be a list of sentences")
    keys = list(preset_fields(raw["preset"], str(path))) if raw.get("preset") is not None else []
    keys += [f"{section}.{name}" for section, values in raw.items() if section not in RECIPE_KEYS for name in values]
    fields = {key: getattr(getattr(cfg, key.partition(".")[0]), key.partition(".")[2]) for key in keys}
    return Recipe(str(path), cfg, fields, run)


def load_recipe(path: Path) -> tuple[ExperimentConfig, dict[str, Any]]:
    """Read a recipe: returns its config and its run keys (exp, steps, translate_examples)."""
    recipe = read_recipe(path)
    return recipe.config, recipe.run


def recipe_fields(path: Path) -> dict[str, Any]:
    """The fields a recipe sets itself (its preset expanded), as section.field -> checked value."""
    return read_recipe(path).fields


def absolute_data_paths(cfg: ExperimentConfig) -> None:
    """Relative corpus paths in a recipe are relative to where `mt` runs; the saved config holds
    absolute ones so that later steps work from any directory."""
    for split in SPLITS:
        setattr(cfg.data, split, [absolute_spec(spec) for spec in getattr(cfg.data, split)])
