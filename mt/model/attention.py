"""Multi-head attention (Sec. 3.2.2): scaled dot-product attention (Sec. 3.2.1) over h heads, with
the key/value cache of incremental decoding and, inside `capture_attention()`, the weights kept for
alignments and heatmaps (`mt.apps.report.attention_maps`, `mt.decoding.alignment`).
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager, nullcontext
from typing import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from mt.model.dropout import dropout

# One decoder layer's cache: "k"/"v" hold self-attention keys/values of all earlier target positions
# (batch, heads, t, d_head); "ck"/"cv" the cross-attention keys/values of the source, computed once;
# "parents", when present, a reorder of "k"/"v"'s rows not yet made (see `reorder_self_cache`).
LayerCache = dict[str, torch.Tensor]
DecoderCache = list[LayerCache]

# SDPA's kernels on CUDA, cuDNN's left out: cuDNN builds an execution plan for every new shape
# (hundreds of ms), and here nearly every call has a new one: token-budget batches vary in length
# from step to step and a decoder's cache grows by one position each step. With it, a bf16 training
# step on an H200 took ~0.5 s whatever the model's size, 14x slower than fp32 (tools/gpu_check.py).
CUDA_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_mask(
    key_mask: torch.Tensor | None, causal: bool, length: int, key_len: int, device: torch.device
) -> torch.Tensor | None:
    """Where each query may attend, True = may: the key mask (batch, 1, 1, key_len) AND, if causal,
    query i of the last `length` positions sees keys up to its own position; None when neither."""
    if not causal:
        return key_mask
    seen = torch.ones(length, key_len, dtype=torch.bool, device=device).tril(key_len - length)
    return seen if key_mask is None else key_mask & seen


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Sec. 3.2.2) through F.scaled_dot_product_attention.

    Self-attention projects queries, keys and values with one fused matrix; cross-attention projects
    the query alone and keys/values with one fused matrix, once per source; when there are `group`
    times as many query rows as sources, rows i*group..(i+1)*group-1 read source i (beam search's beams
    of one sentence) and query it together, as one product per source. With `store_weights`
    (see `capture_attention`) the same attention is computed explicitly and its weights kept, for
    the thread that asked, in `weights`, (batch, heads, len, key_len); the normal path never
    materialises them.
    """

    store_weights = False  # set per instance while a thread captures its weights (capture_attention)
    use_sdpa: bool | None = None  # None: SDPA off the CPU, written out on it; True/False forces one

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float, self_attention: bool):
        super().__init__()
        self._kept: dict[int, torch.Tensor] = {}  # the weights of the last call, by thread (capture_attention)
        self._capturing: set[int] = set()  # the threads capturing them now
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.self_attention = self_attention
        self.attention_dropout = attention_dropout
        if self_attention:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    @property
    def weights(self) -> torch.Tensor | None:
        """The weights of this thread's last call inside `capture_attention`, else None."""
        return self._kept.get(threading.get_ident())

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        # (batch, len, d_model) -> (batch, heads, len, d_head)
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention keys and values of the encoder output, each (batch, heads, src_len, d_head)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)

    def forward(
        self,
        x: torch.Tensor,  # (batch, len, d_model): the queries' input
        memory: torch.Tensor | None = None,  # (batch, src_len, d_model): cross-attention source
        key_mask: torch.Tensor | None = None,  # (batch, 1, 1, key_len) bool, True = may attend
        causal: bool = False,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        if self.self_attention:
            q, k, v = (self.split_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
            if cache is not None:  # incremental: keys/values of earlier positions come from the cache
                if "k" in cache:
                    if q.size(2) > 1:
                        raise ValueError("incremental decoding takes one new position per call")
                    parents = cache.pop("parents", None)
                    k, v = _extended(cache["k"], k, parents), _extended(cache["v"], v, parents)
                cache["k"], cache["v"] = k, v
                causal = causal and q.size(2) > 1  # one new query may see every cached position
        else:
            q = self.split_heads(self.q(x))
            if cache is not None and "ck" in cache:
                k, v = cache["ck"], cache["cv"]
            else:
                k, v = self.project_kv(memory)
                if cache is not None:  # contiguous once, or every step's attention would copy it again
                    cache["ck"], cache["cv"] = k.contiguous(), v.contiguous()
        keep = self.store_weights and threading.get_ident() in self._capturing
        batch, _, length, _ = q.shape
        group = batch // k.size(0) if k.size(0) else 1
        if group * k.size(0) != batch:
            raise ValueError(f"{batch} query rows for {k.size(0)} sources: each source needs as many")
        if group > 1 and keep:  # the weights are kept per query row
            k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
            key_mask = None if key_mask is None else key_mask.repeat_interleave(group, 0)
        elif group > 1:  # a source's rows query it together: (sources, heads, group * len, d_head)
            q = q.view(k.size(0), group, self.n_heads, length, self.d_head).transpose(1, 2)
            q = q.reshape(k.size(0), self.n_heads, group * length, self.d_head)
        sdpa = self.use_sdpa if self.use_sdpa is not None else q.device.type != "cpu"
        if keep or not sdpa:
            context = self.attend_explicit(q, k, v, key_mask, causal, keep)
        else:
            with sdpa_kernel(CUDA_SDPA_BACKENDS) if q.is_cuda else nullcontext():
                context = self._attend_sdpa(q, k, v, key_mask, causal)  # (batch, heads, len, d_head)
        if context.size(0) != batch:  # back to one row per query row
            context = context.view(k.size(0), self.n_heads, group, length, self.d_head).transpose(1, 2)
        return self.out(context.transpose(-3, -2).reshape(batch, length, self.n_heads * self.d_head))

    def _attend_sdpa(self, q, k, v, key_mask, causal) -> torch.Tensor:
        """F.scaled_dot_product_attention under the mask of `attention_mask`; a query whose keys are
        all masked gets zeros: it attends to every key (no NaN, forward or backward), then is zeroed."""
        dropout_p = self.attention_dropout if self.training else 0.0
        length, key_len = q.size(2), k.size(2)
        if key_mask is None and (not causal or length == key_len):  # SDPA's is_causal is top-left aligned
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal)
        mask = attention_mask(key_mask, causal, length, key_len, q.device)
        empty = ~mask.any(dim=-1, keepdim=True)  # (batch or 1, 1, len or 1, 1)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty, dropout_p=dropout_p)
        return context.masked_fill(empty, 0.0)

    def attend_explicit(self, q, k, v, key_mask, causal, keep: bool = False) -> torch.Tensor:
        """softmax(Q K^T / sqrt(d_head) + mask) V written out (Sec. 3.2.1), the softmax in fp32.

        Used on the CPU, and wherever the weights are wanted (`keep`: kept in `weights` for this thread).
        For sentence-length inputs in bf16 SDPA's CPU kernel is several times slower than this; in
        fp32 the kernel alone is faster but whole training steps are not, so the CPU keeps one path
        (figures: docs/performance-notes.md, from bench/cpu_kernels.py and bench/throughput.py).
        The heads go into the batch dimension of contiguous 3-d tensors: torch.matmul on the 4-d
        views would fall back to one small product per head in the backward pass.
        """
        batch, heads, length, d_head = q.shape
        key_len = k.size(2)
        q = (q * (1.0 / math.sqrt(d_head))).reshape(batch * heads, length, d_head)
        k = k.reshape(batch * heads, key_len, d_head)
        v = v.reshape(batch * heads, key_len, d_head)
        scores = torch.bmm(q, k.transpose(1, 2)).view(batch, heads, length, key_len).float()
        mask = attention_mask(key_mask, causal, length, key_len, scores.device)
        if mask is not None:
            scores = scores.masked_fill(~mask, -torch.inf)
        weights = softmax_rows(scores)
        if key_mask is not None:  # a query whose keys are all masked: zeros instead of softmax's NaN
            empty = ~mask.any(dim=-1, keepdim=True)
            if torch.compiler.is_compiling() or empty.any():  # no branch on data in a compiled graph
                weights = weights.masked_fill(empty, 0.0)
        if keep:
            self._kept[threading.get_ident()] = weights
        weights = dropout(weights, self.attention_dropout, self.training).to(v.dtype)
        return torch.bmm(weights.reshape(batch * heads, length, key_len), v).view(batch, heads, length, d_head)


# torch's CPU softmax runs rows shorter than one of its vectors of floats (16 with AVX-512, 8 with AVX2
# or NEON) in a scalar loop: at decoding's shapes (thousands of rows of a few keys: the first steps'
# self-attention, short sources' cross-attention) 5-10x slower than its vectorised path
# (bench/decode_profile.py prints both).
SHORT_ROWS = 16 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 8


def softmax_rows(scores: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension; on the CPU a row shorter than SHORT_ROWS is padded with -inf
    keys to that length first, so that torch takes its vectorised path (not in a compiled graph: it
    fuses its own softmax, and the length test would recompile it on each side of SHORT_ROWS). The
    result may be a strided view. A row's weights do not depend on how many masked keys its batch
    padded it with, as with longer rows (a sentence translates the same in any batch); a row of -inf
    alone gives NaN."""
    keys = scores.size(-1)
    if keys >= SHORT_ROWS or not scores.is_cpu or torch.compiler.is_compiling():  # compiled: its own softmax
        return scores.softmax(dim=-1)
    return F.pad(scores, (0, SHORT_ROWS - keys), value=-torch.inf).softmax(dim=-1)[..., :keys]


def reorder_self_cache(cache: LayerCache, order: torch.Tensor) -> None:
    """Row i of the self-attention keys/values becomes row order[i], made at the next step: there the
    reorder and the new position are one copy into one new tensor (`_extended`), where reordering now
    and appending then would copy every cached position twice a step (beam search reorders at every
    step). Two reorders before a step compose."""
    if "k" in cache:
        pending = cache.get("parents")
        cache["parents"] = order if pending is None else pending.index_select(0, order)


def settle_self_cache(cache: LayerCache) -> None:
    """Make a pending reorder now: for code that changes "k"/"v" itself (adding rows)."""
    parents = cache.pop("parents", None)
    if parents is not None:
        cache["k"], cache["v"] = cache["k"].index_select(0, parents), cache["v"].index_select(0, parents)


def _extended(cached: torch.Tensor, new: torch.Tensor, parents: torch.Tensor | None) -> torch.Tensor:
    """(rows, heads, t + 1, d_head): the cached positions, rows taken in the order `parents` gives
    (None: as they are), then the new position."""
    length = cached.size(2)
    out = new.new_empty(new.size(0), new.size(1), length + 1, new.size(3))
    if parents is None:
        out[:, :, :length] = cached
    else:
        torch.index_select(cached, 0, parents, out=out[:, :, :length])
    out[:, :, length:] = new
    return out


_capture_lock = threading.Lock()  # guards the modules' sets of capturing threads


@contextmanager
def capture_attention(modules: Iterable[MultiHeadAttention]) -> Iterator[list[MultiHeadAttention]]:
    """Within the block, each of `modules` keeps the weights of its last call in this thread in
    `.weights` (batch, heads, len, key_len); read them inside the block: they are dropped when it
    ends. Threads may capture the same modules at once (`mt serve` aligns two batches side by side):
    each reads its own calls' weights."""
    modules = list(modules)
    thread = threading.get_ident()
    with _capture_lock:
        for module in modules:
            module._kept.pop(thread, None)
            module._capturing.add(thread)
            module.store_weights = True
    try:
        yield modules
    finally:
        with _capture_lock:
            for module in modules:
                module._kept.pop(thread, None)
                module._capturing.discard(thread)
                module.store_weights = bool(module._capturing)
