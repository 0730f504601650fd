"""`mt export --format ctranslate2`: a trained checkpoint as a CTranslate2 model directory.

The weights go through the `ctranslate2` package's spec API (imported here only: the `export`
extra, `pip install -e '.[export]'`), one mt tensor to one CTranslate2 variable (`mt.apps.export.mapping`).
The mapping:
- post-norm (Sec. 3.1) or pre-norm with its final LayerNorms: `pre_norm` of the spec, LayerNorm
  gamma/beta per sub-layer, epsilon from the model;
- token embeddings times sqrt(d_model) (Sec. 3.4): `scale_embeddings` set to the model's own factor;
- the sinusoids (Sec. 3.5) as the position table mt adds, row for row: mt interleaves sin and cos
  (PE[:, 2i] = sin, PE[:, 2i+1] = cos), while CTranslate2's built-in ones put all sines before all
  cosines with tensor2tensor's frequencies, so its own would translate differently;
- self-attention: mt's fused [q; k; v] projection is CTranslate2's fused one as it is; cross-attention:
  the query projection, then the fused [k; v]; the output projection last; FFN: ReLU (Sec. 3.3);
- tied weights (Sec. 3.4) stay one matrix: `optimize()` aliases equal variables, and equal source and
  target vocabularies are saved once (shared_vocabulary.json);
- mt's special ids pad 0, unk 1, bos 2, eos 3 are the pieces at those ids, named in the config; the
  source gets </s> appended (add_source_eos), as `Translator` does.
The experiment's lexical shortlist, when it has one (`mt shortlist`), becomes vmap.txt, CTranslate2's
vocabulary map: a line of the frequent target pieces after an empty key, then each source piece and
its candidates, which `translate_batch(use_vmap=True)` reads as mt's `--shortlist` does.
The one addition: mt's search never emits <pad> or <s> (mt/search/steps.py); CTranslate2 has no such rule,
so the output projection gets a bias of -1e4 on those two tokens (0 elsewhere). Their probability is
then left out of the softmax normaliser, which mt's search keeps: CTranslate2's log-probabilities are
higher by -log(1 - p(pad) - p(bos)) a step (up to 0.13 a sentence on the tiny test model), which
changed no translation in the parity tests (docs/exporting.md).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from mt import log
from mt.apps.export.mapping import Exported, Weights, check_exportable, layer_norm_epsilon
from mt.config.schema import ExperimentConfig
from mt.data.shortlist import load_table, vmap_lines
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.model.layers import sinusoid_table
from mt.model.transformer import Transformer
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, language_tag

QUANTIZE = ("int8", "int8_float32", "float16")  # None: float32 weights
VMAP = "vmap.txt"  # CTranslate2's vocabulary map, read with translate_batch(use_vmap=True)
NEVER_EMITTED = -1e4  # bias of <pad> and <s>: exp(-1e4) is 0 in every precision CTranslate2 computes in


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise MtError(
            "--format ctranslate2 needs the ctranslate2 package: pip install 'ctranslate2>=4' "
            "(in mt's checkout: pip install -e '.[export]')"
        ) from None
    return ctranslate2


def _linear(spec, name: str, weights: Weights) -> None:
    spec.weight = weights.take(f"{name}.weight")  # (out, in), as torch stores it
    if f"{name}.bias" in weights.tensors:
        spec.bias = weights.take(f"{name}.bias")


def _norm(spec, name: str, weights: Weights) -> None:
    spec.gamma = weights.take(f"{name}.weight")
    spec.beta = weights.take(f"{name}.bias")


def _attention(spec, name: str, weights: Weights, self_attention: bool) -> None:
    if self_attention:  # rows [q; k; v], split into heads after the split, as CTranslate2 does
        _linear(spec.linear[0], f"{name}.qkv", weights)
    else:  # the query alone, then keys and values fused as rows [k; v]
        _linear(spec.linear[0], f"{name}.q", weights)
        _linear(spec.linear[1], f"{name}.kv", weights)
    _linear(spec.linear[-1], f"{name}.out", weights)


def build_spec(model: Transformer, src_vocab: list[str], tgt_vocab: list[str], positions: int = 0):
    """The validated CTranslate2 TransformerSpec of `model`; src_vocab/tgt_vocab: the piece of each id;
    `positions`: rows of the position table at least (mt's own, then what the formula gives after them)."""
    from ctranslate2.specs import TransformerSpec, common_spec

    pre_norm = model.encoder[0].attn_block.pre_norm
    spec = TransformerSpec.from_config(
        (len(model.encoder), len(model.decoder)),
        model.encoder[0].self_attn.n_heads,
        pre_norm=pre_norm,
        activation=common_spec.Activation.RELU,
    )
    weights = Weights(model)
    for side, embed in ((spec.encoder, model.src_embed), (spec.decoder, model.tgt_embed)):
        side.scale_embeddings = float(embed.scale)  # sqrt(d_model), Sec. 3.4
        side.position_encodings.encodings = _position_table(embed.positions, positions)  # row p: position p
    spec.encoder.embeddings[0].weight = weights.take("src_embed.tokens.weight")
    spec.decoder.embeddings.weight = weights.take("tgt_embed.tokens.weight")
    for i, layer in enumerate(spec.encoder.layer):
        _attention(layer.self_attention, f"encoder.{i}.self_attn", weights, self_attention=True)
        _norm(layer.self_attention.layer_norm, f"encoder.{i}.attn_block.norm", weights)
        _linear(layer.ffn.linear_0, f"encoder.{i}.ffn.w1", weights)
        _linear(layer.ffn.linear_1, f"encoder.{i}.ffn.w2", weights)
        _norm(layer.ffn.layer_norm, f"encoder.{i}.ffn_block.norm", weights)
    for i, layer in enumerate(spec.decoder.layer):
        _attention(layer.self_attention, f"decoder.{i}.self_attn", weights, self_attention=True)
        _norm(layer.self_attention.layer_norm, f"decoder.{i}.self_block.norm", weights)
        _attention(layer.attention, f"decoder.{i}.cross_attn", weights, self_attention=False)
        _norm(layer.attention.layer_norm, f"decoder.{i}.cross_block.norm", weights)
        _linear(layer.ffn.linear_0, f"decoder.{i}.ffn.w1", weights)
        _linear(layer.ffn.linear_1, f"decoder.{i}.ffn.w2", weights)
        _norm(layer.ffn.layer_norm, f"decoder.{i}.ffn_block.norm", weights)
    if pre_norm:  # pre-norm stacks end in a LayerNorm each; post-norm outputs are already normalised
        _norm(spec.encoder.layer_norm, "enc_norm", weights)
        _norm(spec.decoder.layer_norm, "dec_norm", weights)
    _linear(spec.decoder.projection, "output", weights)
    bias = np.zeros(spec.decoder.projection.weight.shape[0], dtype=np.float32)
    bias[[PAD_ID, BOS_ID]] = NEVER_EMITTED  # mt's search never emits these (module docstring)
    spec.decoder.projection.bias = bias
    if weights.left():
        raise MtError(f"the CTranslate2 export does not map {', '.join(weights.left())}; nothing written")
    _vocabularies(spec, src_vocab, tgt_vocab)
    spec.config.layer_norm_epsilon = layer_norm_epsilon(model, "CTranslate2")
    try:
        spec.validate()
    except ValueError as exc:
        raise MtError(f"CTranslate2 refused the exported spec: {' '.join(str(exc).split())}") from None
    return spec


def _position_table(ours: torch.Tensor, rows: int) -> np.ndarray:
    """mt's table, extended to `rows` with the rows of the same formula (checked against mt's own)."""
    ours = ours.detach().float().cpu()
    if rows <= len(ours):
        return ours.numpy().copy()
    table = sinusoid_table(rows, ours.shape[1])
    if not table[: len(ours)].allclose(ours, atol=1e-6):
        raise MtError("the model's position table is not mt's sinusoids: the export cannot extend it")
    return table.numpy()


def _vocabularies(spec, src_vocab: list[str], tgt_vocab: list[str]) -> None:
    """Pieces in id order; the special tokens are whatever pieces sit at mt's fixed ids."""
    for name, id_ in (("unk", UNK_ID), ("bos", BOS_ID), ("eos", EOS_ID)):
        if src_vocab[id_] != tgt_vocab[id_]:
            raise MtError(
                f"the {name} piece differs between the vocabularies ({src_vocab[id_]!r}, "
                f"{tgt_vocab[id_]!r}): CTranslate2 names one {name} token for both sides"
            )
    if len(set(src_vocab)) != len(src_vocab) or len(set(tgt_vocab)) != len(tgt_vocab):
        raise MtError("a vocabulary holds the same piece twice: CTranslate2 looks tokens up by piece")
    spec.register_source_vocabulary(list(src_vocab))
    spec.register_target_vocabulary(list(tgt_vocab))
    spec.config.unk_token = tgt_vocab[UNK_ID]
    spec.config.bos_token = tgt_vocab[BOS_ID]
    spec.config.eos_token = tgt_vocab[EOS_ID]
    spec.config.decoder_start_token = tgt_vocab[BOS_ID]  # the decoder starts from BOS at position 0
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True  # mt's sources end in EOS (Translator._pad)


def _pieces(tokenizer: Tokenizer) -> list[str]:
    return tokenizer.pieces(list(range(tokenizer.vocab_size)))


def check_options(quantize: str | None, license: str | None) -> None:
    if quantize is not None and quantize not in QUANTIZE:
        raise ConfigError(f"--quantize {quantize!r}: expected {', '.join(QUANTIZE)} (or none for float32)")
    if license is not None:
        raise ConfigError("--license is for --format huggingface (the model card); a CTranslate2 model has none")
    _ctranslate2()


def check_model(model_config: dict[str, Any], where: str) -> None:
    check_exportable(model_config, where, "CTranslate2")


def writer(source: Exported, quantize: str | None, license: str | None = None) -> Callable[[Path], None]:
    """What `mt export --format ctranslate2` writes: model.bin and its vocabularies, the SentencePiece
    model(s), and README.txt."""
    spec = build_spec(source.model, _pieces(source.src_tok), _pieces(source.tgt_tok))
    spec.optimize(quantization=quantize)
    spm_files = (
        {"spm.model": source.src_tok}
        if source.joint
        else {"spm.src.model": source.src_tok, "spm.tgt.model": source.tgt_tok}
    )

    vmap = vocabulary_map(source)

    def write(directory: Path) -> None:
        spec.save(str(directory))
        for name, tokenizer in spm_files.items():
            (directory / name).write_bytes(tokenizer.proto)
        if vmap is not None:
            (directory / VMAP).write_text(vmap, encoding="utf-8")
        (directory / "README.txt").write_text(
            readme(
                source.exp,
                source.cfg,
                source.path,
                source.state,
                quantize,
                list(spm_files),
                source.model.max_positions,
                vmap is not None,
            ),
            encoding="utf-8",
        )

    return write


def vocabulary_map(source: Exported) -> str | None:
    """The experiment's lexical shortlist (mt.data.shortlist) as CTranslate2's vocabulary map, when it
    has one built with these tokenizers (else None, with a warning for one built with others)."""
    exp = source.exp
    if not exp.shortlist_path.exists():
        return None
    table = load_table(exp)
    if table.meta.get("tokenizer_sha256") != {"src": source.src_tok.sha256, "tgt": source.tgt_tok.sha256}:
        log.warn(f"{exp.shortlist_path}: built with another tokenizer; no {VMAP} exported (`mt shortlist --force`)")
        return None
    return "".join(vmap_lines(table, _pieces(source.src_tok), _pieces(source.tgt_tok)))


def readme(
    exp: Experiment,
    cfg: ExperimentConfig,
    path: Path,
    state: dict,
    quantize: str | None,
    spm_files: list[str],
    max_positions: int,
    vmap: bool = False,
) -> str:
    """README.txt: where the model came from, how to run it, and the settings that match `mt translate`."""
    d = cfg.decode
    src_spm, tgt_spm = spm_files[0], spm_files[-1]
    penalty_note = {
        "length": f"mt's decode.length_penalty is length: length_penalty={d.alpha} is the same penalty.",
        "none": "mt's decode.length_penalty is none: length_penalty=0 is the same.",
        "gnmt": (
            f"mt's decode.length_penalty is gnmt ((5+|Y|)/6)^alpha, which CTranslate2 does not have: "
            f"length_penalty={d.alpha} is |Y|^alpha, as `mt translate --length-penalty length`."
        ),
    }[d.length_penalty]
    alpha = 0 if d.length_penalty == "none" else d.alpha
    languages, encode, tags = _languages(cfg, src_spm, tgt_spm)
    vmap_note = (
        f"\n{VMAP} is mt's lexical shortlist (`mt translate --shortlist`): with use_vmap=True in\n"
        "translate_batch, each batch's decoder scores only its source tokens' likely translations and the\n"
        "frequent words: faster, approximate (docs/translating.md in mt).\n"
    )
    stop_note = (
        "patience=1 (the default) is mt's decode.stop early: stop once beam_size hypotheses have finished."
        if d.stop == "early"
        else "mt's decode.stop is exact, which CTranslate2 does not "
        "have: patience=1 (the default) is `mt translate --stop early`."
    )
    return f"""CTranslate2 model exported by `mt export` on {datetime.date.today().isoformat()}
experiment: {exp.root}
checkpoint: {path} (step {state.get("step", "?")})
weights:    {quantize or "float32"}
{languages}

Run it from this directory (pip install ctranslate2 sentencepiece):

    import ctranslate2, sentencepiece as spm
    src_sp = spm.SentencePieceProcessor(model_file="{src_spm}")
    tgt_sp = spm.SentencePieceProcessor(model_file="{tgt_spm}")
    translator = ctranslate2.Translator(".", device="cpu")
    lines = ["..."]
    {encode}
    limit = min({max_positions - 1}, max(int({d.max_len_a:g} * len(p) + {d.max_len_b}) for p in pieces))
    results = translator.translate_batch(
        pieces, beam_size={d.beam}, length_penalty={alpha}, return_end_token=True,
        min_decoding_length=0, max_decoding_length=limit, max_input_length={max_positions})
    print([tgt_sp.decode(r.hypotheses[0]).strip() for r in results])
{vmap_note if vmap else ""}
The model appends </s> to each source itself (config.json: add_source_eos); give it the pieces only.
{tags}
To translate as `mt translate` does ({"greedy" if d.beam == 1 else f"beam {d.beam}"}, docs/exporting.md in mt):
- {penalty_note}
- return_end_token=True: returns the </s> (it decodes to nothing), which tells a translation that
  ended from one cut at max_decoding_length. mt counts </s> in |Y|; so does CTranslate2 4.8.5, with
  or without this flag (its scores are the same either way).
- min_decoding_length=0: CTranslate2's default 1 forbids an empty translation; mt allows one.
- max_decoding_length: mt allows int({d.max_len_a:g} * source pieces + {d.max_len_b}) tokens per sentence
  (</s> included, at most {max_positions - 1}), then forces </s>; CTranslate2 takes one number per call
  (`limit` above: the batch's longest) and ends hypotheses there without </s>. Translations that
  end before the limit are the same; to match mt's limit too, translate equally long sources together.
- {stop_note}
- max_input_length={max_positions}: mt cuts sources to {max_positions - 1} pieces + </s>; the position table ends there.
"""


def _languages(cfg: ExperimentConfig, src_spm: str, tgt_spm: str) -> tuple[str, str, str]:
    """The README's lines on the languages, its encoding line, and a multilingual model's note."""
    languages, encode, tags = (
        f"source:     {cfg.data.src_lang}, SentencePiece model {src_spm}\ntarget:     "
        f"{cfg.data.tgt_lang}, SentencePiece model {tgt_spm}",
        "pieces = src_sp.encode(lines, out_type=str)",
        "",
    )
    if cfg.data.multilingual:  # one model, several directions: the first source piece names the target
        first = cfg.data.pairs()[0][1]
        languages = (
            f"directions: {', '.join(cfg.data.directions)} (trained), SentencePiece model {src_spm}\n"
            f"target language tokens (the first source piece asks for the target): "
            + ", ".join(f"{language_tag(lang)} {lang}" for lang in cfg.data.languages())
        )
        encode = f'pieces = [["{language_tag(first)}"] + p for p in src_sp.encode(lines, out_type=str)]  # into {first}'
        tags = (
            "\nA multilingual model: put the target language's token first in every source, as above; "
            "a direction\nnot among those trained is zero-shot (it translates, less well).\n"
        )
    return languages, encode, tags
