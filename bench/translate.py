"""Decoding speed: an experiment's test split at beam 5, mt's modes beside CTranslate2 on the same model.

    python -m bench.translate --exp experiments/bench-multi30k [--modes fp32,int8,ct2_fp32,ct2_int8,ct2_int8_inter] [--repeats 3]

Inputs: a trained experiment (e.g. the one `bench/multi30k.py` leaves), its test split (raw text,
for Multi30k test2016: 1000 sentences), the checkpoint named by --checkpoint (default: last).
mt's modes (fp32, int8 = --quantize int8, bf16, and on request `constrained`: fp32 with each
sentence's reference's longest word as a constraint, `mt translate --constraints`; M_1w: mode M one
batch at a time, --workers 1; M_proc: mode M with its workers in processes of one thread each,
--parallel processes, started by the warm-up, whose peak RSS is not counted) and CTranslate2's (ct2_fp32, ct2_int8: the checkpoint exported by
`mt export` into a temporary directory, compute_type float32 or int8, on intra_threads; on request
ct2_M_inter: on inter_threads, one batch per thread as mt's default --workers) run each in its own
process (so peak RSS is its own), all loaded first and then timed in turn, run 1 of every mode, then
run 2, and so on, so that the machine's drift touches every mode alike; sentences/s is from the median
run. With the experiment's lexical shortlist (`mt shortlist --exp EXP` first), on request: M_sl, mt's mode M
with --shortlist; ct2_M_vmap (and ct2_M_inter_vmap), CTranslate2 with the export's vmap.txt (the same
shortlist) and translate_batch(use_vmap=True). M_engine (and M_sl_engine): mt's mode M decoding through
decode.engine ctranslate2, the CTranslate2 model mt builds in the experiment itself (mt.decoding.engine:
inter_threads, mt's batches, with the shortlist as its vmap). Every mode decodes with the same search: beam 5, the `length` penalty (score / |Y|^alpha, |Y|
counting </s>; CTranslate2 has no GNMT penalty) at --alpha, an empty output allowed, the same source
cut. mt's modes batch by its own source-token budget (decode.max_tokens; its engine modes cut that
to a few hundred tokens on a CPU, mt.decoding.engine); CTranslate2 gets --ct2-max-tokens as
max_batch_size in tokens (default 256, its fastest on these CPUs: docs/benchmarks.md; 0: mt's own budget);
several sizes (--ct2-max-tokens 128,256,512) run each CTranslate2 mode at each, side by side, and mt's
fastest mode is also given against CTranslate2's fastest of them (with and without the vmap: its best
configuration by hand). Timing covers tokenizing, searching and detokenizing for both.
On request, the same checkpoint exported by `mt export --format huggingface` runs
in transformers (hf_fp32: `generate()`) and, converted by Optimum, in ONNX Runtime (ort_fp32), under
the same search settings, batched by mt's budget, with one length limit per batch as CTranslate2 has (pip install -e '.[huggingface,onnx]').
BLEU is sacrebleu's default on the output. Without --modes, bf16 is left out (a row of the table says
so) on a CPU that runs it 10x or more slower than fp32 (no bf16 hardware), and the ct2 modes where the
ctranslate2 package is missing (pip install -e '.[export]'). Prints a table and, as its last line,
one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common import CT2_MODES, HF_MODES, MT_MODES, run_interleaved

REPO = Path(__file__).resolve().parents[1]

# CTranslate2 on inter_threads too: one batch per thread is its best on a CPU of several cores (the
# ratios against it are the ones that count; intra_threads alone flattered mt)
DEFAULT_MODES = ("fp32", "int8", "bf16", "ct2_fp32", "ct2_int8", "ct2_int8_inter")
EQUAL_BLEU = 0.2  # two modes within this BLEU of each other are at equal quality (a ratio beyond it is said)
KNOWN_MODES = (*DEFAULT_MODES, "constrained", "fp32_1w", "int8_1w", "bf16_1w", "fp32_proc", "int8_proc", "bf16_proc",
               "ct2_fp32_inter", "fp32_sl", "int8_sl", "bf16_sl", "ct2_fp32_vmap", "ct2_int8_vmap",
               "ct2_fp32_inter_vmap", "ct2_int8_inter_vmap", "fp32_sl_proc", "int8_sl_proc", "bf16_sl_proc", "fp32_engine", "int8_engine",
               "fp32_sl_engine", "int8_sl_engine", *HF_MODES)



def export_once(args, directory: str, modes: list[str]) -> dict[str, str]:
    """The exports the modes need, in `directory`: format -> its model directory."""
    from mt.apps.export.directory import export
    from mt.experiment.paths import Experiment

    exp = Experiment(args.exp)
    dirs = {}
    if any(m in CT2_MODES for m in modes):
        dirs["ct2"] = str(Path(directory) / "ct2")
        export(exp, exp.load_config(), Path(dirs["ct2"]), checkpoint=args.checkpoint)
    if any(m in HF_MODES for m in modes):
        dirs["hf"] = str(Path(directory) / "hf")
        export(exp, exp.load_config(), Path(dirs["hf"]), fmt="huggingface", checkpoint=args.checkpoint)
    if "ort_fp32" in modes:
        from optimum.exporters.onnx import main_export

        dirs["onnx"] = str(Path(directory) / "onnx")
        main_export(dirs["hf"], output=dirs["onnx"], task="text2text-generation-with-past")
    return dirs


def default_modes() -> tuple[list[str], dict[str, str]]:
    """The modes worth running on this machine, and why each other default one is left out."""
    from mt.hardware import too_slow

    skipped = {m: reason for m in DEFAULT_MODES if m in MT_MODES and (reason := too_slow(MT_MODES[m][0]))}
    if importlib.util.find_spec("ctranslate2") is None:
        skipped.update({m: "no ctranslate2 package (pip install -e '.[export]')" for m in CT2_MODES})
    return [m for m in DEFAULT_MODES if m not in skipped], skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-multi30k"))
    parser.add_argument("--checkpoint", default="last")
    parser.add_argument("--modes", default=None,
                        help=f"Comma-separated, of {', '.join(KNOWN_MODES)} (default: all but constrained that run "
                             "well here); named here, a mode always runs. constrained: fp32 with each sentence's "
                             "reference's longest word as a constraint (mt translate --constraints)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=1.0, help="length penalty exponent, the same for every mode")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ct2-max-tokens", default="256",
                        help="CTranslate2's max_batch_size in tokens (0: the experiment's decode.max_tokens); "
                             "several, comma-separated: each CTranslate2 mode M runs at each as M@bN, in the same "
                             "rotation, and mt is compared with CTranslate2's fastest of them")
    parser.add_argument("--old", default=None, metavar="CHECKOUT",
                        help="Another checkout of mt (git worktree add /tmp/old COMMIT): each of mt's modes also "
                             "runs from it, as M@old, interleaved with this one's, to measure a change before/after")
    args = parser.parse_args()

    from mt.allocator import allocator_name, use_tcmalloc
    from mt.hardware import cpu_name

    use_tcmalloc()  # as `mt` does (MT_ALLOCATOR=system for glibc's malloc); the workers inherit it
    skipped: dict[str, str] = {}
    if args.modes is None:
        modes, skipped = default_modes()
    else:
        modes = [m.strip() for m in args.modes.split(",")]
        unknown = [m for m in modes if m not in KNOWN_MODES]
        if unknown:
            raise SystemExit(f"--modes: unknown {', '.join(unknown)} (expected {', '.join(KNOWN_MODES)})")
    if "fp32" not in modes:
        modes.insert(0, "fp32")
    sizes = [int(n) for n in str(args.ct2_max_tokens).split(",")]
    args.ct2_max_tokens = sizes[0]  # the workers' default; M@bN modes run at N
    if len(sizes) > 1:  # each CTranslate2 mode at each batch size: its best configuration, side by side
        modes = [
            name for m in modes for name in ([f"{m}@b{n}" for n in sizes] if m in CT2_MODES else [m])
        ]
    if args.old:
        args.old = str(Path(args.old).resolve())
        modes += [f"{m}@old" for m in modes if m in MT_MODES and m != "constrained" and not m.endswith(("_1w", "_sl"))]
    print(f"inputs: {args.exp} (test split, checkpoint {args.checkpoint}); beam {args.beam}, length penalty "
          f"alpha {args.alpha}, {args.threads} threads, {args.repeats} runs per mode, interleaved", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="mt-bench-export-") as directory:
        model_dirs = export_once(args, directory, [m.partition("@b")[0] for m in modes])
        settings = {k: getattr(args, k) for k in ("threads", "checkpoint", "beam", "alpha", "old", "ct2_max_tokens")}
        results = run_interleaved({m: (args.exp, m, settings) for m in modes}, args.repeats, model_dirs)

    from rich.console import Console
    from rich.table import Table

    versions = {"mt": "this checkout"}
    if "ct2" in model_dirs:
        import ctranslate2

        versions["ctranslate2"] = ctranslate2.__version__
    if "hf" in model_dirs:
        import transformers

        versions["transformers"] = transformers.__version__
    if "onnx" in model_dirs:
        import onnxruntime

        versions["onnxruntime"] = onnxruntime.__version__
    title = (f"Decoding {args.exp} test split, beam {args.beam}, length penalty {args.alpha}, {args.threads} threads, "
             f"{cpu_name()}")
    table = Table(title=title)
    for column in ("system", "sent/s", "tokens/s", "BLEU", "chrF", "ref word in output", "peak RSS MB", "runs (s)"):
        table.add_column(column, justify="left" if column in ("system", "runs (s)") else "right")
    for mode, r in results.items():
        base, _, size = mode.partition("@b")
        if size:
            mode = base
        name = {**{m: f"CTranslate2 {versions.get('ctranslate2')} {m[4:]}" for m in CT2_MODES},
                "hf_fp32": f"transformers {versions.get('transformers')} fp32",
                "ort_fp32": f"ONNX Runtime {versions.get('onnxruntime')} fp32 (Optimum)"}.get(mode, f"mt {mode}")
        name = name.replace("@old", f" (old: {args.old})") + (f" b{size}" if size else "")
        mode = f"{base}@b{size}" if size else mode
        table.add_row(name, f"{r['sent_per_s']:.1f}", f"{r['tokens_per_s']:.0f}", f"{r['bleu']:.2f}",
                      f"{r['chrf']:.2f}", f"{r['reference_word_in_output']:.1%}", f"{r['peak_rss_mb']:.0f}",
                      " ".join(f"{s:.2f}" for s in r["seconds"]))
    for mode, reason in skipped.items():
        table.add_row(mode, "-", "-", "-", "-", "-", "-", f"skipped: {reason}; pass --modes to force")
    Console(width=140, stderr=False).print(table)
    ratios: dict[str, float] = {}
    ours = [m for m in modes if m in MT_MODES]
    if args.old:
        for m in (m for m in ours if f"{m}@old" in results):
            ratios[f"{m}_over_{m}@old"] = round(results[m]["sent_per_s"] / results[f"{m}@old"]["sent_per_s"], 3)
    # mt's fastest mode among those no more than EQUAL_BLEU below its own fp32 search (a speed bought
    # with quality is not a faster path), fp32 itself at least.
    floor = results["fp32"]["bleu"] - EQUAL_BLEU if "fp32" in results else float("-inf")
    fast_mode = max((m for m in ours if m != "constrained" and (results[m]["bleu"] >= floor or m == "fp32")),
                    key=lambda m: results[m]["sent_per_s"])
    for mine, theirs in (("fp32", "ct2_fp32"), ("int8", "ct2_int8"), (fast_mode, "ct2_int8"), ("constrained", "fp32"),
                         ("fp32", "hf_fp32"), ("fp32", "ort_fp32"), (fast_mode, "ct2_int8_inter"),
                         *((m, f"{m}_1w") for m in ("fp32", "int8", "bf16")),
                         *((f"{m}_sl", m) for m in ("fp32", "int8", "bf16")), (fast_mode, "ct2_int8_inter_vmap"),
                         ("int8_engine", "ct2_int8_inter"), ("int8_sl_engine", "ct2_int8_inter"),
                         ("int8_sl_proc", "ct2_int8_inter"),
                         *((f"{m}_vmap", m) for m in CT2_MODES if not m.endswith("_vmap"))):
        if mine in results and theirs in results:
            ratios[f"{mine}_over_{theirs}"] = round(results[mine]["sent_per_s"] / results[theirs]["sent_per_s"], 3)
    # Against CTranslate2's fastest configuration (of its modes and sizes), with and without the vmap.
    for kind, pick in (("ct2_best", lambda m: "_vmap" not in m), ("ct2_best_vmap", lambda m: "_vmap" in m)):
        theirs = [m for m in results if m.partition("@b")[0] in CT2_MODES and pick(m)]
        if not theirs:
            continue
        best = max(theirs, key=lambda m: results[m]["sent_per_s"])
        print(f"{kind}: {best} ({results[best]['sent_per_s']:.1f} sent/s)")
        ratios[f"{kind}_mode"] = best  # type: ignore[assignment]
        for mine in dict.fromkeys([fast_mode, *(m for m in ("int8_sl_proc", "int8_sl_engine") if m in results)]):
            ratios[f"{mine}_over_{kind}"] = round(results[mine]["sent_per_s"] / results[best]["sent_per_s"], 3)
    gaps = {}  # each ratio's BLEU difference (mine - theirs): a ratio is at equal quality within EQUAL_BLEU
    for name, ratio in ratios.items():
        if not isinstance(ratio, float):
            continue
        mine, _, theirs = name.partition("_over_")
        theirs = ratios.get(f"{theirs}_mode", theirs) if theirs.startswith("ct2_best") else theirs
        gap = results[mine]["bleu"] - results[str(theirs)]["bleu"]
        gaps[f"bleu_gap_{name}"] = round(gap, 2)
        equal = "" if abs(gap) <= EQUAL_BLEU else f"; not at equal BLEU ({gap:+.2f})"
        print(f"{name.replace('_over_', ' / ')} sent/s: {ratio:.2f}x{equal}")
    summary = {
        "allocator": allocator_name(),
        "machine": cpu_name(),
        "sent_per_s_fp32": round(results["fp32"]["sent_per_s"], 1),
        "sent_per_s_fast": round(results[fast_mode]["sent_per_s"], 1),
        "fast_mode": fast_mode,
        "bleu_fp32": round(results["fp32"]["bleu"], 2),
        "bleu_fast": round(results[fast_mode]["bleu"], 2),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in results.values()), 1),
        **{f"sent_per_s_{m}": round(r["sent_per_s"], 1) for m, r in results.items()},
        **{f"bleu_{m}": round(r["bleu"], 2) for m, r in results.items()},
        **{f"tokens_per_s_{m}": round(r["tokens_per_s"]) for m, r in results.items()},
        **{f"peak_rss_mb_{m}": round(r["peak_rss_mb"]) for m, r in results.items()},
        **{f"reference_word_in_output_{m}": round(r["reference_word_in_output"], 4) for m, r in results.items()},
        **ratios,
        **gaps,
        "beam": args.beam, "length_penalty": "length", "alpha": args.alpha, "threads": args.threads, "ct2_max_tokens": sizes if len(sizes) > 1 else sizes[0],
        "repeats": args.repeats, "versions": versions, "signature": results["fp32"]["signature"],
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        **({"skipped": skipped} if skipped else {}),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
