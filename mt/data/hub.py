"""Hugging Face `datasets` as a corpus: a hub dataset, a local data file or a save_to_disk directory.

Records come in two shapes, both read: {"translation": {"de": .., "en": ..}} (wmt14, iwslt2017)
and one column per language (bentrevett/multi30k). `datasets` is imported only when a source needs
it: it takes seconds.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from mt.config.sources import Source
from mt.errors import MtError

_DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow"}


def describe(source: Source) -> str:
    """How messages name the dataset and split: "dataset 'wmt14' (de-en) split 'train'"."""
    name = source.paths[0]
    return f"dataset {name!r}" + (f" ({source.hf_config})" if source.hf_config else "") + f" split {source.part!r}"


def load(source: Source):
    """The split of a hub source: a Dataset, or an IterableDataset when streaming."""
    import datasets

    name, split = source.paths[0], source.part
    path = Path(name)
    offline = False
    try:
        if source.hf_config and (path.is_dir() or path.is_file()):
            raise MtError(f"hf:{name}:{source.hf_config}: a local dataset has no configurations; leave out :CONFIG")
        if path.is_dir():  # written by Dataset(Dict).save_to_disk
            dataset = datasets.load_from_disk(name)
            if isinstance(dataset, datasets.DatasetDict):
                if split not in dataset:
                    raise MtError(
                        f"{describe(source)}: no such split; it has: {', '.join(dataset)} "
                        f"(name one with hf:{name}@SPLIT)"
                    )
                dataset = dataset[split]
            elif dataset.split is not None and str(dataset.split) != split:
                # one saved split, read for another (valid and test would read the training pairs)
                raise MtError(
                    f"{describe(source)}: the directory holds the {str(dataset.split)!r} split alone; give "
                    f"each split a directory of its own, or save a DatasetDict"
                )
            return dataset
        if path.is_file():  # a local data file: the builder goes by its extension
            ext = next((s for s in reversed(path.suffixes) if s != ".gz"), "")
            if ext not in _DATA_FILE_BUILDERS:
                raise MtError(f"hf:{name}: a local dataset file must end in {', '.join(_DATA_FILE_BUILDERS)}")
            # a CSV's cells as written: pandas reads "NA", "None", "null" as missing (an empty side) and
            # "007" as the number 7, where a corpus holds text
            as_text = (
                {"keep_default_na": False, "na_filter": False, "converters": {lang: str for lang in source.langs}}
                if _DATA_FILE_BUILDERS[ext] == "csv"
                else {}
            )
            return datasets.load_dataset(
                _DATA_FILE_BUILDERS[ext], data_files={split: name}, split=split, streaming=source.streaming, **as_text
            )
        if _looks_local(name):  # not a hub name: asking the hub would only delay the one-line error
            raise MtError(f"hf:{name}: no such file or directory")
        args = [name] + ([source.hf_config] if source.hf_config else [])
        offline = _offline_unless_the_hub_answers()
        return datasets.load_dataset(*args, split=split, streaming=source.streaming)
    except MtError:
        raise
    except Exception as exc:  # the library raises many types (network, missing split, bad files)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 300:
            reason = reason[:300] + "..."
        if (invalid := _utf8_error(path)) is not None:  # named by its line, as other sources' are
            raise invalid from None
        if path.is_dir() or path.is_file():  # the file's fault, not the network's
            raise MtError(f"cannot read {describe(source)}: {reason}") from None
        why = "the hub did not answer, so only the local cache was tried" if offline else "no network?"
        raise MtError(f"cannot load {describe(source)}: {reason} ({why}; use local files)") from None


def _utf8_error(path: Path) -> MtError | None:
    """The error naming the first line of a local data file that is not UTF-8, or None (not a local
    file, or valid): the library's error gives a byte position in a block, not the line."""
    line = _invalid_utf8_line(path) if path.is_file() else None
    if line is None:
        return None
    return MtError(f"{path}:{line}: not valid UTF-8 (hf: reads a data file whole: fix or remove the line)")


def _invalid_utf8_line(path: Path) -> int | None:
    """The first line of `path` that is not UTF-8 (from 1), or None."""
    import gzip
    import zlib

    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    return number
    except (OSError, EOFError, zlib.error):  # a broken gzip file: the reader names it, not this
        return None
    return None


def _looks_local(name: str) -> bool:
    """A path, not a hub name ("user/dataset", "wmt14"): absolute, relative with ./ or ../, or a data
    file's name (`_DATA_FILE_BUILDERS`, maybe .gz)."""
    suffixes = [s for s in Path(name).suffixes if s != ".gz"]
    return (
        os.path.isabs(name)
        or name.startswith(("./", "../", "~"))
        or name in (".", "..")
        or bool(suffixes and suffixes[-1] in _DATA_FILE_BUILDERS)
    )


def _offline_unless_the_hub_answers(timeout: float = 3.0) -> bool:
    """Offline mode for the hub libraries when the hub's host does not take a connection: without it
    `datasets` spends ~20 s on retries before failing, and with it a cached dataset still loads.
    Left alone behind a proxy (which this cannot test) or when the user set offline mode already."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection(
            (endpoint.hostname, endpoint.port or (443 if endpoint.scheme == "https" else 80)), timeout
        ).close()
        return False
    except OSError:
        pass
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    for module, name in (
        ("huggingface_hub.constants", "HF_HUB_OFFLINE"),
        ("datasets.config", "HF_HUB_OFFLINE"),
        ("datasets.config", "HF_DATASETS_OFFLINE"),
    ):
        if module in sys.modules and hasattr(sys.modules[module], name):
            setattr(sys.modules[module], name, True)  # read at import: already imported here
    return True


def record_value(record: Any, lang: str) -> Any:
    """A translation record's text in `lang`: None where it has no such key (reported with the record's
    number), "" for an empty value (JSON's null: an empty side, which cleaning counts as one)."""
    if not isinstance(record, dict) or lang not in record:
        return None
    return "" if record[lang] is None else record[lang]


def batches(source: Source, size: int) -> Iterator[tuple[list, list]]:
    """(source values, target values) per batch of up to `size` records; a value is None (or not a
    string) where a record lacks the language, for the reader to report with the record's number."""
    what = describe(source)
    records = load(source).iter(batch_size=size)
    while True:
        try:  # a streamed dataset reads its files here, not in `load`: their faults are one line too
            batch = next(records)
        except StopIteration:
            return
        except Exception as exc:
            if (invalid := _utf8_error(Path(source.paths[0]))) is not None:
                raise invalid from None
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise MtError(f"cannot read {what}: {reason}") from None
        if "translation" in batch:
            rows = batch["translation"]
            yield tuple([record_value(row, lang) for row in rows] for lang in source.langs)
            continue
        for lang in source.langs:
            if lang not in batch:
                raise MtError(f"{what} has no language key {lang!r}; its columns: {', '.join(batch)}")
        yield tuple(["" if value is None else value for value in batch[lang]] for lang in source.langs)
