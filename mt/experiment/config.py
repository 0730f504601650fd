"""A command's config: resolved from what the experiment saved plus this command's recipe and flags
(`mt.config.resolve`, a pure function), saved into config.yaml so that later steps and resumes see
it, recorded in overrides.jsonl, and taken back when the command fails having made nothing. A
config for one call that is not saved (`read_experiment`) writes nothing.
"""

from __future__ import annotations

import datetime
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from mt.atomic_files import write_text_atomic
from mt.config import schema as cfglib
from mt.config.recipes import read_recipe
from mt.config.resolve import flag_overrides, frozen_by, resolve
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import Tokenizer


class ConfigChange:
    """What one command does to an experiment's config.yaml: `resolve` it (and save it), and, around
    the step, `undo_if_fails`."""

    def __init__(self, exp: Experiment, rebuild_data: bool = False):
        self.exp = exp
        self.rebuild_data = rebuild_data  # binarize --force: data/ fixes nothing; it is made again
        self._created_root: bool | None = None  # set when resolve starts a new experiment
        self._config_before: str | None = None  # config.yaml before resolve saved this command's changes
        self._made_before: list | None = None  # what the experiment held then (`_made`)
        self._there_before: set[Path] = set()  # a new experiment's directory: what was in it already

    def frozen_fields(self) -> dict[str, str]:
        """Every config field that may no longer change, with what was made with it."""
        exp = self.exp
        return frozen_by(
            checkpoints=f"the checkpoints in {exp.checkpoints_dir} hold a model built with it"
            if exp.has_checkpoints()
            else None,
            data=f"{exp.data_dir} was binarized with it" if exp.has_data() and not self.rebuild_data else None,
            tokenizer=f"{exp.tokenizer_dir} was trained with it" if exp.has_tokenizer() else None,
        )

    def resolve(
        self,
        overrides: dict[str, Any],
        base: ExperimentConfig | None = None,
        persist: bool = True,
        recipe: Path | None = None,
        origins: dict[str, str] | None = None,
        record: bool = True,
    ) -> ExperimentConfig:
        """The config for this step (`mt.config.resolve.resolve`) from and to the experiment's files: a
        new experiment gets its config written once (with `persist`); with `persist`, changes are
        saved so that later steps (and resumes) see them and recorded in overrides.jsonl; without it
        (one call's decoding flags) nothing is written: a read-only experiment serves; `record` False
        (a dry run) writes nothing at all."""
        exp = self.exp
        read = read_recipe(recipe) if recipe is not None else None
        new = not exp.has_config()
        saved = None if new else exp.load_config()
        cfg, changes = resolve(saved, overrides, origins, base, read, {} if new else self.frozen_fields())
        if new and exp.has_tokenizer():
            given = {key for key, value in overrides.items() if value is not None} | set(read.fields if read else ())
            self._adopt_tokenizer(cfg, given)
        if any(change["key"] == "train.max_steps" for change in changes):
            self._check_budget(cfg, (origins or {}).get("train.max_steps") or (read.name if read else "--max-steps"))
        if persist and any(change["key"].startswith("train.") for change in changes):
            self._check_finished(cfg, changes, origins or {})
        if persist and (new or changes):
            if new:
                self._created_root = not exp.root.exists()
                self._there_before = set() if self._created_root else set(exp.root.rglob("*"))
                exp.root.mkdir(parents=True, exist_ok=True)
            else:
                self._config_before = exp.config_path.read_text(encoding="utf-8")
                self._made_before = self._made()
            write_text_atomic(exp.config_path, cfglib.save_yaml(cfg))
        if changes and record and persist:
            self._record_overrides(changes, persisted=True)
        return cfg

    def _check_budget(self, cfg: ExperimentConfig, where: str) -> None:
        """A train.max_steps below the step last.pt is at would be recorded as a budget that did not run
        (the model has more updates than it says): refused, before anything is written."""
        last = self.exp.checkpoint_path("last")
        if not last.is_file():
            return
        from mt.experiment.checkpoint_file import load_checkpoint

        try:
            step = int(load_checkpoint(last).get("step", 0))
        except MtError:  # a damaged last.pt: training says so when it resumes from it
            return
        if cfg.train.max_steps < step:
            raise ConfigError(
                f"{where}: train.max_steps {cfg.train.max_steps}: {last} is at step {step} already; give "
                f"{step} or more (a model of fewer updates: a step_N.pt checkpoint kept by train.keep_last)"
            )

    def _check_finished(self, cfg: ExperimentConfig, changes: list[dict], origins: dict[str, str]) -> None:
        """A training setting changed where training has nothing left to do (its budget spent, by the
        new config too) would be recorded as if the model were trained with it (the config, a model
        card's figures) though no update runs: refused. A budget given with it trains on."""
        last = self.exp.checkpoint_path("last")
        budget = ("train.max_steps", "train.max_time", "train.patience")
        settings = [
            change["key"] for change in changes if change["key"].startswith("train.") and change["key"] not in budget
        ]
        if not settings or not last.is_file():
            return
        from mt.experiment.checkpoint_file import load_checkpoint

        try:
            state = load_checkpoint(last)
        except MtError:
            return
        step, elapsed = int(state.get("step", 0)), float(state.get("elapsed", 0.0))
        if step >= cfg.train.max_steps:
            spent, more = f"step {step} of train.max_steps {cfg.train.max_steps}", "a larger --max-steps"
        elif cfg.train.max_time and elapsed >= cfg.train.max_time:
            spent = f"{elapsed:.0f}s of train.max_time {cfg.train.max_time:.0f}s"
            more = "a larger --max-time (or --set train.max_time=null)"
        else:
            return
        key = settings[0]
        raise ConfigError(
            f"{origins.get(key) or key}: training is finished ({spent}): {key} would be recorded but never "
            f"used; give {more} to train on with it, or start a new --exp"
        )

    def _adopt_tokenizer(self, cfg: ExperimentConfig, given: set[str]) -> None:
        """A new experiment around a tokenizer copied in (fine-tuning, ensembles): the config records
        the tokenizer that is there, not the defaults; a flag or recipe field (`given`) that says
        otherwise is refused."""
        exp = self.exp
        joint = exp.spm_model_path("joint").exists()
        path = exp.spm_model_path("joint" if joint else "src")
        size = Tokenizer.load(path).vocab_size  # damaged: one line
        for field, value in (("vocab_size", size), ("joint", joint), *trained_with(path)):
            if getattr(cfg.tokenizer, field) != value and f"tokenizer.{field}" in given:
                raise ConfigError(
                    f"tokenizer.{field} {getattr(cfg.tokenizer, field)!r}: the tokenizer in {exp.tokenizer_dir} "
                    f"has {value!r}; leave it out or start from another directory"
                )
            setattr(cfg.tokenizer, field, value)

    @contextmanager
    def undo_if_fails(self) -> Iterator[None]:
        """Around a step that saved this command's config: if the step fails having made nothing, the
        config goes back to what it was (a new experiment's bare start is removed), so that a typo in a
        failed command does not quietly change the next run."""
        try:
            yield
        except BaseException:
            if self._created_root is not None:
                self._remove_bare_start()
            elif self._config_before is not None and self._made() == self._made_before:
                write_text_atomic(self.exp.config_path, self._config_before)
                self._record_overrides(
                    [{"reverted": "the command failed; config.yaml is as before it"}], persisted=False
                )
            raise

    def _made(self) -> list:
        """What the steps have written (tokenizer, data, checkpoints): names, sizes and times."""
        exp = self.exp
        return sorted(
            (str(p), p.stat().st_size, p.stat().st_mtime_ns)
            for d in (exp.tokenizer_dir, exp.data_dir, exp.checkpoints_dir)
            if d.is_dir()
            for p in d.rglob("*")
            if p.is_file()
        )

    def _remove_bare_start(self) -> None:
        """Take back a new experiment's start: its config, overrides and lock, and the directories the
        step made empty; what was in the directory before is never touched."""
        root = self.exp.root
        own = {self.exp.config_path, self.exp.overrides_path, self.exp.lock_path}
        new = [p for p in root.rglob("*") if p not in self._there_before]
        if any(p not in own for p in new if not p.is_dir()):
            return  # the step made something (a tokenizer, data, checkpoints): keep it all
        for path in new:
            if not path.is_dir():
                path.unlink(missing_ok=True)
        for path in sorted((p for p in new if p.is_dir()), reverse=True):
            path.rmdir()
        if self._created_root:
            root.rmdir()

    def _record_overrides(self, changes: list[dict[str, Any]], persisted: bool) -> None:
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        command = " ".join(["mt", *sys.argv[1:]])
        lines = [
            json.dumps({"time": stamp, "command": command, "persisted": persisted, **change}) for change in changes
        ]
        self.exp.root.mkdir(parents=True, exist_ok=True)
        with open(self.exp.overrides_path, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


def open_experiment(
    root: Path,
    recipe: Path | None = None,
    flags: dict[str, Any] | None = None,
    sets: list[str] | None = None,
    preset: str | None = None,
    persist: bool = True,
    rebuild_data: bool = False,
) -> tuple[Experiment, ExperimentConfig, ConfigChange]:
    """A command's experiment, its config and the change the command made to it. Precedence, lowest
    first: saved config (or recipe/defaults), recipe, --preset, the named `flags` (section.field ->
    value, None: unset), --set. `rebuild_data`: binarize's settings may change although data/ exists."""
    change = ConfigChange(Experiment(root), rebuild_data)
    overrides, origins = flag_overrides(flags or {}, sets, preset)
    return change.exp, change.resolve(overrides, persist=persist, recipe=recipe, origins=origins), change


def read_experiment(root: Path) -> tuple[Experiment, ExperimentConfig]:
    """An existing experiment and its saved config, for the commands that only read it (translate,
    evaluate, serve, attention, export, report; average writes only its checkpoint): nothing is
    written, so that a read-only experiment serves.
    Their decoding flags are this call's DecodeOptions (mt.decoding.options), never the config's."""
    exp = Experiment(root)
    return exp, exp.load_config()  # a one-line error when there is no experiment here


def trained_with(model: Path) -> list[tuple[str, Any]]:
    """The tokenizer.* settings a SentencePiece model was trained with, as its file records them (a copied
    tokenizer recorded with the defaults: `mt info`, the export's card and its warnings read them)."""
    try:  # (its protobuf module needs the protobuf package, which not every install has)
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        return []
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(model.read_bytes())
    trainer, found = proto.trainer_spec, []
    kind = {1: "unigram", 2: "bpe"}.get(trainer.model_type)
    if kind is not None:
        found.append(("model_type", kind))
    if proto.normalizer_spec.name in ("nmt_nfkc", "nfkc", "identity", "nmt_nfkc_cf", "nfkc_cf"):
        found.append(("normalization", proto.normalizer_spec.name))
    found.append(("byte_fallback", bool(trainer.byte_fallback)))
    return found
