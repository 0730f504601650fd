"""The GPU paths, checked in one short run: training, mixed precision, SDPA, DDP over NCCL, resume, decoding.

    python tools/gpu_check.py --data data/multi30k                    # on a GPU: about 2-3 minutes on an H200
    python tools/gpu_check.py --data data/multi30k --train-seconds 30 --sweep --json OUT.json   # (g) too: 8 minutes
    python tools/gpu_check.py --data DIR --device cpu --small --sweep # the same checks, tiny, on the CPU (tests)

Inputs: `--data DIR` holds Multi30k as data/multi30k/prepare.py writes it (train, val, test_2016_flickr,
each .en and .de; EN->DE), or any corpus laid out the same way. Everything is written under `--out`
(a temporary directory by default): a joint unigram tokenizer, the binarized data, the checks' models.
Dropout is 0 in (b), so that the device's losses can be set beside the CPU's on the same batches.

(a) matmul peak on the device: 8192^3 (CPU: 1024^3, --small 256^3) in fp32 (TF32 off, torch's default), bf16, fp16.
(b) training of the benchmark preset (3+3, d_model 256) and the paper's base model (6+6, d_model 512) in
    fp32, bf16 and fp16 (a dynamic loss scale), and the preset with train.compile in fp32 and bf16
    (on CUDA): target tokens/s over --steps updates after warm-up,
    MFU against the measured bf16 peak (the 6N rule of bench/throughput.py), peak memory, and the loss
    of the first --ref-steps updates against the same updates in fp32 on the CPU.
(c) SDPA against the written-out attention on the device (padding mask, causal, the decoder's cache):
    logits of a padded batch and of step-by-step decoding, fp32 and bf16; and cached against uncached.
(d) DDP with one rank: the process group torchrun's environment describes (NCCL on CUDA, gloo on the
    CPU) and DistributedDataParallel around the model, as `torchrun --nproc-per-node 1 -m mt train`
    runs; its updates against plain ones, and plain against plain (whether the kernels are
    deterministic at all).
(e) save on the device and resume (fp16 on CUDA, so the loss scaler's state travels too, with dropout,
    so the device's RNG state does): step, optimizer and scaler restored, the next updates against
    the run that never stopped.
(f) beam search (beam 5, GNMT 0.6) of the test set with --device in fp32 and half precision, on a
    benchmark-preset model trained here for --train-seconds: sentences/s and sacreBLEU.
(g) with --sweep, the throughput sweep: the paper's base and big models (their dropout) in bf16 at
    8k, 32k and 64k tokens per update, eager, compiled (train.compile) and compiled with CUDA graphs
    (compile_mode reduce-overhead), and fp32 eager at 32k: target tokens/s over --sweep-steps updates
    timed as training runs them (Trainer.update, no read of the device until the end), MFU against
    (a)'s bf16 peak, peak memory. Eager rows first, then compiled ones, as long as --sweep-seconds
    last; (b) then leaves out its compiled rows. --small: tiny models at 256-1024 tokens, no graphs.
    Before the rows: five updates of each model under torch.cuda.set_sync_debug_mode("error") (an
    update must never wait for the GPU), and the budget train.max_tokens auto decides for each.
Prints a table per part and, as its last line, one JSON object (also written to --json); exits 1 if
a check failed (a sweep row that runs out of memory is reported, not failed).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

# Loss against the CPU's fp32 loss on the same batches: relative difference allowed per precision.
LOSS_TOLERANCE = {"fp32": 1e-3, "bf16": 3e-2, "fp16": 1e-2}
ATTENTION_TOLERANCE = {"fp32": 1e-5, "bf16": 3e-2}  # max abs logit difference over the largest |logit|
RESUME_TOLERANCE = 1e-3  # relative loss difference when the kernels are not deterministic

MODELS = {  # name -> model fields; the full run's two, then --small's two
    "small": dict(enc_layers=3, dec_layers=3, d_model=256, d_ff=1024, n_heads=4),
    "base": dict(enc_layers=6, dec_layers=6, d_model=512, d_ff=2048, n_heads=8),
}
SMALL_MODELS = {
    "tiny-a": dict(enc_layers=1, dec_layers=1, d_model=32, d_ff=64, n_heads=2),
    "tiny-b": dict(enc_layers=2, dec_layers=1, d_model=48, d_ff=96, n_heads=4),
}
# (g): the paper's two models with their dropout (Table 3), the budgets per update, and the same tiny.
SWEEP_MODELS = {
    "base": {**MODELS["base"], "dropout": 0.1},
    "big": dict(enc_layers=6, dec_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
}
SMALL_SWEEP_MODELS = {name: {**fields, "dropout": 0.1} for name, fields in SMALL_MODELS.items()}
SWEEP_TOKENS, SMALL_SWEEP_TOKENS = (8192, 32768, 65536), (256, 512, 1024)
# Compile's warm-up: each new shape of a compiled step with CUDA graphs is run, then recorded.
SWEEP_WARMUP = {"eager": 2, "default": 4, "reduce-overhead": 10}
COMPILE_SECONDS = 150  # a compiled row is not started with less of --sweep-seconds left (its compilation)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_flops_per_token(model) -> tuple[int, int]:
    """(encoder matmul params, decoder matmul params incl. output projection) for the 6N rule, counted
    as bench/throughput.py counts them (embeddings excluded: lookups, not matmuls)."""
    encoder = sum(p.numel() for layer in model.encoder for p in layer.parameters())
    decoder = sum(p.numel() for layer in model.decoder for p in layer.parameters())
    return encoder, decoder + model.output.weight.numel()


def matmul_peak(device, size: int, precisions: list[str]) -> dict[str, float]:
    """GFLOP/s of a size^3 product in each precision, median of 7 after 3 warm-ups."""
    import statistics

    import torch

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    result = {}
    for name in precisions:
        a = torch.randn(size, size, device=device).to(dtypes[name])
        b = torch.randn(size, size, device=device).to(dtypes[name])
        times = []
        for i in range(10):
            sync(device)
            start = time.perf_counter()
            a @ b
            sync(device)
            if i >= 3:
                times.append(time.perf_counter() - start)
        result[name] = 2 * size**3 / statistics.median(times) / 1e9
    return result


SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}  # our split -> the corpus' prefix


def check_corpus(data: Path) -> None:
    for prefix in SPLITS.values():
        for lang in ("en", "de"):
            if not (data / f"{prefix}.{lang}").exists():
                raise SystemExit(f"{data / f'{prefix}.{lang}'}: missing; --data takes what data/multi30k/prepare.py writes")


def small_vocab(data: Path) -> int:
    """--small's vocabulary: about 100, but never below what the corpus' characters need (every one is
    a piece of its own at character_coverage 1.0: Multi30k's 103 would not fit in 100)."""
    characters = set()
    for lang in ("en", "de"):
        characters |= set((data / f"{SPLITS['train']}.{lang}").read_text(encoding="utf-8"))
    return max(100, len(characters) + 32)


def build_experiment(data: Path, out: Path, vocab_size: int):
    """out/exp: the corpus' tokenizer and binarized splits, and the config every check starts from."""
    from mt.atomic_files import write_text_atomic
    from mt.config.schema import ExperimentConfig, save_yaml
    from mt.data.binarize import binarize
    from mt.data.train_tokenizer import train_tokenizer
    from mt.experiment.paths import Experiment

    cfg = ExperimentConfig()
    cfg.data.src_lang, cfg.data.tgt_lang = "en", "de"
    for split, prefix in SPLITS.items():
        setattr(cfg.data, split, [f"files:{data / prefix}"])
    cfg.tokenizer.model_type, cfg.tokenizer.vocab_size, cfg.tokenizer.joint = "unigram", vocab_size, True
    cfg.tokenizer.byte_fallback = vocab_size > 1000  # a tiny vocabulary has no room for the 256 byte pieces
    cfg.model.tie_embeddings = True
    cfg.train.__dict__.update(valid_every=10**9, save_every=10**9, log_every=10**9, seed=1)
    cfg.decode.__dict__.update(beam=5, alpha=0.6, length_penalty="gnmt", checkpoint="last")
    exp = Experiment(out / "exp")
    write_text_atomic(exp.config_path, save_yaml(cfg))
    train_tokenizer(exp, cfg)
    binarize(exp, cfg)
    return exp, cfg


def variant(cfg, model: dict | None = None, **train):
    """A copy of cfg with other model and train fields."""
    cfg = copy.deepcopy(cfg)
    cfg.model.__dict__.update(model or {})
    cfg.train.__dict__.update(train)
    return cfg


def peak_memory_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the process's, so far


def reset_peak_memory(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def training_rows(exp, cfg, device, models: dict, precisions: list[str], steps: int, ref_steps: int,
                  peak: dict[str, float], compiled: list[str] = ()) -> list[dict]:
    """(b): per model, the CPU fp32 losses of the first ref_steps updates, then each precision on
    the device: losses, tokens/s, MFU, peak memory; for the first model, also each of `compiled`'s
    precisions with train.compile (timed after warm-up steps that include the compilations)."""
    from mt.training.setup import build_training

    rows = []
    for name, fields in models.items():
        model_cfg = {**fields, "dropout": 0.0}
        reference = build_training(exp, variant(cfg, model_cfg, precision="fp32"), "cpu").trainer
        # The same batches for every run (a compiled run's own stream pads them to a few shapes).
        batches = [reference.stream.next_batch() for _ in range(ref_steps)]
        cpu_losses = [reference.step([batch])["loss"] for batch in batches]
        del reference
        runs = [(p, False) for p in precisions] + [(p, True) for p in compiled if name == next(iter(models))]
        for precision, compile in runs:
            reset_peak_memory(device)
            trainer = build_training(exp, variant(cfg, model_cfg, precision=precision, compile=compile), str(device)).trainer
            encoder_params, decoder_params = model_flops_per_token(trainer.model)
            losses = [trainer.step([batch])["loss"] for batch in batches]
            for _ in range(6 if compile else 2):
                trainer.update()  # warm-up beyond the compared steps: kernel choice, allocator, recompiles
            sync(device)
            start, tgt, src = time.perf_counter(), 0, 0
            for _ in range(steps):  # as the training loop runs them: nothing read back until the end
                stats = trainer.update()
                tgt, src = tgt + stats["tgt_tokens"], src + stats["src_tokens"]
            sync(device)
            seconds = time.perf_counter() - start
            trainer.read()  # state.skipped: the updates the device skipped
            flops = 6 * (encoder_params * src + decoder_params * tgt) / seconds
            worst = max(relative(a, b) for a, b in zip(losses, cpu_losses))
            rows.append({
                "model": name, "precision": precision, "compiled": compile, "params_m": round(sum(p.numel() for p in trainer.model.parameters()) / 1e6, 2),
                "tgt_tokens_per_s": round(tgt / seconds, 1), "step_ms": round(1000 * seconds / steps, 2),
                "mfu_vs_bf16_peak": round(flops / 1e9 / peak["bf16"], 4) if "bf16" in peak else None,
                "peak_memory_mb": round(peak_memory_mb(device), 1),
                "loss": [round(x, 5) for x in losses], "cpu_fp32_loss": [round(x, 5) for x in cpu_losses],
                "loss_rel_diff": worst, "loss_ok": worst <= LOSS_TOLERANCE[precision],
                "loss_scale": trainer.scaler.get_scale() if trainer.scaler is not None else None,
                "skipped": trainer.state.skipped,
            })
            log(f"  train {name} {precision}{' compiled' if compile else ''}: {rows[-1]['tgt_tokens_per_s']:,.0f} tgt tokens/s, loss rel diff {worst:.2e}")
            del trainer
    return rows


def sweep_plan(models: dict, device) -> list[tuple[str, str, str]]:
    """(model, mode, precision) in the order (g) runs them: bf16 eager, fp32 eager, then compiled."""
    modes = ["default", "reduce-overhead"] if device.type == "cuda" else ["default"]
    plan = [(name, "eager", "bf16") for name in models] + [(name, "eager", "fp32") for name in models]
    compiled = list(models) if device.type == "cuda" else list(models)[:1]  # the CPU: the code path, once
    return plan + [(name, mode, "bf16") for mode in modes for name in compiled]


def time_updates(trainer, device, warmup: int, steps: int) -> dict:
    """Warm-up updates, then `steps` timed as the training loop runs them: no read of the device until
    the end (one synchronisation there); the first and last losses, read once each."""
    first = trainer.step()  # a read: the loss is real, and the first shapes are made
    for _ in range(warmup):
        trainer.update()
    sync(device)
    start, tgt, src = time.perf_counter(), 0, 0
    for _ in range(steps):
        done = trainer.update()
        tgt, src = tgt + done["tgt_tokens"], src + done["src_tokens"]
    sync(device)
    seconds = time.perf_counter() - start
    last = trainer.read()["last_loss"] / max(done["tgt_tokens"], 1)
    return {"seconds": seconds, "tgt": tgt, "src": src, "first_loss": first["loss"], "last_loss": last}


def readiness(exp, cfg, device, models: dict) -> dict:
    """(g)'s first part: per model, whether five bf16 updates ran without a synchronisation of the
    GPU (CUDA's sync debug mode raises at one; None on the CPU), and train.max_tokens auto's budget."""
    import torch

    from mt.training.setup import build_training

    result = {}
    for name, fields in models.items():
        entry: dict = {}
        run = build_training(exp, variant(cfg, fields, precision="bf16", max_tokens="auto"), str(device))
        entry["max_tokens_auto"] = run.cfg.train.max_tokens
        trainer = run.trainer
        try:
            trainer.step()  # the optimizer's state is made at the first update
            entry["sync_free"] = None
            if device.type == "cuda":
                sync(device)
                torch.cuda.set_sync_debug_mode("error")
                try:
                    for _ in range(5):
                        trainer.update()
                    entry["sync_free"] = True
                except RuntimeError as exc:
                    entry["sync_free"], entry["sync"] = False, str(exc).strip().splitlines()[0][:300]
                finally:
                    torch.cuda.set_sync_debug_mode("default")
        except torch_oom():
            entry["sync_free"], entry["sync"] = None, "out of memory at auto's budget"
        trainer.stream.close()
        del trainer, run
        gc.collect()
        reset_peak_memory(device)
        log(f"  ready {name}: max_tokens auto {entry['max_tokens_auto']}, sync-free updates {entry['sync_free']}")
        result[name] = entry
    return result


def throughput_sweep(exp, cfg, device, models: dict, budgets: tuple[int, ...], peak: dict[str, float],
                     steps: int, seconds: float) -> list[dict]:
    """(g): each (model, mode, precision) of `sweep_plan` at each budget (fp32 at the middle one), one
    Trainer per (model, mode) whose batches change budget; rows not reached in `seconds` say so."""
    from mt.training.setup import build_training

    deadline = time.monotonic() + seconds
    rows = []
    for name, mode, precision in sweep_plan(models, device):
        # fp32 at the middle budget; on the CPU (the tests) a compiled row there too: compiling is slow
        sizes = budgets if precision == "bf16" and (mode == "eager" or device.type == "cuda") else budgets[1:2]
        base_row = {"model": name, "compile": mode, "precision": precision}
        need = COMPILE_SECONDS if mode != "eager" and device.type == "cuda" else 0
        if deadline - time.monotonic() < need:
            rows += [{**base_row, "max_tokens": size, "status": "not run: out of --sweep-seconds"} for size in sizes]
            continue
        run_cfg = variant(cfg, models[name], precision=precision, compile=mode != "eager",
                          compile_mode="default" if mode == "eager" else mode, max_tokens=sizes[0], clip_norm=0.0)
        trainer = None
        try:
            trainer = build_training(exp, run_cfg, str(device)).trainer
            encoder_params, decoder_params = model_flops_per_token(trainer.model)
            out_of_memory = False
            for size in sizes:
                row = {**base_row, "max_tokens": size, "params_m": round(sum(p.numel() for p in trainer.model.parameters()) / 1e6, 1)}
                if time.monotonic() > deadline or out_of_memory:
                    why = "a smaller budget ran out of memory" if out_of_memory else "out of --sweep-seconds"
                    rows.append({**row, "status": f"not run: {why}"})
                    continue
                trainer.stream.seek(0, 0)  # the stream's batches, cut to this budget from the epoch's start
                trainer.stream.stream.max_tokens = size
                reset_peak_memory(device)
                try:
                    timed = time_updates(trainer, device, SWEEP_WARMUP[mode] if device.type == "cuda" else 1, steps)
                except torch_oom() as exc:
                    rows.append({**row, "status": f"out of memory ({type(exc).__name__})"})
                    out_of_memory = True  # the budgets grow: the next would too
                    continue
                flops = 6 * (encoder_params * timed["src"] + decoder_params * timed["tgt"]) / timed["seconds"]
                rows.append({
                    **row, "status": "ok",
                    "tgt_tokens_per_s": round(timed["tgt"] / timed["seconds"], 1),
                    "tgt_tokens_per_update": round(timed["tgt"] / steps),
                    "step_ms": round(1000 * timed["seconds"] / steps, 2),
                    "mfu_vs_bf16_peak": round(flops / 1e9 / peak["bf16"], 4) if "bf16" in peak else None,
                    "peak_memory_mb": round(peak_memory_mb(device), 1),
                    "first_loss": round(timed["first_loss"], 4), "last_loss": round(timed["last_loss"], 4),
                })
                log(f"  sweep {name} {precision} {mode} {size}: {rows[-1]['tgt_tokens_per_s']:,.0f} tgt tokens/s, "
                    f"MFU {rows[-1]['mfu_vs_bf16_peak']}, {rows[-1]['peak_memory_mb']:,.0f} MB")
        except Exception as exc:  # noqa: BLE001 - a compiler's or a kernel's failure is a result to report
            message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
            log(f"  sweep {name} {precision} {mode}: failed: {message}")
            done = {row["max_tokens"] for row in rows if (row["model"], row["compile"], row["precision"]) == (name, mode, precision)}
            rows += [{**base_row, "max_tokens": size, "status": f"failed: {message}"} for size in sizes if size not in done]
        finally:
            if trainer is not None:
                trainer.stream.close()
            del trainer
            gc.collect()
            reset_peak_memory(device)
    return rows


def torch_oom() -> type[BaseException]:
    import torch

    return torch.cuda.OutOfMemoryError


def attention_check(device, vocab: int, fields: dict) -> dict:
    """(c): SDPA and the written-out attention on the same weights and inputs."""
    import torch

    from mt.config.schema import ModelConfig
    from mt.model.attention import MultiHeadAttention
    from mt.model.transformer import build_model

    torch.manual_seed(3)
    model_cfg = ModelConfig(**{**fields, "dropout": 0.0, "tie_embeddings": True})
    model = build_model(model_cfg, vocab, vocab, True).to(device).eval()
    batch, src_len, tgt_len = 6, 23, 9
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    for row, length in enumerate((23, 20, 11, 5, 2, 1)):  # right padding, down to one real token
        src[row, length:] = model.pad_id
    tgt = torch.randint(4, vocab, (batch, tgt_len), device=device)
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    result = {}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model.to(dtype)
        outputs = {}
        for sdpa in (True, False):
            for module in attentions:
                module.use_sdpa = sdpa
            with torch.no_grad():
                full = model(src, tgt).float()
                memory, src_mask = model.encode(src)
                cache, steps = model.new_cache(), []
                for t in range(tgt_len):
                    steps.append(model.decode(tgt[:, t : t + 1], memory, src_mask, cache).float())
            outputs[sdpa] = (full, torch.cat(steps, dim=1))
        (full_s, cached_s), (full_w, cached_w) = outputs[True], outputs[False]
        scale = float(full_w.abs().max())
        result[precision] = {
            "full_sdpa_vs_written": float((full_s - full_w).abs().max()),
            "cached_sdpa_vs_written": float((cached_s - cached_w).abs().max()),
            "cached_vs_full_sdpa": float((cached_s - full_s).abs().max()),
        }
        worst = max(result[precision].values()) / scale
        result[precision].update(max_abs_logit=scale, relative=worst, ok=worst <= ATTENTION_TOLERANCE[precision])
    for module in attentions:
        module.use_sdpa = None
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def params_difference(a, b) -> float:
    return max(float((x.detach().float() - y.detach().float()).abs().max()) for x, y in zip(a.parameters(), b.parameters()))


def ddp_check(exp, cfg, device, fields: dict, steps: int) -> dict:
    """(d): one rank in a process group, as torchrun's environment sets it up, against plain updates."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from mt.training import distributed
    from mt.training.setup import build_training

    run_cfg = variant(cfg, {**fields, "dropout": 0.0}, precision="fp32")
    plain = [build_training(exp, run_cfg, str(device)).trainer for _ in range(2)]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "TORCHELASTIC_RUN_ID": "gpu-check"}
    saved_env = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        group = distributed.setup(str(device))
        backend = dist.get_backend()
        ddp = build_training(exp, run_cfg, str(device), group).trainer
        wrapped = isinstance(ddp.loss_module, DistributedDataParallel)
        ddp_losses = [ddp.step()["loss"] for _ in range(steps)]
        distributed.shutdown(group)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    plain_losses = [[t.step()["loss"] for _ in range(steps)] for t in plain]
    noise = params_difference(plain[0].model, plain[1].model)
    ddp_diff = params_difference(ddp.model, plain[0].model)
    return {
        "backend": backend, "ddp_wrapped": wrapped, "steps": steps,
        "params_max_diff_ddp_vs_plain": ddp_diff, "params_max_diff_plain_vs_plain": noise,
        "loss_ddp": ddp_losses, "loss_plain": plain_losses[0],
        "bitwise": ddp_diff == 0.0,
        # Equal bit for bit where the kernels are deterministic; else no further apart than two plain runs.
        "ok": wrapped and (ddp_diff == 0.0 or ddp_diff <= 10 * max(noise, 1e-7)),
    }


def resume_check(exp_root: Path, cfg, device, fields: dict, before: int, after: int) -> dict:
    """(e): `before` updates, save, `after` more; a fresh run resumed from the save, `after` updates."""
    import shutil

    import torch

    from mt.experiment.paths import Experiment
    from mt.training.checkpoints import resume_training, save_training
    from mt.training.setup import build_training

    precision = "fp16" if device.type == "cuda" else "fp32"
    run_root = exp_root.parent / "resume-exp"
    shutil.rmtree(run_root, ignore_errors=True)
    shutil.copytree(exp_root, run_root, ignore=shutil.ignore_patterns("checkpoints"))
    exp = Experiment(run_root)
    run_cfg = variant(cfg, {**fields, "dropout": 0.1}, precision=precision, save_every=before, keep_last=2)
    first = build_training(exp, run_cfg, str(device))
    # fp16's first loss scale (2^16) overflows for some updates, which are skipped: step until `before`
    # updates were made, so that the optimizer's moments are not all zeros when saved.
    for _ in range(before + 30):
        if first.trainer.state.step >= before:
            break
        first.trainer.step()
    save_training(first)
    saved_scale = first.trainer.scaler.get_scale() if first.trainer.scaler is not None else None
    saved_moment = [s["exp_avg"].clone() for s in first.trainer.optimizer.state.values()]
    straight = [first.trainer.step()["loss"] for _ in range(after)]

    second = build_training(exp, run_cfg, str(device))
    resumed = resume_training(second)
    trainer = second.trainer
    restored_step = trainer.state.step
    restored_scale = trainer.scaler.get_scale() if trainer.scaler is not None else None
    moments_equal = all(torch.equal(a, s["exp_avg"]) for a, s in zip(saved_moment, trainer.optimizer.state.values()))
    again = [trainer.step()["loss"] for _ in range(after)]
    worst = max(relative(a, b) for a, b in zip(again, straight))
    params_diff = params_difference(trainer.model, first.trainer.model)
    return {
        "precision": precision, "saved_at": before, "resumed": resumed, "restored_step": restored_step,
        "optimizer_restored": moments_equal, "loss_scale_saved": saved_scale, "loss_scale_restored": restored_scale,
        "loss_straight": straight, "loss_resumed": again, "loss_rel_diff": worst,
        "params_max_diff": params_diff, "bitwise": again == straight and params_diff == 0.0,
        "ok": resumed and restored_step == before and moments_equal and saved_scale == restored_scale
              and worst <= RESUME_TOLERANCE,
    }


def decoding_rows(exp, cfg, device, fields: dict, train_seconds: float, max_steps: int, precisions: list[str]) -> tuple[dict, list[dict]]:
    """(f): a model trained on the device, then the test set decoded in each precision."""
    from mt.atomic_files import write_text_atomic
    from mt.config.schema import save_yaml
    from mt.data.corpus import load_split
    from mt.decoding.translator import Translator
    from mt.metrics import score
    from mt.training.loop import train

    train_cfg = variant(cfg, {**fields, "dropout": 0.1}, precision="auto", max_time=train_seconds,
                        max_steps=max_steps, max_tokens=8192 if device.type == "cuda" else cfg.train.max_tokens,
                        lr_peak=1e-3, warmup_steps=min(1000, max(1, max_steps // 4)), cooldown=0.2,
                        weight_decay=0.1, label_smoothing=0.1)
    if device.type == "cuda":
        train_cfg.decode.max_tokens = 8000  # source tokens per decoding batch: a GPU wants more than the CPU's 2000
    write_text_atomic(exp.config_path, save_yaml(train_cfg))
    summary = train(exp, train_cfg, str(device))
    src_lines, refs = load_split(train_cfg.data.sources("test"))
    rows = []
    for precision in precisions:
        translator = Translator.load(exp, train_cfg, device=str(device), precision=precision)
        translator.translate(src_lines[:50])  # warm-up
        sync(device)
        start = time.perf_counter()
        hyps = translator.translate(src_lines)
        sync(device)
        seconds = time.perf_counter() - start
        scores = score(hyps, refs)
        rows.append({"precision": precision, "sentences": len(hyps), "sent_per_s": round(len(hyps) / seconds, 1),
                     "bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2)})
        log(f"  decode {precision}: {rows[-1]['sent_per_s']} sent/s, BLEU {rows[-1]['bleu']}")
    trained = {k: summary[k] for k in ("steps", "seconds", "precision", "skipped") if k in summary}
    return trained, rows


def table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            cells.append(f"{value:,.4g}" if isinstance(value, float) else str(value))
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="train/val/test_2016_flickr .en/.de, as data/multi30k/prepare.py writes")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny models and sizes: the CPU run the tests make")
    parser.add_argument("--out", help="work directory (default: a temporary one, removed at the end)")
    parser.add_argument("--steps", type=int, help="timed updates per training row (default 30; --small 3)")
    parser.add_argument("--ref-steps", type=int, help="updates compared with the CPU's (default 4; --small 2)")
    parser.add_argument("--train-seconds", type=float, default=90.0, help="training budget of (f)'s model")
    parser.add_argument("--sweep", action="store_true", help="(g): the throughput sweep of base and big")
    parser.add_argument("--sweep-steps", type=int, help="timed updates per sweep row (default 10; --small 2)")
    parser.add_argument("--sweep-seconds", type=float, default=300.0, help="(g)'s time: rows past it are not run")
    parser.add_argument("--json", help="also write the result (the last line's JSON object) to this file")
    args = parser.parse_args()

    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU here (torch.cuda.is_available() is false); try --device cpu")
    check_corpus(Path(args.data))
    small = args.small
    steps = args.steps or (3 if small else 30)
    ref_steps = args.ref_steps or (2 if small else 4)
    models = SMALL_MODELS if small else MODELS
    precisions = ["fp32", "bf16", "fp16"] if device.type == "cuda" else ["fp32", "bf16"]
    decode_precisions = ["fp32", "bf16", "fp16"] if device.type == "cuda" else ["fp32"]
    started = time.perf_counter()
    temporary = tempfile.TemporaryDirectory(prefix="gpu-check-") if not args.out else None
    out = Path(args.out or temporary.name)
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    log(f"gpu_check on {gpu or device}: torch {torch.__version__}, CUDA {torch.version.cuda}")

    peak = matmul_peak(device, 8192 if device.type == "cuda" else (256 if small else 1024), precisions)
    log("  matmul GFLOP/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in peak.items()))
    exp, cfg = build_experiment(Path(args.data), out, small_vocab(Path(args.data)) if small else 8000)
    cfg = variant(cfg, max_tokens=300 if small else (8192 if device.type == "cuda" else 4096))
    first_model = next(iter(models.values()))

    vocab = exp.load_tokenizers(cfg.tokenizer.joint)[0].vocab_size

    # train.compile where it should pay: GPUs, whose steps of a small model are many small kernels
    # (tests/integration/test_compile_and_phases.py runs it on the CPU).
    compiled = ["fp32", "bf16"] if device.type == "cuda" and not args.sweep else []  # (g) compiles base and big
    train_rows = training_rows(exp, cfg, device, models, precisions, steps, ref_steps, peak, compiled)
    attention = attention_check(device, vocab, first_model)
    log(f"  attention: {json.dumps(attention)}")
    ddp = ddp_check(exp, cfg, device, first_model, ref_steps + 1)
    log(f"  ddp: backend {ddp['backend']}, params diff {ddp['params_max_diff_ddp_vs_plain']:.3g}")
    resume = resume_check(exp.root, cfg, device, first_model, before=ref_steps + 1, after=ref_steps + 1)
    log(f"  resume: ok {resume['ok']}, bitwise {resume['bitwise']}")
    # Before (f), whose checkpoint a max_tokens auto would keep the budget of.
    ready = readiness(exp, cfg, device, SMALL_SWEEP_MODELS if small else SWEEP_MODELS) if args.sweep else {}
    trained, decode_rows = decoding_rows(exp, cfg, device, first_model, args.train_seconds,
                                         max_steps=20 if small else 10**9, precisions=decode_precisions)
    sweep = []
    if args.sweep:
        sweep = throughput_sweep(exp, cfg, device, SMALL_SWEEP_MODELS if small else SWEEP_MODELS,
                                 SMALL_SWEEP_TOKENS if small else SWEEP_TOKENS, peak,
                                 args.sweep_steps or (2 if small else 10), args.sweep_seconds)

    print(f"gpu_check: {gpu or device.type}, torch {torch.__version__}, CUDA {torch.version.cuda}, data {args.data}")
    table("(a) matmul peak", [{"precision": k, "gflops": round(v, 1)} for k, v in peak.items()], ["precision", "gflops"])
    table(f"(b) training, {steps} timed updates of {cfg.train.max_tokens} tokens, dropout 0; loss of the first "
          f"{ref_steps} against CPU fp32", train_rows,
          ["model", "precision", "compiled", "params_m", "tgt_tokens_per_s", "step_ms", "mfu_vs_bf16_peak", "peak_memory_mb",
           "loss_rel_diff", "loss_ok", "loss_scale"])
    table("(c) SDPA against the written-out attention (max abs logit difference)",
          [{"precision": k, **v} for k, v in attention.items()],
          ["precision", "full_sdpa_vs_written", "cached_sdpa_vs_written", "cached_vs_full_sdpa", "max_abs_logit",
           "relative", "ok"])
    table("(d) DDP with one rank", [ddp], ["backend", "ddp_wrapped", "steps", "params_max_diff_ddp_vs_plain",
                                          "params_max_diff_plain_vs_plain", "bitwise", "ok"])
    table("(e) save and resume", [resume], ["precision", "saved_at", "restored_step", "optimizer_restored",
                                            "loss_scale_restored", "loss_rel_diff", "bitwise", "ok"])
    table(f"(f) beam 5, GNMT 0.6, on the test set; model: {trained}", decode_rows, ["precision", "sentences", "sent_per_s", "bleu", "chrf"])
    if args.sweep:
        table("(g) before the sweep: train.max_tokens auto's budget (bf16), and five updates under CUDA's sync debug mode",
              [{"model": k, **v} for k, v in ready.items()], ["model", "max_tokens_auto", "sync_free", "sync"])
        table("(g) throughput sweep: tokens per update (max_tokens), eager or compiled; MFU against (a)'s bf16 peak",
              sweep, ["model", "precision", "compile", "max_tokens", "tgt_tokens_per_update", "tgt_tokens_per_s",
                      "step_ms", "mfu_vs_bf16_peak", "peak_memory_mb", "last_loss", "status"])

    failed = [f"train {r['model']} {r['precision']}{' compiled' if r['compiled'] else ''}" for r in train_rows if not r["loss_ok"]]
    failed += [f"attention {k}" for k, v in attention.items() if not v["ok"]]
    failed += ["ddp"] if not ddp["ok"] else []
    failed += ["resume"] if not resume["ok"] else []
    failed += [f"decode {r['precision']}" for r in decode_rows if not r["sentences"]]
    # A sweep row that fails (not one out of memory or out of time) is a failed check: compile or graphs broke.
    failed += [f"sweep {r['model']} {r['precision']} {r['compile']} {r['max_tokens']}" for r in sweep
               if r["status"].startswith("failed")]
    failed += [f"sync-free updates {name}" for name, r in ready.items() if r["sync_free"] is False]
    print(f"\nchecks failed: {', '.join(failed) or 'none'}")
    result = {"device": gpu or device.type, "torch": torch.__version__, "cuda": torch.version.cuda, "data": args.data,
              "small": small, "matmul_gflops": peak, "train": train_rows, "attention": attention, "ddp": ddp,
              "resume": resume, "decode_model": trained, "decode": decode_rows, "ready": ready, "sweep": sweep, "failed": failed,
              "ok": not failed, "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if temporary is not None:
        temporary.cleanup()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
