"""Training in several processes (DistributedDataParallel over gloo, on the CPU).

One update where each of 2 processes takes half of a batch equals one single-process update on the
whole batch; each process reads its own batches of the seeded order; and `mt train --nproc 2`
trains, writes one log and checkpoints with both processes' RNG states, resumes with 2 processes
and refuses to resume with 1. The tiny experiment comes from helpers.build_experiment.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from helpers import assert_params_close, build_experiment, copy_experiment, params

from mt.data.batching import collate, make_batches
from mt.experiment.checkpoint_file import load_checkpoint
from mt.experiment.paths import Experiment
from mt.training import distributed
from mt.training.setup import build_training

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(),
                                reason="hardware: torch without the gloo process-group backend")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Experiment:
    return build_experiment(tmp_path_factory.mktemp("distributed"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: int, port: int, root: str, halves: list[np.ndarray], out: str) -> None:
    """One of torchrun's processes, as its environment would describe it."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    group = distributed.setup("cpu")
    try:
        exp = Experiment(root)
        trainer = build_training(exp, exp.load_config(), group=group).trainer
        stats = trainer.step([collate(trainer.stream.data, halves[rank])])
        shard = trainer.stream.next_batch().indices  # this process's batch of the seeded order
        torch.save({"params": params(trainer.model), "stats": stats, "shard": torch.from_numpy(shard),
                    "batch_in_epoch": trainer.stream.batch_in_epoch}, Path(out) / f"rank{rank}.pt")
    finally:
        distributed.shutdown(group)
    # As `mt train` under torchrun does: the interpreter's teardown of gloo's threads sometimes aborts
    # ("terminate called without an active exception") after the work is done.
    os._exit(0)


@pytest.mark.slow
def test_two_processes_on_half_a_batch_each_equal_one_on_the_whole(base, tmp_path):
    # adam_eps 1e-3: see test_trainer.test_update_freq_k_equals_one_batch_of_k_times_the_rows.
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0, adam_eps=1e-3)
    single = build_training(exp, cfg).trainer
    order = make_batches(single.stream.data.src_lens, single.stream.data.tgt_lens, cfg.train.max_tokens,
                         cfg.train.seed, 0)
    whole = order[0]
    halves = [whole[: len(whole) // 3], whole[len(whole) // 3 :]]  # unequal token counts on purpose
    stats = single.step([collate(single.stream.data, whole)])

    mp.spawn(_worker, args=(2, free_port(), str(exp.root), halves, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    for result in ranks:
        assert result["stats"]["tgt_tokens"] == stats["tgt_tokens"]  # counted over both processes
        assert result["stats"]["loss"] == pytest.approx(stats["loss"], rel=1e-6)
        assert_params_close(result["params"], params(single.model), atol=1e-6)
    assert all(torch.equal(ranks[0]["params"][k], ranks[1]["params"][k]) for k in ranks[0]["params"])
    assert [r["batch_in_epoch"] for r in ranks] == [2, 2]
    assert [r["shard"].tolist() for r in ranks] == [order[0].tolist(), order[1].tolist()]


def mt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, env=env, timeout=300)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.mark.slow
def test_mt_train_nproc_2_trains_resumes_and_refuses_one_process(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=4, save_every=2, log_every=1, valid_every=2)
    done = mt("train", "--exp", str(exp.root), "--nproc", "2", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("2 processes") == 1  # rank 0 speaks; the other is quiet
    state = load_checkpoint(exp.checkpoint_path("last"))
    assert state["step"] == 4 and state["world_size"] == 2 and state["batch_in_epoch"] == 8
    assert len(state["rng"]) == 2 and not torch.equal(state["rng"][0]["torch"], state["rng"][1]["torch"])
    records = [json.loads(line) for line in exp.train_log_path.read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4]  # one log, written by rank 0
    assert sum("valid_nll" in r for r in records) == 2

    refused = mt("train", "--exp", str(exp.root), "--max-steps", "6")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    last_line = refused.stderr.strip().splitlines()[-1]
    assert last_line.startswith("error: ") and "saved by 2 training process(es), now 1" in last_line

    done = mt("train", "--exp", str(exp.root), "--nproc", "2", "--max-steps", "6", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert "resuming at step 4" in done.stderr
    assert load_checkpoint(exp.checkpoint_path("last"))["step"] == 6
    assert not exp.lock_path.exists()


@pytest.mark.slow
def test_a_checkpoint_the_main_process_cannot_write_stops_every_process_at_once(base, tmp_path):
    """Rank 0 alone writes; its failure (here a directory where step 2's checkpoint goes) was its own:
    the other process went on into the next update's all-reduce and both waited there for gloo's
    30-minute timeout, the error unsaid. Now every process stops, with the error in one line."""
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=4, save_every=2, log_every=1, valid_every=4)
    exp.checkpoint_path("step_2").mkdir(parents=True)
    done = mt("train", "--exp", str(exp.root), "--nproc", "2", "--threads", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: "), done.stderr
    assert "step_0000002.pt" in done.stderr


@pytest.mark.slow
def test_a_failure_of_the_main_process_alone_ends_every_process_with_its_error(base, tmp_path):
    """Rank 0 alone writes the log: a log it cannot open failed rank 0 only, which then waited for the
    others in a barrier while they waited for it in the next all-reduce, until gloo's 30-minute
    timeout, the error unsaid."""
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=4, save_every=2, log_every=1, valid_every=4)
    exp.train_log_path.mkdir(parents=True)
    done = mt("train", "--exp", str(exp.root), "--nproc", "2", "--threads", "1")
    assert done.returncode != 0 and "train.jsonl" in done.stderr, done.stderr
    assert any(line.startswith("error: ") and "train.jsonl" in line for line in done.stderr.splitlines()), done.stderr


def test_torchrun_with_one_rank_takes_the_ddp_path_and_updates_as_one_process(base, tmp_path):
    # tools/gpu_check.py's DDP check on one GPU needs this path: torchrun's environment with WORLD_SIZE 1.
    exp, cfg = copy_experiment(base, tmp_path / "exp", model__dropout=0.0)
    plain = build_training(exp, cfg).trainer
    expected = [plain.step()["loss"] for _ in range(2)]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "TORCHELASTIC_RUN_ID": "test"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        group = distributed.setup("cpu")
        assert group.joined and torch.distributed.is_initialized()
        ddp = build_training(exp, cfg, group=group).trainer
        assert isinstance(ddp.loss_module, torch.nn.parallel.DistributedDataParallel)
        assert [ddp.step()["loss"] for _ in range(2)] == expected
        distributed.shutdown(group)
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    assert not torch.distributed.is_initialized()
    assert all(torch.equal(a, b) for a, b in zip(ddp.model.parameters(), plain.model.parameters()))


@pytest.mark.slow
def test_torchrun_nproc_per_node_1_runs_mt_train_in_a_process_group(base, tmp_path):
    exp, _ = copy_experiment(base, tmp_path / "exp", max_steps=2, save_every=2, log_every=1, valid_every=2)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-port",
                           str(free_port()), "-m", "mt", "train", "--exp", str(exp.root)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 process in a process group (DDP)" in done.stderr
    assert load_checkpoint(exp.checkpoint_path("last"))["step"] == 2
