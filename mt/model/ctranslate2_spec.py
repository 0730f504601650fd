"""The model as CTranslate2's TransformerSpec: what `mt export --format ctranslate2` writes and what
the CTranslate2 engine (mt.decoding.engine) decodes with.

The weights go through the `ctranslate2` package's spec API (the `export` extra), one mt tensor to
one CTranslate2 variable (`mt.model.mapping`).
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
The one addition: mt's search never emits <pad> or <s> (mt/search/steps.py); CTranslate2 has no such rule,
so the output projection gets a bias of -1e4 on those two tokens (0 elsewhere). Their probability is
then left out of the softmax normaliser, which mt's search keeps: CTranslate2's log-probabilities are
higher by -log(1 - p(pad) - p(bos)) a step (up to 0.13 a sentence on the tiny test model), which
changed no translation in the parity tests (docs/exporting.md).
"""

from __future__ import annotations

import numpy as np
import torch

from mt.errors import MtError
from mt.model.layers import sinusoid_table
from mt.model.mapping import Weights, layer_norm_epsilon
from mt.model.transformer import Transformer
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

NEVER_EMITTED = -1e4  # bias of <pad> and <s>: exp(-1e4) is 0 in every precision CTranslate2 computes in


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
