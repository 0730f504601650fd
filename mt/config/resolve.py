"""Config resolution, as pure functions: what a step runs with, from the saved config (or a recipe,
or the defaults, on a new experiment), a recipe's fields, --preset, the named flags and --set.

Fields that something in the experiment was made with (the model, the tokenizer, the binarized
data) are frozen: changing one is refused. So is train.seed once a checkpoint exists: a resume takes
the random state and the data order from the checkpoint, and a new seed would only be a false record. `Experiment.resolve_config` reads and writes the files
around `resolve`; nothing here touches the filesystem.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping

from mt.config.recipes import Recipe, preset_fields
from mt.config.schema import ExperimentConfig, set_field, to_dict, validate
from mt.config.sources import SPLITS, absolute_spec
from mt.errors import ConfigError

# Settings of `mt binarize`, not of the tokenizer: they may change after the tokenizer is trained,
# until the data are written.
BINARIZE_FIELDS = (  # and the splits the tokenizer does not read: a mistyped valid path is corrected before binarize
    "data.valid",
    "data.test",
    "data.max_len",
    "data.max_len_ratio",
    "data.dedup",
    "tokenizer.train_segmentations",
    "tokenizer.sampling_alpha",
)
CORPUS_FIELDS = tuple(f"data.{split}" for split in SPLITS)
# Training fields that the checkpoints fix, with why: they hold what the field seeded.
CHECKPOINT_FIELDS = {
    "train.seed": "the checkpoints hold the random state and data order it seeded, which a resume continues"
}


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """`--set section.field=value` flags as {key: value}; a malformed one is a one-line error."""
    overrides = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected section.field=value")
        overrides[key.strip()] = value.strip()
    return overrides


def apply_sets(cfg: ExperimentConfig, sets: list[str] | None) -> None:
    """`--set` flags written into `cfg` and the result checked, for scripts that take a config as it
    is (bench/); a bad one is a one-line ConfigError."""
    for key, value in parse_sets(sets).items():
        set_field(cfg, key, value, where="--set")
    validate(cfg, "--set")


FLAG_NAMES = {"train.lr_peak": "--lr"}  # fields whose flag is not --FIELD-NAME


def flag_overrides(
    flags: Mapping[str, Any], sets: list[str] | None = None, preset: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """A command's overrides and where each came from (for messages). Lowest first: --preset, the
    named flags (section.field -> value; None: not given), --set."""
    overrides = dict(flags)
    # a flag named otherwise than its field (--lr sets train.lr_peak): messages name the flag typed
    origins = {key: FLAG_NAMES[key] for key, value in flags.items() if key in FLAG_NAMES and value is not None}
    if preset is not None:
        fields = preset_fields(preset, "--preset")
        origins.update({key: f"--preset {preset}" for key in fields})
        overrides = {**fields, **{key: value for key, value in flags.items() if value is not None}}
    set_fields = parse_sets(sets)
    origins.update({key: "--set" for key in set_fields})
    return {**overrides, **set_fields}, origins


def frozen_by(checkpoints: str | None = None, data: str | None = None, tokenizer: str | None = None) -> dict[str, str]:
    """The fields that what the experiment holds fixes, each with the reason; each argument says
    what was made (e.g. "data/ was binarized with it"), or None where nothing was."""
    frozen = {}
    for section, fields in to_dict(ExperimentConfig()).items():
        for key in (f"{section}.{name}" for name in fields):
            # data.max_len, tokenizer.train_segmentations and the like are binarize's settings, not the tokenizer's
            binarize = key in BINARIZE_FIELDS
            why = (
                (section == "model" and checkpoints)
                or ((section == "data" or binarize) and data)
                or (binarize and checkpoints)  # data/ removed to save disk is rebuilt as the model was trained on it
                or (section in ("tokenizer", "data") and not binarize and tokenizer)
            )
            if why:
                frozen[key] = why
    if checkpoints:
        frozen.update(CHECKPOINT_FIELDS)
    return frozen


def differing(saved: ExperimentConfig, wanted: ExperimentConfig) -> dict[str, Any]:
    """section.field -> value of each field where `wanted` differs from `saved`."""
    old, new = to_dict(saved), to_dict(wanted)
    return {
        f"{section}.{name}": value
        for section, fields in new.items()
        for name, value in fields.items()
        if old[section][name] != value
    }


def resolve(
    saved: ExperimentConfig | None,
    overrides: Mapping[str, Any],
    origins: Mapping[str, str] | None = None,
    base: ExperimentConfig | None = None,
    recipe: Recipe | None = None,
    frozen: Mapping[str, str] | None = None,
) -> tuple[ExperimentConfig, list[dict[str, Any]]]:
    """The config a step runs with, and its changes ({key, old, new}, to record).

    A new experiment (`saved` None) starts from `recipe`'s config, else `base`, else the defaults.
    An existing one starts from `saved`; the fields `recipe` sets count as overrides (flags win over
    them), and so do `base`'s where it differs. A change to a key of `frozen` (key -> what was made
    with it) is refused. `origins` names where an override came from (a flag, `--set`, a recipe)
    for messages; by default the flag named after the field. Arguments are not changed.
    """
    origins = dict(origins or {})
    given = {key: value for key, value in overrides.items() if value is not None}  # by flags, --set, --preset
    if recipe is not None and saved is None:
        base = recipe.config
    elif recipe is not None:
        overrides = {**recipe.fields, **{key: value for key, value in overrides.items() if value is not None}}
        origins = {**{key: recipe.name for key in recipe.fields}, **origins}
    cfg = copy.deepcopy(saved if saved is not None else base if base is not None else ExperimentConfig())
    if saved is not None and base is not None:
        overrides = {**differing(saved, base), **overrides}
    changes = _apply(cfg, overrides, origins, frozen or {})
    where = "flags" if recipe is None else f"{recipe.name} with flags"
    try:
        validate(cfg, where)
    except ConfigError as exc:
        raise ConfigError(_by_origin(str(exc).removeprefix(f"{where}: "), given, origins) or str(exc)) from None
    return cfg, changes


def _origin(key: str, origins: Mapping[str, str]) -> str:
    """Where an override of `key` came from, by default the flag named after its field."""
    return origins.get(key, f"--{key.partition('.')[2].replace('_', '-')}")


def _by_origin(problem: str, given: Mapping[str, Any], origins: Mapping[str, str]) -> str | None:
    """A validation `problem` prefixed with the flag (and value) that set the first field it names
    among those `given`, as `--max-len -1: data.max_len must be at least 1`; None if it names none."""
    for key in re.findall(r"\b[a-z]+\.[a-z_0-9]+\b", problem):
        if key in given:
            origin = _origin(key, origins)
            return f"{origin}: {problem}" if origin == "--set" or " " in origin else f"{origin} {given[key]}: {problem}"
    return None


def _apply(
    cfg: ExperimentConfig, overrides: Mapping[str, Any], origins: Mapping[str, str], frozen: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Set the overrides on cfg (None: not given); the changes, refusing those to frozen fields."""
    changes = []
    for key, value in overrides.items():
        if value is None:
            continue
        name = key.partition(".")[2]
        where = _origin(key, origins)
        old = getattr(getattr(cfg, key.partition(".")[0], None), name, None)
        new = set_field(cfg, key, value, where=where)
        if key in CORPUS_FIELDS:  # relative paths as of this directory: the saved config works from any other
            new = [absolute_spec(spec) for spec in new]
            if old is not None and new == [absolute_spec(spec) for spec in old]:
                new = old  # the same files as a config saved with relative paths names: no change
            setattr(cfg.data, name, new)
        if new == old:
            continue
        if key in frozen:
            raise ConfigError(
                f"{where}: {key} is fixed at {old!r} (not {new!r}): {frozen[key]}; "
                f"start a new experiment (another --exp) to change it"
            )
        changes.append({"key": key, "old": old, "new": new})
    return changes
