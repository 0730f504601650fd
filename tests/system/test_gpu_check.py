"""tools/gpu_check.py on the CPU (`--small`): every part runs and its checks pass.

On a GPU it runs the same parts at full size (README, "On a GPU"); here the device is the CPU, so
the CPU reference equals the run itself and DDP goes through gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, toy_corpus


@pytest.mark.slow
def test_gpu_check_small_on_the_cpu_runs_every_part_and_passes(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for prefix, n, seed in (("train", 400, 1), ("val", 30, 2), ("test_2016_flickr", 30, 3)):
        de, en = toy_corpus(n, seed)
        (data / f"{prefix}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
        (data / f"{prefix}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_check.py"), "--data", str(data), "--device", "cpu",
                           "--small", "--sweep", "--out", str(tmp_path / "out"), "--json", str(tmp_path / "check.json")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert json.loads((tmp_path / "check.json").read_text()) == result
    assert result["ok"] and result["failed"] == []
    assert {(r["model"], r["precision"]) for r in result["train"]} == {
        ("tiny-a", "fp32"), ("tiny-a", "bf16"), ("tiny-b", "fp32"), ("tiny-b", "bf16")}
    fp32 = [r for r in result["train"] if r["precision"] == "fp32"]
    assert all(r["loss"] == r["cpu_fp32_loss"] and r["tgt_tokens_per_s"] > 0 for r in fp32)
    assert result["attention"]["fp32"]["relative"] < 1e-5
    assert result["ddp"]["backend"] == "gloo" and result["ddp"]["ddp_wrapped"] and result["ddp"]["bitwise"]
    resume = result["resume"]
    assert resume["restored_step"] == resume["saved_at"] and resume["optimizer_restored"] and resume["bitwise"]
    assert result["decode"][0]["sentences"] == 30 and result["decode_model"]["steps"] == 20
    assert "| fp32 |" in done.stdout and "checks failed: none" in done.stdout
    # (g) on tiny models: bf16 at three budgets and fp32 at the middle one, eager, and one compiled row (no
    # CUDA graphs on the CPU), each row timed, with a finite loss and tokens near its budget.
    sweep = result["sweep"]
    assert {(r["model"], r["precision"], r["compile"], r["max_tokens"]) for r in sweep} == {
        *((m, "bf16", "eager", t) for m in ("tiny-a", "tiny-b") for t in (256, 512, 1024)),
        ("tiny-a", "bf16", "default", 512),  # compiled: once on the CPU (every model and budget on CUDA)
        ("tiny-a", "fp32", "eager", 512), ("tiny-b", "fp32", "eager", 512)}
    assert all(r["status"] == "ok" and r["tgt_tokens_per_s"] > 0 and r["peak_memory_mb"] > 0 for r in sweep)
    assert all(0 < r["tgt_tokens_per_update"] <= r["max_tokens"] and r["last_loss"] < 20 for r in sweep)
    assert "(g) throughput sweep" in done.stdout
    # auto on the CPU is its fixed budget; CUDA's sync debug mode has nothing to check here.
    assert result["ready"] == {name: {"max_tokens_auto": 4096, "sync_free": None} for name in ("tiny-a", "tiny-b")}


@pytest.mark.slow
def test_gpu_check_names_a_missing_corpus_and_a_missing_gpu(tmp_path):
    missing = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_check.py"), "--data", str(tmp_path),
                              "--device", "cpu", "--small"], capture_output=True, text=True, timeout=120)
    assert missing.returncode != 0 and "train.en: missing" in missing.stderr
    import torch

    if not torch.cuda.is_available():
        no_gpu = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_check.py"), "--data", str(tmp_path)],
                                capture_output=True, text=True, timeout=120)
        assert no_gpu.returncode != 0 and "torch sees no GPU" in no_gpu.stderr
