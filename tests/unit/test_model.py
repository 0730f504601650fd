"""mt.model: the paper's details (Sec. 3) and the invariants search and training rely on.

Sinusoids and the sqrt(d_model) embedding scale against the formulas; tied weights and the exact
parameter count; post-norm sub-layers; the causal mask; padding, batch position and the incremental
cache leaving a sentence's logits unchanged.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import tiny_model
from torch import nn

from mt.model.attention import SHORT_ROWS, MultiHeadAttention, capture_attention, softmax_rows
from mt.model.dropout import dropout
from mt.model.layers import Residual, sinusoid_table
from mt.model.transformer import Transformer, count_parameters
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

VOCAB = 32
ATOL = 1e-5


pytestmark = pytest.mark.usefixtures("single_thread")


def random_ids(lengths: list[int], seed: int, first: int = 4, vocab: int = VOCAB) -> torch.Tensor:
    """Right-padded rows of real tokens (ids >= first) ending in EOS, one row per length."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(first, vocab, (n,), generator=gen)
        ids[row, n] = EOS_ID
    return ids


def tgt_inputs(lengths: list[int], seed: int) -> torch.Tensor:
    """BOS + real tokens, right-padded: the decoder's input."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for row, n in enumerate(lengths):
        ids[row, 0] = BOS_ID
        ids[row, 1 : n + 1] = torch.randint(4, VOCAB, (n,), generator=gen)
    return ids


# -- Sec. 3.5: positional encoding ----------------------------------------------------------------


def paper_pe(pos: int, j: int, d_model: int) -> float:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), by the math module."""
    two_i = j - j % 2
    angle = pos / 10000 ** (two_i / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


def test_sinusoid_table_matches_the_formula():
    d_model = 16
    table = sinusoid_table(100, d_model)
    assert table.shape == (100, d_model)
    for pos in (0, 1, 7, 50, 99):
        for j in range(d_model):
            assert table[pos, j].item() == pytest.approx(paper_pe(pos, j, d_model), abs=1e-6)
    assert table[1, 0].item() == pytest.approx(math.sin(1.0)) and table[1, 1].item() == pytest.approx(math.cos(1.0))


# -- Sec. 3.4: embeddings * sqrt(d_model) + positions --------------------------------------------


@pytest.mark.parametrize("start", [0, 5])
def test_embedding_is_scaled_tokens_plus_positions(start):
    model = tiny_model()
    ids = random_ids([6, 3], seed=1)
    d_model = model.d_model
    positions = range(start, start + ids.size(1))
    table = torch.tensor([[paper_pe(pos, j, d_model) for j in range(d_model)] for pos in positions])
    for embed in (model.src_embed, model.tgt_embed):
        expected = embed.tokens.weight[ids] * math.sqrt(d_model) + table
        torch.testing.assert_close(embed(ids, start), expected, atol=ATOL, rtol=0)


def test_pad_embedding_is_zero():
    model = tiny_model()
    assert torch.count_nonzero(model.src_embed.tokens.weight[PAD_ID]) == 0


# -- Sec. 3.4: shared weights, and the parameter count ---------------------------------------------


def test_shared_vocabulary_ties_three_ways():
    model = tiny_model()
    assert model.src_embed.tokens.weight is model.tgt_embed.tokens.weight
    assert model.output.weight is model.tgt_embed.tokens.weight
    # Tied means one tensor: a step on the output projection moves both embeddings.
    model.output.weight.grad = torch.ones_like(model.output.weight)
    before = model.src_embed.tokens.weight.detach().clone()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    torch.testing.assert_close(model.src_embed.tokens.weight.detach(), before - 0.1)


def test_separate_vocabularies_tie_two_ways():
    torch.manual_seed(0)
    model = Transformer(40, 24, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1, shared_vocab=False)
    assert model.output.weight is model.tgt_embed.tokens.weight
    assert model.src_embed.tokens.weight is not model.tgt_embed.tokens.weight
    assert model.src_embed.tokens.weight.shape == (40, 16)
    assert model.output.weight.shape == (24, 16)


def test_untied_embeddings_are_three_matrices():
    model = tiny_model(tie_embeddings=False)
    weights = {id(model.src_embed.tokens.weight), id(model.tgt_embed.tokens.weight), id(model.output.weight)}
    assert len(weights) == 3


def expected_parameters(vocab, d_model, d_ff, enc_layers, dec_layers, tied=True):
    """By hand: biases everywhere but the output projection; LayerNorm = 2 * d; sinusoids are free."""
    linear = lambda n_in, n_out: n_in * n_out + n_out  # noqa: E731
    attention = 4 * linear(d_model, d_model)  # q, k, v, out (fused or not, the same count)
    ffn = linear(d_model, d_ff) + linear(d_ff, d_model)
    norm = 2 * d_model
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embeddings = vocab * d_model if tied else 3 * vocab * d_model
    return embeddings + enc_layers * encoder_layer + dec_layers * decoder_layer


def test_count_parameters_of_the_benchmark_preset():
    """The 'small' preset: 3+3 layers, d 256, ff 1024, 4 heads, joint vocabulary of 8000."""
    model = Transformer(8000, 8000, d_model=256, d_ff=1024, n_heads=4, enc_layers=3, dec_layers=3)
    expected = expected_parameters(8000, 256, 1024, 3, 3)
    assert expected == 7_577_600  # the hand computation, spelled out
    assert count_parameters(model) == expected
    assert count_parameters(model) < sum(p.numel() for p in model.state_dict().values())  # tied counted once
    untied = Transformer(
        8000, 8000, d_model=256, d_ff=1024, n_heads=4, enc_layers=3, dec_layers=3, tie_embeddings=False
    )
    assert count_parameters(untied) == expected_parameters(8000, 256, 1024, 3, 3, tied=False)


# -- Sec. 3.1: post-norm ----------------------------------------------------------------------------


def perturb_norms(model: Transformer, seed: int = 3) -> None:
    """Non-trivial LayerNorm affines, so that a test can tell where each norm sits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.copy_(1 + 0.5 * torch.randn(module.weight.shape, generator=gen))
                module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=gen))


def test_post_norm_layers_are_layernorm_of_x_plus_sublayer():
    model = tiny_model()
    perturb_norms(model)
    src = random_ids([5, 3], seed=2)
    tgt = tgt_inputs([4, 2], seed=3)
    with torch.no_grad():
        # Encoder, written out: x = LN(x + SelfAttn(x)); x = LN(x + FFN(x)).
        memory, src_mask = model.encode(src)
        x = model.src_embed(src)
        for layer in model.encoder:
            x = layer.attn_block.norm(x + layer.self_attn(x, key_mask=src_mask))
            x = layer.ffn_block.norm(x + layer.ffn(x))
        torch.testing.assert_close(memory, x, atol=ATOL, rtol=0)  # and no final LayerNorm
        # Decoder, written out, with causal self-attention and cross-attention to the memory.
        y = model.tgt_embed(tgt)
        for layer in model.decoder:
            y = layer.self_block.norm(y + layer.self_attn(y, causal=True))
            y = layer.cross_block.norm(y + layer.cross_attn(y, memory, key_mask=src_mask))
            y = layer.ffn_block.norm(y + layer.ffn(y))
        torch.testing.assert_close(model.decode(tgt, memory, src_mask), model.output(y), atol=ATOL, rtol=0)


def test_post_norm_outputs_are_normalised_and_pre_norm_adds_a_final_norm():
    post = tiny_model()
    assert not any(isinstance(m, nn.LayerNorm) for m in (post.enc_norm, post.dec_norm))
    src = random_ids([7, 4], seed=4)
    with torch.no_grad():
        memory, src_mask = post.encode(src)
        hidden = post.decode_hidden(tgt_inputs([5, 2], seed=5), memory, src_mask)
    for out in (memory, hidden):  # LayerNorm weight 1, bias 0 at init: each row mean 0, variance 1
        torch.testing.assert_close(out.mean(-1), torch.zeros(out.shape[:-1]), atol=1e-5, rtol=0)
        torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(out.shape[:-1]), atol=1e-3, rtol=0)

    pre = tiny_model(pre_norm=True)
    assert isinstance(pre.enc_norm, nn.LayerNorm) and isinstance(pre.dec_norm, nn.LayerNorm)
    perturb_norms(pre)
    with torch.no_grad():
        memory, src_mask = pre.encode(src)
        x = pre.src_embed(src)
        for layer in pre.encoder:  # pre-norm: x + SelfAttn(LN(x)); x + FFN(LN(x)); then LN
            x = x + layer.self_attn(layer.attn_block.norm(x), key_mask=src_mask)
            x = x + layer.ffn(layer.ffn_block.norm(x))
        torch.testing.assert_close(memory, pre.enc_norm(x), atol=ATOL, rtol=0)


# -- Sec. 3.2.3: the decoder sees only earlier target positions ------------------------------------


def test_future_target_tokens_do_not_change_earlier_logits():
    model = tiny_model()
    src = random_ids([6, 4], seed=6)
    tgt = tgt_inputs([7, 7], seed=7)
    changed = tgt.clone()
    k = 4
    changed[:, k] = (changed[:, k] - 4 + 1) % (VOCAB - 4) + 4  # another real token at position k
    with torch.no_grad():
        logits = model(src, tgt)
        logits_changed = model(src, changed)
    torch.testing.assert_close(logits[:, :k], logits_changed[:, :k], atol=ATOL, rtol=0)
    for pos in range(k, tgt.size(1)):  # position k reads the changed token; later ones attend to it
        assert (logits[:, pos] - logits_changed[:, pos]).abs().max() > 1e-3


# -- padding and batch position ----------------------------------------------------------------------


def test_source_padding_does_not_change_logits():
    model = tiny_model()
    src = random_ids([6, 2, 4], seed=8)
    tgt = tgt_inputs([5, 3, 1], seed=9)
    padded = F.pad(src, (0, 5), value=PAD_ID)
    with torch.no_grad():
        logits = model(src, tgt)
        logits_padded = model(padded, tgt)
        memory, _ = model.encode(src)
        memory_padded, _ = model.encode(padded)
    torch.testing.assert_close(logits_padded, logits, atol=ATOL, rtol=0)
    lengths = (src != PAD_ID).sum(1)
    for row, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(memory_padded[row, :n], memory[row, :n], atol=ATOL, rtol=0)


def test_target_padding_does_not_change_real_positions():
    model = tiny_model()
    src = random_ids([6, 2], seed=10)
    tgt = tgt_inputs([5, 3], seed=11)
    with torch.no_grad():
        logits = model(src, tgt)
        logits_padded = model(src, F.pad(tgt, (0, 4), value=PAD_ID))
    torch.testing.assert_close(logits_padded[:, : tgt.size(1)], logits, atol=ATOL, rtol=0)


def test_a_sentence_scores_the_same_alone_and_in_a_batch():
    model = tiny_model()
    src_lengths, tgt_lengths = [3, 8, 5, 1], [4, 2, 6, 3]
    src = random_ids(src_lengths, seed=12)
    tgt = tgt_inputs(tgt_lengths, seed=13)
    with torch.no_grad():
        batch_logits = model(src, tgt)
        for row in range(len(src_lengths)):
            s, t = src_lengths[row] + 1, tgt_lengths[row] + 1
            alone = model(src[row : row + 1, :s], tgt[row : row + 1, :t])
            torch.testing.assert_close(batch_logits[row : row + 1, :t], alone, atol=ATOL, rtol=0)
        flipped = model(src.flip(0), tgt.flip(0)).flip(0)  # other rows around it
    for row, n in enumerate(tgt_lengths):
        torch.testing.assert_close(flipped[row, : n + 1], batch_logits[row, : n + 1], atol=ATOL, rtol=0)


# -- incremental decoding ------------------------------------------------------------------------------


@pytest.mark.parametrize("pre_norm", [False, True])
def test_cached_decoding_equals_full_recomputation(pre_norm):
    model = tiny_model(pre_norm=pre_norm)
    src = random_ids([5, 9, 2], seed=14)
    tgt = tgt_inputs([8, 8, 8], seed=15)
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        full = model.decode(tgt, memory, src_mask)
        cache = model.new_cache()
        for t in range(tgt.size(1)):
            step = model.decode(tgt[:, t : t + 1], memory, src_mask, cache)
            torch.testing.assert_close(step[:, 0], full[:, t], atol=ATOL, rtol=0)
        assert cache[0]["k"].size(2) == tgt.size(1)


def continue_after_reorder(model, src, tgt, order, source_order, split=3):
    """Decode `split` positions with the cache, reorder it, decode the rest; compare each step with a
    full recomputation of what row i now holds: old row order[i]'s prefix, then row i's tokens."""
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        for t in range(split):
            model.decode(tgt[:, t : t + 1], memory, src_mask, cache)
        model.reorder_cache(cache, order, source_order)
        sources = order if source_order is None else source_order
        memory, src_mask = memory[sources], src_mask[sources]
        prefix = torch.cat([tgt[order, :split], tgt[: len(order), split:]], dim=1)
        full = model.decode(prefix, memory, src_mask)
        for t in range(split, tgt.size(1)):
            step = model.decode(prefix[:, t : t + 1], memory, src_mask, cache)
            torch.testing.assert_close(step[:, 0], full[:, t], atol=ATOL, rtol=0)


def test_reordered_cache_follows_its_beams():
    """Beams of one sentence: rows dropped and duplicated, the source (cross-attention cache) shared."""
    model = tiny_model()
    src = random_ids([6], seed=16).expand(3, -1)
    continue_after_reorder(model, src, tgt_inputs([6, 6, 6], seed=17), torch.tensor([2, 0, 0]), None)


def test_reordered_cache_drops_finished_sentences():
    """Sentence 1 of three leaves the batch: its self- and cross-attention caches go with it."""
    model = tiny_model()
    src = random_ids([5, 9, 2], seed=18)
    keep = torch.tensor([0, 2])
    continue_after_reorder(model, src, tgt_inputs([6, 6, 6], seed=19), keep, keep)
    # A different parent per row and a different source per row at once.
    order = torch.tensor([2, 2, 0])
    continue_after_reorder(model, src, tgt_inputs([6, 6, 6], seed=20), order, order)


def test_two_reorders_before_a_step_compose():
    """The self-attention cache's reorder is made at the next step (one copy with the new position);
    two reorders in a row, as when a sentence finishes and rows then leave, must act as their product."""
    model = tiny_model()
    src = random_ids([5, 9, 2], seed=21)
    tgt = tgt_inputs([6, 6, 6], seed=22)
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        for t in range(3):
            model.decode(tgt[:, t : t + 1], memory, src_mask, cache)
        first, second = torch.tensor([2, 0, 1]), torch.tensor([1, 0])  # rows move, then one leaves
        model.reorder_cache(cache, first, first)
        assert "parents" in cache[0]  # pending, not yet made
        model.reorder_cache(cache, second, second)
        rows = first[second]  # [0, 2]
        memory, src_mask = memory[rows], src_mask[rows]
        prefix = torch.cat([tgt[rows, :3], tgt[:2, 3:]], dim=1)
        full = model.decode(prefix, memory, src_mask)
        for t in range(3, tgt.size(1)):
            step = model.decode(prefix[:, t : t + 1], memory, src_mask, cache)
            torch.testing.assert_close(step[:, 0], full[:, t], atol=ATOL, rtol=0)
        assert "parents" not in cache[0] and cache[0]["k"].size(0) == 2


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_rows_that_share_a_source_read_it_once_and_get_what_a_copy_each_gives(use_sdpa):
    """Beam search passes one encoder row per sentence for its `group` beam rows: the logits, the
    cached steps and the kept attention weights must equal those of a source copied to every row."""
    model = tiny_model()
    src = random_ids([5, 9, 2], seed=23)
    group, tgt = 3, tgt_inputs([6] * 9, seed=24)
    layers = [layer.cross_attn for layer in model.decoder]
    for attn in layers:
        attn.use_sdpa = use_sdpa
    try:
        with torch.no_grad():
            memory, src_mask = model.encode(src)
            copied = memory.repeat_interleave(group, 0), src_mask.repeat_interleave(group, 0)
            expected = model.decode(tgt, *copied)
            torch.testing.assert_close(model.decode(tgt, memory, src_mask), expected, atol=ATOL, rtol=0)
            cache = model.new_cache()
            for t in range(tgt.size(1)):
                step = model.decode(tgt[:, t : t + 1], memory, src_mask, cache)
                torch.testing.assert_close(step[:, 0], expected[:, t], atol=ATOL, rtol=0)
            assert cache[0]["ck"].size(0) == 3  # one row per source, not per beam
            with capture_attention(layers):
                model.decode(tgt, *copied)
                kept = layers[-1].weights
            with capture_attention(layers):
                model.decode(tgt, memory, src_mask)
                torch.testing.assert_close(layers[-1].weights, kept, atol=ATOL, rtol=0)
            assert model.decode(tgt[:0], memory[:0], src_mask[:0]).shape == (0, tgt.size(1), 32)  # no sentences
            with pytest.raises(ValueError, match="10 query rows for 3 sources"):
                model.decode(tgt_inputs([6] * 10, seed=25), memory, src_mask)
    finally:
        for attn in layers:
            attn.use_sdpa = None


def test_positions_beyond_max_positions_are_an_error():
    model = tiny_model(max_positions=8)
    with pytest.raises(ValueError, match="max_positions=8"):
        model.encode(random_ids([8], seed=18))


@pytest.mark.parametrize("causal", [False, True])
def test_written_out_attention_equals_torch_sdpa(causal):
    """On the CPU attention is written out (MultiHeadAttention.attend_explicit); it must equal torch's SDPA."""
    torch.manual_seed(4)
    attn = MultiHeadAttention(32, 4, 0.0, self_attention=True).eval()
    x = torch.randn(5, 7, 32)
    key_mask = None if causal else (torch.arange(7) < torch.tensor([7, 3, 6, 1, 5])[:, None])[:, None, None, :]
    q, k, v = (attn.split_heads(t) for t in attn.qkv(x).chunk(3, dim=-1))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, is_causal=causal)
    expected = attn.out(expected.transpose(1, 2).reshape(5, 7, 32))
    torch.testing.assert_close(attn(x, key_mask=key_mask, causal=causal), expected, atol=1e-5, rtol=1e-5)


# -- masks: key mask AND causal, and queries with nothing to attend to -----------------------------


def attention_by_hand(attn: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_head)) V with `allowed` (batch, len, key_len) written out; a query with
    no allowed key gets a context of zeros."""
    q, k, v = (attn.split_heads(t) for t in attn.qkv(x).chunk(3, dim=-1))
    scores = q @ k.transpose(-1, -2) / math.sqrt(attn.d_head)
    scores = scores.masked_fill(~allowed[:, None], -torch.inf)
    weights = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)
    batch, length, _ = x.shape
    return attn.out((weights @ v).transpose(1, 2).reshape(batch, length, -1))


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_key_mask_and_causal_are_combined(use_sdpa):
    """Both paths (written out on the CPU, SDPA elsewhere) apply the key mask AND the causal mask."""
    torch.manual_seed(5)
    attn = MultiHeadAttention(32, 4, 0.0, self_attention=True).eval()
    attn.use_sdpa = use_sdpa
    x = torch.randn(3, 6, 32)
    key_mask = (torch.arange(6) < torch.tensor([6, 4, 2])[:, None])[:, None, None, :]
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    expected = attention_by_hand(attn, x, key_mask[:, 0] & causal)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, key_mask=key_mask, causal=True), expected, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(attn(x, key_mask=key_mask), expected, atol=1e-3)  # the test can tell


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_a_query_with_every_key_masked_gets_zeros_not_nan(use_sdpa):
    torch.manual_seed(6)
    attn = MultiHeadAttention(32, 4, 0.0, self_attention=True).train()
    attn.use_sdpa = use_sdpa
    x = torch.randn(3, 5, 32, requires_grad=True)
    # Sentence 1 masks every key; sentence 2 masks key 0, so that causally its query 0 sees nothing.
    key_mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    for causal in (False, True):
        out = attn(x, key_mask=key_mask, causal=causal)
        assert torch.isfinite(out).all()
        context_zero = attn.out.bias.expand(5, 32)  # a zero context projects to the output bias
        torch.testing.assert_close(out[1], context_zero)
        assert torch.equal(out[2, 0], attn.out.bias) == causal
        allowed = key_mask[:, 0] & (torch.ones(5, 5, dtype=torch.bool).tril() if causal else True)
        torch.testing.assert_close(out, attention_by_hand(attn, x, allowed), atol=1e-5, rtol=1e-5)
        out.sum().backward()
        assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in attn.parameters())
        x.grad = None
        attn.zero_grad()


@pytest.mark.parametrize("keys", [1, 7, SHORT_ROWS - 1, SHORT_ROWS, 40])
def test_softmax_rows_equals_torch_softmax_at_every_row_length(keys):
    torch.manual_seed(7)
    scores = torch.randn(300, 4, 1, keys) * 5
    scores[0, 0, 0, : keys // 2] = -torch.inf  # masked keys
    torch.testing.assert_close(softmax_rows(scores), scores.softmax(dim=-1), atol=1e-6, rtol=1e-6)
    # A row's weights are the same whatever masked keys pad it and wherever it sits in its batch.
    padded = torch.cat([scores, torch.full((300, 4, 1, 20), -torch.inf)], dim=-1)
    assert torch.equal(softmax_rows(padded)[..., :keys], softmax_rows(scores))
    assert torch.equal(softmax_rows(scores[37:41]), softmax_rows(scores)[37:41])
    scores[1, 2, 0] = -torch.inf  # a row with every key masked: NaN, as torch's softmax gives it
    assert softmax_rows(scores)[1, 2].isnan().all() and scores.softmax(dim=-1)[1, 2].isnan().all()
    grad_scores, upstream = torch.randn(2, 3, keys, requires_grad=True), torch.randn(2, 3, keys)
    (softmax_rows(grad_scores) * upstream).sum().backward()
    ours, grad_scores.grad = grad_scores.grad, None
    (grad_scores.softmax(dim=-1) * upstream).sum().backward()
    torch.testing.assert_close(ours, grad_scores.grad, atol=1e-6, rtol=1e-6)


def test_incremental_attention_over_a_few_keys_equals_the_batched_pass():
    """The first decoder steps attend over fewer keys than SHORT_ROWS: the step-by-step pass (softmax_rows'
    own path) equals one causal pass over the whole prefix."""
    torch.manual_seed(8)
    attn = MultiHeadAttention(32, 4, 0.0, self_attention=True).eval()
    x = torch.randn(6, 5, 32)
    with torch.no_grad():
        whole = attn(x, causal=True)
        cache: dict = {}
        steps = [attn(x[:, i : i + 1], causal=True, cache=cache) for i in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)


# -- bf16 inference keeps the fp32 position table ------------------------------------------------------


def test_bf16_model_adds_fp32_positions():
    """Training adds the sinusoids in fp32 (autocast leaves embeddings alone): a model cast to bf16
    for inference adds the same fp32 table and rounds once, not the table rounded to bf16 first."""
    model = tiny_model(max_positions=1024)
    positions = sinusoid_table(1024, model.d_model)
    ids = random_ids([30], seed=21)
    start = 990  # far positions: the table's values have no short binary expansion there
    model.to(torch.bfloat16)
    assert model.src_embed.positions.dtype == model.tgt_embed.positions.dtype == torch.float32
    for embed in (model.src_embed, model.tgt_embed):
        out = embed(ids, start)
        assert out.dtype == torch.bfloat16
        tokens = embed.tokens.weight[ids]
        table = positions[start : start + ids.size(1)]
        assert torch.equal(out, (tokens.float() * embed.scale + table).bfloat16())
        assert not torch.equal(out, tokens * embed.scale + table.bfloat16())  # the all-bf16 sum differs
    memory, src_mask = model.encode(ids)  # and the bf16 model runs on
    assert model.decode(tgt_inputs([4], seed=22), memory, src_mask).dtype == torch.bfloat16


# -- Sec. 5.4: dropout on each sub-layer's output before the residual add, and on embeddings + positions --


@pytest.mark.parametrize("pre_norm", [False, True])
def test_residual_dropout_is_on_the_sublayer_output_before_the_add(pre_norm):
    model = tiny_model(pre_norm=pre_norm, dropout=0.5).train()
    perturb_norms(model)
    blocks = [m for m in model.modules() if isinstance(m, Residual)]
    assert len(blocks) == 2 * 2 + 2 * 3 and all(block.dropout.p == 0.5 for block in blocks)
    x = torch.randn(2, 5, 16)
    sublayer = nn.Linear(16, 16)
    with torch.no_grad():
        for block in blocks:
            torch.manual_seed(7)
            out = block(x, sublayer)
            torch.manual_seed(7)
            if pre_norm:
                expected = x + dropout(sublayer(block.norm(x)), 0.5, True)
            else:
                expected = block.norm(x + dropout(sublayer(x), 0.5, True))
            torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
            block.dropout.p = 1.0  # all of the sub-layer's output dropped, nothing of x
            torch.testing.assert_close(block(x, sublayer), x if pre_norm else block.norm(x), atol=1e-6, rtol=0)
            block.dropout.p = 0.5


def test_embedding_dropout_is_on_tokens_plus_positions():
    model = tiny_model(dropout=0.5).train()
    ids = random_ids([6, 3], seed=23)
    with torch.no_grad():
        for embed in (model.src_embed, model.tgt_embed):
            assert embed.dropout.p == 0.5
            torch.manual_seed(8)
            out = embed(ids, 2)
            torch.manual_seed(8)
            summed = embed.tokens.weight[ids] * embed.scale + sinusoid_table(64, 16)[2 : 2 + ids.size(1)]
            torch.testing.assert_close(out, dropout(summed, 0.5, True), atol=1e-6, rtol=0)


def test_every_sublayer_and_embedding_goes_through_its_dropout():
    """Pre-norm with dropout 1: the embeddings and every sub-layer's output are all dropped, so each
    stack's output is its final LayerNorm of zeros, whatever the tokens."""
    model = tiny_model(pre_norm=True, dropout=1.0).train()
    perturb_norms(model)
    with torch.no_grad():
        memory, src_mask = model.encode(random_ids([5, 3], seed=24))
        hidden = model.decode_hidden(tgt_inputs([4, 6], seed=25), memory, src_mask)
    torch.testing.assert_close(memory, model.enc_norm(torch.zeros(16)).expand_as(memory), atol=1e-6, rtol=0)
    torch.testing.assert_close(hidden, model.dec_norm(torch.zeros(16)).expand_as(hidden), atol=1e-6, rtol=0)


# -- pre-norm's final LayerNorms; the joint vocabulary of three-way tying -----------------------------


def test_pre_norm_applies_the_final_decoder_norm_and_post_norm_has_none():
    pre = tiny_model(pre_norm=True)
    perturb_norms(pre)
    src, tgt = random_ids([5, 3], seed=26), tgt_inputs([4, 2], seed=27)
    with torch.no_grad():
        memory, src_mask = pre.encode(src)
        y = pre.tgt_embed(tgt)
        for layer in pre.decoder:  # pre-norm: y + Sub(LN(y)) for each sub-layer; then LN
            y = y + layer.self_attn(layer.self_block.norm(y), causal=True)
            y = y + layer.cross_attn(layer.cross_block.norm(y), memory, key_mask=src_mask)
            y = y + layer.ffn(layer.ffn_block.norm(y))
        torch.testing.assert_close(pre.decode(tgt, memory, src_mask), pre.output(pre.dec_norm(y)), atol=ATOL, rtol=0)
        before = pre.decode(tgt, memory, src_mask)
        pre.dec_norm.weight.mul_(2.0)
        assert not torch.allclose(pre.decode(tgt, memory, src_mask), before)
        pre.enc_norm.weight.mul_(2.0)
        assert not torch.allclose(pre.encode(src)[0], memory)
    post = tiny_model()
    assert isinstance(post.enc_norm, nn.Identity) and isinstance(post.dec_norm, nn.Identity)
    assert not any(isinstance(m, nn.LayerNorm) for m in post.modules() if m not in
                   {b.norm for b in post.modules() if isinstance(b, Residual)})


def test_three_way_tying_needs_one_vocabulary_size():
    with pytest.raises(ValueError, match="src_vocab_size == tgt_vocab_size"):
        Transformer(40, 32, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1)
    model = Transformer(32, 32, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1)
    weights = (model.src_embed.tokens.weight, model.tgt_embed.tokens.weight, model.output.weight)
    assert len({id(w) for w in weights}) == 1 and len({w.data_ptr() for w in weights}) == 1
    # Untied or with separate vocabularies, differing sizes are fine.
    Transformer(40, 32, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1, shared_vocab=False)
    Transformer(40, 32, d_model=16, d_ff=32, n_heads=4, enc_layers=1, dec_layers=1, tie_embeddings=False)
