"""Sequence-level knowledge distillation (Kim & Rush, 2016): a teacher translates its training corpus,
and a student is trained on the teacher's translations.

`mt distill --teacher T --exp S` translates the source side of T's training sources (every pair, in
order, weights ignored) with T's search, `--chunk-lines` lines at a time, in chunks that survive a
kill (mt.apps.chunked: S/distill/chunks/; a resume keeps the chunk size, teachers, search and precision).
When all are done they are joined into
S/distill/train.SRC and train.TGT (the student's `files:S/distill/train` corpus), with
S/distill/manifest.json, written last, saying who translated what and how; once it exists the
distillation is done, and a rerun says so (remove S/distill to distill again).
Several `--teacher`s decode as an ensemble; they must share the first one's tokenizer (train the
second teacher with the first's: `mt train-tokenizer` is skipped when the tokenizer exists).

The student gets the teacher's tokenizer (copied into S/tokenizer, so the vocabularies match and the
step `train-tokenizer` has nothing to do) and, when S has no config yet, the teacher's config with
its training corpus replaced by the distilled one (plus the original pairs with `--mix-original`);
its model is then chosen at `mt train` (`--preset student`, say). Valid and test stay the teacher's.
A config of its own gets the distilled corpus (and, with `--mix-original`, the teacher's training
corpora) added to its data.train, as `mt backtranslate` adds its corpus, before S has data or
checkpoints.

The teacher's back-translated sources (bt: specs) are skipped, saying how many lines: they are noised
synthetic text that the teacher read after the <BT> tag, not sentences to teach from. `--keep-bt`
translates them too (as they are, without the tag).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from mt import log
from mt.apps import chunked
from mt.atomic_files import write_json_atomic, write_text_atomic
from mt.config.schema import ExperimentConfig, save_yaml
from mt.config.sources import absolute_spec
from mt.data.corpus import LineOrigins, load_split
from mt.data.dataset import changed_inputs, file_sha256, input_record
from mt.decoding.options import DecodeOptions
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment


def distill_dir(student: Experiment) -> Path:
    return student.root / "distill"


def teacher_checkpoints(teachers: list[Experiment], checkpoint: str | None) -> list[str]:
    """The file each teacher decodes with: --checkpoint (a name each teacher resolves), else its decode.checkpoint."""

    paths = []
    for teacher in teachers:
        if not teacher.has_config():
            raise MtError(f"--teacher {teacher.root}: no experiment there (no config.yaml)")
        if teacher is not teachers[0] and not same_tokenizer(teacher, teachers[0]):
            raise MtError(
                f"--teacher {teacher.root}: its tokenizer is not {teachers[0].root}'s; an ensemble decodes with "
                f"one: train the second teacher with the first's tokenizer (copy {teachers[0].tokenizer_dir})"
            )
        if teacher is not teachers[0]:
            pairs, first = teacher.load_config().data.pairs(), teachers[0].load_config().data
            if (pairs, bool(teacher.load_config().data.directions)) != (first.pairs(), bool(first.directions)):
                raise MtError(
                    f"--teacher {teacher.root}: it translates {', '.join('-'.join(p) for p in pairs)}, "
                    f"{teachers[0].root} {', '.join('-'.join(p) for p in first.pairs())}: an ensemble's members "
                    "translate the same directions (and are multilingual alike)"
                )
        name = checkpoint or teacher.load_config().decode.checkpoint
        paths.append(str(teacher.find_checkpoint(name).resolve()))  # the same teacher from any directory
    return paths


def same_tokenizer(a: Experiment, b: Experiment) -> bool:
    """Whether two experiments hold the same SentencePiece model file(s), byte for byte."""
    names = sorted(p.name for p in a.tokenizer_dir.glob("*.model"))
    return (
        bool(names)
        and names == sorted(p.name for p in b.tokenizer_dir.glob("*.model"))
        and all((a.tokenizer_dir / n).read_bytes() == (b.tokenizer_dir / n).read_bytes() for n in names)
    )


def corpus_specs(teacher_cfg: ExperimentConfig, student: Experiment) -> list[str]:
    """The distilled corpus as source specs: files:S/distill/train, or one per direction (train.en-de,
    read for en-de only). Absolute: the config works from any directory."""
    prefix = (distill_dir(student) / "train").resolve()
    if not teacher_cfg.data.multilingual:
        return [f"files:{prefix}"]
    return [f"files:{prefix}.{src}-{tgt}~{src}-{tgt}" for src, tgt in teacher_cfg.data.pairs()]


def student_config(teacher_cfg: ExperimentConfig, student: Experiment, mix_original: bool) -> ExperimentConfig:
    """The teacher's config with the distilled corpus as training data (and the original pairs too with mix_original)."""
    train = corpus_specs(teacher_cfg, student)
    if mix_original:
        train += list(teacher_cfg.data.train)
    data = dataclasses.replace(teacher_cfg.data, train=train)
    return dataclasses.replace(teacher_cfg, data=data)


def prepare_student(
    teacher: Experiment, student: Experiment, mix_original: bool, given: set[str] | None = None
) -> ExperimentConfig:
    """The student's config (written if new) and the teacher's tokenizer, copied once. A config of its
    own (a student recipe's) takes the teacher's tokenizer fields before the copy (`teacher_tokenizer`)."""
    teacher_cfg = teacher.load_config()
    if student.has_config():
        cfg = add_corpus(teacher_cfg, student, mix_original, teacher)
        if not student.has_tokenizer() and teacher_tokenizer(cfg, teacher_cfg, teacher, given or set()):
            write_text_atomic(student.config_path, save_yaml(cfg))
    else:
        cfg = student_config(teacher_cfg, student, mix_original)
        student.root.mkdir(parents=True, exist_ok=True)
        write_text_atomic(student.config_path, save_yaml(cfg))
    if not student.has_tokenizer():
        staging = student.root / ".tokenizer-copy"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(teacher.tokenizer_dir, staging, ignore=shutil.ignore_patterns("inputs.json"))  # its corpus
        staging.rename(student.tokenizer_dir)
    elif not same_tokenizer(student, teacher):
        raise MtError(
            f"{student.tokenizer_dir}: not the teacher's tokenizer ({teacher.tokenizer_dir}); a student "
            f"must share its teacher's vocabulary: distill into a new --exp"
        )
    return cfg


def teacher_tokenizer(
    cfg: ExperimentConfig, teacher_cfg: ExperimentConfig, teacher: Experiment, given: set[str]
) -> bool:
    """A student shares its teacher's tokenizer, so its config describes that one: each tokenizer field
    the teacher's differs in is taken from it (whether anything was), unless the student's recipe or
    flags set it (`given`), which is refused before the tokenizer is copied (once
    copied, the field is fixed: `joint: false` left a student with one model where binarize wanted two).
    Binarize's settings (train_segmentations, sampling_alpha) stay the student's own."""
    from mt.config.resolve import BINARIZE_FIELDS

    changed = False
    for field in dataclasses.fields(cfg.tokenizer):
        key = f"tokenizer.{field.name}"
        mine, theirs = getattr(cfg.tokenizer, field.name), getattr(teacher_cfg.tokenizer, field.name)
        if key in BINARIZE_FIELDS or mine == theirs:
            continue
        if key in given:
            raise ConfigError(
                f"{key} {mine!r}: the teacher's tokenizer ({teacher.tokenizer_dir}), which a student shares, "
                f"has {theirs!r}; leave it out"
            )
        setattr(cfg.tokenizer, field.name, theirs)
        changed = True
    return changed


def add_corpus(
    teacher_cfg: ExperimentConfig, student: Experiment, mix_original: bool, teacher: Experiment | None = None
) -> ExperimentConfig:
    """A student's own config (of the teacher's directions) with the distilled corpus in its data.train
    (unless it reads it already) and, with mix_original, the teacher's training specs it lacks; saved
    when changed, which is refused once the student has data or checkpoints made without them. What it
    cannot read is refused before the teacher translates: another spelling of the distilled corpus, or
    a symbol its data needs that the `teacher`'s tokenizer, which a student shares, lacks (binarize
    refused it after the distillation's hours, and the tokenizer cannot be trained again)."""
    cfg = student.load_config()
    if (cfg.data.pairs(), cfg.data.multilingual) != (teacher_cfg.data.pairs(), teacher_cfg.data.multilingual):
        mine, theirs = (", ".join(f"{s}->{t}" for s, t in c.data.pairs()) for c in (cfg, teacher_cfg))
        directions = lambda c: " (data.directions)" if c.data.multilingual else ""  # noqa: E731
        raise ConfigError(
            f"--exp {student.root}: translates {mine}{directions(cfg)}, the teacher {theirs}{directions(teacher_cfg)}"
        )
    here = f"files:{distill_dir(student).resolve()}/"
    have = [absolute_spec(str(spec)) for spec in cfg.data.train]
    expected = corpus_specs(teacher_cfg, student)

    def read(spec: str) -> str:  # (the corpus as read: no bt: mark, weight or spaces around ~)
        return re.sub(r"\s*~\s*", "~", spec.removeprefix("bt:").split("*")[0].strip())

    for spec in have:
        if read(spec).startswith(here) and read(spec) not in expected:
            raise ConfigError(
                f"--exp {student.root}: its data.train reads {spec}, which is not the distilled corpus: it is "
                f"{', '.join(expected)}"
            )
    if teacher is not None and (not student.has_tokenizer() or same_tokenizer(student, teacher)):
        from mt.data.train_tokenizer import back_translation_symbols
        from mt.tokenizer import language_tag

        tok = teacher.load_tokenizers(teacher_cfg.tokenizer.joint)[0]
        missing = [symbol for symbol in back_translation_symbols(cfg) if tok.symbol_id(symbol) is None]
        if cfg.data.multilingual:
            missing += [language_tag(tgt) for _, tgt in cfg.data.pairs() if tok.tag_id(tgt) is None]
        if missing:
            raise ConfigError(
                f"--exp {student.root}: its data needs {', '.join(missing)}, which the teacher's tokenizer "
                f"({teacher.tokenizer_dir}) has not, and a student shares its teacher's: leave out what needs it "
                "(bt: corpora, directions), or give a teacher whose tokenizer has it"
            )
    wanted = [] if any(read(spec).startswith(here) for spec in have) else expected
    if mix_original:
        wanted += [str(spec) for spec in teacher_cfg.data.train if absolute_spec(str(spec)) not in have]
    if not wanted:
        return cfg
    made = "checkpoints" if student.has_checkpoints() else "binarized data" if student.has_data() else None
    if made:
        raise ConfigError(
            f"--exp {student.root}: has {made} made without the distilled corpus; add "
            f"{', '.join(wanted)} to its data.train before its first step, or distill into a new --exp"
        )
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, train=[*cfg.data.train, *wanted]))
    write_text_atomic(student.config_path, save_yaml(cfg))
    log.info(f"distill: {', '.join(wanted)} added to {student.config_path}'s data.train")
    return cfg


def distill(
    teachers: list[Experiment],
    student: Experiment,
    options: DecodeOptions | None = None,  # the teacher's search, over its decode.* (beam, alpha, ...)
    chunk_lines: int | None = None,  # None: the size the chunks on disk have, else CHUNK_LINES
    mix_original: bool = False,
    checkpoint: str | None = None,  # each teacher's; None: its decode.checkpoint
    device: str = "cpu",
    precision: str = "fp32",
    quantize: str | None = None,
    keep_bt: bool = False,  # translate the teacher's back-translated sources (bt:) too
    threads: int | None = None,  # torch's threads, set when the teachers load (None: torch's own choice)
    given: set[str] | None = None,  # the config fields a student recipe or its flags set (teacher_tokenizer)
) -> dict:
    """Translate the first teacher's training sources into `student` (module docstring); returns the manifest."""
    if not teachers:
        raise ConfigError("give at least one --teacher")
    check_not_a_teacher(teachers, student)
    out = distill_dir(student)
    if (out / "manifest.json").exists():  # written last: done, whatever the search flags say now
        manifest = read_manifest(student)  # a damaged one is refused, not called done
        try:
            asked = teacher_checkpoints(teachers, checkpoint)
        except MtError:
            if any(Path(path).exists() for path in manifest["teachers"]):
                raise
            # the teachers removed since (disk space): the corpus stands, and a student's training resumes
            log.info(f"distill: done already ({out}; its teachers are gone: the corpus was checked when made)")
            return manifest
        if manifest.get("teachers") != asked:  # other teachers (a recipe edited): not this corpus
            raise MtError(
                f"{out}: distilled from {', '.join(manifest.get('teachers') or ['?'])}, not "
                f"{', '.join(asked)}; remove {out} to distill again, or distill into another --exp"
            )
        saved = manifest.get("teacher_sha256")  # the teachers' bytes: one trained again at its path is another
        if saved and saved != [file_sha256(Path(c))[:16] for c in asked]:
            raise MtError(
                f"{out}: distilled from an earlier {', '.join(asked)} (saved again since); remove {out} to "
                "distill again, or distill into another --exp"
            )
        if keep_bt and manifest.get("keep_bt") is False:  # (asked for lines it left: not done as asked)
            raise MtError(
                f"{out}: distilled without --keep-bt; remove {out} to distill the back-translated sources "
                "too, or distill into another --exp"
            )
        # the teacher's training files, not only its model: their sizes and times, hashed where those moved
        # (a file gone since: the corpus stands, as with a teacher removed)
        changed = [
            (path, how) for _, path, how in changed_inputs(student, manifest.get("inputs") or {}) if how != "gone"
        ]
        if changed:
            raise MtError(
                f"{out}: {changed[0][0]}, a training file of the teacher, has {changed[0][1]} since it was "
                f"distilled; remove {out} to distill it again, or distill into another --exp"
            )
        if student.has_config():  # --mix-original asked now: added, or refused once data is made (was ignored)
            add_corpus(teachers[0].load_config(), student, mix_original)
        log.info(f"distill: done already ({out}; remove it to distill again)")
        return manifest
    lead = teachers[0]
    checkpoints = teacher_checkpoints(teachers, checkpoint)
    teacher_cfg = lead.load_config()
    options = (options or DecodeOptions()).resolved(teacher_cfg.decode)
    origins: dict[tuple[str, str], LineOrigins] = {}  # where each direction's lines were read: for warnings
    inputs = input_record(teacher_cfg, ["train"])  # before reading: a file rewritten meanwhile is "changed"
    parts, skipped, invalid = teacher_sources(teacher_cfg, keep_bt, origins)
    # Each teacher by its bytes too: a checkpoint trained on (or averaged again) at the same path is another model.
    how = {
        "teachers": checkpoints,
        "teacher_sha256": [file_sha256(Path(c))[:16] for c in checkpoints],
        **{f"decode.{k}": v for k, v in options.record().items()},
        "precision": precision,
        "quantize": quantize,
    }
    if skipped is not None:  # the teacher has bt: sources (recorded only then: older chunks resume as they were)
        how["keep_bt"] = keep_bt
    # Refused before the student is made: a bad chunk size, chunks done otherwise, a teacher that does not load.
    plan = chunked.plan_chunks(out, parts, chunk_lines, how, "the teacher's source lines")
    translate = (
        teacher_translator(lead, teacher_cfg, checkpoints, options, device, precision, quantize, threads, origins)
        if plan.todo
        else None
    )
    prepare_student(lead, student, mix_original, given)
    chunks, state = chunked.translate_chunks(out, plan, translate, "distill")
    manifest = _join(
        student,
        teacher_cfg,
        chunks,
        checkpoints,
        how["teacher_sha256"],
        state,
        options,
        skipped or 0,
        invalid,
        {"inputs": inputs, **({"keep_bt": keep_bt} if skipped is not None else {})},
    )
    return manifest


def teacher_sources(
    teacher_cfg: ExperimentConfig, keep_bt: bool, origins: dict[tuple[str, str], LineOrigins] | None = None
) -> tuple[list[tuple[tuple[str, str], list[str]]], int | None, int]:
    """Each direction's training source lines of the teacher, how many lines of back-translated
    sources (bt:) were skipped (None: it has none; 0 with keep_bt), and how many pairs that are no
    text were left out, each said on stderr; given
    `origins`, where each direction's lines were read, by direction."""
    parts, skipped, names = [], None, []
    # A pair that is no text (invalid UTF-8, a malformed record), which the teacher's binarize left out
    # with data.clean, stopped distill: left out here too, said; every other line as it is written.
    dropped: list[str] = []
    for pair in teacher_cfg.data.pairs():
        sources = teacher_cfg.data.sources("train", pair)
        synthetic = [source for source in sources if source.back_translated]
        if synthetic:
            skipped = (skipped or 0) + (0 if keep_bt else len(load_split(synthetic, [])[0]))
            names += [source.name for source in synthetic]
        kept = [s for s in sources if keep_bt or not s.back_translated]
        read = LineOrigins()
        parts.append((pair, load_split(kept, dropped, (read, 0))[0]))
        if origins is not None:
            origins[pair] = read
    if dropped:
        log.warn(
            f"distill: {len(dropped):,} pairs of the teacher's training data are not text and are left out "
            f"(first: {dropped[0]})"
        )
    if skipped and not any(lines for _, lines in parts):
        raise MtError(
            "the teacher's training sources are all back-translated (bt:): nothing to distill; "
            "--keep-bt translates them"
        )
    if skipped:
        log.warn(
            f"distill: skipped {skipped:,} lines of the teacher's back-translated sources "
            f"({', '.join(dict.fromkeys(names))}): noised synthetic text it read after <BT>; "
            f"--keep-bt translates them too"
        )
    return parts, skipped, len(dropped)


def teacher_translator(
    lead: Experiment,
    teacher_cfg: ExperimentConfig,
    checkpoints: list[str],
    options: DecodeOptions,
    device: str,
    precision: str,
    quantize: str | None,
    threads: int | None = None,
    origins: dict[tuple[str, str], LineOrigins] | None = None,
) -> chunked.Translate:
    """The teachers, loaded (an ensemble of several), as mt.apps.chunked translates with them; torch
    (and its threads) only now, after every refusal. Warnings name a line where `origins` says it was
    read (else by its place among its direction's lines)."""
    from mt.decoding.translator import Translator
    from mt.hardware import set_threads

    set_threads(threads)
    translator = Translator.load(lead, teacher_cfg, checkpoints, device, precision, quantize)

    def translate(index: int, pair: tuple[str, str], lines: list[str], first: int) -> list[str]:
        names = origins[pair].names(first, len(lines)) if origins and pair in origins else None
        directed = dataclasses.replace(options, src_lang=pair[0], tgt_lang=pair[1])
        return chunked.searched_or_copied(translator, lines, directed, first, names)

    return translate


def check_not_a_teacher(teachers: list[Experiment], student: Experiment) -> None:
    """A student of its own: its config, tokenizer and distill/ would be written into the teacher."""
    for teacher in teachers:
        if teacher.root.resolve() == student.root.resolve():
            raise ConfigError(
                f"--exp {student.root}: the same directory as --teacher {teacher.root}; a teacher "
                f"cannot be its own student: distill into a new --exp"
            )


MANIFEST_FIELDS = {"teachers": (list,), "seconds": (int, float), "corpus": (str, list)}


def read_manifest(student: Experiment) -> dict:
    """distill/manifest.json, checked for what `mt distill` and `mt info` read of it."""
    path = distill_dir(student) / "manifest.json"
    manifest = chunked.read_manifest(path, MANIFEST_FIELDS, "mt distill")
    corpus = manifest["corpus"] if isinstance(manifest["corpus"], list) else [manifest["corpus"]]
    for key, values in (("teachers", manifest["teachers"]), ("corpus", corpus)):
        if not values or not all(isinstance(value, str) for value in values):
            raise MtError(
                f"{path}: {key} {manifest[key]!r} is not a list of paths; remove it and rerun "
                f"`mt distill` to write it again from the chunks"
            )
    return manifest


def _join(
    student: Experiment,
    teacher_cfg: ExperimentConfig,
    chunks: list[chunked.Chunk],
    checkpoints: list[str],
    teacher_sha256: list[str],  # the chunks' `how` has them: each checkpoint read once
    state: dict,
    options: DecodeOptions,
    skipped_bt: int = 0,
    invalid: int = 0,
    inputs: dict | None = None,
) -> dict:
    """distill/train.SRC and train.TGT (with directions, train.SRC-TGT.SRC and .TGT for each) from the
    chunks, in order, and the manifest; nothing is written unless both sides have a line for each source."""
    out = distill_dir(student)
    multilingual = teacher_cfg.data.multilingual
    texts = {}
    for pair in teacher_cfg.data.pairs():
        mine = [chunk for chunk in chunks if chunk[1] == pair]
        prefix = out / (f"train.{pair[0]}-{pair[1]}" if multilingual else "train")
        for side, lang in enumerate(pair):
            texts[prefix.with_name(f"{prefix.name}.{lang}")] = chunked.joined(out, mine, side)
    chunked.write_joined(out, texts, "mt distill")
    lines = sum(len(c[2]) for c in chunks)
    specs = corpus_specs(teacher_cfg, student)
    manifest = {
        "teachers": checkpoints,
        "teacher_sha256": teacher_sha256,
        "lines": lines,
        "chunks": len(chunks),
        "chunk_lines": state["chunk_lines"],
        "decode": options.record(),
        "seconds": state["seconds"],  # translating, over all runs
        "skipped_bt_lines": skipped_bt,  # lines of the teacher's bt: sources, not translated
        "invalid_pairs_skipped": invalid,  # pairs that are no text (not UTF-8, a malformed record)
        "corpus": specs[0] if not multilingual else specs,
        **(inputs or {}),  # the teacher's training files, --keep-bt: what a done distillation checks
    }
    write_json_atomic(out / "manifest.json", manifest)  # last: marks the distillation done
    log.info(f"distill: {lines:,} pairs in {', '.join(str(path) for path in texts)}")
    return manifest


def teacher_rows(student: Experiment) -> list[dict]:
    """The student and its teachers side by side (from distill/manifest.json): test BLEU and chrF,
    sentences/s of `mt evaluate`'s test run (each as it decoded: beam, precision in `decoding`),
    parameters, size of the checkpoint on disk. Empty when the experiment is not a student."""
    manifest_path = distill_dir(student) / "manifest.json"
    if not manifest_path.exists():
        return []
    manifest = read_manifest(student)
    student_cfg = student.load_config()
    try:  # the file decoding takes (best.pt, or last.pt without a valid split), as evaluate names it
        own = student.find_checkpoint(student_cfg.decode.checkpoint)
    except MtError:
        own = student.checkpoint_path(student_cfg.decode.checkpoint)
    entries = [("student", student, own)]
    for path in map(Path, manifest["teachers"]):
        entries.append(("teacher", Experiment(path.parent.parent), path))  # EXP/checkpoints/NAME.pt
    return [_model_row(role, exp, checkpoint) for role, exp, checkpoint in entries]


def _model_row(role: str, exp: Experiment, checkpoint: Path) -> dict:
    from mt.apps.evaluate import checkpoint_name, stale
    from mt.experiment.checkpoint_file import load_checkpoint, model_from_checkpoint
    from mt.model.transformer import count_parameters

    row: dict = {"role": role, "experiment": str(exp.root), "checkpoint": checkpoint.name}
    scores = exp.read_json(exp.score_path("test")) if exp.has_config() else None
    if scores and scores.get("checkpoint") != checkpoint_name(exp, checkpoint):  # another model's scores
        row["scores_of"] = str(scores.get("checkpoint"))
    elif scores:
        row.update(bleu=round(scores["bleu"], 2), chrf=round(scores["chrf"], 2))
        if reasons := stale(exp, exp.load_config(), "test", scores):
            row["stale"] = reasons
        if scores.get("translate_seconds"):
            row["sent_per_s"] = round(scores["sentences"] / scores["translate_seconds"], 1)
        decode = scores.get("decode", {})
        row["decoding"] = f"beam {decode.get('beam')}, {decode.get('quantize') or decode.get('precision')}"
    if checkpoint.is_file():
        row["size_mb"] = round(checkpoint.stat().st_size / 1e6, 1)
        try:
            row["params_m"] = round(count_parameters(model_from_checkpoint(load_checkpoint(checkpoint))) / 1e6, 2)
        except (MtError, KeyError, RuntimeError):
            pass  # the checkpoints section of `mt info` says what is wrong with it
    return row
