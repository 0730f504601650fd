"""The training log, train.jsonl: one JSON record per line, written by `mt train`, read back by
`mt info`, `mt plot` and `mt report`. Training records hold "loss", validation records "valid_loss"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mt.errors import MtError


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
            if key in record:
                while records and records[-1]["step"] >= record["step"]:
                    records.pop()
                records.append(record)
    return train, valid
