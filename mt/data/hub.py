"""Hugging Face `datasets` as a corpus: a hub dataset, a local data file or a save_to_disk directory.

Records come in two shapes, both read: {"translation": {"de": .., "en": ..}} (wmt14, iwslt2017)
and one column per language (bentrevett/multi30k). `datasets` is imported only when a source needs
it: it takes seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

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
    try:
        if path.is_dir():  # written by Dataset(Dict).save_to_disk
            dataset = datasets.load_from_disk(name)
            if isinstance(dataset, datasets.DatasetDict):
                if split not in dataset:
                    raise MtError(f"{describe(source)}: no such split; it has: {', '.join(dataset)} "
                                  f"(name one with hf:{name}@SPLIT)")
                dataset = dataset[split]
            return dataset
        if path.is_file():  # a local data file: the builder goes by its extension
            ext = next((s for s in reversed(path.suffixes) if s != ".gz"), "")
            if ext not in _DATA_FILE_BUILDERS:
                raise MtError(f"hf:{name}: a local dataset file must end in {', '.join(_DATA_FILE_BUILDERS)}")
            return datasets.load_dataset(_DATA_FILE_BUILDERS[ext], data_files={split: name}, split=split,
                                         streaming=source.streaming)
        args = [name] + ([source.hf_config] if source.hf_config else [])
        return datasets.load_dataset(*args, split=split, streaming=source.streaming)
    except MtError:
        raise
    except Exception as exc:  # the library raises many types (network, missing split, bad files)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 300:
            reason = reason[:300] + "..."
        raise MtError(f"cannot load {describe(source)}: {reason} (no network? use local files)") from None


def batches(source: Source, size: int) -> Iterator[tuple[list, list]]:
    """(source values, target values) per batch of up to `size` records; a value is None (or not a
    string) where a record lacks the language, for the reader to report with the record's number."""
    what = describe(source)
    for batch in load(source).iter(batch_size=size):
        if "translation" in batch:
            records = batch["translation"]
            yield tuple([r.get(lang) if isinstance(r, dict) else None for r in records] for lang in source.langs)
            continue
        for lang in source.langs:
            if lang not in batch:
                raise MtError(f"{what} has no language key {lang!r}; its columns: {', '.join(batch)}")
        yield batch[source.langs[0]], batch[source.langs[1]]
