"""`mt evaluate`: translate a split of an experiment and score it (`mt.metrics`), saving the
translations and the scores, with how they were decoded, in the experiment.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from dataclasses import replace
from pathlib import Path

from mt import log
from mt.atomic_files import write_json_atomic, write_text_atomic
from mt.config.schema import ExperimentConfig
from mt.data.corpus import load_split
from mt.data.dataset import file_sha256
from mt.decoding.engine import decodes
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.metrics import score, score_tokenized


def decode_record(
    options: DecodeOptions, precision: str = "fp32", quantize: str | None = None, averaged_from: list[str] | None = None
) -> dict:
    """How a split was decoded (resolved `options`), as its scores record it: `mt run` rescores when
    this changes. `averaged_from`: the checkpoints that the experiment's average.pt averages, when it decoded."""
    record = {**options.record(), "precision": precision, "quantize": quantize}
    return record if averaged_from is None else {**record, "averaged_from": list(averaged_from)}


def averaged_from(exp: Experiment, translator: Translator) -> list[str] | None:
    """What the experiment's checkpoints/average.pt averaged, when the translator decodes with it."""
    average = exp.checkpoint_path("average").resolve()
    return next((names for path, names in translator.averaged_from.items() if path.resolve() == average), None)


def checkpoint_name(exp: Experiment, path: Path) -> str:
    """How scores name a checkpoint: by its name when it is the experiment's own, else by its whole
    path (another run's best.pt is not this one's: `mt run` and model cards compare the names)."""
    resolved = Path(path).resolve()
    return resolved.name if resolved.parent == exp.checkpoints_dir.resolve() else str(resolved)


def split_digest(cfg: ExperimentConfig, split: str) -> str:
    """A digest of the split's source and reference lines, every direction's, as `evaluate_split` reads
    them: scores of other lines (references fixed, a file replaced) are not this split's."""
    return lines_digest([load_split(cfg.data.sources(split, pair)) for pair in cfg.data.pairs()])


def lines_digest(directions: list[tuple[list[str], list[str]]]) -> str:
    """`split_digest` of (source lines, references) as read, each direction's in turn."""
    digest = hashlib.sha256()
    for sides in directions:
        for lines in sides:
            digest.update("\n".join(lines).encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:16]


def stale(
    exp: Experiment, cfg: ExperimentConfig, name: str, record: dict, digests: dict[str, str] | None = None
) -> list[str]:
    """Why a scores record (scores/NAME.json) no longer says how the experiment scores: a checkpoint
    it names saved since, or its split's lines changed since; [] where neither is seen (`mt info`
    and `mt report` show the reasons beside the numbers, `mt run` scores again). `digests`: each split's
    `split_digest`, kept across calls (a split and its tokenized scores read the split once)."""
    reasons = []
    written = exp.score_path(name).stat().st_mtime if exp.score_path(name).exists() else None
    read = record.get("checkpoint_stats") or []  # (size, mtime_ns) of each as it was read; older records: none
    for k, named in enumerate(str(record.get("checkpoint") or "").split("+")):
        path = Path(named) if os.path.isabs(named) else exp.checkpoints_dir / named
        if not named or not path.is_file():
            continue
        if k < len(read) and not read_as_now(record, k, path):
            reasons.append(f"{path.name} saved since")
        elif k >= len(read) and written is not None and path.stat().st_mtime > written:
            reasons.append(f"{path.name} saved since")
    split = name.removesuffix(".tokenized")
    if record.get("data_sha256"):
        try:
            if digests is None:
                digests = {}
            if split not in digests:
                digests[split] = split_digest(cfg, split)
            if record["data_sha256"] != digests[split]:
                reasons.append(f"the {split} split's lines changed since")
        except (MtError, OSError):
            reasons.append(f"the {split} split's files cannot be read now")
    return reasons


def read_as_now(record: dict, k: int, path: Path) -> bool:
    """Whether checkpoint `path`, the k-th of a scores record, is the file that was scored: its size
    and time as they were read, or else (a copy with other times) its bytes' sha256 as recorded."""
    stat = path.stat()
    if list(record["checkpoint_stats"][k]) == [stat.st_size, stat.st_mtime_ns]:
        return True
    hashes = record.get("checkpoint_sha256") or []
    if k >= len(hashes) or stat.st_size != record["checkpoint_stats"][k][0]:
        return False
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns) == hashes[k]


@functools.lru_cache(maxsize=16)
def _sha256_of(path: str, size: int, mtime_ns: int, ctime_ns: int) -> str:
    """A checkpoint's sha256 (16 digits), once per file as it is (any write or touch moves its ctime):
    `mt info` asks it for each split's scores."""
    return file_sha256(Path(path))[:16]


def check_writable(exp: Experiment) -> None:
    """MtError unless the experiment can take the translations and scores `evaluate_split` saves (a
    read-only copy was decoded whole, then refused at its first write, its scores never shown)."""
    for folder in (exp.hyp_path("x").parent, exp.score_path("x").parent):
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        if not os.access(existing, os.W_OK | os.X_OK):
            raise MtError(
                f"{existing}: not writable; mt evaluate saves its translations and scores in the experiment "
                "(score a read-only one with `mt translate` and `mt evaluate --hyp FILE --ref FILE`)"
            )


def evaluate_split(
    exp: Experiment,
    cfg: ExperimentConfig,
    split: str,
    translator: Translator | None = None,
    tokenized: bool = False,
    lowercase: bool = False,
    options: DecodeOptions | None = None,
) -> dict:
    """Translate every source line of a split (raw text, nothing dropped) and score it against its
    references; the translations and scores are saved in the experiment. `tokenized`: the scores
    are `score_tokenized`'s (in the target language's Moses rules), saved as scores/SPLIT.tokenized.json.
    `translator`: the model(s) to translate with; the experiment's decode.checkpoint when None. With
    data.directions, each direction is translated and scored on its own (translations/SPLIT.SRC-TGT.hyp),
    and the record holds them all under "directions" with their mean as its own BLEU and chrF. `options`:
    this call's decoding options (flags), over the experiment's decode.*."""
    if translator is None:  # loaded here: closed here (its search processes, if any)
        with Translator.load(exp, cfg) as own:
            return evaluate_split(exp, cfg, split, own, tokenized, lowercase, options)
    options = (options or DecodeOptions()).resolved(cfg.decode)
    cfg.data.check_sides(split)  # every direction's, before any is translated
    check_writable(exp)  # before the search: a read-only experiment lost a whole split's decoding
    # the bytes of what was loaded (read now, before the search): a copy of the experiment with other
    # file times is still what was scored, a checkpoint saved again while it was is not (`stale`)
    hashes = [file_sha256(path)[:16] for path in translator.checkpoint_paths]
    start = time.perf_counter()
    directions, read, translations = {}, [], {}
    for src_lang, tgt_lang in cfg.data.pairs():
        name = f"{src_lang}-{tgt_lang}" if cfg.data.multilingual else None
        src_lines, refs = load_split(cfg.data.sources(split, (src_lang, tgt_lang)))
        read.append((src_lines, refs))  # the lines scored: files changed during the search are not these
        with log.make_progress() as progress:  # on a terminal only (log.progress_enabled)
            task = progress.add_task(f"{split}{f' {name}' if name else ''}", total=len(src_lines))
            found = translator.search(
                src_lines,
                replace(options, src_lang=src_lang, tgt_lang=tgt_lang),
                progress=lambda done: progress.advance(task, done),
            )
        hyps = [hyp[0][0] for hyp in found]
        directions[name] = (
            score_tokenized(hyps, refs, tgt_lang, lowercase) if tokenized else score(hyps, refs, tgt_lang)
        )
        translations[name] = hyps
        log.info(f"{split}{f' {name}' if name else ''}: {len(hyps)} sentences translated")
    seconds = time.perf_counter() - start
    # Beside the scores they belong to, written once every direction is scored (a run stopped midway
    # left one direction's new translations beside the earlier scores); tokenized scoring (maybe of
    # another checkpoint) leaves the translations of the sacreBLEU scores, which reports show, as they are.
    for name, hyps in translations.items():
        hyp_path = exp.hyp_path(split + ".tokenized" if tokenized else split, name)
        write_text_atomic(hyp_path, "".join(h + "\n" for h in hyps))
        log.info(f"{split}{f' {name}' if name else ''}: translations written to {hyp_path}")
    scores = directions[None] if None in directions else _mean(directions)
    result = {
        "split": split,
        **scores,
        "checkpoint": "+".join(checkpoint_name(exp, path) for path in translator.checkpoint_paths),
        # each file's size and time as it was read: one saved again while this split was translated is
        # newer than its name's, though older than these scores (`stale`)
        "checkpoint_stats": [list(stat) for stat in translator.checkpoint_stats],
        "checkpoint_sha256": hashes,
        "decode": decode_record(options, translator.precision, translator.quantize, averaged_from(exp, translator)),
        # the engine that ran (decode.engine auto names none: CTranslate2, or mt's search when it cannot)
        "engine": translator.engine.describe() if decodes(translator, options) and translator.engine else "mt",
        "data_sha256": lines_digest(read),
        "translate_seconds": round(seconds, 2),
    }
    write_json_atomic(exp.score_path(split + ".tokenized" if tokenized else split), result)
    log.info(f"{split}: translated and scored in {seconds:.1f}s")
    return result


def _mean(directions: dict[str, dict]) -> dict:
    """Each direction's scores, and their mean as the split's (signatures are the same for every one)."""
    first = next(iter(directions.values()))
    numbers = [key for key, value in first.items() if isinstance(value, float)]
    mean = {key: round(sum(d[key] for d in directions.values()) / len(directions), 4) for key in numbers}
    shared = {
        key: value
        for key, value in first.items()  # tokenized BLEU's name each target language
        if key.endswith("signature") and all(d.get(key) == value for d in directions.values())
    }
    return {**shared, **mean, "sentences": sum(d["sentences"] for d in directions.values()), "directions": directions}
