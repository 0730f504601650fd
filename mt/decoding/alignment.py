"""Hard word alignments from cross-attention (Sec. 3.2.3), as `mt translate --alignments` prints them.

Each output token is aligned to the source token its chosen layer's head-averaged cross-attention
weighs most (EOS excluded on both sides), as fairseq's `--print-alignment` does. The weights come
from one teacher-forced pass of the decoder over the translation found: the decoder's input is
BOS y1 .. yn, so row t of a cross-attention matrix is the attention paid to the source while output
token t was produced. Over whitespace-separated words the alignment is written in the Pharaoh
format `i-j` (source word i, target word j, from 0): a word pair is aligned if any of their subword
tokens are. The heatmaps of the same weights are `mt.apps.report.attention_maps`'s.
"""

from __future__ import annotations

import torch

from mt.errors import ConfigError
from mt.model.attention import capture_attention
from mt.model.transformer import Transformer
from mt.tokenizer import BOS_ID, PAD_ID, TAG, Tokenizer


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


def target_input(tokens: list[list[int]], device: torch.device) -> torch.Tensor:
    """BOS + tokens, right-padded: (rows, longest + 1); position t predicts token t (EOS last)."""
    width = max((len(t) for t in tokens), default=0) + 1
    tgt_in = torch.full((len(tokens), width), PAD_ID, dtype=torch.long, device=device)
    tgt_in[:, 0] = BOS_ID
    for row, ids in enumerate(tokens):
        if ids:
            tgt_in[row, 1 : len(ids) + 1] = torch.tensor(ids, dtype=torch.long, device=device)
    return tgt_in


def evaluating(member: Transformer) -> Transformer:
    """`member` in eval mode; eval() walks every module, a large share of a one-sentence pass, so only
    when it is training."""
    if member.training:
        member.eval()
    return member


Encoded = list[tuple[torch.Tensor, torch.Tensor]]  # each member's (memory, src_mask) of a batch of sources


@torch.inference_mode()
def encode_sources(model, src_ids: torch.Tensor) -> Encoded:
    """The first half of the alignment pass, each member's encoder over `src_ids`: it captures no
    attention, so it may run while a search (CTranslate2's) runs in other threads."""
    return [evaluating(member).encode(src_ids) for member in members(model)]


@torch.inference_mode()
def alignment_weights(
    model,
    src_ids: torch.Tensor,
    tokens: list[list[int]],
    layer: int,
    rows: torch.Tensor | None = None,
    encoded: Encoded | None = None,
) -> list[torch.Tensor]:
    """Head-averaged cross-attention of decoder layer `layer` (0-based) for each of `tokens`, (tgt, src),
    averaged over the members of an ensemble; only that layer computes its weights explicitly. Row r of
    `tokens` translates source rows[r] of src_ids (None: source r); `encoded`: `encode_sources(src_ids)`,
    if it ran already."""
    encoded = encoded if encoded is not None else encode_sources(model, src_ids)
    if rows is not None:
        src_ids = src_ids.index_select(0, rows)
    total = None
    for member, (memory, src_mask) in zip(members(model), encoded):
        if rows is not None:
            memory, src_mask = memory.index_select(0, rows), src_mask.index_select(0, rows)
        module = evaluating(member).decoder[layer].cross_attn
        with capture_attention([module]):
            member.decode_hidden(target_input(tokens, src_ids.device), memory, src_mask)
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
    part of: SentencePiece marks every word start (a run of whitespace in the input) with "▁". A
    multilingual model's target tag (<2de>) is no word of the line: -1."""
    index, word = [], -1
    for piece in pieces:
        if TAG.fullmatch(piece):
            index.append(-1)
            continue
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
    words = sorted({(src_words[i], tgt_words[j]) for i, j in pairs if src_words[i] >= 0})  # (not a tag)
    return " ".join(f"{i}-{j}" for i, j in words)


def word_alignments(
    model,
    src_ids: torch.Tensor,  # (sentences, src_len)
    src_encoded: list[list[int]],  # each sentence's source ids, without EOS
    outputs: list[list[list[int]]],  # each sentence's hypotheses, as output ids (whichever search found them)
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    layer: int,
    encoded: Encoded | None = None,  # `encode_sources(model, src_ids)`, if it ran already
) -> list[list[str]]:
    """The word alignment (Pharaoh line) of every hypothesis of every sentence."""
    rows = [s for s, sentence in enumerate(outputs) for _ in sentence]
    if not rows:
        return [[] for _ in outputs]
    tokens = [ids for sentence in outputs for ids in sentence]
    every = rows == list(range(src_ids.size(0)))  # one hypothesis a sentence: no rows to pick
    picked = None if every else torch.tensor(rows, device=src_ids.device)
    weights = iter(alignment_weights(model, src_ids, tokens, layer, picked, encoded))
    src_words = [source_word_index(src_tok.pieces(ids)) for ids in src_encoded]
    result = []
    for s, sentence in enumerate(outputs):
        result.append(
            [
                word_alignment(hard_alignment(next(weights)), src_words[s], output_word_index(tgt_tok, ids))
                for ids in sentence
            ]
        )
    return result
