"""Token-based batching: budget, coverage, determinism, padding; collate's BOS/EOS/PAD layout; the
bucketed shapes of a compiled step; the host-counted tokens and target positions; batches made ahead
on a thread (PrefetchingStream) in the same order and at the same positions."""

import numpy as np
import pytest
import torch

from mt.data.batching import ROWS_MULTIPLE, BatchStream, bucket_rows, bucket_width, collate, make_batches, pad_fraction
from mt.data.dataset import ParallelData
from mt.data.prefetch import PrefetchingStream
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID


def random_lengths(n=5000, seed=0):
    """Target lengths loosely following source lengths, as in real parallel text."""
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 60, n)
    tgt = np.clip((src * rng.uniform(0.7, 1.4, n)).astype(np.int64), 1, None)
    return src, tgt


def padded_size(batch, src, tgt):
    return len(batch) * max(src[batch].max() + 1, tgt[batch].max() + 1)


@pytest.mark.parametrize("shuffle", [True, False])
def test_batches_cover_every_index_once_within_budget(shuffle):
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, max_tokens=1000, seed=1, epoch=1, shuffle=shuffle)
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(len(src)))
    assert all(padded_size(b, src, tgt) <= 1000 for b in batches)
    assert all(len(b) % ROWS_MULTIPLE == 0 for b in batches if len(b) >= ROWS_MULTIPLE)


def test_batches_are_deterministic_and_differ_between_epochs():
    src, tgt = random_lengths()
    first = make_batches(src, tgt, 1000, seed=3, epoch=1)
    again = make_batches(src, tgt, 1000, seed=3, epoch=1)
    assert len(first) == len(again) and all(np.array_equal(a, b) for a, b in zip(first, again))
    other = make_batches(src, tgt, 1000, seed=3, epoch=2)
    assert [b.tolist() for b in first] != [b.tolist() for b in other]
    assert make_batches(src, tgt, 1000, seed=4, epoch=1)[0].tolist() != first[0].tolist()


def test_unshuffled_batches_are_in_length_order():
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, 1000, seed=1, epoch=1, shuffle=False)
    order = np.concatenate(batches)
    assert np.all(np.diff(tgt[order]) >= 0)


def test_over_long_pair_gets_its_own_batch():
    src = np.array([3, 4, 500, 5, 2])
    tgt = np.array([3, 5, 7, 4, 600])
    batches = make_batches(src, tgt, max_tokens=100, seed=1, epoch=1)
    assert sorted(b.tolist() for b in batches if len(b) == 1 and b[0] in (2, 4)) == [[2], [4]]
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(5))


def test_length_bucketing_keeps_padding_low():
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, 2000, seed=1, epoch=1)
    src_pad, tgt_pad = pad_fraction(batches, src, tgt)
    assert 0.0 <= tgt_pad < 0.05 and 0.0 <= src_pad < 0.4
    rng = np.random.default_rng(0)
    unsorted = np.array_split(rng.permutation(len(src)), len(batches))
    assert pad_fraction(unsorted, src, tgt)[1] > 0.3  # what bucketing saves
    assert make_batches(np.array([], int), np.array([], int), 100, 1, 1) == []


def write_data(exp, split, src_seqs, tgt_seqs):
    """Binarized arrays in the layout binarize writes, from hand-made id sequences."""
    exp.data_dir.mkdir(parents=True)
    for side, seqs in (("src", src_seqs), ("tgt", tgt_seqs)):
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
        np.save(exp.ids_path(split, side), np.array([i for s in seqs for i in s], dtype=np.uint16))
        np.save(exp.offsets_path(split, side), offsets)


def test_collate_places_bos_eos_and_padding(tmp_path):
    exp = Experiment(tmp_path / "exp")
    src_seqs = [[10, 11, 12], [20], [30, 31, 32, 33, 34]]
    tgt_seqs = [[40, 41], [50, 51, 52, 53], [60]]
    write_data(exp, "train", src_seqs, tgt_seqs)
    data = ParallelData(exp, "train")
    batch = collate(data, np.array([2, 0, 1]))
    assert batch.size == 3 and batch.indices.tolist() == [2, 0, 1]
    P, B, E = PAD_ID, BOS_ID, EOS_ID
    assert batch.src_ids.dtype == torch.long
    assert batch.src_ids.tolist() == [
        [30, 31, 32, 33, 34, E],
        [10, 11, 12, E, P, P],
        [20, E, P, P, P, P],
    ]
    assert batch.tgt_in.tolist() == [
        [B, 60, P, P, P],
        [B, 40, 41, P, P],
        [B, 50, 51, 52, 53],
    ]
    assert batch.tgt_out.tolist() == [
        [60, E, P, P, P],
        [40, 41, E, P, P],
        [50, 51, 52, 53, E],
    ]
    assert batch.n_src_tokens == 9 + 3 and batch.n_tgt_tokens == 7 + 3


def test_collate_over_make_batches_matches_lengths(tmp_path):
    exp = Experiment(tmp_path / "exp")
    rng = np.random.default_rng(5)
    src_seqs = [rng.integers(4, 300, rng.integers(1, 20)).tolist() for _ in range(200)]
    tgt_seqs = [rng.integers(4, 300, rng.integers(1, 20)).tolist() for _ in range(200)]
    write_data(exp, "valid", src_seqs, tgt_seqs)
    data = ParallelData(exp, "valid")
    for indices in make_batches(data.src_lens, data.tgt_lens, 256, seed=1, epoch=1):
        batch = collate(data, indices)
        assert batch.src_ids.numel() <= 256 or batch.size == 1
        assert batch.n_src_tokens == int(data.src_lens[indices].sum()) + batch.size
        assert batch.n_tgt_tokens == int(data.tgt_lens[indices].sum()) + batch.size
        i = int(indices[0])
        assert batch.tgt_out[0, : data.tgt_lens[i]].tolist() == tgt_seqs[i]
        assert batch.tgt_in[0, 1 : data.tgt_lens[i] + 1].tolist() == tgt_seqs[i]


def test_batch_stream_shares_out_each_epoch_and_resumes_from_its_position(tmp_path):
    exp = Experiment(tmp_path / "exp")
    rng = np.random.default_rng(6)
    seqs = [rng.integers(4, 300, rng.integers(1, 20)).tolist() for _ in range(200)]
    write_data(exp, "train", seqs, seqs)
    data = ParallelData(exp, "train")
    orders = [make_batches(data.src_lens, data.tgt_lens, 256, seed=1, epoch=epoch) for epoch in (0, 1)]
    streams = [BatchStream(data, 256, seed=1, rank=rank, world_size=2) for rank in (0, 1)]
    for i in range(len(orders[0]) // 2):  # a last round short of one batch per process is left out
        for rank, stream in enumerate(streams):
            assert stream.next_batch().indices.tolist() == orders[0][2 * i + rank].tolist()
    assert streams[0].next_batch().indices.tolist() == orders[1][0].tolist()  # the next epoch reshuffles
    assert (streams[0].epoch, streams[0].batch_in_epoch) == (1, 2)
    resumed = BatchStream(data, 256, seed=1, rank=0, world_size=2)
    resumed.seek(1, 2)
    assert resumed.next_batch().indices.tolist() == streams[0].next_batch().indices.tolist() == orders[1][2].tolist()
    with pytest.raises(MtError, match="training batches for 1000 processes"):
        BatchStream(data, 256, seed=1, world_size=1000).next_batch()


# -- bucketed shapes (train.compile) -------------------------------------------------------------------


def test_the_ladder_pads_little_and_has_few_rungs():
    rungs = {bucket_width(w) for w in range(1, 257)}
    assert len(rungs) == 16 and max(rungs) == 256
    assert sorted(rungs)[:9] == [8, 16, 24, 32, 40, 48, 56, 64, 80]
    for width in range(1, 1025):
        rung = bucket_width(width)
        assert rung >= width and bucket_width(rung) == rung and bucket_width(width + 1) >= rung
        assert rung - width < 8 or (width > 32 and rung - width < rung / 5)  # past 32, under a fifth is padding
    assert bucket_rows(48, 4096) == 80 and bucket_rows(24, 100) == 4 and bucket_rows(600, 256) == 1


def test_bucketed_batches_cover_every_pair_in_a_few_shapes_within_budget():
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, 2000, seed=1, epoch=1, bucketed=True)
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(len(src)))
    shapes = set()
    for batch in batches:
        width = bucket_width(int(max(src[batch].max(), tgt[batch].max())) + 1)
        rows = bucket_rows(width, 2000)
        assert len(batch) <= rows and rows * width <= 2000
        shapes.add((rows, width))
    widths = {bucket_width(int(w)) for w in np.maximum(src, tgt) + 1}
    assert len(shapes) == len(widths) <= 11  # lengths up to 82 + 1: eight rungs of 8, three of 16
    assert len(batches) < 1.25 * len(make_batches(src, tgt, 2000, seed=1, epoch=1))  # what the padding costs


def test_a_bucketed_batch_is_padded_with_pad_rows_and_pad_columns_only(tmp_path):
    exp = Experiment(tmp_path / "exp")
    src_seqs = [[10, 11, 12], [20], [30, 31, 32, 33, 34]]
    tgt_seqs = [[40, 41], [50, 51, 52, 53], [60]]
    write_data(exp, "train", src_seqs, tgt_seqs)
    data = ParallelData(exp, "train")
    plain, padded = collate(data, np.array([2, 0, 1])), collate(data, np.array([2, 0, 1]), bucket_tokens=64)
    assert padded.src_ids.shape == padded.tgt_in.shape == padded.tgt_out.shape == (8, 8)  # 64 // 8 rows, rung 8
    for name in ("src_ids", "tgt_in", "tgt_out"):
        small, big = getattr(plain, name), getattr(padded, name)
        assert torch.equal(big[:3, : small.size(1)], small) and (big[:3, small.size(1) :] == PAD_ID).all()
        assert (big[3:] == PAD_ID).all()
    assert padded.tokens == plain.tokens == (9 + 3, 7 + 3) and padded.indices.tolist() == [2, 0, 1]
    # The target positions, counted on the host, pick the same tokens from either layout.
    assert padded.tgt_out.flatten()[padded.targets].tolist() == plain.tgt_out.flatten()[plain.targets].tolist()
    assert plain.targets.tolist() == torch.nonzero(plain.tgt_out.flatten() != PAD_ID).squeeze(1).tolist()
    # Never wider than the model's positions: pairs of 5 tokens (6 with EOS/BOS) on a rung of 8 for a
    # model of 7 positions (was 8: a traceback in the training step)
    assert collate(data, np.array([2, 0, 1]), bucket_tokens=64, max_width=7).src_ids.shape[1] == 7


# -- batches made ahead on a thread ---------------------------------------------------------------------


def _stream_data(tmp_path, n=200):
    exp = Experiment(tmp_path / "exp")
    rng = np.random.default_rng(7)
    seqs = [rng.integers(4, 300, rng.integers(1, 20)).tolist() for _ in range(n)]
    write_data(exp, "train", seqs, seqs[::-1])
    return ParallelData(exp, "train")


def _same(a, b) -> bool:
    return a.indices.tolist() == b.indices.tolist() and all(torch.equal(x, y) for x, y in zip(a.tensors(), b.tensors()))


@pytest.mark.parametrize("bucketed", [False, True])
def test_prefetched_batches_are_the_streams_own_in_order_across_epochs_and_ranks(tmp_path, bucketed):
    data = _stream_data(tmp_path)
    for rank in (0, 1):
        plain = BatchStream(data, 256, seed=3, rank=rank, world_size=2, bucketed=bucketed)
        ahead = PrefetchingStream(BatchStream(data, 256, seed=3, rank=rank, world_size=2, bucketed=bucketed),
                                  torch.device("cpu"))
        for _ in range(40):  # past the end of the first epoch
            expected, got = plain.next_batch(), ahead.next_batch()
            assert _same(got, expected)
            # The position is that of the batches taken, not of those the thread made ahead.
            assert (ahead.epoch, ahead.batch_in_epoch) == (plain.epoch, plain.batch_in_epoch)
        assert plain.epoch >= 1
        ahead.close()


def test_a_prefetching_stream_seeks_and_resumes_where_the_plain_one_would(tmp_path):
    data = _stream_data(tmp_path)
    ahead = PrefetchingStream(BatchStream(data, 256, seed=3), torch.device("cpu"))
    taken = [ahead.next_batch() for _ in range(5)]
    position = (ahead.epoch, ahead.batch_in_epoch)
    following = [ahead.next_batch() for _ in range(3)]
    resumed = PrefetchingStream(BatchStream(data, 256, seed=3), torch.device("cpu"))
    resumed.seek(*position)  # as a checkpoint saved after the 5th batch resumes
    assert all(_same(resumed.next_batch(), batch) for batch in following)
    ahead.close()  # stopped: a later batch starts a new thread at the position taken
    again = PrefetchingStream(BatchStream(data, 256, seed=3), torch.device("cpu"))
    assert _same(again.next_batch(), taken[0])
    assert _same(ahead.next_batch(), resumed.next_batch())


def test_a_streams_error_is_raised_by_the_step_that_takes_the_batch(tmp_path):
    data = _stream_data(tmp_path)
    ahead = PrefetchingStream(BatchStream(data, 256, seed=1, world_size=1000), torch.device("cpu"))
    with pytest.raises(MtError, match="training batches for 1000 processes"):
        ahead.next_batch()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="hardware: no CUDA device")
def test_on_cuda_batches_arrive_on_the_gpu_with_the_same_contents(tmp_path):
    data = _stream_data(tmp_path)
    plain = BatchStream(data, 256, seed=3)
    ahead = PrefetchingStream(BatchStream(data, 256, seed=3), torch.device("cuda"))
    for _ in range(10):
        expected, got = plain.next_batch(), ahead.next_batch()
        assert all(t.is_cuda for t in got.tensors())
        assert _same(got.to(torch.device("cpu")), expected)
    ahead.close()
