"""`mt report`: one self-contained HTML page about an experiment, to read or to send.

Sections: the experiment (direction, corpus, model, training, decoding, with the full config.yaml),
data statistics (data/stats.json), training curves (train.jsonl, as `mt plot`), scores with their
sacrebleu signatures (scores/*.json), sample translations beside their references
(translations/{split}.hyp and the corpus), and an attention example (as `mt attention`). Images are
embedded as base64 data URIs, so the page needs no other file and no network. A section whose
inputs are missing says so instead of failing the report.
"""

from __future__ import annotations

import base64
import datetime
import html
import random
from pathlib import Path
from typing import Callable

from mt.atomic_files import check_output, write_text_atomic
from mt.config.schema import ExperimentConfig
from mt.data import stats as data_stats
from mt.data.corpus import SPLITS, load_split, read_lines
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       max-width: 1180px; margin: 2em auto; padding: 0 1.5em; }
h1 { font-size: 1.6em; margin-bottom: 0.1em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1em; margin: 1.2em 0 0.4em; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
th, td { border: 1px solid #e0e0e0; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f6f6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv th { width: 11em; }
table.samples td:first-child { color: #888; }
table.samples td.hyp { background: #f3f8ff; }
code, pre { font: 0.88em/1.4 ui-monospace, "SF Mono", Menlo, Consolas, monospace; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
.missing { color: #8a6d3b; background: #fcf8e3; padding: 0.4em 0.7em; display: inline-block; }
details summary { cursor: pointer; color: #0a58ca; margin: 0.5em 0; }
"""


def _e(value) -> str:
    return html.escape(str(value))


def _table(headers: list[str], rows: list[list[str]], classes: dict[int, str] | None = None, css: str = "") -> str:
    """An HTML table of cells that are HTML already; `classes` styles columns by index."""
    classes = classes or {}
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td{f' class={classes[i]}' if i in classes else ''}>{cell}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _kv(rows: dict) -> str:
    return (
        "<table class='kv'>"
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows.items())
        + "</table>"
    )


def _img(png: bytes, alt: str, width: int | None = None) -> str:
    data = base64.b64encode(png).decode("ascii")
    style = f" style='width:{width}px'" if width else ""
    return f"<img alt='{_e(alt)}'{style} src='data:image/png;base64,{data}'>"


def _missing(reason: str) -> str:
    return f"<p class='missing'>{_e(reason)}</p>"


def _section(title: str, build: Callable[[], str]) -> str:
    """A section, or a note saying why it is missing: one absent input never sinks the report."""
    try:
        body = build()
    except MtError as exc:
        body = _missing(f"not available: {exc}")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a hand-edited or foreign file
        body = _missing(f"not available: unexpected content ({type(exc).__name__}: {exc})")
    return f"<section><h2>{_e(title)}</h2>\n{body}\n</section>"


# -- sections -------------------------------------------------------------------------------------
def _overview(exp: Experiment) -> str:
    from mt.apps.report.info import experiment_info

    info = experiment_info(exp)
    rows = dict(info["experiment"])
    rows.update({f"checkpoint {name}": size for name, size in info["checkpoints"].items()})
    config = exp.config_path.read_text(encoding="utf-8")
    return _kv(rows) + f"<details><summary>config.yaml</summary><pre>{_e(config)}</pre></details>"


def _data(exp: Experiment) -> str:
    stats = exp.read_json(exp.data_stats_path)
    if not stats:
        raise MtError(f"{exp.data_stats_path} not found: run `mt binarize`")
    splits = stats.get("splits") or {}
    reasons = list(dict.fromkeys(r for s in splits.values() for r in data_stats.shown_drops(s)))
    rows = []
    for split, s in splits.items():
        drops = [f"{s['dropped'][r]:,}" if r in s["dropped"] else "-" for r in reasons]
        rows.append(
            [
                _e(split),
                f"{s['pairs_in']:,}",
                f"{data_stats.pairs_kept(s):,}",
                *drops,
                data_stats.rows_text(s),
                f"{s['src_tokens']:,}",
                f"{s['tgt_tokens']:,}",
                f"{s['mean_src_len']:.1f}",
                f"{s['mean_tgt_len']:.1f}",
            ]
        )
    names = [
        f"too long (> {stats.get('max_len', '?')})" if r == "too_long" else data_stats.reason_name(r) for r in reasons
    ]
    headers = [
        "split",
        "pairs",
        "kept",
        *(f"dropped: {name}" if i == 0 else name for i, name in enumerate(names)),
        "rows written",
        "src tokens",
        "tgt tokens",
        "mean src len",
        "mean tgt len",
    ]
    return (
        _table(headers, rows, dict.fromkeys(range(1, len(headers)), "num"))
        + "<p class='sub'>pairs = kept + dropped; rows written repeat a pair for its weight (*2) and "
        "segmentations (×3); tokens are subword tokens of the experiment's tokenizer</p>"
    )


def _training(exp: Experiment) -> str:
    from mt.apps.report.info import training_summary
    from mt.apps.report.plot import png_bytes, training_curves
    from mt.training.train_log import load_train_log

    train, valid = load_train_log(exp.train_log_path)
    if not train and not valid:
        raise MtError(f"{exp.train_log_path}: no training records yet")
    summary = training_summary(exp)
    figure = training_curves([(exp.root.resolve().name, train, valid)])
    return _kv(summary) + _img(png_bytes(figure, dpi=80), "training curves")


def _signature(record: dict, metric: str, mean: bool) -> str:
    """A record's signature of `metric`; a multilingual mean has none where its directions' differ
    (a Chinese target's tok:zh beside 13a), a direction's or a split's must (a KeyError: damaged)."""
    key = f"{metric}_signature"
    return record.get(key, "a signature per direction") if mean else record[key]


def _scores(exp: Experiment) -> str:
    from mt.apps.evaluate import stale

    cfg, digests = exp.load_config(), {}  # once, not per split
    rows = []
    for split in SPLITS:
        s = exp.read_json(exp.score_path(split))
        if not s:
            rows += _tokenized_rows(exp, split, cfg, digests)
            continue
        decode = s.get("decode", {})
        options = ", ".join(f"{k} {v}" for k, v in decode.items() if v is not None)
        how = _e(f"{s.get('checkpoint', '')}; {options}; {s.get('translate_seconds', '?')} s")
        if reasons := stale(exp, cfg, split, s, digests):  # the numbers as scored, said to be old
            how += f"<br><strong>stale: {_e('; '.join(reasons))}</strong>"
        # A multilingual experiment's record holds each direction, and their mean as its own figures.
        for name, d in [*(s.get("directions") or {}).items(), (None, s)]:
            label = (
                split
                if not s.get("directions")
                else f"{split} {name}"
                if name
                else f"{split} (mean of {len(s['directions'])})"
            )
            rows.append(
                [
                    _e(label),
                    f"{d['bleu']:.2f}",
                    f"{d['chrf']:.2f}",
                    f"{d.get('sentences', '')}",
                    f"<code>{_e(d.get('bleu_detail', ''))}</code><br>"
                    f"<code>BLEU {_e(_signature(d, 'bleu', mean=name is None and bool(s.get('directions'))))}</code>"
                    f"<br><code>chrF {_e(_signature(d, 'chrf', mean=name is None and bool(s.get('directions'))))}</code>",
                    how,
                ]
            )
        rows += _tokenized_rows(exp, split, cfg, digests)
    if not rows:
        raise MtError(f"no scores in {exp.score_path('test').parent}: run `mt evaluate --exp {exp.root}`")
    return _table(
        ["split", "BLEU", "chrF", "sentences", "details and sacrebleu signatures", "checkpoint; decoding; time"],
        rows,
        {1: "num", 2: "num", 3: "num"},
    )


def _tokenized_rows(exp: Experiment, split: str, cfg: ExperimentConfig, digests: dict) -> list[list[str]]:
    """The rows of `mt evaluate --tokenized`'s scores of a split (scores/SPLIT.tokenized.json): tokenized
    BLEU, as papers report it; no chrF; said to be stale as sacreBLEU's rows are."""
    from mt.apps.evaluate import stale

    s = exp.read_json(exp.score_path(f"{split}.tokenized"))
    if not isinstance(s, dict):
        return []
    decode = s.get("decode", {})
    options = ", ".join(f"{k} {v}" for k, v in decode.items() if v is not None)
    how = _e(f"{s.get('checkpoint', '')}; {options}; {s.get('translate_seconds', '?')} s")
    if reasons := stale(exp, cfg, f"{split}.tokenized", s, digests):
        how += f"<br><strong>stale: {_e('; '.join(reasons))}</strong>"
    rows = []
    for name, d in [*(s.get("directions") or {}).items(), (None, s)]:
        if "bleu_tokenized" not in d:
            continue
        label = f"{split}{f' {name}' if name else ''} (tokenized)"
        signature = f"<code>BLEU {_e(d.get('bleu_tokenized_signature', ''))}</code>"
        rows.append([_e(label), f"{d['bleu_tokenized']:.2f}", "-", f"{d.get('sentences', '')}", signature, how])
    return rows


def _is_student(exp: Experiment) -> bool:
    from mt.apps.distill import distill_dir

    return (distill_dir(exp) / "manifest.json").exists()


def _teachers(exp: Experiment) -> str:
    from mt.apps.distill import teacher_rows

    rows = [
        [
            _e(r["role"]),
            _e(r["experiment"]),
            _e(r["checkpoint"]),
            f"{r.get('bleu', '-')}"
            + (f"<br><strong>stale: {_e('; '.join(r['stale']))}</strong>" if r.get("stale") else "")
            + (f"<br>(scores of {_e(r['scores_of'])})" if "scores_of" in r else ""),
            f"{r.get('chrf', '-')}",
            f"{r.get('sent_per_s', '-')}",
            _e(r.get("decoding", "-")),
            f"{r.get('params_m', '-')}",
            f"{r.get('size_mb', '-')}",
        ]
        for r in teacher_rows(exp)
    ]
    return _table(
        [
            "",
            "experiment",
            "checkpoint",
            "test BLEU",
            "chrF",
            "sent/s (mt evaluate)",
            "decoding",
            "parameters (M)",
            "size (MB)",
        ],
        rows,
        {3: "num", 4: "num", 5: "num", 7: "num", 8: "num"},
    )


def sample_table(exp: Experiment, count: int, seed: int = 1) -> str:
    from mt.metrics import sacrebleu_bleu

    if count == 0:
        return _missing("no samples asked for (--samples 0)")
    cfg = exp.load_config()
    parts = []
    for split in SPLITS:
        for pair in cfg.data.pairs():  # a multilingual experiment's translations: one file per direction
            direction = "-".join(pair) if cfg.data.multilingual else None
            title = f"{split} {direction}" if direction else split
            path = exp.hyp_path(split, direction)
            if not path.exists():
                continue
            hyps = read_lines(path)
            try:
                sources, refs = load_split(cfg.data.sources(split, pair))
            except MtError as exc:
                parts.append(f"<h3>{_e(title)}</h3>" + _missing(f"references not available: {exc}"))
                continue
            if len(hyps) != len(refs):
                parts.append(
                    f"<h3>{_e(title)}</h3>"
                    + _missing(
                        f"{path} has {len(hyps)} lines but the {title} split has {len(refs)}: translate it again with "
                        f"`mt evaluate`"
                    )
                )
                continue
            picked = sorted(random.Random(seed).sample(range(len(hyps)), min(count, len(hyps))))
            bleu = sacrebleu_bleu(pair[1], effective_order=True)  # a Chinese target's tokenizer is zh's
            rows = [
                [
                    str(i + 1),
                    _e(sources[i]),
                    _e(refs[i]),
                    _e(hyps[i]),
                    f"{bleu.sentence_score(hyps[i], [refs[i]]).score:.1f}",
                ]
                for i in picked
            ]
            parts.append(
                f"<h3>{_e(title)}: {len(picked)} of {len(hyps):,} sentences, drawn at random (seed {seed})</h3>"
                + _table(
                    ["line", f"source ({pair[0]})", f"reference ({pair[1]})", "translation", "sentence BLEU"],
                    rows,
                    {3: "hyp", 4: "num"},
                    css="samples",
                )
            )
    if not parts:
        raise MtError(f"no translations in {exp.hyp_path('test').parent}: run `mt evaluate --exp {exp.root}`")
    return "\n".join(parts)


def _attention(exp: Experiment, sentence: str | None, checkpoint: str | None, translator=None) -> str:
    from mt.apps.report.attention_maps import attention_maps, figures
    from mt.apps.report.plot import png_bytes
    from mt.decoding.translator import Translator

    cfg = exp.load_config()
    if sentence is None:
        sentence = _first_source(exp, cfg)
    translator = translator or Translator.load(exp, cfg, checkpoint)
    # A multilingual model reads the target's tag first: the first direction's, as the samples use.
    maps = attention_maps(translator, sentence, tag=translator.directions.tag(*cfg.data.pairs()[0]))
    figs = figures(maps)
    layers = maps.cross.size(0)
    return (
        _kv(
            {
                "source": maps.source,
                "translation": maps.translation,
                "checkpoint": translator.checkpoint_path.name,
                "alignment": _word_pairs(maps),
            }
        )
        + f"<p class='sub'>Cross-attention of the forced decode of the translation: row = output token "
        f"(the step that produced it), column = source token. Alignment (as <code>mt translate "
        f"--alignments</code>, over words, from 0): argmax of the head-averaged last layer ({layers}), "
        f"end-of-sentence excluded.</p>"
        + _img(png_bytes(figs["alignment"]), "alignment heatmap")
        + "<h3>every decoder layer, heads averaged</h3>"
        + _img(png_bytes(figs["layers"]), "cross-attention per layer")
    )


def _word_pairs(maps) -> str:
    """The word alignment as `--alignments` writes it, then spelled out: "man–Mann, ..."."""
    src, tgt = maps.source.split(), maps.translation.split()
    pairs = [tuple(map(int, pair.split("-"))) for pair in maps.word_alignment.split()]
    spelled = ", ".join(
        f"{src[i]}–{tgt[j]}" for i, j in sorted(pairs, key=lambda p: p[::-1]) if i < len(src) and j < len(tgt)
    )
    return f"{maps.word_alignment}  ({spelled})"


def _first_source(exp: Experiment, cfg) -> str:
    for split in ("test", "valid"):
        try:
            sources, _ = load_split(cfg.data.sources(split))
        except MtError:
            continue
        line = next((s for s in sources if s.strip()), None)
        if line:
            return line
    raise MtError("no test or valid sentence to show; give one with --sentence")


# -- the page -------------------------------------------------------------------------------------
def build_report(
    exp: Experiment,
    samples: int = 10,
    sentence: str | None = None,
    checkpoint: str | None = None,
    translator=None,
    attention: str | None = None,
) -> str:
    """The report as one HTML string; `translator`: the attention example's, loaded already;
    `attention`: its section's body, made already."""
    cfg = exp.load_config()  # a one-line error when this is not an experiment
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    sections = [
        _section("Experiment", lambda: _overview(exp)),
        _section("Data", lambda: _data(exp)),
        _section("Training", lambda: _training(exp)),
        _section("Scores", lambda: _scores(exp)),
        *([_section("Student and teachers", lambda: _teachers(exp))] if _is_student(exp) else []),
        _section("Sample translations", lambda: sample_table(exp, samples)),
        _section("Attention", lambda: attention or _attention(exp, sentence, checkpoint, translator)),
    ]
    pairs = cfg.data.pairs()
    title = f"mt report: {exp.root.resolve().name} ({', '.join(f'{src} → {tgt}' for src, tgt in pairs)})"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n"
        f"<h1>{_e(title)}</h1><p class='sub'>{_e(exp.root.resolve())} · generated {_e(stamp)}</p>\n"
        + "\n".join(sections)
        + "\n</body></html>\n"
    )


def report(
    exp: Experiment,
    output: Path | None = None,
    force: bool = False,
    samples: int = 10,
    sentence: str | None = None,
    checkpoint: str | None = None,
) -> Path:
    """`mt report`: write the page (default EXP/report.html); an existing file only with `force`."""
    output = Path(output) if output is not None else exp.report_path
    check_output(output, force)
    if samples < 0:
        raise ConfigError(f"--samples {samples}: expected 0 or more")
    # Asked for by name: what cannot be used is an error, not a page whose attention says "not available".
    if sentence is not None and not sentence.strip():
        raise ConfigError(
            "--sentence is empty: give the text to translate, or leave it out for the first test sentence"
        )
    translator = None
    if checkpoint is not None:  # loaded here, once: missing, damaged, another model's or tokenizer's is refused
        from mt.decoding.translator import Translator

        translator = Translator.load(exp, exp.load_config(), checkpoint)
    attention = None
    if sentence is not None:  # its attention made here: one it cannot be made for is an error, not a note
        attention = _attention(exp, sentence, checkpoint, translator)
    write_text_atomic(output, build_report(exp, samples, sentence, checkpoint, translator, attention))
    return output
