"""`mt run RECIPE`: the recipe's steps in order, each skipped when its output is already there."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mt import log
from mt.config.recipes import READS, STEPS, load_recipe, read_recipe
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.experiment.config import ConfigChange
from mt.experiment.paths import Experiment

SAMPLES = 4  # test sentences shown at the end of `mt run`


def run_recipe(
    recipe: Path,
    exp_dir: Path | None,
    overrides: dict[str, Any],
    device: str = "cpu",
    print_result: Callable[[str], None] = print,
    print_data: Callable[[dict], None] | None = None,
    dry_run: bool = False,
) -> Experiment:
    """Resolve the recipe into its experiment, then train-tokenizer, binarize, train, evaluate.

    `overrides` are `--set` fields (they win over the recipe); `print_result` gets the score and
    example lines (stdout in the CLI), `print_data` binarize's statistics. `dry_run`: print the
    config the steps would run with and say which are done, writing nothing.
    """
    if recipe.resolve() in _RUNNING:  # a teacher: or reverse: that leads back to itself
        chain = " -> ".join(str(path) for path in [*_RUNNING, recipe.resolve()])
        raise ConfigError(f"{recipe}: a recipe that needs itself to run first ({chain})")
    _RUNNING.append(recipe.resolve())
    try:
        return _run_recipe(recipe, exp_dir, overrides, device, print_result, print_data, dry_run)
    finally:
        _RUNNING.pop()


_RUNNING: list[Path] = []  # the recipes being run, outermost first (a teacher's or reverse's inside)


def _run_recipe(
    recipe: Path,
    exp_dir: Path | None,
    overrides: dict[str, Any],
    device: str,
    print_result: Callable[[str], None],
    print_data: Callable[[dict], None] | None,
    dry_run: bool,
) -> Experiment:
    _, run = load_recipe(recipe)
    exp_dir = exp_dir or (Path(str(run["exp"])) if run.get("exp") else None)
    if exp_dir is None:
        raise ConfigError(f"{recipe}: no `exp:` directory in the recipe; give --exp")
    if exp_dir.is_file():
        raise ConfigError(f"{recipe}: exp {exp_dir}: is a file, not an experiment directory")
    change = ConfigChange(Experiment(exp_dir))
    exp = change.exp
    cfg = change.resolve(
        overrides, recipe=recipe, origins={key: "--set" for key in overrides}, persist=not dry_run, record=not dry_run
    )
    # By default every step but distill and backtranslate where the recipe has not their run keys
    # (teacher:, reverse:; given, they were ignored), and shortlist only where decode.shortlist decodes with it.
    skipped = (
        *(() if run.get("teacher") else ("distill",)),
        *(() if run.get("reverse") else ("backtranslate",)),
        *(() if cfg.decode.shortlist else ("shortlist",)),
    )
    steps = run.get("steps") or [s for s in STEPS if s not in skipped]
    if cfg.decode.shortlist and "evaluate" in steps and "shortlist" not in steps:
        # evaluate decodes with the table: one of other decode.shortlist_top or data was used unseen
        at = steps.index("evaluate")
        steps = [*steps[:at], "shortlist", *steps[at:]]
    if dry_run:
        _dry_run(exp, cfg, steps, print_result, run)
        return exp
    given = {key for key, value in overrides.items() if value is not None} | set(read_recipe(recipe).fields)
    with change.undo_if_fails():
        for step in steps:
            _run_step(step, exp, cfg, run, device, print_result, print_data, given, steps)
    show_test_samples(exp, cfg)
    _translate_examples(exp, cfg, [str(e) for e in run.get("translate_examples") or []], device, print_result)
    return exp


def _run_step(
    step: str,
    exp: Experiment,
    cfg: ExperimentConfig,
    run: dict[str, Any],
    device: str,
    print_result: Callable[[str], None],
    print_data: Callable[[dict], None] | None,
    given: set[str],
    steps: list[str],
) -> None:
    """One step of the recipe (`run`: its run keys), unless what it makes is there already. `given`:
    the config fields the recipe and the flags set; `steps`: the recipe's."""
    if step == "distill":
        distill_step(exp, cfg, run["teacher"], device, given)
    elif step == "backtranslate":
        backtranslate_step(exp, cfg, run, device)
    elif step == "train-tokenizer":
        from mt.data.train_tokenizer import train_tokenizer

        if exp.has_tokenizer():
            _check_tokenizer_inputs(exp)
            log.info(f"train-tokenizer: done already ({exp.tokenizer_dir})")
            if not exp.casing_path.exists():  # trained before the casing tables (mt.text.casing): added
                try:
                    train_tokenizer(exp, cfg)
                except MtError as exc:  # (the training text gone, say: the vocabulary reads casing alone)
                    log.warn(f"train-tokenizer: its casing tables not added: {exc}")
            return
        log.heading("train-tokenizer")
        train_tokenizer(exp, cfg)
    elif step == "binarize":
        from mt.data.binarize import binarize

        if exp.has_data():
            _check_inputs(exp, cfg)
            log.info(f"binarize: done already ({exp.data_dir})")
            return
        if done := _data_not_needed(exp, cfg, steps):  # data/ removed to save disk: nothing left reads it
            log.info(f"binarize: not needed, training is done ({done}); {exp.data_dir} is not made again")
            return
        log.heading("binarize")
        stats = binarize(exp, cfg)
        if print_data is not None:
            print_data(stats)
    elif step == "shortlist":
        shortlist_step(exp, cfg)
    elif step == "train":
        from mt.training.launch import report_stop
        from mt.training.loop import train

        done = _training_done(exp, cfg)
        if done:
            log.info(f"train: done already ({done})")
            return
        log.heading("train")
        report_stop(train(exp, cfg, device=device))
    elif step == "average":
        average_step(exp, cfg)
    elif step == "evaluate":
        _evaluate(exp, cfg, device, print_result)


def shortlist_step(exp: Experiment, cfg: ExperimentConfig) -> None:
    """EXP/shortlist from the training split (mt.data.shortlist), unless the one there was built from
    the same data and tokenizer with the same decode.shortlist_top and shortlist_frequent."""
    from mt.data.shortlist import build_shortlist, stale_reason

    reason = stale_reason(exp, cfg)
    if reason is None:
        log.info(f"shortlist: done already ({exp.shortlist_path})")
        return
    log.heading("shortlist", "" if reason == "not built" else f" (again: {reason})")
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    build_shortlist(exp, cfg, src_tok.vocab_size, tgt_tok.vocab_size)


def distill_step(
    exp: Experiment,
    cfg: ExperimentConfig,
    teacher: str | list[str],
    device: str,
    given: set[str] | None = None,
) -> None:
    """The recipe's `teacher:` (each a recipe, run first to the end when anything of it is missing,
    or an experiment) translates its training corpus into this experiment (mt.apps.distill). A recipe that
    names its training data must read it from here: checked before the teacher runs (an hour, say)."""
    from mt.apps.distill import distill, distill_dir

    _check_distill_corpus(exp, cfg)
    done = (distill_dir(exp) / "manifest.json").exists()  # distill says so, once it has checked the teachers
    teachers = []
    for entry in [teacher] if isinstance(teacher, str) else teacher:
        if entry.endswith((".yaml", ".yml")) and not done:
            log.heading("teacher", f" {entry}")
            teachers.append(run_recipe(Path(entry), None, {}, device, _labelled(f"teacher {entry}")))
        else:
            teachers.append(_experiment_of(entry))
    log.heading("distill")
    distill(teachers, exp, device=device, given=given)
    saved = exp.load_config()  # with the distilled corpus, if distill added it, and the teacher's tokenizer
    cfg.data.train, cfg.tokenizer = saved.data.train, saved.tokenizer


def _labelled(what: str) -> Callable[[str], None]:
    """A recipe run for another's results, to stderr under its name: stdout is the asked recipe's (its
    `test: BLEU` line was the teacher's first)."""
    return lambda line: log.info(f"{what}: {line}")


def _experiment_of(entry: str) -> Experiment:
    """The experiment a `teacher:` or `reverse:` entry names: a recipe's `exp:`, or the directory."""
    if not entry.endswith((".yaml", ".yml")):
        return Experiment(Path(entry))
    _, run = load_recipe(Path(entry))
    if not run.get("exp"):
        raise ConfigError(f"{entry}: no `exp:` directory in the recipe")
    return Experiment(Path(str(run["exp"])))


def _check_distill_corpus(exp: Experiment, cfg: ExperimentConfig) -> None:
    """A recipe that names its training data must read the distilled corpus from this experiment."""
    from mt.apps.distill import distill_dir
    from mt.config.sources import absolute_spec

    here = f"files:{distill_dir(exp).resolve()}/"
    if cfg.data.train and not any(absolute_spec(str(spec)).startswith(here) for spec in cfg.data.train):
        raise ConfigError(
            f"the step distill writes {distill_dir(exp)}/train.*, which the recipe's data.train does not "
            f"read ({', '.join(map(str, cfg.data.train))}): with --exp, give --set "
            f"'data.train=[files:{distill_dir(exp)}/train]' too"
        )


def _check_backtranslate_corpus(exp: Experiment, cfg: ExperimentConfig) -> None:
    """The recipe names the synthetic corpus in its data.train itself."""
    from mt.apps.backtranslate import backtranslate_dir, listed_spec

    if listed_spec(cfg, exp) is None:
        raise ConfigError(
            f"the step backtranslate writes {backtranslate_dir(exp) / 'train'}.{cfg.data.src_lang}/"
            f".{cfg.data.tgt_lang}: add bt:files:{backtranslate_dir(exp) / 'train'} to the recipe's data.train"
        )


def backtranslate_step(exp: Experiment, cfg: ExperimentConfig, run: dict[str, Any], device: str) -> None:
    """The recipe's `reverse:` (a recipe, run first to the end when anything of it is missing, or an
    experiment) back-translates `mono:` into this experiment (mt.apps.backtranslate), with `bt_search`.
    The recipe names the synthetic corpus in its data.train itself (bt:files:EXP/backtranslate/train),
    so that running it again finds the config it wrote."""
    from mt.apps.backtranslate import backtranslate, backtranslate_dir, listed_spec
    from mt.decoding.options import DecodeOptions, Sampling

    _check_backtranslate_corpus(exp, cfg)
    spec = listed_spec(cfg, exp)
    done = (backtranslate_dir(exp) / "manifest.json").exists()  # backtranslate says so, once it has checked
    entry = str(run["reverse"])
    if entry.endswith((".yaml", ".yml")) and not done:
        log.heading("reverse", f" {entry}")
        reverse = run_recipe(Path(entry), None, {}, device, _labelled(f"reverse {entry}"))
    else:
        reverse = _experiment_of(entry)
    search = run.get("bt_search", "beam")
    log.heading("backtranslate")
    backtranslate(
        reverse,
        exp,
        [str(m) for m in run["mono"]],
        options=DecodeOptions(sampling=Sampling()) if search == "sample" else None,
        noise=search == "noise",
        tagged=spec.strip().startswith("bt:"),
        device=device,
    )


def show_test_samples(exp: Experiment, cfg: ExperimentConfig, count: int = SAMPLES) -> None:
    """A few test sentences with reference and translation, on stderr: the quality, not only the number.

    Spread evenly over the split's sentences of 4-16 source words (one-word lines say little), the
    same ones on every run; of the first direction, in a multilingual experiment.
    """
    from mt.data.corpus import load_split, read_lines

    direction = cfg.data.pairs()[0]
    hyp_path = exp.hyp_path("test", "-".join(direction) if cfg.data.multilingual else None)
    if not cfg.data.test or not hyp_path.exists():
        return
    sources, refs = load_split(cfg.data.sources("test", direction))
    hyps = read_lines(hyp_path)
    if len(hyps) != len(sources):
        return  # scored with another test set: nothing to line up
    fitting = [i for i, line in enumerate(sources) if 4 <= len(line.split()) <= 16] or list(range(len(sources)))
    picks = [fitting[(2 * k + 1) * len(fitting) // (2 * count)] for k in range(min(count, len(fitting)))]
    where = f" {'-'.join(direction)}" if cfg.data.multilingual else ""
    log.heading(f"test samples{where}", f" ({len(picks)} of {len(sources)}: source, reference, translation)")
    for i in picks:
        log.info(f"  {sources[i]}")
        log.info(f"    ref: {refs[i]}")
        log.info(f"    mt:  {hyps[i]}")


def _translate_examples(
    exp: Experiment, cfg: ExperimentConfig, examples: list[str], device: str, print_result: Callable[[str], None]
) -> None:
    """The recipe's `translate_examples`, each with its translation."""
    if not examples:
        return
    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator

    src_lang = cfg.data.pairs()[0][0]  # the examples are in the first direction's source language
    with Translator.load(exp, cfg, device=device) as translator:  # its search processes, if any, stop after
        for tgt_lang in translator.directions.targets(src_lang):
            found = translator.search(examples, DecodeOptions(src_lang=src_lang, tgt_lang=tgt_lang))
            arrow = f"-{tgt_lang}->" if cfg.data.multilingual else "->"
            for source, hyps in zip(examples, found):
                print_result(f"{source}  {arrow}  {hyps[0][0]}")


def _dry_run(
    exp: Experiment,
    cfg: ExperimentConfig,
    steps: list[str],
    print_result: Callable[[str], None],
    run_keys: dict[str, Any],
) -> None:
    """The resolved config (stdout) and each step's state (stderr), as `mt run` would take them."""
    from mt.apps.backtranslate import backtranslate_dir
    from mt.apps.distill import distill_dir
    from mt.config.schema import save_yaml
    from mt.data.shortlist import stale_reason

    print_result(save_yaml(cfg).rstrip("\n"))
    done = {
        "distill": (distill_dir(exp) / "manifest.json").exists(),
        "backtranslate": (backtranslate_dir(exp) / "manifest.json").exists(),
        "train-tokenizer": exp.has_tokenizer(),
        "binarize": exp.has_data() or bool(_data_not_needed(exp, cfg, steps)),
        "shortlist": exp.has_data() and stale_reason(exp, cfg) is None,
        "train": bool(_training_done(exp, cfg)),
        "average": _average_fresh(exp, cfg),
        "evaluate": exp.checkpoint_path("last").exists()
        and all(_scores_fresh(exp, cfg, split) for split in ("valid", "test") if getattr(cfg.data, split)),
    }
    for step in steps:  # a step to run makes what reads its output run again too (train, then evaluate)
        if not done.get(step):
            for later in steps[steps.index(step) + 1 :]:
                if step in READS.get(later, ()):
                    done[later] = False

    checks = {"distill": _check_distill_corpus, "backtranslate": _check_backtranslate_corpus}
    for step, check in checks.items():
        if step in steps and not done[step]:
            try:
                check(exp, cfg)
            except ConfigError as exc:
                log.warn(f"{step} would stop: {exc}")
    if done["binarize"] and "binarize" in steps:
        try:
            _check_inputs(exp, cfg)
        except MtError as exc:
            log.warn(f"binarize would stop: {exc}")
    log.info(
        f"dry run of {exp.root} (nothing written): "
        + ", ".join(f"{step} {'done' if done.get(step) else 'to run'}" for step in steps)
    )
    for missing in _missing_inputs(exp, cfg, [s for s in steps if not done.get(s)], run_keys):
        log.warn(f"missing: {missing}")


def _missing_inputs(exp: Experiment, cfg: ExperimentConfig, to_run: list[str], run: dict[str, Any]) -> list[str]:
    """The input files that the steps still to run read and that are not there (what the steps
    themselves write, under the experiment, is not counted): each as "WHERE: PATH"."""
    from mt.data.dataset import input_files
    from mt.data.text_files import existing

    splits = {"train-tokenizer": ("train",), "binarize": ("train", "valid", "test"), "evaluate": ("test",)}
    wanted = dict.fromkeys(split for step in to_run for split in splits.get(step, ()))
    found = [f"data.{split}: {path}" for split in wanted for path in input_files(cfg, split)]
    if "backtranslate" in to_run:
        found += [
            f"mono: {m.removeprefix('text:').strip()}" for m in map(str, run.get("mono") or []) if m.startswith("text:")
        ]
    root = str(exp.root.resolve())
    return list(
        dict.fromkeys(
            item
            for item in found
            if not Path(existing(item.partition(": ")[2])).exists()
            and not str(Path(item.partition(": ")[2]).resolve()).startswith(root)
        )
    )


def _check_tokenizer_inputs(exp: Experiment) -> None:
    """A training file changed since the tokenizer learned its vocabulary from it (a corpus fixed or
    replaced before binarize ran): said, since binarize will encode the new text with it."""
    from mt.data.dataset import changed_inputs

    if exp.has_data():  # binarize's own check compares data/ with its files
        return
    for _, path, how in changed_inputs(exp, exp.read_json(exp.tokenizer_inputs_path) or {}):
        log.warn(
            f"train-tokenizer: {path} has changed since {exp.tokenizer_dir} was trained on it ({how}); its "
            f"vocabulary is the earlier text's: start a new --exp to train one on the new text"
        )


def _check_inputs(exp: Experiment, cfg: ExperimentConfig) -> None:
    """data/ is done only while the files it was binarized from are: a training or validation file
    whose lines changed since is an error while training has steps left (it would learn and select on
    the old lines), a warning once it has none; a test file, a warning (evaluate reads its lines as
    they are); a file gone (removed, compressed) a warning: data/ holds its lines."""
    from mt.data.dataset import changed_inputs

    for split, path, how in changed_inputs(exp):
        said = f"binarize: {path} ({split}) has changed since {exp.data_dir} was binarized from it ({how})"
        if how == "gone":
            held = "evaluate reads the split's files as they are" if split == "test" else "data/ holds its lines"
            log.warn(f"binarize: {path} ({split}), which {exp.data_dir} was binarized from, is gone; {held}")
        elif split == "test":
            log.warn(f"{said}; evaluate scores its lines as they are now")
        elif _training_done(exp, cfg):
            log.warn(f"{said}; the model was trained on its earlier lines")
        elif exp.has_checkpoints():
            raise MtError(
                f"{said}: {exp.checkpoints_dir} holds a model trained on its earlier lines; "
                f"put the file back, or start a new --exp"
            )
        else:
            raise MtError(
                f"{said}: training would read its earlier lines; "
                f"`mt binarize --exp {exp.root} --force` binarizes it again, or start a new --exp"
            )


def _data_not_needed(exp: Experiment, cfg: ExperimentConfig, steps: list[str]) -> str | None:
    """Why binarize may leave a removed data/ so (training is done, and no shortlist is to be built
    from it), or None."""
    return None if "shortlist" in steps else _training_done(exp, cfg)


def _training_done(exp: Experiment, cfg: ExperimentConfig) -> str | None:
    """Why training has nothing left to do (max_steps or max_time reached), or None."""
    from mt.experiment.checkpoint_file import load_checkpoint

    last = exp.checkpoint_path("last")
    if not last.exists():
        return None
    state = load_checkpoint(last)
    step, elapsed = int(state.get("step", 0)), float(state.get("elapsed", 0.0))
    if state.get("validated_at") not in (None, step) and cfg.data.valid:
        return None  # stopped before its last step was validated: `mt train` validates it, then stops
    if step >= cfg.train.max_steps:
        return f"step {step} of max_steps {cfg.train.max_steps}"
    if cfg.train.max_time and elapsed >= cfg.train.max_time:  # None or 0: off
        return f"{elapsed:.0f}s of max_time {cfg.train.max_time:.0f}s at step {step}"
    if 0 < cfg.train.patience <= int(state.get("bad_validations", 0)) and _same_best(state, cfg):
        return f"patience {cfg.train.patience} ran out at step {step}"  # a resume would stop at once
    return None


def _same_best(state: dict, cfg: ExperimentConfig) -> bool:
    """Whether a resume keeps the checkpoint's best and patience (TrainingState.from_checkpoint): the
    same best_metric, measured alike (BLEU on a sample of the same size)."""
    from mt.training.state import bleu_setup

    setup = bleu_setup(cfg.train.best_metric, cfg.train.valid_bleu_sentences, cfg.data.multilingual)
    return state.get("best_metric", "nll") == cfg.train.best_metric and state.get("best_setup") in (None, setup)


def average_step(exp: Experiment, cfg: ExperimentConfig) -> None:
    """checkpoints/average.pt from the last decode.average_last periodic checkpoints (Sec. 6.1), or
    all of them when there are fewer, unless it averages these already (`_average_fresh`)."""
    from mt.training.average import average_last

    target = exp.checkpoint_path("average")
    if _average_fresh(exp, cfg):
        log.info(f"average: done already ({target})")
        return
    log.heading("average")
    if _average_sources(exp, cfg) == [exp.checkpoint_path("last")]:
        # a training shorter than train.save_every: the run goes on, with the one model it has (it stopped here)
        from mt.experiment.checkpoint_file import save_checkpoint
        from mt.training.average import average_checkpoints

        log.warn(
            f"average: no periodic checkpoint to average (train.save_every {cfg.train.save_every} saved none before "
            "training ended): average.pt holds last.pt's model; lower train.save_every to average several"
        )
        save_checkpoint(target, average_checkpoints([exp.checkpoint_path("last")]))
        return
    path, used = average_last(exp, len(_average_sources(exp, cfg)) or 1, force=True)
    log.info(f"averaged {', '.join(p.stem for p in used)} into {path}")


def _average_sources(exp: Experiment, cfg: ExperimentConfig) -> list[Path]:
    """The periodic checkpoints that average.pt is to average now: the last decode.average_last (of
    those up to last.pt's step: `run_checkpoints`); last.pt where there are none."""
    from mt.training.average import run_checkpoints

    periodic = run_checkpoints(exp)
    if not periodic:  # a training shorter than train.save_every: last.pt alone (average_step says so)
        return [exp.checkpoint_path("last")] if exp.checkpoint_path("last").exists() else []
    return periodic[-min(cfg.decode.average_last, len(periodic)) :]


def _average_fresh(exp: Experiment, cfg: ExperimentConfig) -> bool:
    """Whether average.pt averages the checkpoints it is to average now (the names it recorded) and
    was written after each of them (not, say, a step_N.pt of an earlier run of the same name)."""
    from mt.experiment.checkpoint_file import load_checkpoint

    target, sources = exp.checkpoint_path("average"), _average_sources(exp, cfg)
    if not target.exists() or not sources:
        return False
    try:
        recorded = load_checkpoint(target).get("averaged_from")
    except MtError:  # damaged: made again
        return False
    return recorded == [p.name for p in sources] and target.stat().st_mtime > max(p.stat().st_mtime for p in sources)


def _scores_fresh(exp: Experiment, cfg: ExperimentConfig, split: str) -> bool:
    """Whether the split's scores hold: decoded with these options, from the checkpoint decoding
    chooses, after it and the last checkpoint were written (average.pt, say, comes after last.pt);
    from average.pt, only while it averages what it is to average now (`_average_fresh`); with
    decode.shortlist, after the shortlist was built; of the split's lines as they are now."""
    from mt.apps.evaluate import checkpoint_name, decode_record, split_digest
    from mt.decoding.options import DecodeOptions

    score_path, last = exp.score_path(split), exp.checkpoint_path("last")
    try:
        chosen = exp.find_checkpoint(cfg.decode.checkpoint)  # best.pt, or last.pt without a valid split
    except MtError:
        return False
    average = chosen.resolve() == exp.checkpoint_path("average").resolve()
    expected = decode_record(
        DecodeOptions().resolved(cfg.decode),
        averaged_from=[p.name for p in _average_sources(exp, cfg)] if average else None,
    )
    try:
        scores = exp.read_json(score_path) if score_path.exists() else None
    except MtError:  # not JSON (a write cut short by hand, a disk fault): scored again
        scores = None
    return (
        isinstance(scores, dict)  # anything else is damage: scored again, and written anew
        and scores.get("decode") == expected
        and last.exists()
        and scores.get("checkpoint") == checkpoint_name(exp, chosen)  # a .pt of another run: its whole path
        and score_path.stat().st_mtime > last.stat().st_mtime
        and score_path.stat().st_mtime > chosen.stat().st_mtime
        and _read_as_now(scores, chosen)  # not saved again while it was being scored
        and (not average or _average_fresh(exp, cfg))
        and (
            not cfg.decode.shortlist
            or (exp.shortlist_path.exists() and score_path.stat().st_mtime > exp.shortlist_path.stat().st_mtime)
        )
        and scores.get("data_sha256") == split_digest(cfg, split)  # last: it reads the split
    )


def _read_as_now(scores: dict, checkpoint: Path) -> bool:
    """Whether the scores' checkpoint is the file that was scored (`read_as_now`; a record without its
    stats, written before they were kept, is taken as read so)."""
    from mt.apps.evaluate import read_as_now

    return len(scores.get("checkpoint_stats") or []) != 1 or read_as_now(scores, 0, checkpoint)


def _evaluate(exp: Experiment, cfg: ExperimentConfig, device: str, print_result: Callable[[str], None]) -> None:
    """Score valid and test; a split is rescored only when its scores are older than the last
    checkpoint or were decoded with other options."""
    from mt.apps.evaluate import evaluate_split
    from mt.decoding.translator import Translator

    translator = None  # loaded once, for the first split that needs it
    try:
        for split in ("valid", "test"):
            if not getattr(cfg.data, split):
                continue
            score_path = exp.score_path(split)
            if _scores_fresh(exp, cfg, split):
                scores = exp.read_json(score_path)
                log.info(f"evaluate {split}: done already ({score_path})")
            else:
                log.heading(f"evaluate {split}")
                translator = translator or Translator.load(exp, cfg, device=device)
                scores = evaluate_split(exp, cfg, split, translator)
            for line in score_lines(split, scores):
                print_result(line)
    finally:
        if translator is not None:  # its search processes, if any
            translator.close()


def score_lines(split: str, scores: dict) -> list[str]:
    """The split's result: BLEU, chrF and the signature; a multilingual split's, a line per direction
    first and its mean said as one (it read as a plain score, the directions' own unshown), under the
    signature they share or none where they are tokenized apart (zh, ja against 13a)."""
    line = f"{split}: BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
    directions = scores.get("directions", {})
    if not directions:
        return [f"{line}  ({scores['bleu_signature']})"]
    each = [
        f"{split} {name}: BLEU {d['bleu']:.2f}  chrF {d['chrf']:.2f}  ({d['bleu_signature']})"
        for name, d in directions.items()
    ]
    shared = f", {scores['bleu_signature']}" if "bleu_signature" in scores else ", each scored as above"
    return [*each, f"{line}  (the mean of {len(directions)} directions{shared})"]
