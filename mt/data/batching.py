"""Token-based batching: pairs of similar length batched together up to a token budget.

Sec. 5.1: "Sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target
tokens." As in fairseq, the budget bounds the padded size of the larger of the two tensors.
Training reads them through a `BatchStream`: epoch after epoch, shared out among processes.

With `bucketed` (train.compile), every batch is padded to one of a few shapes: both sides to the
rung of `bucket_width` that holds its longest pair, and to the rows a full batch of that rung has,
so that a compiled step sees a handful of shapes (CUDA graphs record one graph per shape) instead
of a new one at nearly every step. The padding is masked: it changes no loss and no gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mt.data.dataset import ParallelData
from mt.errors import MtError
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID

ROWS_MULTIPLE = 8  # fairseq's required_batch_size_multiple: row counts that suit matmul kernels


@dataclass
class Batch:
    src_ids: torch.Tensor  # (batch, src_len) long: tokens + EOS, right-padded with PAD_ID
    tgt_in: torch.Tensor  # (batch, tgt_len) long: BOS + tokens, padded (decoder input)
    tgt_out: torch.Tensor  # (batch, tgt_len) long: tokens + EOS, padded (what the decoder predicts)
    indices: np.ndarray  # (batch,) dataset indices of the rows (padding rows have none)
    # Counted on the host by `collate`, so that nothing is read back from a GPU to learn them:
    tokens: tuple[int, int] | None = None  # (source, target) non-pad tokens
    targets: torch.Tensor | None = None  # (target tokens,) long: flat positions of tgt_out's non-pad tokens

    @property
    def n_src_tokens(self) -> int:
        return self.tokens[0] if self.tokens is not None else int((self.src_ids != PAD_ID).sum())

    @property
    def n_tgt_tokens(self) -> int:
        return self.tokens[1] if self.tokens is not None else int((self.tgt_out != PAD_ID).sum())

    @property
    def size(self) -> int:
        return self.src_ids.shape[0]

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in (self.src_ids, self.tgt_in, self.tgt_out, self.targets) if t is not None]

    def _with(self, tensors: list[torch.Tensor]) -> "Batch":
        src_ids, tgt_in, tgt_out, *targets = tensors
        return Batch(src_ids, tgt_in, tgt_out, self.indices, self.tokens, targets[0] if targets else None)

    def to(self, device: torch.device) -> "Batch":
        """The same batch with its tensors on `device` (itself where they are already), copied
        without waiting for the copy (from pinned memory, the copy runs beside the host)."""
        if all(t.device == device or (device.type == "cpu" and t.device.type == "cpu") for t in self.tensors()):
            return self
        return self._with([t.to(device, non_blocking=True) for t in self.tensors()])

    def pinned(self) -> "Batch":
        """The same batch in page-locked host memory, which a GPU copies from asynchronously."""
        return self._with([t.pin_memory() for t in self.tensors()])


def bucket_width(width: int) -> int:
    """The rung of the shape ladder that holds `width`: multiples of 8 up to 64, of 16 up to 128, of
    32 up to 256, of 64 up to 512, of 128 beyond. Past 32, under a fifth of a rung is padding, and
    widths up to 256 fall on 16 rungs."""
    step = 8 if width <= 64 else 16 if width <= 128 else 32 if width <= 256 else 64 if width <= 512 else 128
    return -(-width // step) * step


def bucket_rows(width: int, max_tokens: int) -> int:
    """The rows of a full batch of rung `width` (as `make_batches` cuts them, in multiples of
    ROWS_MULTIPLE): every batch of that rung is padded to it."""
    rows = max(1, max_tokens // width)
    return rows - rows % ROWS_MULTIPLE if rows >= ROWS_MULTIPLE else rows


def _length_order(src_lens: np.ndarray, tgt_lens: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Indices sorted by (tgt_len, src_len); ties in random order when rng is given, else by index."""
    key = tgt_lens * (int(src_lens.max()) + 1) + src_lens  # one int64 key sorts faster than lexsort
    if rng is None:
        return np.argsort(key, kind="stable")
    perm = rng.permutation(len(key))
    return perm[np.argsort(key[perm], kind="stable")]


def _batch_ends(src_width: np.ndarray, tgt_width: np.ndarray, max_tokens: int) -> list[int]:
    """Greedy cut points over pairs in sorted order: rows * max(widths) <= max_tokens per batch.

    tgt_width is non-decreasing (the sort order), so a batch starting at i can hold at most
    max_tokens // tgt_width[i] rows: only that window is examined, which keeps this linear.
    """
    n, ends, start = len(src_width), [], 0
    while start < n:
        cap = max(1, max_tokens // int(max(src_width[start], tgt_width[start])))
        stop = min(n, start + cap)
        width = np.maximum(np.maximum.accumulate(src_width[start:stop]), tgt_width[start:stop])
        fits = np.arange(1, stop - start + 1) * width <= max_tokens  # true, then false
        rows = int(np.argmin(fits)) if not fits.all() else len(fits)
        rows = max(rows, 1)  # a single over-long pair still gets a batch of its own
        if rows >= ROWS_MULTIPLE:
            rows -= rows % ROWS_MULTIPLE
        start += rows
        ends.append(start)
    return ends


def make_batches(
    src_lens: np.ndarray,
    tgt_lens: np.ndarray,
    max_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    bucketed: bool = False,
) -> list[np.ndarray]:
    """Index arrays, one per batch, covering every pair once; deterministic in (seed, epoch).

    Pairs are sorted by (tgt_len, src_len) and cut greedily so that a batch's padded size, rows *
    max(src_len + 1, tgt_len + 1) (EOS on the source; BOS or EOS on the target), stays within
    max_tokens; `bucketed`: with each width taken up to its `bucket_width` rung, as `collate` pads
    it. With shuffle, length ties are broken at random and the batch order is shuffled.
    """
    src_lens = np.asarray(src_lens, dtype=np.int64)
    tgt_lens = np.asarray(tgt_lens, dtype=np.int64)
    if len(src_lens) != len(tgt_lens):
        raise ValueError(f"{len(src_lens)} source lengths but {len(tgt_lens)} target lengths")
    if len(src_lens) == 0:
        return []
    rng = np.random.default_rng((seed, epoch)) if shuffle else None
    order = _length_order(src_lens, tgt_lens, rng)
    src_width, tgt_width = src_lens[order] + 1, tgt_lens[order] + 1
    if bucketed:  # both sides padded to one rung; the target's rung alone still rises in this order
        rung = np.vectorize(bucket_width, otypes=[np.int64])
        src_width, tgt_width = rung(np.maximum(src_width, tgt_width)), rung(tgt_width)
    ends = _batch_ends(src_width, tgt_width, max_tokens)
    batches = np.split(order, ends[:-1])
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def _fill(
    lens: np.ndarray, tokens: np.ndarray, width: int, first: int | None, last: int | None, rows: int
) -> np.ndarray:
    """(rows, width) array of PAD with each row's tokens, optionally after `first` and before `last`;
    rows past len(lens) stay all PAD."""
    out = np.full((rows, width), PAD_ID, dtype=np.int64)
    filled = out[: len(lens)]  # a view: writes go to `out`
    shift = 0 if first is None else 1
    if first is not None:
        filled[:, 0] = first
    cols = np.arange(width)
    # Row-major boolean assignment fills rows in order, matching the concatenated tokens.
    filled[(cols >= shift) & (cols < lens[:, None] + shift)] = tokens
    if last is not None:
        filled[np.arange(len(lens)), lens + shift] = last
    return out


def collate(
    data: ParallelData, indices: np.ndarray, bucket_tokens: int | None = None, max_width: int | None = None
) -> Batch:
    """Padded tensors for the pairs `indices`: source + EOS; BOS + target; target + EOS. With
    `bucket_tokens` (the budget `make_batches` cut them to, `bucketed`), both sides are padded to
    the batch's `bucket_width` rung, at most `max_width` (the model's positions: a rung past them
    would not fit the model), and the rows to that rung's `bucket_rows` (rows of PAD only, which the
    attention masks and the loss leave out)."""
    indices = np.asarray(indices, dtype=np.int64)
    src_lens, tgt_lens = data.src_lens[indices], data.tgt_lens[indices]
    src_tokens = np.concatenate([data.src(i) for i in indices]).astype(np.int64)
    tgt_tokens = np.concatenate([data.tgt(i) for i in indices]).astype(np.int64)
    src_width, tgt_width, rows = int(src_lens.max()) + 1, int(tgt_lens.max()) + 1, len(indices)
    if bucket_tokens is not None:
        src_width = tgt_width = min(bucket_width(max(src_width, tgt_width)), max_width or np.iinfo(np.int64).max)
        rows = max(rows, bucket_rows(src_width, bucket_tokens))
    tgt_out = _fill(tgt_lens, tgt_tokens, tgt_width, None, EOS_ID, rows)
    return Batch(
        src_ids=torch.from_numpy(_fill(src_lens, src_tokens, src_width, None, EOS_ID, rows)),
        tgt_in=torch.from_numpy(_fill(tgt_lens, tgt_tokens, tgt_width, BOS_ID, None, rows)),
        tgt_out=torch.from_numpy(tgt_out),
        indices=indices,
        tokens=(int(src_lens.sum()) + len(indices), int(tgt_lens.sum()) + len(indices)),
        targets=torch.from_numpy(np.flatnonzero(tgt_out != PAD_ID)),
    )


def length_groups(src_lens: list[int], max_tokens: int) -> list[list[int]]:
    """Decoding batches: indices of `src_lens` sorted by length (stable), cut into runs whose padded
    size, rows * (longest + 1) with EOS, stays within max_tokens; an over-long source runs alone."""
    order = sorted(range(len(src_lens)), key=lambda i: src_lens[i])
    groups: list[list[int]] = []
    group: list[int] = []
    for i in order:
        longest = src_lens[i] + 1  # sorted ascending: the newest member is the longest
        if group and longest * (len(group) + 1) > max_tokens:
            groups.append(group)
            group = []
        group.append(i)
    if group:
        groups.append(group)
    return groups


def pad_fraction(batches: list[np.ndarray], src_lens: np.ndarray, tgt_lens: np.ndarray) -> tuple[float, float]:
    """Fraction of positions that are padding in the src_ids and tgt_out tensors of `batches`."""
    if not batches:
        return 0.0, 0.0
    order = np.concatenate(batches)
    starts = np.concatenate([[0], np.cumsum([len(b) for b in batches])[:-1]])
    rows = np.array([len(b) for b in batches])
    fractions = []
    for lens in (np.asarray(src_lens)[order] + 1, np.asarray(tgt_lens)[order] + 1):
        padded = int((np.maximum.reduceat(lens, starts) * rows).sum())
        fractions.append(1.0 - int(lens.sum()) / padded)
    return fractions[0], fractions[1]


def balanced_epoch(directions: np.ndarray, temperature: float, seed: int, epoch: int) -> np.ndarray | None:
    """The pairs of an epoch when several directions share the data (Arivazhagan et al., 2019): a
    direction with n of the N pairs takes N * n^(1/T) / sum(n^(1/T)) rows, its pairs repeated or a
    random part of them, drawn afresh each epoch (deterministic in seed and epoch); None when that is
    every pair once (one direction, T = 1, or directions of one size)."""
    counts = np.bincount(directions) if len(directions) else np.zeros(0, np.int64)
    present = np.flatnonzero(counts)
    if len(present) < 2 or temperature == 1:
        return None
    weights = counts[present] ** (1.0 / temperature)
    rows = np.rint(weights / weights.sum() * counts.sum()).astype(np.int64)
    if (rows == counts[present]).all():
        return None
    rng = np.random.default_rng((seed, epoch, 7))
    chosen = []
    for direction, want in zip(present, rows):
        members = np.flatnonzero(directions == direction)
        full, part = divmod(int(want), len(members))
        chosen += [members] * full + [rng.choice(members, part, replace=False)]
    return np.sort(np.concatenate(chosen))


class BatchStream:
    """This process's training batches, epoch after epoch, and its position among them.

    All processes step through one seeded order of an epoch's batches (`make_batches` with the seed
    and the epoch), process `rank` taking batch batch_in_epoch + rank; a last round short of one
    batch per process is left out, and the next epoch reshuffles. (epoch, batch_in_epoch) is what a
    checkpoint saves: the order is a function of them, so a resumed run reads what it would have.
    `bucketed` pads every batch to one of a few shapes (see the module's docstring); the cuts differ,
    so it is part of the order.
    """

    def __init__(
        self,
        data: ParallelData,
        max_tokens: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        direction_temperature: float = 1.0,
        bucketed: bool = False,
        max_width: int | None = None,  # the model's positions: no bucketed batch is wider (`collate`)
    ):
        self.data, self.max_tokens, self.seed, self.bucketed = data, max_tokens, seed, bucketed
        self.max_width = max_width
        self.direction_temperature = direction_temperature  # `balanced_epoch`'s T
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.batch_in_epoch = 0  # batches of this epoch taken by all processes together
        self._order: list[np.ndarray] | None = None  # the epoch's batches, made on first use

    def seek(self, epoch: int, batch_in_epoch: int) -> None:
        """Continue from a saved position."""
        self.epoch, self.batch_in_epoch, self._order = epoch, batch_in_epoch, None

    def next_batch(self) -> Batch:
        """This process's next batch."""
        if self._order is None:
            pairs = balanced_epoch(self.data.directions, self.direction_temperature, self.seed, self.epoch)
            src_lens, tgt_lens = self.data.src_lens, self.data.tgt_lens
            if pairs is not None:
                src_lens, tgt_lens = src_lens[pairs], tgt_lens[pairs]
            batches = make_batches(src_lens, tgt_lens, self.max_tokens, self.seed, self.epoch, bucketed=self.bucketed)
            self._order = batches if pairs is None else [pairs[batch] for batch in batches]
            if len(self._order) < self.world_size:
                raise MtError(
                    f"{len(self._order)} training batches for {self.world_size} processes: use a smaller max_tokens"
                )
        if self.batch_in_epoch + self.world_size > len(self._order):
            self.seek(self.epoch + 1, 0)
            return self.next_batch()
        indices = self._order[self.batch_in_epoch + self.rank]
        self.batch_in_epoch += self.world_size
        return collate(self.data, indices, self.max_tokens if self.bucketed else None, self.max_width)
