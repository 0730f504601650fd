"""The training log, train.jsonl: one JSON record per line, written by `mt train`, read back by
`mt info`, `mt plot` and `mt report`. Training records hold "loss", validation records "valid_loss"."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from mt.errors import ConfigError, MtError

if TYPE_CHECKING:
    from mt.experiment.paths import Experiment
    from mt.training.distributed import Distributed

# train.jsonl's fields -> TensorBoard's tags.
TENSORBOARD_TAGS = {
    "loss": "train/loss",
    "nll": "train/nll",
    "ppl": "train/ppl",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "tgt_tokens_per_s": "train/tgt_tokens_per_s",
    "tokens_per_s": "train/tokens_per_s",
    "loss_scale": "train/loss_scale",
    "valid_loss": "valid/loss",
    "valid_nll": "valid/nll",
    "valid_ppl": "valid/ppl",
    "valid_bleu": "valid/bleu",
}


def load_train_log(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training records, validation records) of a train.jsonl, in step order.

    A line cut short by a killed run is skipped; when a resumed run logs a step again, its records
    replace those the earlier run wrote from that step on (the checkpoint it resumed from is older).
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise MtError(f"{path}: no training log; train the experiment first (`mt train`)") from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None
    train: list[dict] = []
    valid: list[dict] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), (int, float)):
            continue
        for records, key in ((train, "loss"), (valid, "valid_loss")):
            # Its own kind from its step on, the other kind past its step: a resumed run's first
            # training record also ends the validations the earlier run logged after its checkpoint.
            ours = key in record
            while records and records[-1]["step"] >= record["step"] + (0 if ours else 1):
                records.pop()
            if ours:
                records.append(record)
    return train, valid


class TensorBoardLog:
    """train.tensorboard: each train.jsonl record's numbers as TensorBoard scalars against the step."""

    def __init__(self, directory: Path, purge_step: int | None = None):
        """`purge_step`: a resumed run's first step; what an earlier run logged from it on (past the
        checkpoint it resumes from) is hidden, as the resumed run logs those steps again."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError(
                "train.tensorboard: needs the tensorboard package: pip install tensorboard "
                "(in mt's checkout: pip install -e '.[tensorboard]'), or set train.tensorboard: false"
            ) from None
        self.writer = SummaryWriter(log_dir=str(directory), purge_step=purge_step)

    def write(self, record: dict[str, Any]) -> None:
        for key, tag in TENSORBOARD_TAGS.items():
            if isinstance(record.get(key), (int, float)):
                self.writer.add_scalar(tag, record[key], global_step=int(record["step"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class TrainLog:
    """Rank 0's records: train.jsonl (appended to over runs), and TensorBoard's events if asked."""

    def __init__(self, handle, tensorboard: TensorBoardLog | None):
        self.handle, self.tensorboard = handle, tensorboard

    def write(self, record: dict[str, Any]) -> None:
        self.handle.write(json.dumps(record) + "\n")
        self.handle.flush()
        if self.tensorboard is not None:
            self.tensorboard.write(record)


@contextmanager
def open_train_log(
    exp: Experiment, group: Distributed, tensorboard: bool, resumed_at: int | None = None
) -> Iterator[TrainLog | None]:
    """The log for rank 0; None for the other processes. `resumed_at`: the step a resumed run starts
    from (TensorBoard's events past it, an earlier run's, are purged)."""
    if not group.is_main:
        yield None
        return
    board = TensorBoardLog(exp.tensorboard_dir, None if resumed_at is None else resumed_at + 1) if tensorboard else None
    try:
        end_last_line(exp.train_log_path)
        with open(exp.train_log_path, "a", encoding="utf-8") as handle:
            yield TrainLog(handle, board)
    finally:
        if board is not None:
            board.close()


def end_last_line(path) -> None:
    """A run killed mid-write left half a record: the next starts on a line of its own, not glued to it."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as handle:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
