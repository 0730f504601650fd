"""`mt binarize`: parallel text -> token-id arrays on disk (read back by `mt.data.dataset`).

Binarizing streams: the sources are read in chunks (mt.data.corpus), encoded in worker processes
(mt.data.binarize_workers), and the results are appended in corpus order to .npy files whose header (which holds
the length) is written last, so memory stays flat whatever the corpus size. Everything is written
to a hidden directory that is renamed into place at the end, beside a manifest (pairs, tokens, size
and sha256 of every file, the tokenizer's sha256) that `mt train` checks before it trusts the data.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from mt import log
from mt.atomic_files import sync_directory, write_json_atomic
from mt.config.schema import ExperimentConfig
from mt.data import binarize_workers as encoding
from mt.data import corpus
from mt.data import stats as data_stats
from mt.data.arrays import SeenPairs, SplitWriter
from mt.data.binarize_workers import CLEAN_REASONS, RAW_REASONS, Filters, Workers, id_dtype
from mt.data.dataset import input_record
from mt.data.text_files import existing
from mt.errors import MtError
from mt.experiment.lock import experiment_lock
from mt.experiment.paths import Experiment
from mt.tokenizer import BACK_TRANSLATION_TAG, Tokenizer, language_tag

WORKERS = 2  # encoding processes, by default (`mt binarize --workers`)


def _select(arrays: dict, mask: np.ndarray) -> dict:
    """The pairs of an encoded chunk (and of its sampled segmentations) where mask is True."""
    out = dict(arrays)
    for side in ("src", "tgt"):
        out[f"{side}_ids"] = arrays[f"{side}_ids"][np.repeat(mask, arrays[f"{side}_lens"])]
        out[f"{side}_lens"] = arrays[f"{side}_lens"][mask]
    for key in ("index", "hashes"):
        if key in arrays:
            out[key] = arrays[key][mask]
    if "samples" in arrays:
        out["samples"] = [_select(sample, mask) for sample in arrays["samples"]]
    return out


def _copies(weight: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """How many times each of n pairs is written: int(weight), plus one for a random `fraction` of
    them (*1.5: once, or twice for about half; *0.5: a random half once, the rest not at all)."""
    copies = np.full(n, int(weight), dtype=np.int64)
    fraction = weight - int(weight)
    if fraction > 1e-9:
        copies += rng.random(n) < fraction
    return copies


def drop_reasons(clean: str | None, sources) -> tuple[str, ...]:
    """The reasons a split counts, in the order they apply: "subsampled" (a weight below 1) comes
    before "duplicate", since a pair left out by the sample is not written and so not seen."""
    reasons = CLEAN_REASONS if clean is not None else RAW_REASONS
    if any(source.weight < 1 for source in sources):
        at = reasons.index("duplicate") if "duplicate" in reasons else len(reasons)
        reasons = reasons[:at] + ("subsampled",) + reasons[at:]
    return reasons


# ---------------------------------------------------------------------------------------------
# The step


def binarize_split(
    exp: Experiment,
    cfg: ExperimentConfig,
    split: str,
    tmp_dir: Path,
    workers: Workers,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    train: SeenPairs | None = None,
    remember: bool = False,
) -> tuple[dict, dict, SeenPairs | None]:
    """Stream one split from its sources into tmp_dir; returns (its stats, its files for the manifest,
    the hashes of its pairs when deduplicated or `remember`ed). `train`: the training split's hashes,
    which the pairs of valid and test are looked up in (stats' "in_train")."""
    data = cfg.data
    clean = data.cleaning(split)
    filters = Filters(
        clean,
        data.max_len,
        data.max_len_ratio if clean is not None else 0.0,
        clean is not None and data.dedup,
        cfg.tokenizer.train_segmentations if split == "train" else 1,
        cfg.tokenizer.sampling_alpha,
        hashes=train is not None or remember,
        # valid and test read strictly: their pairs looked up as cleaned training text ("a dog " is "a dog")
        hash_clean=data.cleaning("train") if train is not None and clean is None else None,
    )
    # Each source of each direction, in order; with directions, its pairs' sources start with the tag.
    entries = [
        (d, source, _tagged(filters, src_tok, tgt, data.multilingual, source.back_translated))
        for d, (src, tgt) in enumerate(data.pairs())
        for source in data.sources(split, (src, tgt))
    ]
    sources = [source for _, source, _ in entries]
    reasons = drop_reasons(clean, sources)
    tally = {
        "dropped": dict.fromkeys(reasons, 0),
        "fixed": {"control": 0, "unicode": 0, "whitespace": 0},
        "examples": {},
        "sources": [
            {
                "source": s.name,
                "weight": s.weight,
                "pairs_in": 0,
                "kept": 0,
                "rows": 0,
                "dropped": dict.fromkeys(reasons, 0),
                **({"direction": "-".join(s.langs)} if data.multilingual else {}),
            }
            for s in sources
        ],
    }
    seen = SeenPairs() if filters.dedup else None
    kept_hashes = SeenPairs() if remember and not filters.dedup else None  # (deduplicating, `seen` has them)
    in_train = 0
    tasks = (
        ((index, chunk.start), chunk, tagged)
        for index, (_, source, tagged) in enumerate(entries)
        for chunk in corpus.chunks(source, encoding.ENCODE_CHUNK)
    )
    writer = SplitWriter(
        exp, tmp_dir, split, id_dtype(src_tok.vocab_size), id_dtype(tgt_tok.vocab_size), data.multilingual
    )
    try:
        with log.make_progress() as progress:
            bar = progress.add_task(f"binarize {split}", total=None)  # pairs read; the total is unknown
            for (index, start), result in workers.map(tasks):
                progress.update(bar, advance=result["pairs_in"])
                _add_chunk(result, index, start, sources[index].weight, tally, seen, writer, entries[index][0])
                if train is not None:
                    in_train += int(train.contains(result["hashes"]).sum())
                if kept_hashes is not None:
                    kept_hashes.first_seen(result["hashes"])
    except BaseException:
        writer.abandon()
        raise
    stats = {
        "pairs_in": sum(s["pairs_in"] for s in tally["sources"]),  # = pairs_kept + every count in dropped
        "pairs_kept": sum(s["kept"] for s in tally["sources"]),  # pairs read that are written, once or more
        "kept": writer.pairs,  # rows written: each kept pair as often as its weight and segmentations say
        "dropped": tally["dropped"],
        "src_tokens": writer.tokens["src"],
        "tgt_tokens": writer.tokens["tgt"],
        "mean_src_len": round(writer.tokens["src"] / writer.pairs, 2) if writer.pairs else 0.0,
        "mean_tgt_len": round(writer.tokens["tgt"] / writer.pairs, 2) if writer.pairs else 0.0,
    }
    if filters.segmentations > 1:  # "kept" counts every copy, as with upsampling
        stats["segmentations"] = {"copies": filters.segmentations, "sampling_alpha": filters.sampling_alpha}
    if clean is not None:
        stats["cleaning"] = {"normalize": clean, "fixed_lines": tally["fixed"], "examples": tally["examples"]}
    if split == "train" and (len(sources) > 1 or sources[0].weight != 1):
        stats["sources"] = tally["sources"]
    if data.multilingual:
        stats["directions"] = {"-".join(pair): writer.direction_rows.get(d, 0) for d, pair in enumerate(data.pairs())}
    if train is not None:
        stats["in_train"] = in_train  # pairs also in the training split: their scores flatter the model
    return stats, writer.close(), seen if seen is not None else kept_hashes


def _tagged(filters: Filters, src_tok: Tokenizer, tgt_lang: str, multilingual: bool, back_translated: bool) -> Filters:
    """The filters of a source: with several directions, each source begins with its target language's
    tag; a back-translated one (bt:) then has <BT>, which counts in data.max_len."""
    prefix: tuple[int, ...] = ()
    if multilingual:
        tag = src_tok.tag_id(tgt_lang)
        if tag is None:
            raise MtError(
                f"{src_tok.path}: no {language_tag(tgt_lang)} token: the tokenizer was trained for other "
                f"languages than data.directions has now; train it again"
            )
        prefix += (tag,)
    if back_translated:
        tag = src_tok.symbol_id(BACK_TRANSLATION_TAG)
        if tag is None:
            raise MtError(
                f"{src_tok.path}: no {BACK_TRANSLATION_TAG} token for the back-translated pairs (bt:): the "
                f"tokenizer was trained without them; train it again, or leave out bt:"
            )
        prefix += (tag,)
    return replace(filters, src_prefix=prefix, src_counted=int(back_translated)) if prefix else filters


def _add_chunk(
    result: dict,
    index: int,
    start: int,
    weight: float,
    tally: dict,
    seen: SeenPairs | None,
    writer: SplitWriter,
    direction: int = 0,
) -> None:
    """Count an encoded chunk of source `index`, sample it by its weight, drop the duplicates of
    pairs already written, write the rest as often as the weight says.

    Sampling comes before deduplication: a pair that a *0.5 leaves out is never written, so it must
    not make its copies in later sources duplicates. Deduplication looks at pairs, not rows, so an
    upsampled pair (*2) is still written twice."""
    # Chunks arrive in order: every earlier source is complete, so its size is known.
    offset = sum(s["pairs_in"] for s in tally["sources"][:index])
    source = tally["sources"][index]
    source["pairs_in"] = start + result["pairs_in"]
    for reason, count in result["dropped"].items():
        tally["dropped"][reason] += count
        source["dropped"][reason] += count
    for kind, count in result["fixed"].items():
        tally["fixed"][kind] += count
    for reason, shown in result["examples"].items():
        kept = tally["examples"].setdefault(reason, [])
        kept.extend(shown[: corpus.MAX_EXAMPLES - len(kept)])
    # Drawn for every pair read, so a source's sample is the same whatever the filters and workers.
    rng = np.random.default_rng([index, start])
    copies = _copies(weight, result["pairs_in"], rng)[result["index"]]
    arrays, drops = result, {}
    if weight < 1:
        drops["subsampled"] = copies == 0
    if seen is not None:
        sampled = copies > 0
        new = np.zeros(len(copies), dtype=bool)
        new[sampled] = seen.first_seen(result["hashes"][sampled])
        drops["duplicate"] = sampled & ~new
    if drops:
        for reason, mask in drops.items():
            tally["dropped"][reason] += int(mask.sum())
            source["dropped"][reason] += int(mask.sum())
        keep = ~np.logical_or.reduce(list(drops.values()))
        arrays, copies = _select(result, keep), copies[keep]
    source["kept"] += len(arrays["index"])
    rows = writer.pairs
    for copy in range(int(copies.max()) if len(copies) else 0):  # the pairs in order, then again (*2)
        part = arrays if (copies > copy).all() else _select(arrays, copies > copy)
        writer.append(part, offset + start + part["index"], direction)
        for sample in part.get("samples", ()):  # its line numbers are the best segmentation's
            writer.append(sample, offset + start + part["index"], direction)
    source["rows"] += writer.pairs - rows


def _log_split(split: str, stats: dict, seconds: float) -> None:
    dropped = stats["dropped"]
    copies = data_stats.segmentations(stats)
    log.info(f"{split}: {data_stats.summary(stats)} in {seconds:.1f}s")
    if copies > 1:
        log.info(
            f"{split}: each pair written in {copies} segmentations, its best and {copies - 1} sampled "
            f"(alpha {stats['segmentations']['sampling_alpha']}; {stats['mean_src_len']} / "
            f"{stats['mean_tgt_len']} tokens per sentence over all copies)"
        )
    if stats.get("in_train"):
        log.warn(
            f"{split}: {stats['in_train']:,} of its {stats['pairs_kept']:,} pairs are also in the training split "
            f"(the same source and target): scores on them flatter the model (data/stats.json: in_train)"
        )
    examples = stats.get("cleaning", {}).get("examples", {})
    for reason in ("invalid_utf8", "malformed"):
        for example in examples.get(reason, []):
            log.warn(f"{split}: skipped {example}")
        more = dropped.get(reason, 0) - len(examples.get(reason, []))
        if more > 0:
            log.warn(f"{split}: skipped {more:,} more pairs for {reason.replace('_', ' ')} (counts in data/stats.json)")


def _refuse_empty(cfg: ExperimentConfig, split: str, stats: dict) -> None:
    """A configured split without one usable pair: validation would report a perplexity of 1.00 (and
    best.pt), evaluation a score of nothing, training would have nothing to learn from."""
    dropped = ", ".join(f"{reason.replace('_', ' ')} {count:,}" for reason, count in stats["dropped"].items() if count)
    read = f"{stats['pairs_in']:,} pairs read" + (f", all dropped: {dropped}" if dropped else "")
    fix = "give it sentence pairs" if split == "train" else f"give it sentence pairs, or configure no {split} split"
    raise MtError(f"{corpus.describe(cfg.data.sources(split))}: the {split} split has no usable pairs ({read}); {fix}")


def _refuse_empty_direction(cfg: ExperimentConfig, split: str, stats: dict) -> None:
    """With data.directions, a direction without a usable pair in a split that has some: refused."""
    for direction in (name for name, rows in stats.get("directions", {}).items() if not rows):
        where = corpus.describe(cfg.data.sources(split, tuple(direction.split("-"))))
        raise MtError(
            f"{where}: the {split} split has no usable pairs for {direction} (each empty or dropped); "
            f"give it sentence pairs of {direction}, or leave {direction} out of data.directions"
        )


def _check_files_exist(cfg: ExperimentConfig, split: str) -> None:
    """A split's files are there before any split is read: a mistyped valid path was found once the
    training split was encoded, hours in (the Ding dictionary's reader says how to install it)."""
    from mt.config.sources import DING_PATH
    from mt.data.hub import _looks_local

    for pair in cfg.data.pairs():
        for source in cfg.data.sources(split, pair):
            paths: tuple[str, ...] = ()
            if source.kind in ("files", "tsv", "jsonl"):
                paths = source.paths
            elif source.kind == "ding" and source.paths[0] != DING_PATH:  # the package's: its reader says how
                paths = source.paths
            elif source.kind == "hf" and _looks_local(source.paths[0]):  # a data file, not a hub name
                paths = (os.path.expanduser(source.paths[0]),)
            for path in paths:
                if not os.path.exists(existing(path) if source.kind == "files" else path):
                    raise MtError(f"data.{split}: {path}: no such file")


def binarize(exp: Experiment, cfg: ExperimentConfig, workers: int = WORKERS, force: bool = False) -> dict:
    """`mt binarize`: encode every configured split into exp.data_dir; returns the stats written.
    `force`: build it again where it exists (not under checkpoints, which were trained on it); the old
    data/ stays until the new one is complete."""
    if exp.data_dir.exists() and not exp.has_data():  # a folder of the user's (corpora, say): never replaced
        raise MtError(
            f"{exp.data_dir}: not data `mt binarize` wrote (no {exp.manifest_path.name}), and binarize writes "
            f"there; move it out of {exp.root}, or binarize into another --exp"
        )
    if exp.data_dir.exists() and not force:
        raise MtError(
            f"{exp.data_dir}: the experiment is already binarized; nothing overwritten "
            f"(--force builds it again; or start a new experiment with --exp)"
        )
    with experiment_lock(exp):  # no trainer reads data/ while it is rebuilt, and none starts meanwhile
        if exp.data_dir.exists() and exp.has_checkpoints():
            raise MtError(
                f"{exp.data_dir}: {exp.checkpoints_dir} holds a model trained on it; rebuilding it would "
                f"change what a resume reads: binarize into a new --exp"
            )
        return _build(exp, cfg, workers)


def _build(exp: Experiment, cfg: ExperimentConfig, workers: int) -> dict:
    """Every split into a hidden directory, renamed to data/ once whole (`binarize`)."""
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    splits = [split for split in corpus.SPLITS if getattr(cfg.data, split)]
    if not splits:
        raise MtError("no data splits are configured: set data.train, data.valid and data.test (e.g. [files:PREFIX])")
    tokenizer_sha256 = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
    stats: dict = {"max_len": cfg.data.max_len, "tokenizer_sha256": tokenizer_sha256, "splits": {}}
    for split in splits:  # every split's, before any is read: a bad test spec found after hours of train
        cfg.data.check_sides(split)
        _check_files_exist(cfg, split)
    # The inputs as they are before they are read: a file changed later is told from these (`changed_inputs`).
    inputs = input_record(cfg, splits, content=True)  # (read whole here anyway: a .gz's lines hashed)
    manifest: dict = {"format": 1, "tokenizer_sha256": tokenizer_sha256, "splits": {}, "files": {}, "inputs": inputs}
    for abandoned in exp.abandoned_data_builds():
        shutil.rmtree(abandoned, ignore_errors=True)
    # Everything is built in a hidden directory and renamed at the end: an interrupted run leaves
    # no data dir behind, and a data dir that exists is complete.
    tmp_dir = exp.new_data_build()
    pool = Workers(src_tok, tgt_tok, workers)
    try:
        try:
            train = None  # the training split's pair hashes: valid and test looked up in them
            held_out = bool(cfg.data.valid or cfg.data.test)
            for split in splits:
                started = time.perf_counter()
                remember = split == "train" and held_out  # (8 bytes a pair, as deduplication holds)
                split_stats, files, seen = binarize_split(
                    exp, cfg, split, tmp_dir, pool, src_tok, tgt_tok, train, remember
                )
                train = seen if split == "train" else train
                if not split_stats["kept"]:
                    _refuse_empty(cfg, split, split_stats)
                _refuse_empty_direction(cfg, split, split_stats)
                stats["splits"][split] = split_stats
                manifest["splits"][split] = {key: split_stats[key] for key in ("kept", "src_tokens", "tgt_tokens")}
                manifest["files"].update(files)
                _log_split(split, split_stats, time.perf_counter() - started)
        finally:
            pool.close()
        write_json_atomic(tmp_dir / exp.data_stats_path.name, stats)
        write_json_atomic(tmp_dir / exp.manifest_path.name, manifest)
        old = None
        if exp.data_dir.exists():  # --force: the old data/ moves aside only now that the new one is whole
            old = exp.new_data_build()  # marked: a run killed before it is removed leaves it to the next
            os.replace(exp.data_dir, old / "data")
        os.replace(tmp_dir, exp.data_dir)
        sync_directory(exp.root)  # the rename is the commit point of the whole data/
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return stats
