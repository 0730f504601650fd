"""README.md of a Hugging Face export: the model card the Hub shows. Its YAML header holds what the
Hub indexes (languages, licence, task, the test scores); the body says how to use the model, how to
get mt's translations from it, what it was trained on and how, and how it scored."""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from mt import __version__
from mt.apps.export.exported import Exported
from mt.config.schema import ModelConfig
from mt.model.transformer import count_parameters
from mt.training.schedule import peak_lr
from mt.training.token_budget import lr_scaling


def model_card(source: Exported, license: str, gap: float) -> str:
    cfg, exp = source.cfg, source.exp
    scores = {
        split: exp.read_json(exp.score_path(split)) for split in ("test", "valid") if exp.score_path(split).is_file()
    }
    for split, record in scores.items():  # scored before the file was written again (trained on): other weights
        if exp.score_path(split).stat().st_mtime <= source.path.stat().st_mtime:
            record["checkpoint"] = f"{record.get('checkpoint', '?')} before its last save"
    header = yaml.safe_dump(_metadata(source, license, scores.get("test")), sort_keys=False, allow_unicode=True)
    directions = ", ".join(cfg.data.directions) if cfg.data.multilingual else f"{cfg.data.src_lang}-{cfg.data.tgt_lang}"
    return f"""---
{header}---

# {exp.root.name}: {directions}

A Transformer ("Attention Is All You Need", Vaswani et al., 2017) trained with mt {__version__}
and exported with `mt export --format huggingface` on
{datetime.date.today().isoformat()}, from checkpoint `{source.path.name}` (update {source.state.get("step", "?")}).
It is a `MarianMTModel`: transformers, Optimum (ONNX) and the Hub's widgets run it as they run the
OPUS-MT models. The export was checked before it was written: on a test batch its log-probabilities
differ from mt's by at most {gap:.1e}.

## Use

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("PATH_OR_HUB_NAME")
model = AutoModelForSeq2SeqLM.from_pretrained("PATH_OR_HUB_NAME")
batch = tokenizer([{_example(cfg)!r}], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```
{_languages(cfg)}
{_decoding(cfg, source.model.max_positions)}
## Results

{_results(scores, source)}

## Training

{_training(source)}

## ONNX

```sh
pip install 'optimum-onnx[onnxruntime]'
optimum-cli export onnx --model PATH --task text2text-generation-with-past onnx/
```

```python
from optimum.onnxruntime import ORTModelForSeq2SeqLM
model = ORTModelForSeq2SeqLM.from_pretrained("onnx/")  # then tokenizer and generate() as above
```

## Licence

`{license}`{" (not given to `mt export --license`): the licences of the training data decide" if license == "unknown" else ""}.
"""


def _metadata(source: Exported, license: str, test: dict | None) -> dict[str, Any]:
    cfg = source.cfg
    languages = cfg.data.languages() if cfg.data.multilingual else [cfg.data.src_lang, cfg.data.tgt_lang]
    meta: dict[str, Any] = {
        "language": languages,
        "license": license,
        "library_name": "transformers",
        "pipeline_tag": "translation",
        "tags": ["translation", "marian", "mt"],
    }
    if test is not None and own_scores(test, source):  # the Hub indexes these: the exported model's own
        directions = test.get("directions") or {f"{cfg.data.src_lang}-{cfg.data.tgt_lang}": test}
        meta["model-index"] = [
            {
                "name": source.exp.root.name,
                "results": [
                    {
                        "task": {"type": "translation", "name": f"Translation {direction}"},
                        "dataset": {
                            "type": "custom",
                            "name": ", ".join(map(public_spec, cfg.data.test)) or "test",
                            "split": "test",
                        },
                        "metrics": [
                            {"type": "bleu", "value": round(s["bleu"], 2), "name": "BLEU (sacreBLEU)"},
                            {"type": "chrf", "value": round(s["chrf"], 2), "name": "chrF"},
                        ],
                    }
                    for direction, s in directions.items()
                ],
            }
        ]
    return meta


def own_scores(record: dict, source: Exported) -> bool:
    """Whether scores are the exported model's: its checkpoint (not an earlier save), decoded in float32
    with the search the export writes (generation_config.json: decode.*), not int8, bf16 or another beam."""
    from mt.apps.evaluate import checkpoint_name, decode_record
    from mt.decoding.options import DecodeOptions

    # fp32, no quantization: the weights as exported, with the search generation_config.json holds (|Y|^alpha
    # for GNMT's, which transformers lacks: `mt evaluate --length-penalty length`), the whole vocabulary
    gnmt = source.cfg.decode.length_penalty == "gnmt" and source.cfg.decode.beam > 1
    exported_search = DecodeOptions(length_penalty="length" if gnmt else None, shortlist=False, engine="mt")
    wanted = decode_record(exported_search.resolved(source.cfg.decode))
    decoded = record.get("decode") or {}
    exported = checkpoint_name(source.exp, source.path)  # another run's best.pt is not this one's
    if decoded.get("length_penalty") == "gnmt" and decoded.get("beam", 1) > 1:
        return False  # transformers has no GNMT penalty: its generate() ranks the beam otherwise (below)
    # a record leaves out what was off (no_repeat_ngram 0, no shortlist, mt's own search): compared as
    # such, so that a score of --shortlist or the CTranslate2 engine is not taken for the model's own
    off = {"no_repeat_ngram": 0, "shortlist": False, "engine": "mt"}
    wanted, decoded = {**off, **wanted}, {**off, **decoded}
    if decoded["shortlist"] or record.get("engine", "mt") != "mt":  # the engine that ran, not the one asked
        return False
    return record.get("checkpoint") == exported and all(decoded.get(k) == v for k, v in wanted.items())


def public_spec(spec: str) -> str:
    """A corpus as the card names it: each local file by its name alone (`files:/home/me/data/train` is
    `files:train`): the card is published, and where the files lay on this machine is no one's business."""
    from mt.config.sources import by_file_names

    return by_file_names(spec)


def public_config(text: str, cfg) -> str:
    """config.yaml as the card shows it: its corpora's local paths by their names alone (public_spec)."""
    for spec in dict.fromkeys([*cfg.data.train, *cfg.data.valid, *cfg.data.test]):
        text = text.replace(spec, public_spec(spec))
    return text


def _example(cfg) -> str:
    if cfg.data.multilingual:
        return f">>{cfg.data.pairs()[0][1]}<< A sentence to translate."
    return "A sentence to translate."


def _languages(cfg) -> str:
    if not cfg.data.multilingual:
        return ""
    targets = dict.fromkeys(tgt for _, tgt in cfg.data.pairs())  # a language it only read is no target
    rows = "\n".join(f"| `>>{lang}<<` | {lang} |" for lang in targets)
    return f"""
One model for several directions, trained on {", ".join(cfg.data.directions)}. Start every source with
the token of the language to translate into (the tokenizer reads it and gives its id); a direction
not trained is zero-shot: it translates, less well.

| token | target language |
|---|---|
{rows}
"""


def _decoding(cfg, max_positions: int) -> str:
    d = cfg.decode
    shortlist = (
        "\n- mt decodes this experiment with its lexical shortlist (`decode.shortlist`, an approximate search);"
        " transformers scores the whole vocabulary, as `mt translate --no-shortlist`."
        if d.shortlist
        else ""
    )
    penalty = {
        "length": "mt's length penalty is |Y|^alpha, as transformers' `length_penalty`.",
        "none": "mt uses no length penalty: `length_penalty=0`.",
        "gnmt": (
            f"mt's length penalty is ((5+|Y|)/6)^{d.alpha} (GNMT), which transformers does not have: "
            f"`length_penalty={d.alpha}` is |Y|^{d.alpha}, as `mt translate --length-penalty length`."
        ),
    }[d.length_penalty]
    stopping = "True" if d.stop == "early" else "False"
    # greedy search has neither setting (transformers refuses them beside num_beams=1)
    search, penalty = (
        ("greedy (`num_beams=1`)", "")
        if d.beam == 1
        else (f"beam {d.beam} (`num_beams={d.beam}`), `early_stopping={stopping}`", f"\n- {penalty}")
    )
    if d.beam > 1 and d.stop == "exact":
        penalty += (
            "\n- mt's exact stop (`decode.stop: exact`, on until no hypothesis can improve) has no equivalent:"
            ' `early_stopping=False` is the nearest ("never" searches on to `max_length` at every call).'
        )
    repeat = (
        f"\n- mt's repetition guard (no {d.no_repeat_ngram}-gram twice) is `no_repeat_ngram_size={d.no_repeat_ngram}`;"
        " transformers bans the n-grams after normalising the scores, mt before, so a beam search may"
        " still differ where the guard acts."
        if d.no_repeat_ngram
        else ""
    )
    return f"""
## Translating as mt does

`generation_config.json` holds mt's search: {search}, `<pad>` and `<s>` never
generated (`suppress_tokens`), `</s>` forced at the length limit; `config.json`'s
`task_specific_params` give the translation pipeline the same beam (its own default is 4).{penalty}{shortlist}
- It translates what it is given as one segment. `mt translate` cuts each line into sentences
  (a line of three sentences given whole comes back as one, and may lose some), leaves blank lines
  blank and copies a text without letters (`12:45`): do the same before `generate()`, one sentence
  a segment.
- mt stops a sentence at int({d.max_len_a:g} * source tokens + {d.max_len_b}) tokens (</s> included,
  at most {max_positions - 1}); `generate()` takes one limit per call: `max_length={max_positions}` by default,
  or pass `max_new_tokens`. Greedy translations that end before the limit are mt's, token for token.
  At the limit transformers forces </s> with a log-probability of 0 where mt keeps the model's, so a
  beam search that reaches the limit can prefer a hypothesis cut there that mt would not.
- `skip_special_tokens=True` also drops `<unk>`, which mt prints as ` ⁇ ` (rare with byte fallback).
- Sources longer than {max_positions - 1} tokens: mt cuts them to fit the positions; cut them with
  `truncation=True`.{repeat}
"""


def _results(scores: dict[str, dict], source: Exported) -> str:
    if not scores:
        return "Not evaluated before the export (`mt evaluate` writes the scores this card shows)."
    lines = ["| split | direction | BLEU | chrF | checkpoint | search |", "|---|---|---|---|---|---|"]
    signatures = {}
    for split, record in scores.items():
        directions = record.get("directions") or {"": record}
        d = record.get("decode", {})
        search = f"beam {d.get('beam', '?')}, alpha {d.get('alpha', '?')} ({d.get('length_penalty', '?')})"
        search += "".join(f", {v}" for v in (d.get("quantize"), d.get("precision")) if v not in (None, "fp32"))
        for direction, s in directions.items():
            lines.append(
                f"| {split} | {direction or '-'} | {s['bleu']:.2f} | {s['chrf']:.2f} | "
                f"{record.get('checkpoint', '?')} | {search} |"
            )
            signatures.update({s[k]: None for k in ("bleu_signature", "chrf_signature") if k in s})
    notes = [f"sacreBLEU signatures: {', '.join(f'`{sig}`' for sig in signatures)}."]
    from mt.apps.evaluate import checkpoint_name

    exported = checkpoint_name(source.exp, source.path)
    if any(record.get("checkpoint") != exported for record in scores.values()):
        notes.append(f"Scores of another checkpoint than the exported `{exported}` are marked by their checkpoint.")
    if any(record.get("checkpoint") == exported and not own_scores(record, source) for record in scores.values()):
        notes.append(
            "Scores decoded otherwise than the exported float32 model with its search "
            "(`generation_config.json`), or with the GNMT length penalty transformers does not have, "
            "are not its own: the header the Hub indexes leaves them out."
        )
    return "\n".join(lines) + "\n\n" + " ".join(notes)


def _training(source: Exported) -> str:
    cfg, model = source.cfg, source.model
    stats_path = source.exp.data_stats_path
    pairs = ""
    if stats_path.is_file():
        splits = source.exp.read_json(stats_path).get("splits", {})
        pairs = ", ".join(f"{split} {s['pairs_kept']:,} pairs" for split, s in splits.items() if "pairs_kept" in s)
    # The model as the checkpoint holds it (a checkpoint given from another experiment is not cfg's)
    m, t = ModelConfig(**source.state["model_config"]) if source.state.get("model_config") else cfg.model, cfg.train
    outside = (
        f"\n- The checkpoint, {source.path.name}, comes from outside this experiment: the data and training "
        "lines are the experiment's it was exported from, not necessarily the ones it was trained with."
        if source.path.resolve().parent != source.exp.checkpoints_dir.resolve()
        else ""
    )
    hours = source.state.get("elapsed")
    budget = source.state.get("max_tokens") or t.max_tokens  # auto's choice, where the checkpoint has it
    lr_factor, warmup = (
        lr_scaling(t, budget, int(source.state.get("world_size", 1)))
        if isinstance(budget, int)
        else (1.0, t.warmup_steps)
    )
    peak = peak_lr(t.lr_peak, t.lr_scale, t.warmup_steps, m.d_model) * lr_factor
    return f"""- Data: {", ".join(f"`{public_spec(spec)}`" for spec in cfg.data.train)}{f" ({pairs}, after cleaning)" if pairs else ""};
  SentencePiece {cfg.tokenizer.model_type}, {"one joint vocabulary" if cfg.tokenizer.joint else "two vocabularies"} of {cfg.tokenizer.vocab_size:,}.
- Model: {m.enc_layers}+{m.dec_layers} layers, d_model {m.d_model}, FFN {m.d_ff}, {m.n_heads} heads, {"pre-norm" if m.pre_norm else "post-norm"},
  {"tied" if m.tie_embeddings else "untied"} embeddings, {count_parameters(model) / 1e6:.1f}M parameters.
- Training: {source.state.get("step", "?")} updates{f" in {hours / 3600:.2f} h" if hours else ""}, batches of {f"{budget:,}" if isinstance(budget, int) else budget} tokens,
  peak learning rate {peak:.3g}{"" if t.lr_peak is not None else " (the paper's schedule)"} after {warmup:,} warm-up updates, label smoothing {t.label_smoothing:g},
  dropout {m.dropout:g}, precision {t.precision}.{outside}

<details><summary>The experiment's config.yaml</summary>

```yaml
{public_config(source.exp.config_path.read_text(encoding="utf-8").strip(), cfg)}
```
</details>"""
