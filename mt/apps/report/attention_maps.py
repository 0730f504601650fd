"""Seeing inside: attention weights of a translation as heatmaps, and the raw weights as JSON.

The weights come from a forced decode: once a translation is found (beam search, `mt.decoding.translator`),
one teacher-forced pass of the decoder over its tokens, with `model.capture_attention` on, gives
every layer's weights. The decoder's input is BOS y1 .. yn, so row t of a cross-attention
(encoder-decoder, Sec. 3.2.3) matrix is the attention the decoder paid to the source while it
produced output token t (y1 .. yn, then EOS); columns are source tokens, EOS last. With the cache
the beam search computes the same weights, so they are the ones the search used.

The hard alignment drawn and written here is `mt.decoding.alignment`'s, the one `mt translate --alignments`
prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from mt import log
from mt.atomic_files import write_bytes_atomic, write_json_atomic
from mt.decoding.alignment import (
    hard_alignment,
    members,
    output_word_index,
    source_word_index,
    target_input,
    word_alignment,
)
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.model.attention import capture_attention
from mt.model.transformer import Transformer
from mt.tokenizer import PAD_ID

EOS_LABEL = "</s>"


@dataclass
class AttentionMaps:
    """The attention weights of one sentence pair; each row of a matrix sums to 1."""

    source: str
    translation: str
    src_tokens: list[str]  # subword pieces, EOS_LABEL last: the columns
    tgt_tokens: list[str]  # output pieces, EOS_LABEL last: the rows (the token produced at that step)
    cross: torch.Tensor  # (dec_layers, heads, tgt_len, src_len)
    encoder: torch.Tensor  # (enc_layers, heads, src_len, src_len)
    src_words: list[int] = field(default_factory=list)  # word index of each source token (EOS: none)
    tgt_words: list[int] = field(default_factory=list)  # word index of each output token (EOS: none)
    alignment: list[tuple[int, int]] = field(default_factory=list)  # (src token, tgt token) pairs
    layer: int = -1  # the decoder layer the alignment comes from, 0-based

    @property
    def word_alignment(self) -> str:
        """The alignment over whitespace-separated words, in Pharaoh format (as `--alignments`)."""
        return word_alignment(self.alignment, self.src_words, self.tgt_words)

    def head_average(self, layer: int) -> torch.Tensor:
        """Cross-attention of one decoder layer averaged over heads, (tgt_len, src_len)."""
        return self.cross[layer].mean(dim=0)

    def to_json(self, encoder: bool = False, digits: int = 5) -> dict:
        """Plain data: tokens, weights [layer][head][tgt][src], the alignment; rounded to `digits`."""
        data = {
            "source": self.source,
            "translation": self.translation,
            "src_tokens": self.src_tokens,
            "tgt_tokens": self.tgt_tokens,
            "rows": "output tokens: row t is the attention while producing tgt_tokens[t]",
            "cross_attention": _rounded(self.cross, digits),
            "alignment_layer": self.layer % self.cross.size(0) + 1,
            "alignment": [[i, j] for i, j in self.alignment],  # subword tokens
            "alignment_words": self.word_alignment,  # Pharaoh format over whitespace-separated words
        }
        if encoder:
            data["encoder_self_attention"] = _rounded(self.encoder, digits)
        return data


def _rounded(weights: torch.Tensor, digits: int) -> list:
    return torch.round(weights.float(), decimals=digits).tolist()


@torch.no_grad()
def forced_attention(
    model: Transformer, src_ids: torch.Tensor, tokens: list[list[int]]
) -> list[dict[str, torch.Tensor]]:
    """Every layer's weights for each row of src_ids (rows, src_len; EOS-terminated, right-padded)
    decoding `tokens` (generated ids, no EOS): "cross" (dec_layers, heads, tgt, src) and "encoder"
    (enc_layers, heads, src, src), with padding cut off."""
    model.eval()
    cross_modules = [layer.cross_attn for layer in model.decoder]
    encoder_modules = [layer.self_attn for layer in model.encoder]
    with capture_attention(cross_modules + encoder_modules):
        memory, src_mask = model.encode(src_ids)
        model.decode_hidden(target_input(tokens, src_ids.device), memory, src_mask)
        cross = torch.stack([m.weights for m in cross_modules], dim=1)  # (rows, layers, heads, tgt, src)
        encoder = torch.stack([m.weights for m in encoder_modules], dim=1)
    src_lens = (src_ids != PAD_ID).sum(dim=1).tolist()
    return [
        {
            "cross": cross[row, :, :, : len(ids) + 1, : src_lens[row]].cpu(),
            "encoder": encoder[row, :, :, : src_lens[row], : src_lens[row]].cpu(),
        }
        for row, ids in enumerate(tokens)
    ]


def attention_maps(
    translator, sentence: str, target: str | None = None, layer: int = -1, tag: int | None = None, options=None
) -> AttentionMaps:
    """Translate `sentence` with the translator's search (or take `target` as the translation) and
    return the weights of the forced decode; an ensemble shows its first model. `tag`: a multilingual
    model's target token (`Translator.directions.tag`), which the maps show as the first source piece.
    `options`: the search's DecodeOptions (the experiment's decode.* where None)."""
    if not sentence.strip():
        raise MtError("the sentence is empty: give the text to translate")
    if target is not None and not target.strip():
        raise MtError("--target is empty: give a translation, or leave it out to use the model's")
    layer = layer % len(members(translator.model)[0].decoder)
    for text, name in ((sentence, "the sentence"), (target, "--target")):
        try:  # from the command line, a byte that is not UTF-8 arrives as a lone surrogate
            (text or "").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MtError(f"{name}: not valid Unicode (character {exc.start + 1}; is the text UTF-8?)") from None
    src_ids, src = translator.encode_line(sentence, tag)
    if target is None:
        tokens = translator.best_hypothesis(src_ids, options).tokens
    else:
        tokens = translator.tgt_tok.encode([target])[0]
        if len(tokens) > translator.max_src_tokens:  # the maps would show a shorter text as the one given
            raise MtError(
                f"--target: {len(tokens)} tokens; this model writes at most {translator.max_src_tokens} "
                "(model.max_positions - 1): give a shorter translation"
            )
    model = members(translator.model)[0]
    weights = forced_attention(model, src_ids, [tokens])[0]
    maps = AttentionMaps(
        source=sentence,
        translation=translator.tgt_tok.decode([tokens])[0],
        src_tokens=translator.src_tok.pieces(src) + [EOS_LABEL],
        tgt_tokens=translator.tgt_tok.pieces(tokens) + [EOS_LABEL],
        cross=weights["cross"],
        encoder=weights["encoder"],
        src_words=source_word_index(translator.src_tok.pieces(src)),
        tgt_words=output_word_index(translator.tgt_tok, tokens),
        layer=layer,
    )
    maps.alignment = hard_alignment(maps.head_average(layer))
    return maps


FORMATS = ("png", "json", "both")


def attention(
    translator,
    sentence: str,
    out_dir: Path,
    layer: int = -1,
    encoder: bool = False,
    fmt: str = "png",
    target: str | None = None,
    force: bool = False,
    tag: int | None = None,
    options=None,
) -> tuple[AttentionMaps, list[Path]]:
    """`mt attention`: translate one sentence and write heatmaps of its attention (and/or the raw
    weights as JSON) into `out_dir`; existing files are replaced only with `force`. `tag`: a
    multilingual model's target token (`Translator.directions.tag`); `options`: the search's DecodeOptions."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(FORMATS)}")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():  # else "File exists" from the first write
        raise MtError(f"--output {out_dir}: not a directory; mt attention writes its files into one")
    layer = layer % len(members(translator.model)[0].decoder)
    files = Experiment.attention_files(Path(out_dir), layer, encoder, fmt)
    # any of mt attention's files, of any layer or format: one sentence's beside another's is no set
    earlier = sorted(
        {
            *Path(out_dir).glob("cross-attention-layer*-heads.png"),
            *(path for path in Experiment.attention_files(Path(out_dir), 0, True, "both").values() if path.exists()),
        }
    )
    if earlier and not force:
        raise MtError(f"{earlier[0]}: exists; choose another --output or add --force")
    left = [path.name for path in earlier if path not in files.values()]
    if left:  # replaced with --force are the files this call writes; the others are not this sentence's
        log.warn(f"{out_dir} still holds {', '.join(left)} of an earlier call, not of this sentence")
    maps = attention_maps(translator, sentence, target, layer, tag, options)
    if "json" in files:
        write_json_atomic(files["json"], maps.to_json(encoder))
    if "layers" in files:
        from mt.apps.report.plot import png_bytes

        for kind, fig in figures(maps, encoder).items():
            write_bytes_atomic(files[kind], png_bytes(fig))
    return maps, list(files.values())


def figures(maps: AttentionMaps, encoder: bool = False) -> dict:
    """The heatmaps of `mt attention`, by kind: "layers", "heads", "alignment" (and "encoder")."""
    from mt.apps.report.plot import heatmaps

    dec_layers, heads = maps.cross.shape[:2]
    layer = maps.layer % dec_layers
    pair = f"{maps.source}  →  {maps.translation}"
    figs = {
        "layers": heatmaps(
            [maps.head_average(n) for n in range(dec_layers)],
            maps.tgt_tokens,
            maps.src_tokens,
            [f"layer {n + 1}, mean of {heads} heads" for n in range(dec_layers)],
            f"cross-attention per decoder layer: {pair}",
        ),
        "heads": heatmaps(
            list(maps.cross[layer]),
            maps.tgt_tokens,
            maps.src_tokens,
            [f"layer {layer + 1}, head {h + 1}" for h in range(heads)],
            f"cross-attention heads of decoder layer {layer + 1}: {pair}",
        ),
        "alignment": heatmaps(
            [maps.head_average(layer)],
            maps.tgt_tokens,
            maps.src_tokens,
            [f"layer {layer + 1}, mean of {heads} heads; □ = alignment (argmax)"],
            pair,
            marks=[(i, j) for i, j in maps.alignment],
        ),
    }
    if encoder:
        enc_layers = maps.encoder.size(0)
        figs["encoder"] = heatmaps(
            [maps.encoder[n].mean(dim=0) for n in range(enc_layers)],
            maps.src_tokens,
            maps.src_tokens,
            [f"layer {n + 1}, mean of {heads} heads" for n in range(enc_layers)],
            f"encoder self-attention: {maps.source}",
            row_axis="source (query)",
            col_axis="source (key)",
        )
    return figs
