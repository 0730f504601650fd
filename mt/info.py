"""`mt info`: what an experiment holds, as plain sections of key -> value."""

from __future__ import annotations

from typing import Any

from mt.errors import MtError
from mt.experiment import Experiment, kept_text
from mt.train_log import load_train_log


def experiment_info(exp: Experiment) -> dict[str, dict[str, Any]]:
    cfg = exp.load_config()
    data = cfg.data
    sections: dict[str, dict[str, Any]] = {
        "experiment": {
            "directory": str(exp.root),
            "direction": f"{data.src_lang} -> {data.tgt_lang}",
            "corpus": ", ".join(data.train) or "(none)",
            "tokenizer": f"{cfg.tokenizer.model_type} {cfg.tokenizer.vocab_size} ({'joint' if cfg.tokenizer.joint else 'separate'})"
            + ("" if exp.has_tokenizer() else " (not trained)"),
            "model": f"{cfg.model.enc_layers}+{cfg.model.dec_layers} layers, d_model {cfg.model.d_model}, "
            f"d_ff {cfg.model.d_ff}, {cfg.model.n_heads} heads, dropout {cfg.model.dropout}"
            + (", pre-norm" if cfg.model.pre_norm else ""),
            "training": f"max_tokens {cfg.train.max_tokens}, warmup {cfg.train.warmup_steps}, "
            f"label smoothing {cfg.train.label_smoothing}, {cfg.train.precision}",
            "decoding": f"beam {cfg.decode.beam}, alpha {cfg.decode.alpha} ({cfg.decode.length_penalty}), "
            f"stop {cfg.decode.stop}",
        }
    }
    stats = exp.read_json(exp.data_stats_path) if exp.data_stats_path.exists() else None
    sections["data"] = {}
    for split, s in ((stats or {}).get("splits") or {}).items():
        sections["data"][split] = (
            f"{kept_text(s)} pairs kept of {s['pairs_in']:,}; {s['src_tokens']:,} src / {s['tgt_tokens']:,} tgt tokens"
        )
    sections["checkpoints"] = {}
    if exp.checkpoints_dir.exists():
        for path in sorted(exp.checkpoints_dir.glob("*.pt")):
            sections["checkpoints"][path.stem] = f"{path.stat().st_size / 1e6:.1f} MB"
    sections["training"] = {}
    saved_step = _saved_step(exp)
    if exp.train_log_path.exists():
        train_records, valid_records = load_train_log(exp.train_log_path)  # a resume's records replace older ones
        if train_records:
            last = train_records[-1]
            sections["training"]["last step"] = last["step"]
            logged = f" (logged at step {last['step']})" if saved_step not in (None, last["step"]) else ""
            sections["training"]["train loss / ppl"] = f"{last['loss']:.3f} / {last['ppl']:.2f}{logged}"
            sections["training"]["tgt tokens/s"] = f"{last['tgt_tokens_per_s']:.0f}"
            sections["training"]["hours"] = f"{last['elapsed'] / 3600:.2f}"
        if valid_records:
            best = min(valid_records, key=lambda r: r["valid_nll"])
            sections["training"]["best valid ppl"] = f"{best['valid_ppl']:.2f} (step {best['step']})"
    if saved_step is not None:  # last.pt's, where a resume starts: the log may end a few updates before it
        sections["training"]["last step"] = saved_step
    sections["scores"] = {}
    for split in ("valid", "test"):
        scores = exp.read_json(exp.score_path(split))
        if scores:
            sections["scores"][split] = (f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  {_how_decoded(scores)}  "
                                         f"{scores['bleu_signature']}")
        tokenized = exp.read_json(exp.score_path(f"{split}.tokenized"))
        if tokenized:
            sections["scores"][f"{split} (tokenized)"] = (f"BLEU {tokenized['bleu_tokenized']:.2f}  {_how_decoded(tokenized)}  "
                                                          f"{tokenized['bleu_tokenized_signature']}")
    from mt.distill import teacher_rows

    for row in teacher_rows(exp):  # a student of mt distill: its teachers beside it
        figures = [f"{row['bleu']:.2f} BLEU, chrF {row['chrf']:.2f}" if "bleu" in row else "not evaluated",
                   f"{row['sent_per_s']} sent/s ({row['decoding']})" if "sent_per_s" in row else None,
                   f"{row['params_m']}M parameters" if row.get("params_m") else None,
                   f"{row['size_mb']} MB" if "size_mb" in row else None]
        sections.setdefault("student and teachers", {})[f"{row['role']} {row['experiment']}"] = \
            "; ".join(f for f in figures if f)
    return sections


def _how_decoded(scores: dict) -> str:
    """Which checkpoint and search gave a score: `mt evaluate` with other flags rewrites it."""
    decode = scores.get("decode") or {}
    search = f"beam {decode['beam']}, alpha {decode['alpha']} {decode['length_penalty']}" if "beam" in decode else ""
    precision = decode.get("quantize") or decode.get("precision")
    parts = [scores.get("checkpoint"), search, precision if precision not in (None, "fp32") else None]
    return "(" + ", ".join(p for p in parts if p) + ")" if any(parts) else ""


def _saved_step(exp: Experiment) -> int | None:
    """The step checkpoints/last.pt holds; None where there is none, or it cannot be read (the
    checkpoints section lists it, and translate/train name what is wrong with it)."""
    path = exp.checkpoint_path("last")
    if not path.is_file():
        return None
    from mt.checkpoint import load_checkpoint

    try:
        return int(load_checkpoint(path)["step"])
    except (MtError, KeyError, TypeError, ValueError):
        return None
