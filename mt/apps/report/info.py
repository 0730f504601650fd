"""`mt info`: what an experiment holds. `experiment_record` is the data (`mt info --json`: numbers as
numbers, the saved records as they are, for scripts); `experiment_info` the same as plain sections of
key -> text, for the terminal and `mt report`."""

from __future__ import annotations

import math
from typing import Any

from mt.config.schema import ExperimentConfig, to_dict
from mt.data import stats as data_stats
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.training.train_log import load_train_log


def experiment_record(exp: Experiment, cfg: ExperimentConfig | None = None) -> dict[str, Any]:
    """The config (`cfg` where the caller has read it), data statistics, checkpoints, training
    progress and scores, as saved."""
    cfg = cfg or exp.load_config()
    stats = exp.read_json(exp.data_stats_path) if exp.data_stats_path.exists() else None
    if stats is not None and not (isinstance(stats, dict) and isinstance(stats.get("splits") or {}, dict)):
        raise _unexpected(exp.data_stats_path, "not the object `mt binarize` writes", "binarize")
    checkpoints = {}
    if exp.checkpoints_dir.exists():
        checkpoints = {path.stem: {"bytes": path.stat().st_size} for path in sorted(exp.checkpoints_dir.glob("*.pt"))}
    from mt.apps.evaluate import stale

    scores, digests = {}, {}  # digests: each split read once for its scores' staleness
    for split in ("train", "valid", "test"):  # mt evaluate --split train writes scores/train.json too
        for name in (split, f"{split}.tokenized"):
            record = exp.read_json(exp.score_path(name))
            if record is not None and not isinstance(record, dict):
                raise _unexpected(exp.score_path(name), f"a JSON {type(record).__name__}, not an object", "evaluate")
            if record:
                scores[name] = {**record, "stale": stale(exp, cfg, name, record, digests)}
    from mt.apps.distill import teacher_rows

    return {
        "directory": str(exp.root),
        "tokenizer_trained": exp.has_tokenizer(),
        "config": to_dict(cfg),
        "data": (stats or {}).get("splits") or {},
        "checkpoints": checkpoints,
        "training": _training(exp, cfg.train.best_metric),
        "scores": scores,
        "student_and_teachers": teacher_rows(exp),
    }


def experiment_info(exp: Experiment) -> dict[str, dict[str, Any]]:
    """`experiment_record` as sections of short text lines."""
    cfg = exp.load_config()
    record = experiment_record(exp, cfg)
    data = cfg.data
    sections: dict[str, dict[str, Any]] = {
        "experiment": {
            "directory": record["directory"],
            **(
                {"directions": f"{', '.join(data.directions)} (multilingual: <2xx> tokens)"}
                if data.multilingual
                else {"direction": f"{data.src_lang} -> {data.tgt_lang}"}
            ),
            "corpus": ", ".join(data.train) or "(none)",
            "tokenizer": f"{cfg.tokenizer.model_type} {cfg.tokenizer.vocab_size} ({'joint' if cfg.tokenizer.joint else 'separate'})"
            + ("" if record["tokenizer_trained"] else " (not trained)"),
            "model": f"{cfg.model.enc_layers}+{cfg.model.dec_layers} layers, d_model {cfg.model.d_model}, "
            f"d_ff {cfg.model.d_ff}, {cfg.model.n_heads} heads, dropout {cfg.model.dropout}"
            + (", pre-norm" if cfg.model.pre_norm else ""),
            "training": f"max_tokens {cfg.train.max_tokens}, warmup {cfg.train.warmup_steps}, "
            f"label smoothing {cfg.train.label_smoothing}, {cfg.train.precision}",
            "decoding": f"beam {cfg.decode.beam}, alpha {cfg.decode.alpha} ({cfg.decode.length_penalty}), "
            f"stop {cfg.decode.stop}",
        }
    }
    try:
        sections["data"] = {
            split: f"{data_stats.summary(s)}; {s['src_tokens']:,} src / {s['tgt_tokens']:,} tgt tokens"
            for split, s in record["data"].items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a hand-edited or foreign file
        raise _unexpected(exp.data_stats_path, exc, "binarize") from None
    sections["checkpoints"] = {name: f"{c['bytes'] / 1e6:.1f} MB" for name, c in record["checkpoints"].items()}
    sections["training"] = _training_text(record["training"])
    sections["scores"] = {}
    for name, s in record["scores"].items():
        try:
            sections["scores"].update(_score_lines(name, s))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a hand-edited or foreign file
            raise _unexpected(exp.score_path(name), exc, "evaluate") from None
    for row in record["student_and_teachers"]:  # a student of mt distill: its teachers beside it
        figures = [
            f"{row['bleu']:.2f} BLEU, chrF {row['chrf']:.2f}"
            if "bleu" in row
            else f"not evaluated (its test scores are of {row['scores_of']})"
            if "scores_of" in row
            else "not evaluated",
            f"stale: {'; '.join(row['stale'])}" if row.get("stale") else None,
            f"{row['sent_per_s']} sent/s ({row['decoding']})" if "sent_per_s" in row else None,
            f"{row['params_m']}M parameters" if row.get("params_m") else None,
            f"{row['size_mb']} MB" if "size_mb" in row else None,
        ]
        sections.setdefault("student and teachers", {})[f"{row['role']} {row['experiment']}"] = "; ".join(
            f for f in figures if f
        )
    return sections


def _score_lines(name: str, s: dict) -> dict[str, str]:
    """One scores file as lines: "test" -> "BLEU 31.20  chrF 58.10  (best.pt, beam 5, ...)  SIGNATURE"."""
    # A split's directions share a signature unless their target languages are tokenized apart
    # (tokenized BLEU's Moses rules, sacreBLEU's zh): then each direction's line says its own.
    key = "bleu_tokenized" if name.endswith(".tokenized") else "bleu"
    shown = f"{name.removesuffix('.tokenized')} (tokenized)" if name.endswith(".tokenized") else name
    chrf = "" if name.endswith(".tokenized") else f"  chrF {s['chrf']:.2f}"
    # one direction's record has its signature (a KeyError without: its content unexpected)
    signature = s.get(key + "_signature", "(a signature per direction)") if "directions" in s else s[key + "_signature"]
    line = f"BLEU {s[key]:.2f}{chrf}  {_how_decoded(s)}  {signature}"
    if s.get("stale"):  # shown as they were scored, and said to be no longer the experiment's
        line += f"  (stale: {'; '.join(s['stale'])}: mt evaluate again)"
    if "directions" not in s:
        return {shown: line}
    lines = {shown: f"mean of {len(s['directions'])} directions: {line}"}
    for direction, d in s["directions"].items():
        own = "" if key + "_signature" in s else f"  {d[key + '_signature']}"
        chrf = "" if name.endswith(".tokenized") else f"  chrF {d['chrf']:.2f}"
        lines[f"{shown} {direction}"] = f"BLEU {d[key]:.2f}{chrf}{own}"
    return lines


def _unexpected(path, what, command: str) -> MtError:
    """A saved file that is valid JSON but not what `mt COMMAND` writes (hand-edited, another tool's)."""
    why = f"{type(what).__name__}: {what}" if isinstance(what, Exception) else what
    return MtError(f"{path}: unexpected content ({why}); write it again with `mt {command}` or remove it")


def training_summary(exp: Experiment) -> dict[str, Any]:
    """The training section alone (the report's, beside its curves)."""
    return _training_text(_training(exp, exp.load_config().train.best_metric))


def _training(exp: Experiment, best_metric: str = "nll") -> dict[str, Any]:
    """Where training stands: last.pt's step, the last logged update, the best validation by
    train.best_metric (what made best.pt: the lowest NLL, or the highest BLEU)."""
    training: dict[str, Any] = {}
    if exp.train_log_path.exists():
        train_records, valid_records = load_train_log(exp.train_log_path)  # a resume's records replace older ones
        # A hand-edited or older log may lack a field or hold another type: shown as missing, not a traceback
        if train_records:
            last = train_records[-1]
            training.update(
                last_step=last["step"],
                logged_step=last["step"],
                train_loss=_number(last.get("loss")),
                train_ppl=_number(last.get("ppl")),
                tgt_tokens_per_s=_number(last.get("tgt_tokens_per_s")),
                seconds=_number(last.get("elapsed")),
            )
        key = "valid_bleu" if best_metric == "bleu" else "valid_nll"
        finite = [r for r in valid_records if isinstance(_number(r.get(key)), float) and math.isfinite(r[key])]
        if finite:  # a diverged validation (NaN) is no best
            best = max(finite, key=lambda r: r[key]) if best_metric == "bleu" else min(finite, key=lambda r: r[key])
            training.update(best_valid_ppl=_number(best.get("valid_ppl")), best_valid_step=best["step"])
            if best_metric == "bleu":
                training["best_valid_bleu"] = _number(best.get("valid_bleu"))
    saved_step = _saved_step(exp)
    if saved_step is not None:  # last.pt's, where a resume starts: the log may end a few updates before it
        training["last_step"] = saved_step
    return training


def _number(value: Any) -> float | None:
    """A log's number as a float (NaN and inf too), None for anything else (missing, text, a bool)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _shown(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    return format(value, spec) if math.isfinite(value) else f"{value} (diverged)"


def _training_text(training: dict[str, Any]) -> dict[str, Any]:
    text: dict[str, Any] = {}
    if "last_step" in training:
        text["last step"] = training["last_step"]
    if "logged_step" in training:
        logged = (
            f" (logged at step {training['logged_step']})" if training["logged_step"] != training["last_step"] else ""
        )
        text["train loss / ppl"] = (
            f"{_shown(training['train_loss'], '.3f')} / {_shown(training['train_ppl'], '.2f')}{logged}"
        )
        text["tgt tokens/s"] = _shown(training["tgt_tokens_per_s"], ".0f")
        seconds = training["seconds"]
        text["hours"] = _shown(None if seconds is None else seconds / 3600, ".2f")
    if "best_valid_bleu" in training:  # train.best_metric bleu: best.pt is the highest BLEU's
        text["best valid BLEU / ppl"] = (
            f"{_shown(training['best_valid_bleu'], '.2f')} / {_shown(training['best_valid_ppl'], '.2f')} "
            f"(step {training['best_valid_step']})"
        )
    elif "best_valid_ppl" in training:
        text["best valid ppl"] = f"{_shown(training['best_valid_ppl'], '.2f')} (step {training['best_valid_step']})"
    return text


def _how_decoded(scores: dict) -> str:
    """Which checkpoint and search gave a score: `mt evaluate` with other flags rewrites it."""
    decode = scores.get("decode") or {}
    search = f"beam {decode['beam']}, alpha {decode['alpha']} {decode['length_penalty']}" if "beam" in decode else ""
    precision = decode.get("quantize") or decode.get("precision")
    engine = scores.get("engine")  # the engine that ran, where the record says (CTranslate2's "ctranslate2 4.x ...")
    parts = [
        scores.get("checkpoint"),
        search,
        precision if precision not in (None, "fp32") else None,
        "shortlist" if decode.get("shortlist") else None,
        engine.split(" (")[0] if isinstance(engine, str) and engine != "mt" else None,
    ]
    return "(" + ", ".join(p for p in parts if p) + ")" if any(parts) else ""


def _saved_step(exp: Experiment) -> int | None:
    """The step checkpoints/last.pt holds; None where there is none, or it cannot be read (the
    checkpoints section lists it, and translate/train name what is wrong with it)."""
    from mt.experiment.checkpoint_file import saved_step

    return saved_step(exp.checkpoint_path("last"))  # its tensors not read: seconds and GBs for a big model


def json_numbers(value: Any) -> Any:
    """`value` with every non-finite number (a diverged loss: NaN, inf) as None: JSON has no NaN, and
    Python's json would write one that other readers refuse."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_numbers(item) for item in value]
    return value
