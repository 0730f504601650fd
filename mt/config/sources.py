"""Where each split's parallel text comes from: one grammar of source specs for every split.

data.train, data.valid and data.test are lists of specs, read in order and concatenated:

    files:PREFIX              PREFIX.SRC_LANG and PREFIX.TGT_LANG, line-aligned (.gz when only that exists)
    files:SRC_FILE|TGT_FILE   two line-aligned files (a '|', since commas separate list items in flags)
    tsv:FILE[:L1-L2]          SOURCE<TAB>TARGET per line, or columns named by language (:en-de); .gz ok
    jsonl:FILE                a JSON object per line, {"translation": {"de": .., "en": ..}} or {"de": .., "en": ..}
    hf:NAME[:CONFIG][@SPLIT]  datasets.load_dataset: a hub dataset, a local data file or a save_to_disk
                              directory; SPLIT defaults to train, validation, test
    ding[:FILE][@PART]        the Ding dictionary; PART is train (its sentence and phrase pairs), sentences,
                              phrases, valid or test, and defaults to the list's split

A path may start with ~ or ~user, expanded as a shell would (files:~/corpus/train).

A train spec may end in *WEIGHT (above 0), binarize's upsampling factor (2 writes each pair twice,
0.5 keeps a random half), and may start with bt: to mark back-translated pairs (`mt backtranslate`):
binarize puts the tag <BT> before each of their sources (Caswell et al., 2019). In an experiment of several directions (data.directions), a spec is read
for each of them (PREFIX.en and PREFIX.de for en-de, PREFIX.en and PREFIX.fr for en-fr, ...), or only
for those it names after a ~, before any weight: files:PREFIX~en-de,de-en*2. Specs are parsed when the config loads, so a typo fails before any work; `Source` is
the parsed form the readers take.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mt.errors import ConfigError

SPLITS = ("train", "valid", "test")
KINDS = ("files", "tsv", "jsonl", "hf", "ding")
DING_PATH = "/usr/share/trans/de-en"  # Debian's trans-de-en
DING_PARTS = ("train", "sentences", "phrases", "valid", "test")
HUB_SPLITS = {"train": "train", "valid": "validation", "test": "test"}  # our split -> the usual hub name
GRAMMAR = (
    "files:PREFIX, files:SRC|TGT, tsv:FILE[:L1-L2], jsonl:FILE, hf:NAME[:CONFIG][@SPLIT] "
    "or ding[:FILE][@PART], with an optional *WEIGHT and bt: in train and ~SRC-TGT,... with data.directions"
)
BACK_TRANSLATED = "bt:"  # a train spec's prefix: synthetic pairs whose sources get the <BT> tag
MAX_WEIGHT = 1000.0  # copies of a corpus per epoch: upsampling beyond that is a typo

# A sign is part of the weight so that *-1 is refused as a weight, not read as part of a file name.
_WEIGHT = re.compile(r"\*\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*$")
_KIND = re.compile(r"([a-z]+)(?=[:@]|$)")
_TSV_COLUMNS = re.compile(r":([A-Za-z]\w*)-([A-Za-z]\w*)$")
_DIRECTION = re.compile(r"([A-Za-z][A-Za-z0-9_]*)-([A-Za-z][A-Za-z0-9_]*)")
_DIRECTIONS = re.compile(r"~\s*((?:[A-Za-z]\w*-[A-Za-z]\w*)(?:\s*,\s*[A-Za-z]\w*-[A-Za-z]\w*)*)\s*$")


@dataclass(frozen=True)
class Source:
    """One corpus of a split, parsed: everything a reader needs, no config object."""

    kind: str  # files | tsv | jsonl | hf | ding
    name: str  # the spec as written: for messages and stats
    paths: tuple[str, ...]  # files: (src, tgt); tsv, jsonl, ding: (file,); hf: (dataset name or path,)
    langs: tuple[str, str]  # (source language, target language): jsonl/hf keys, ding direction, prefixes
    part: str = ""  # hf: the dataset's split; ding: train | sentences | valid | test
    hf_config: str | None = None
    columns: tuple[int, int] = (0, 1)  # tsv: the columns of source and target
    weight: float = 1.0
    streaming: bool = False  # hf: read record by record instead of downloading first
    directions: tuple[tuple[str, str], ...] = ()  # those it is read for (~SRC-TGT,...); (): every one
    back_translated: bool = False  # bt:: binarize starts each source with the <BT> tag
    sides_named: bool = True  # False: files:SRC|TGT, a tsv without :L1-L2 (only its direction says: check_sides)


def parse_direction(text: str, where: str) -> tuple[str, str]:
    """ "en-de" -> ("en", "de"): two different language codes (letters, digits, _; no hyphen)."""
    match = _DIRECTION.fullmatch(str(text).strip())
    if not match or match.group(1) == match.group(2):
        raise ConfigError(f"{where}: {text!r} is not a direction: expected SRC-TGT of two languages, like en-de")
    return match.group(1), match.group(2)


def check_directions(directions: list[str], specs: dict[str, list[str]], where: str) -> None:
    """data.directions: distinct SRC-TGT pairs; and a source's ~SRC-TGT names only those (`specs`:
    each split's specs)."""
    pairs = [parse_direction(direction, "data.directions") for direction in directions]
    if not pairs:
        return
    if len(set(pairs)) != len(pairs):
        raise ConfigError(f"{where}: data.directions: {', '.join(directions)} names a direction twice")
    for split, split_specs in specs.items():
        for spec in split_specs:
            named = parse_source(spec, split, pairs[0], multilingual=True).directions
            unknown = [f"{s}-{t}" for s, t in named if (s, t) not in pairs]
            if unknown:
                raise ConfigError(
                    f"{where}: data.{split}: {spec!r} names {', '.join(unknown)}, not a direction of "
                    f"data.directions ({', '.join(directions)})"
                )


def by_file_names(spec: str) -> str:
    """`spec` with each local path by its file's name alone ("bt:tsv:/home/me/corpus.tsv*2" is
    "bt:tsv:corpus.tsv*2", "files:/a/x.de|/b/y.en" "files:x.de|y.en"): what a published model card
    shows. A dataset of the Hub is named as it is."""
    text = str(spec).strip()
    marked = BACK_TRANSLATED if text.startswith(BACK_TRANSLATED) else ""
    text, tail = text[len(marked) :].strip(), ""
    for suffix in (_WEIGHT, _DIRECTIONS):  # (a weight after the directions: "~de-en *2")
        if match := suffix.search(text):
            text, tail = text[: match.start()].rstrip(), text[match.start() :] + tail
    kind, colon, arg = text.partition(":")
    if not colon or kind not in KINDS or (kind == "hf" and not arg.startswith(("/", "~", "."))):
        return spec

    def name(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    if kind == "files":
        arg = "|".join(name(path.strip()) for path in arg.split("|"))
    elif kind == "hf":
        local, colon, config = arg.partition(":")
        arg = name(local) + colon + config
    else:
        arg = name(arg)
    return f"{marked}{kind}:{arg}{tail}"


def parse_source(
    spec: str, split: str, langs: tuple[str, str], streaming: bool = False, multilingual: bool = False
) -> Source:
    """A spec of data.<split> as a Source for langs[0] -> langs[1]; a ConfigError names the spec.
    `multilingual`: data.directions is set, so a ~SRC-TGT,... suffix may say which directions read it."""
    where = f"data.{split}: {spec!r}"
    text, weight = str(spec).strip(), 1.0
    back_translated = text.startswith(BACK_TRANSLATED)
    if back_translated:
        if split != "train":
            raise ConfigError(f"{where}: bt: marks back-translated training pairs; valid and test are real text")
        text = text[len(BACK_TRANSLATED) :].strip()
    if match := _WEIGHT.search(text):
        weight, text = float(match.group(1)), text[: match.start()].rstrip()
        if not 0 < weight <= MAX_WEIGHT:  # written so that NaN fails too; *1e9 would write a billion copies
            raise ConfigError(f"{where}: a weight must be above 0 and at most {MAX_WEIGHT:g} (*{match.group(1)})")
        if split != "train":
            raise ConfigError(f"{where}: a *WEIGHT applies to training data only")
    directions: tuple[tuple[str, str], ...] = ()
    if match := _DIRECTIONS.search(text):  # (a ~ in a path, files:~/corpus, is not one)
        if not multilingual:
            raise ConfigError(f"{where}: a ~SRC-TGT suffix names directions of data.directions, which is not set")
        directions = tuple(parse_direction(d, where) for d in match.group(1).split(","))
        text = text[: match.start()].rstrip()
        if langs not in directions:  # checked as read in a direction it names (its columns, its languages)
            langs = directions[0]
    kind_match = _KIND.match(text)
    kind = kind_match.group(1) if kind_match else text.partition(":")[0]
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown kind {kind!r}; a source is {GRAMMAR}")
    rest, part = text[len(kind) :], ""
    if kind in ("hf", "ding") and "@" in rest:
        rest, _, part = rest.rpartition("@")
        if not part:
            raise ConfigError(f"{where}: nothing after '@' (the {'split' if kind == 'hf' else 'part'})")
    if rest and not rest.startswith(":"):
        raise ConfigError(f"{where}: expected ':' after {kind!r}; a source is {GRAMMAR}")
    arg = rest[1:].strip()
    if not arg and kind != "ding":
        raise ConfigError(f"{where}: {kind}: needs a {'name' if kind == 'hf' else 'path'} after the colon")
    common = dict(
        name=str(spec).strip(),
        langs=tuple(langs),
        weight=weight,
        directions=directions,
        back_translated=back_translated,
    )
    if kind == "files":
        src, bar, tgt = arg.partition("|")
        if bar and not (src.strip() and tgt.strip()):
            raise ConfigError(f"{where}: files:SRC|TGT needs both files")
        paths = (src, tgt) if bar else (f"{arg}.{langs[0]}", f"{arg}.{langs[1]}")
        paths = (_path(paths[0]), _path(paths[1]))
        return Source("files", paths=paths, sides_named=not bar, **common)
    if kind == "tsv":
        return Source(
            "tsv",
            sides_named=bool(_TSV_COLUMNS.search(arg)),
            paths=(_path(_tsv_path(arg)),),
            columns=_tsv_columns(arg, langs, where),
            **common,
        )
    if kind == "jsonl":
        return Source("jsonl", paths=(_path(arg),), **common)
    if kind == "hf":
        name, _, config = arg.partition(":")
        name = _path(name) if name.startswith("~") else name  # a hub name never starts with ~: a local path
        return Source(
            "hf", paths=(name,), part=part or HUB_SPLITS[split], hf_config=config or None, streaming=streaming, **common
        )
    part = part or split
    if part not in DING_PARTS:
        raise ConfigError(f"{where}: unknown Ding part {part!r}; expected {', '.join(DING_PARTS)}")
    if set(langs) != {"de", "en"}:
        raise ConfigError(
            f"{where}: the Ding dictionary is German-English: data.src_lang/tgt_lang must be "
            f"de/en or en/de, not {langs[0]}/{langs[1]}"
        )
    return Source("ding", paths=(_path(arg) if arg else DING_PATH,), part=part, **common)


def check_sides(source: Source, split: str, pairs: int) -> None:
    """A corpus whose languages only its direction says (files:SRC|TGT, a tsv without :L1-L2), read for
    `pairs` directions: with more than one, it must name its own (~SRC-TGT), or it is read the same way
    round for every direction, wrong pairs under every other tag. Asked where a split is read to be
    learnt or scored (binarize, the tokenizer, evaluate), not where a config is loaded."""
    if not source.sides_named and pairs > 1 and len(source.directions) != 1:
        why = "two files name no languages" if source.kind == "files" else "its columns are not named"
        raise ConfigError(
            f"data.{split}: {source.name!r}: {why}; add ~SRC-TGT for the one direction it holds, or use "
            "files:PREFIX (PREFIX.LANG) or tsv:FILE:L1-L2"
        )


def _path(text: str) -> str:
    """A file's path as a spec writes it, with ~ and ~user expanded as a shell would."""
    return os.path.expanduser(text.strip())


def _tsv_path(arg: str) -> str:
    named = _TSV_COLUMNS.search(arg)
    return arg[: named.start()] if named else arg


def _tsv_columns(arg: str, langs: tuple[str, str], where: str) -> tuple[int, int]:
    named = _TSV_COLUMNS.search(arg)
    if not named:
        return (0, 1)
    columns = named.groups()
    missing = [lang for lang in langs if lang not in columns]
    if missing:
        raise ConfigError(f"{where}: names columns {'-'.join(columns)}, not {missing[0]}")
    return columns.index(langs[0]), columns.index(langs[1])


def reversed_spec(spec: str, langs: tuple[str, str]) -> str | None:
    """A spec of a langs[0] -> langs[1] corpus written so that it reads the same pairs the other way
    round: a tsv's unnamed columns named by `langs`, files:SRC|TGT swapped, the rest as it is (they
    name their sides by language). A back-translated corpus (bt:) is None: read the other way its
    synthetic side would be the target."""
    text = str(spec).strip()
    if text.startswith(BACK_TRANSLATED):
        return None
    weight = _WEIGHT.search(text)
    head, tail = (text[: weight.start()].rstrip(), text[weight.start() :]) if weight else (text, "")
    suffix = _DIRECTIONS.search(head)
    if suffix:
        return text  # a multilingual spec names its directions itself
    if head.startswith("tsv:") and not _TSV_COLUMNS.search(head):
        return f"{head}:{langs[0]}-{langs[1]}{tail}"
    if head.startswith("files:") and "|" in head:
        src, _, tgt = head[len("files:") :].partition("|")
        return f"files:{tgt.strip()}|{src.strip()}{tail}"
    return text


def absolute_spec(spec: str) -> str:
    """The spec with its paths made absolute (relative to the working directory), the rest kept, so a
    saved config works from any directory. Specs are checked by parse_source, not here."""
    text = str(spec).strip()
    if text.startswith(BACK_TRANSLATED):
        return BACK_TRANSLATED + absolute_spec(text[len(BACK_TRANSLATED) :])
    weight = _WEIGHT.search(text)
    suffix = text[weight.start() :] if weight else ""
    text = text[: weight.start()].rstrip() if weight else text
    directions = _DIRECTIONS.search(text)  # `~en-de`: not part of a path (hf:corpus.jsonl~en-de)
    suffix = (text[directions.start() :] if directions else "") + suffix
    text = text[: directions.start()].rstrip() if directions else text
    kind_match = _KIND.match(text)
    if not kind_match or kind_match.group(1) not in KINDS or not text[len(kind_match.group(1)) :].startswith(":"):
        return spec  # no path (ding, ding@valid), or not a spec: parse_source names it as written
    kind, arg = kind_match.group(1), text[len(kind_match.group(1)) + 1 :]
    tail = ""
    if kind in ("hf", "ding") and "@" in arg:
        arg, _, part = arg.rpartition("@")
        tail = "@" + part
    if kind == "hf":
        name, sep, config = arg.partition(":")
        local = Path(os.path.expanduser(name))  # os's: an unknown ~user stays as written (pathlib raises)
        arg = (str(local.resolve()) if local.exists() else name) + sep + config
    elif kind == "files":
        arg = "|".join(_absolute(part) for part in arg.split("|"))
    elif kind == "tsv":
        named = _TSV_COLUMNS.search(arg)
        arg = _absolute(_tsv_path(arg)) + (named.group(0) if named else "")
    else:
        arg = _absolute(arg)
    return f"{kind}:{arg}{tail}{suffix}"


def _absolute(path: str) -> str:
    path = path.strip()
    return path if not path or "://" in path else str(Path(os.path.expanduser(path)).resolve())


# The corpus fields of configs before data.train/valid/test (refused, with the new form spelled out).
LEGACY_FIELDS = (
    "source",
    "train_src",
    "train_tgt",
    "valid_src",
    "valid_tgt",
    "test_src",
    "test_tgt",
    "train_prefix",
    "valid_prefix",
    "test_prefix",
    "hf_name",
    "hf_config",
    "hf_data_files",
    "hf_splits",
    "ding_path",
    "ding_phrases",
    "ding_valid_size",
    "ding_test_size",
    "train_sources",
)


def legacy_message(old: dict, where: str) -> str:
    """One line saying what replaced the old corpus fields, with this config's lists written out."""
    kind = old.get("source", "files")
    lists = {}
    for split in SPLITS:
        specs: list[str] = []
        if split == "train" and old.get("train_sources"):
            specs = list(old["train_sources"])
        elif kind == "files":
            if old.get(f"{split}_src") or old.get(f"{split}_tgt"):
                specs = [f"files:{old.get(f'{split}_src') or 'SRC_FILE'}|{old.get(f'{split}_tgt') or 'TGT_FILE'}"]
            elif old.get(f"{split}_prefix"):
                specs = [f"files:{old[f'{split}_prefix']}"]
        elif kind == "hf" and old.get("hf_data_files"):
            wanted = (old.get("hf_splits") or HUB_SPLITS).get(split)
            specs = [f"hf:{old['hf_data_files'][wanted]}"] if wanted in old["hf_data_files"] else []
        elif kind == "hf" and old.get("hf_name"):
            wanted = (old.get("hf_splits") or HUB_SPLITS).get(split)
            config = f":{old['hf_config']}" if old.get("hf_config") else ""
            at = f"@{wanted}" if wanted and wanted != HUB_SPLITS[split] else ""
            specs = [f"hf:{old['hf_name']}{config}{at}"] if wanted else []
        elif kind == "ding":
            path = f":{old['ding_path']}" if old.get("ding_path", DING_PATH) != DING_PATH else ""
            at = "@sentences" if split == "train" and old.get("ding_phrases") is False else ""
            specs = [f"ding{path}{at}"] if split == "train" or old.get(f"ding_{split}_size", 1) else []
        if specs:
            lists[split] = "[" + ", ".join(specs) + "]"
    named = ", ".join(f"data.{key}" for key in old) + (" belongs" if len(old) == 1 else " belong")
    written = "; ".join(f"data.{split}: {value}" for split, value in lists.items()) or "data.train: [files:PREFIX]"
    return (
        f"{where}: {named} to the old corpus schema, replaced by one list of sources per split: "
        f"write {written} (see docs/data.md)"
    )
