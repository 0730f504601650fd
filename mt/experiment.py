"""The experiment directory: every file name in it, atomic writes, the training lock, and reading and
writing the config (resolved by `mt.resolve`, a pure function).

Layout (documented in the README):

    EXP/config.yaml            resolved config, written by the first step, read by every later one
    EXP/overrides.jsonl        every flag that changed a recipe/config value: time, command, key, old, new
    EXP/tokenizer/spm.model    SentencePiece model and .vocab (spm.src.* + spm.tgt.* if not joint)
    EXP/data/{split}.{src,tgt}.ids.npy      token ids of a split, concatenated (memory-mapped)
    EXP/data/{split}.{src,tgt}.offsets.npy  sentence i is ids[offsets[i]:offsets[i+1]]
    EXP/data/{split}.lines.npy the corpus line of each kept pair
    EXP/data/stats.json        pairs kept/dropped per reason, tokens, mean lengths, tokenizer hash
    EXP/data/manifest.json     size and sha256 of every data file, the tokenizer hash: checked by train
    EXP/checkpoints/           step_XXXXXXX.pt, last.pt, best.pt, average.pt
    EXP/train.jsonl            training log: step, loss, lr, tokens/s, validation metrics
    EXP/tensorboard/           TensorBoard event files of the same numbers (train.tensorboard: true)
    EXP/train.lock             held (flock) while a trainer runs; holds its pid
    EXP/translations/{split}.hyp   detokenized output of `mt evaluate`
    EXP/scores/{split}.json    BLEU/chrF with sacrebleu signatures
    EXP/attention/             `mt attention`'s heatmaps and weights (by default)
    EXP/curves.png             `mt plot`'s training curves (by default)
    EXP/report.html            `mt report`'s page (by default)
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from mt import config as cfglib
from mt.config import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.recipes import read_recipe, read_yaml_mapping
from mt.atomic_files import pid_alive, write_text_atomic
from mt.resolve import flag_overrides, frozen_by, resolve


_DATA_BUILD = re.compile(r"\.data-(\d+)-")  # Experiment.new_data_build's directories


def _lock_owner(fd: int) -> int:
    """The pid in a lock file another process holds (0 if unreadable); it writes it just after taking
    the lock, so an empty file is read again for a moment."""
    for _ in range(50):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return 0
        if text:
            return int(text) if text.isdigit() else 0
        time.sleep(0.01)
    return 0


class Experiment:
    """Knows every file name in an experiment directory; nothing else builds these paths."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self._created_root: bool | None = None  # set when resolve_config starts a new experiment
        self._config_before: str | None = None  # config.yaml before resolve_config saved this command's changes
        self._made_before: list | None = None  # what the experiment held then (`_made`)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def overrides_path(self) -> Path:
        return self.root / "overrides.jsonl"

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    def spm_prefix(self, side: str) -> Path:
        """side: "joint", "src" or "tgt"; SentencePiece adds .model/.vocab to this prefix."""
        return self.tokenizer_dir / ("spm" if side == "joint" else f"spm.{side}")

    def spm_model_path(self, side: str) -> Path:
        """The SentencePiece model file of `side` ("joint", "src" or "tgt")."""
        prefix = self.spm_prefix(side)
        return prefix.with_name(prefix.name + ".model")

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def new_data_build(self) -> Path:
        """A fresh hidden directory ".data-PID-XXXX" for binarize to build data/ in, renamed at the end."""
        self.root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=self.root, prefix=f".data-{os.getpid()}-"))

    def abandoned_data_builds(self) -> list[Path]:
        """Build directories of binarize runs that were killed: their process is gone."""
        found = []
        for path in self.root.glob(".data-*"):
            match = _DATA_BUILD.match(path.name)
            if match and path.is_dir() and not pid_alive(int(match.group(1))):
                found.append(path)
        return found

    def ids_path(self, split: str, side: str) -> Path:
        return self.data_dir / f"{split}.{side}.ids.npy"

    def offsets_path(self, split: str, side: str) -> Path:
        return self.data_dir / f"{split}.{side}.offsets.npy"

    def lines_path(self, split: str) -> Path:
        """The 0-based line (in the concatenated sources) of each pair binarize kept; copies repeat it."""
        return self.data_dir / f"{split}.lines.npy"

    @property
    def data_stats_path(self) -> Path:
        return self.data_dir / "stats.json"

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "manifest.json"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint_path(self, name: str) -> Path:
        """"best", "last", "average", "step_100", or a file name under checkpoints/."""
        if name.startswith("step_") and name[5:].isdigit():
            name = f"step_{int(name[5:]):07d}"
        if not name.endswith(".pt"):
            name += ".pt"
        return self.checkpoints_dir / name

    def step_checkpoints(self) -> list[Path]:
        """Periodic checkpoints, oldest first."""
        return sorted(self.checkpoints_dir.glob("step_*.pt"))

    @property
    def tensorboard_dir(self) -> Path:
        return self.root / "tensorboard"

    @property
    def train_log_path(self) -> Path:
        return self.root / "train.jsonl"

    def hyp_path(self, split: str) -> Path:
        return self.root / "translations" / f"{split}.hyp"

    def score_path(self, split: str) -> Path:
        return self.root / "scores" / f"{split}.json"

    @property
    def attention_dir(self) -> Path:
        """Where `mt attention` writes by default."""
        return self.root / "attention"

    @staticmethod
    def attention_files(out_dir: Path, layer: int, encoder: bool, fmt: str) -> dict[str, Path]:
        """What `mt attention` writes into out_dir (attention_dir, or --output-dir), by kind; `layer` 0-based."""
        png = {"layers": "cross-attention.png", "heads": f"cross-attention-layer{layer + 1}-heads.png",
               "alignment": "alignment.png", **({"encoder": "encoder-self-attention.png"} if encoder else {})}
        names = {**(png if fmt in ("png", "both") else {}), **({"json": "attention.json"} if fmt in ("json", "both") else {})}
        return {kind: out_dir / name for kind, name in names.items()}

    @property
    def curves_path(self) -> Path:
        """`mt plot`'s default output (in the first experiment given)."""
        return self.root / "curves.png"

    @property
    def report_path(self) -> Path:
        """`mt report`'s default output."""
        return self.root / "report.html"

    @property
    def lock_path(self) -> Path:
        return self.root / "train.lock"

    # -- config --------------------------------------------------------------------------------
    def has_config(self) -> bool:
        return self.config_path.exists()

    def load_config(self) -> ExperimentConfig:
        if not self.has_config():
            raise MtError(f"{self.root}: not an experiment yet (no config.yaml); start with "
                          f"`mt run RECIPE` or `mt train-tokenizer --exp {self.root} ...`")
        return cfglib.from_dict(read_yaml_mapping(self.config_path, "experiment config"), str(self.config_path))

    def has_tokenizer(self) -> bool:
        """A finished tokenizer: its .model file is written last (joint, or the per-side pair)."""
        return self.spm_model_path("joint").exists() or self.spm_model_path("src").exists()

    def has_data(self) -> bool:
        """Binarized data: binarize renames its whole directory into place when it is done."""
        return self.data_dir.is_dir()

    def has_checkpoints(self) -> bool:
        return self.checkpoints_dir.is_dir() and any(self.checkpoints_dir.glob("*.pt"))

    def frozen_fields(self) -> dict[str, str]:
        """Every config field that may no longer change, with what was made with it."""
        return frozen_by(
            checkpoints=f"the checkpoints in {self.checkpoints_dir} hold a model built with it" if self.has_checkpoints() else None,
            data=f"{self.data_dir} was binarized with it" if self.has_data() else None,
            tokenizer=f"{self.tokenizer_dir} was trained with it" if self.has_tokenizer() else None)

    def resolve_config(self, overrides: dict[str, Any], base: ExperimentConfig | None = None, persist: bool = True,
                       recipe: Path | None = None, origins: dict[str, str] | None = None,
                       record: bool = True) -> ExperimentConfig:
        """The config for this step (`mt.resolve.resolve`) from and to the files here: a new experiment
        gets its config written once (with `persist`); changes are recorded in overrides.jsonl and,
        with `persist`, saved so that later steps (and resumes) see them; `record` False (a dry run)
        writes nothing at all."""
        read = read_recipe(recipe) if recipe is not None else None
        new = not self.has_config()
        saved = None if new else self.load_config()
        cfg, changes = resolve(saved, overrides, origins, base, read, {} if new else self.frozen_fields())
        if new and self.has_tokenizer():
            given = {key for key, value in overrides.items() if value is not None} | set(read.fields if read else ())
            self._adopt_tokenizer(cfg, given)
        if persist and (new or changes):
            if new:
                self._created_root = not self.root.exists()
                self.root.mkdir(parents=True, exist_ok=True)
            else:
                self._config_before = self.config_path.read_text(encoding="utf-8")
                self._made_before = self._made()
            write_text_atomic(self.config_path, cfglib.save_yaml(cfg))
        if changes and record and (persist or not new):
            self._record_overrides(changes, persisted=persist)
        return cfg

    def _adopt_tokenizer(self, cfg: ExperimentConfig, given: set[str]) -> None:
        """A new experiment around a tokenizer copied in (fine-tuning, ensembles): the config records
        the tokenizer that is there, not the defaults; a flag or recipe field (`given`) that says
        otherwise is refused."""
        from mt.tokenizer import Tokenizer  # a damaged model file: a one-line error naming it

        joint = self.spm_model_path("joint").exists()
        size = Tokenizer.load(self.spm_model_path("joint" if joint else "src")).vocab_size
        for field, value in (("vocab_size", size), ("joint", joint)):
            if getattr(cfg.tokenizer, field) != value and f"tokenizer.{field}" in given:
                raise ConfigError(f"tokenizer.{field} {getattr(cfg.tokenizer, field)!r}: the tokenizer in {self.tokenizer_dir} "
                                  f"has {value!r}; leave it out or start from another directory")
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
                write_text_atomic(self.config_path, self._config_before)
                self._record_overrides([{"reverted": "the command failed; config.yaml is as before it"}], persisted=False)
            raise

    def _made(self) -> list:
        """What the steps have written (tokenizer, data, checkpoints): names, sizes and times."""
        return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns)
                      for d in (self.tokenizer_dir, self.data_dir, self.checkpoints_dir) if d.is_dir()
                      for p in d.rglob("*") if p.is_file())

    def _remove_bare_start(self) -> None:
        own = {self.config_path, self.overrides_path, self.lock_path}
        files = [p for p in self.root.rglob("*") if not p.is_dir()]
        if any(p not in own for p in files):
            return  # the step made something (a tokenizer, data, checkpoints): keep it all
        for path in files:
            path.unlink(missing_ok=True)
        for path in sorted((p for p in self.root.rglob("*") if p.is_dir()), reverse=True):
            path.rmdir()
        if self._created_root:
            self.root.rmdir()

    def _record_overrides(self, changes: list[dict[str, Any]], persisted: bool) -> None:
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        command = " ".join(["mt", *sys.argv[1:]])
        lines = [json.dumps({"time": stamp, "command": command, "persisted": persisted, **change})
                 for change in changes]
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.overrides_path, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")

    # -- lock ----------------------------------------------------------------------------------
    @contextmanager
    def training_lock(self) -> Iterator[None]:
        """Refuse a second trainer on this experiment; take over a lock left by a dead process.

        The lock is flock(2) on train.lock, held while the block runs. Taking it is one atomic step
        (no moment where the file exists without its owner), and the kernel releases it when its
        process ends, however it ends: a lock file left by a dead process is free to take. The file
        holds the owner's pid, for the message a second trainer gets.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fd = self._take_lock()
        try:
            yield
        finally:
            self.lock_path.unlink(missing_ok=True)  # still held: a starter from now on makes a new file
            os.close(fd)

    def _take_lock(self) -> int:
        """The open, flock-ed lock file, holding our pid; an error if a live process holds it."""
        for _ in range(100):
            fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _lock_owner(fd)
                os.close(fd)
                raise MtError(
                    f"{self.root} is already being trained by {f'process {pid}' if pid else 'another process'} "
                    f"(lock {self.lock_path}); wait for it or stop it"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            # The owner before us may have removed the file between our open and our flock: we would
            # hold a file no one else opens. Only the file at lock_path counts; try again on that.
            try:
                at_path, held = os.stat(self.lock_path), os.fstat(fd)
                current = (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)
            except FileNotFoundError:
                current = False
            if current:
                os.ftruncate(fd, 0)  # a dead owner's pid, if any
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return fd
            os.close(fd)
        raise MtError(f"{self.lock_path}: could not take the training lock (it keeps being replaced)")

    # -- small readers -------------------------------------------------------------------------
    def read_json(self, path: Path) -> Any:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            raise MtError(f"{path}: unreadable ({exc})") from None


def open_experiment(root: Path, recipe: Path | None = None, flags: dict[str, Any] | None = None,
                    sets: list[str] | None = None, preset: str | None = None, persist: bool = True,
                    existing: bool = False) -> tuple[Experiment, ExperimentConfig]:
    """A command's experiment and config. Precedence, lowest first: saved config (or recipe/defaults),
    recipe, --preset, the named `flags` (section.field -> value, None: unset), --set. With `existing`
    the experiment must already exist (translate, evaluate): nothing is created."""
    exp = Experiment(root)
    if existing:
        exp.load_config()  # a one-line error when there is no experiment here
    overrides, origins = flag_overrides(flags or {}, sets, preset)
    return exp, exp.resolve_config(overrides, persist=persist, recipe=recipe, origins=origins)
