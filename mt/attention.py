"""Seeing inside: attention weights of a translation, hard word alignments, raw weights as JSON.

The weights come from a forced decode: once a translation is found (beam search, `mt.translate`),
one teacher-forced pass of the decoder over its tokens, with `model.capture_attention` on, gives
every layer's weights. The decoder's input is BOS y1 .. yn, so row t of a cross-attention
(encoder-decoder, Sec. 3.2.3) matrix is the attention the decoder paid to the source while it
produced output token t (y1 .. yn, then EOS); columns are source tokens, EOS last. With the cache
the beam search computes the same weights, so they are the ones the search used.

Hard alignment: each output token is aligned to the source token its chosen layer's head-averaged
cross-attention weighs most (EOS excluded on both sides), as fairseq's `--print-alignment` does.
`mt translate --alignments` reports it over whitespace-separated words, in the Pharaoh format
`i-j` (source word i, target word j, from 0): a word pair is aligned if any of their subword tokens
are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from mt.errors import ConfigError, MtError
from mt.experiment import write_bytes_atomic, write_json_atomic
from mt.model import Transformer, capture_attention
from mt.search import Hypothesis
from mt.tokenizer import BOS_ID, PAD_ID, Tokenizer

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


def members(model) -> list[Transformer]:
    """The Transformer(s) behind a model: an Ensemble's members, or the model itself."""
    return list(getattr(model, "models", [model]))


def check_layer(model, layer: int | None, flag: str, side: str = "decoder") -> int:
    """A 1-based layer number from the command line (None: the last) -> a 0-based index; a one-line
    error if the model has no such layer."""
    count = min(len(getattr(m, side)) for m in members(model))
    if layer is None:
        return count - 1
    if not 1 <= layer <= count:
        raise ConfigError(f"{flag} {layer}: the model has {count} {side} layers (1-{count})")
    return layer - 1


def _target_input(tokens: list[list[int]], device: torch.device) -> torch.Tensor:
    """BOS + tokens, right-padded: (rows, longest + 1); position t predicts token t (EOS last)."""
    width = max((len(t) for t in tokens), default=0) + 1
    tgt_in = torch.full((len(tokens), width), PAD_ID, dtype=torch.long, device=device)
    tgt_in[:, 0] = BOS_ID
    for row, ids in enumerate(tokens):
        if ids:
            tgt_in[row, 1 : len(ids) + 1] = torch.tensor(ids, dtype=torch.long, device=device)
    return tgt_in


@torch.no_grad()
def forced_attention(model: Transformer, src_ids: torch.Tensor, tokens: list[list[int]]) -> list[dict[str, torch.Tensor]]:
    """Every layer's weights for each row of src_ids (rows, src_len; EOS-terminated, right-padded)
    decoding `tokens` (generated ids, no EOS): "cross" (dec_layers, heads, tgt, src) and "encoder"
    (enc_layers, heads, src, src), with padding cut off."""
    model.eval()
    cross_modules = [layer.cross_attn for layer in model.decoder]
    encoder_modules = [layer.self_attn for layer in model.encoder]
    with capture_attention(cross_modules + encoder_modules):
        memory, src_mask = model.encode(src_ids)
        model.decode_hidden(_target_input(tokens, src_ids.device), memory, src_mask)
        cross = torch.stack([m.weights for m in cross_modules], dim=1)  # (rows, layers, heads, tgt, src)
        encoder = torch.stack([m.weights for m in encoder_modules], dim=1)
    src_lens = (src_ids != PAD_ID).sum(dim=1).tolist()
    return [
        {"cross": cross[row, :, :, : len(ids) + 1, : src_lens[row]].cpu(),
         "encoder": encoder[row, :, :, : src_lens[row], : src_lens[row]].cpu()}
        for row, ids in enumerate(tokens)
    ]


@torch.no_grad()
def alignment_weights(model, src_ids: torch.Tensor, tokens: list[list[int]], layer: int) -> list[torch.Tensor]:
    """Head-averaged cross-attention of decoder layer `layer` (0-based) for each row, (tgt, src),
    averaged over the members of an ensemble; only that layer computes its weights explicitly."""
    total = None
    for member in members(model):
        member.eval()
        module = member.decoder[layer].cross_attn
        with capture_attention([module]):
            memory, src_mask = member.encode(src_ids)
            member.decode_hidden(_target_input(tokens, src_ids.device), memory, src_mask)
            weights = module.weights.mean(dim=1)  # (rows, tgt, src)
        total = weights if total is None else total + weights
    average = (total / len(members(model))).cpu()
    src_lens = (src_ids != PAD_ID).sum(dim=1).tolist()
    return [average[row, : len(ids) + 1, : src_lens[row]] for row, ids in enumerate(tokens)]


def hard_alignment(weights: torch.Tensor) -> list[tuple[int, int]]:
    """(source token, output token) pairs: each output token with the source token it weighs most.

    weights: (tgt_len, src_len) with EOS last on both sides; EOS rows and columns take no part
    (the source EOS often collects attention that says nothing about alignment).
    """
    if weights.size(0) < 2 or weights.size(1) < 2:
        return []
    best = weights[:-1, :-1].argmax(dim=1).tolist()
    return [(i, j) for j, i in enumerate(best)]


def source_word_index(pieces: list[str]) -> list[int]:
    """For each piece of an encoded line, the index of the line's whitespace-separated word it is
    part of: SentencePiece marks every word start (a run of whitespace in the input) with "▁"."""
    index, word = [], -1
    for piece in pieces:
        word += piece.startswith("\u2581")
        index.append(max(word, 0))
    return index


def output_word_index(tokenizer: Tokenizer, ids: list[int]) -> list[int]:
    """For each generated token, the index of the whitespace-separated word of the decoded
    translation it falls in (decoding can add spaces, around an unknown token's " ⁇ " say, so the
    decoded prefixes are counted; a lone "▁" counts with the word before it)."""
    if not ids:
        return []
    prefixes = tokenizer.decode([ids[: k + 1] for k in range(len(ids))])
    return [max(len(text.split()) - 1, 0) for text in prefixes]


def word_alignment(pairs: list[tuple[int, int]], src_words: list[int], tgt_words: list[int]) -> str:
    """Subword pairs -> the Pharaoh line over words: "i-j ...", sorted, each pair once."""
    words = sorted({(src_words[i], tgt_words[j]) for i, j in pairs})
    return " ".join(f"{i}-{j}" for i, j in words)


def word_alignments(
    model,
    src_ids: torch.Tensor,  # (sentences, src_len)
    src_encoded: list[list[int]],  # each sentence's source ids, without EOS
    hyps: list[list[Hypothesis]],  # each sentence's hypotheses
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    layer: int,
) -> list[list[str]]:
    """The word alignment (Pharaoh line) of every hypothesis of every sentence."""
    rows = [s for s, sentence in enumerate(hyps) for _ in sentence]
    if not rows:
        return [[] for _ in hyps]
    tokens = [h.tokens for sentence in hyps for h in sentence]
    row_ids = src_ids.index_select(0, torch.tensor(rows, device=src_ids.device))
    weights = iter(alignment_weights(model, row_ids, tokens, layer))
    src_words = [source_word_index(src_tok.pieces(ids)) for ids in src_encoded]
    result = []
    for s, sentence in enumerate(hyps):
        result.append([word_alignment(hard_alignment(next(weights)), src_words[s], output_word_index(tgt_tok, h.tokens))
                       for h in sentence])
    return result


def attention_maps(translator, sentence: str, target: str | None = None, layer: int = -1) -> AttentionMaps:
    """Translate `sentence` with the translator's search (or take `target` as the translation) and
    return the weights of the forced decode; an ensemble shows its first model."""
    if not sentence.strip():
        raise MtError("the sentence is empty: give the text to translate")
    if target is not None and not target.strip():
        raise MtError("--target is empty: give a translation, or leave it out to use the model's")
    src_ids, src = translator.encode_line(sentence)
    if target is None:
        tokens = translator.best_hypothesis(src_ids).tokens
    else:
        tokens = translator.tgt_tok.encode([target])[0][: translator.max_src_tokens]
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
ATTENTION_DIR = "attention"  # default output of `mt attention`, in the experiment


def output_files(out_dir: Path, layer: int, encoder: bool, fmt: str) -> dict[str, Path]:
    """What `mt attention` writes, by kind; `layer` 0-based."""
    files: dict[str, Path] = {}
    if fmt in ("png", "both"):
        files["layers"] = out_dir / "cross-attention.png"
        files["heads"] = out_dir / f"cross-attention-layer{layer + 1}-heads.png"
        files["alignment"] = out_dir / "alignment.png"
        if encoder:
            files["encoder"] = out_dir / "encoder-self-attention.png"
    if fmt in ("json", "both"):
        files["json"] = out_dir / "attention.json"
    return files


def attention(
    translator,
    sentence: str,
    out_dir: Path,
    layer: int = -1,
    encoder: bool = False,
    fmt: str = "png",
    target: str | None = None,
    force: bool = False,
) -> tuple[AttentionMaps, list[Path]]:
    """`mt attention`: translate one sentence and write heatmaps of its attention (and/or the raw
    weights as JSON) into `out_dir`; existing files are replaced only with `force`."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(FORMATS)}")
    layer = layer % len(members(translator.model)[0].decoder)
    files = output_files(Path(out_dir), layer, encoder, fmt)
    taken = [path for path in files.values() if path.exists()]
    if taken and not force:
        raise MtError(f"{taken[0]}: exists; choose another --output-dir or add --force")
    maps = attention_maps(translator, sentence, target, layer)
    if "json" in files:
        write_json_atomic(files["json"], maps.to_json(encoder))
    if "layers" in files:
        from mt.plot import png_bytes

        for kind, fig in figures(maps, encoder).items():
            write_bytes_atomic(files[kind], png_bytes(fig))
    return maps, list(files.values())


def figures(maps: AttentionMaps, encoder: bool = False) -> dict:
    """The heatmaps of `mt attention`, by kind: "layers", "heads", "alignment" (and "encoder")."""
    from mt.plot import heatmaps

    dec_layers, heads = maps.cross.shape[:2]
    layer = maps.layer % dec_layers
    pair = f"{maps.source}  →  {maps.translation}"
    figs = {
        "layers": heatmaps([maps.head_average(n) for n in range(dec_layers)], maps.tgt_tokens, maps.src_tokens,
                           [f"layer {n + 1}, mean of {heads} heads" for n in range(dec_layers)],
                           f"cross-attention per decoder layer: {pair}"),
        "heads": heatmaps(list(maps.cross[layer]), maps.tgt_tokens, maps.src_tokens,
                          [f"layer {layer + 1}, head {h + 1}" for h in range(heads)],
                          f"cross-attention heads of decoder layer {layer + 1}: {pair}"),
        "alignment": heatmaps([maps.head_average(layer)], maps.tgt_tokens, maps.src_tokens,
                              [f"layer {layer + 1}, mean of {heads} heads; □ = alignment (argmax)"],
                              pair, marks=[(i, j) for i, j in maps.alignment]),
    }
    if encoder:
        enc_layers = maps.encoder.size(0)
        figs["encoder"] = heatmaps([maps.encoder[n].mean(dim=0) for n in range(enc_layers)], maps.src_tokens,
                                   maps.src_tokens, [f"layer {n + 1}, mean of {heads} heads" for n in range(enc_layers)],
                                   f"encoder self-attention: {maps.source}", row_axis="source (query)",
                                   col_axis="source (key)")
    return figs
