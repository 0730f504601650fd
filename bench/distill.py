"""Distillation, measured: a teacher's training corpus distilled, a student trained on it, both decoded side by side.

    python -m bench.distill --teacher experiments/multi30k_en_de [--exp experiments/bench-student] [--minutes 60]
        [--preset student-tiny] [--set section.field=value ...] [--repeats 3]

Inputs: a trained teacher experiment (the one-hour recipe's, `mt run recipes/multi30k_en_de.yaml`), its
training corpus (distilled) and test split (scored). Steps, each timed: `mt distill` (the teacher's
decoding options from its config: beam 5 for the recipe), `mt binarize`, `mt train` of the student
(--preset, --minutes of training; the rest of its config is the teacher's, then --set), `mt evaluate`
of the student's test split. An existing --exp resumes where it stopped (each step skips what is
done). Then decoding speed in one interleaved run (bench/common.py's run_interleaved, as
bench/translate.py runs it: each mode in its own process, run r of every mode before run r+1): the teacher in fp32 at beam 5 and the student in int8
at beam 1 and beam 2, all with the `length` penalty at --alpha; sent/s from the median run, BLEU of
the output. Prints a table and, as its last line, one JSON object with `teacher_bleu`,
`student_bleu` (the student row named by --student-beam), `teacher_sent_per_s`, `student_sent_per_s`,
`student_train_minutes`, `distill_minutes`, parameters and sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(what: str, step) -> tuple[object, float]:
    print(f"{what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    result = step()
    return result, time.perf_counter() - start


def build_student(args) -> dict:
    """distill, binarize, train, evaluate (each skipped when done); their seconds."""
    from mt.apps.distill import distill
    from mt.apps.evaluate import evaluate_split
    from mt.atomic_files import write_text_atomic
    from mt.config import schema as cfglib
    from mt.config.recipes import preset_fields
    from mt.config.schema import save_yaml
    from mt.data.binarize import binarize
    from mt.experiment.paths import Experiment
    from mt.training.loop import train

    teacher, student = Experiment(args.teacher), Experiment(args.exp)
    seconds = {}
    manifest, seconds["distill"] = timed("distill", lambda: distill([teacher], student))
    seconds["distill"] = manifest["seconds"]  # over all runs, if resumed
    cfg = student.load_config()
    if not student.has_data():
        for key, value in {**preset_fields(args.preset, "--preset"), "train.max_time": args.minutes * 60.0,
                           "train.max_steps": 10**9, "decode.checkpoint": "last"}.items():
            cfglib.set_field(cfg, key, value, where=key)
        for key, value in (item.split("=", 1) for item in args.sets):
            cfglib.set_field(cfg, key, value, where="--set")
        cfglib.validate(cfg, "bench/distill.py")
        write_text_atomic(student.config_path, save_yaml(cfg))
        _, seconds["binarize"] = timed("binarize", lambda: binarize(student, cfg))
    summary, seconds["train_wall"] = timed("train", lambda: train(student, cfg))
    _, seconds["evaluate"] = timed("evaluate", lambda: evaluate_split(student, cfg, "test"))
    return {"seconds": seconds, "train": summary}


def decode_side_by_side(args) -> dict[str, dict]:
    """Teacher fp32 beam 5, student int8 beam 1 and 2: each in its own process, interleaved."""
    from bench.common import run_interleaved

    def settings(beam: int) -> dict:
        return {"threads": args.threads, "checkpoint": "last", "beam": beam, "alpha": args.alpha, "old": None}

    return run_interleaved({"teacher fp32 beam 5": (args.teacher, "fp32", settings(5)),
                            "student int8 beam 1": (args.exp, "int8", settings(1)),
                            "student int8 beam 2": (args.exp, "int8", settings(2))}, args.repeats, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", required=True, help="a trained teacher experiment")
    parser.add_argument("--exp", default=str(REPO / "experiments" / "bench-student"))
    parser.add_argument("--preset", default="student-tiny")
    parser.add_argument("--minutes", type=float, default=60.0, help="the student's training budget")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    parser.add_argument("--alpha", type=float, default=1.0, help="length penalty (|Y|^alpha) for every decoding row")
    parser.add_argument("--student-beam", type=int, choices=(1, 2), default=2, help="the student row the JSON reports")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from mt.allocator import use_tcmalloc
    from mt.apps.distill import teacher_rows
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name

    use_tcmalloc()
    torch.set_num_threads(args.threads)
    built = build_student(args)
    decoded = decode_side_by_side(args)
    sizes = {row["role"]: row for row in teacher_rows(Experiment(args.exp))}
    print(f"\nDistillation: teacher {args.teacher}, student {args.exp} ({args.preset}), {cpu_name()}, {args.threads} threads")
    print("| model | test BLEU | chrF | sent/s | runs (s) |")
    print("|---|---|---|---|---|")
    for name, r in decoded.items():
        print(f"| {name} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['sent_per_s']:.1f} | {' '.join(f'{s:.2f}' for s in r['seconds'])} |")
    seconds = built["seconds"]
    print(f"\ndistill {seconds['distill'] / 60:.1f} min, student training {built['train']['elapsed'] / 60:.1f} min "
          f"({built['train']['steps']} updates); parameters teacher {sizes['teacher'].get('params_m')}M, "
          f"student {sizes['student'].get('params_m')}M")
    teacher, student = decoded["teacher fp32 beam 5"], decoded[f"student int8 beam {args.student_beam}"]
    print(json.dumps({
        "machine": cpu_name(), "teacher": args.teacher, "student": args.exp, "preset": args.preset,
        "teacher_bleu": round(teacher["bleu"], 2), "student_bleu": round(student["bleu"], 2),
        "teacher_sent_per_s": round(teacher["sent_per_s"], 1), "student_sent_per_s": round(student["sent_per_s"], 1),
        "student_beam": args.student_beam, "speedup": round(student["sent_per_s"] / teacher["sent_per_s"], 2),
        "rows": {name: {k: r[k] for k in ("bleu", "chrf", "sent_per_s", "peak_rss_mb")} for name, r in decoded.items()},
        "student_train_minutes": round(built["train"]["elapsed"] / 60, 2), "student_steps": built["train"]["steps"],
        "distill_minutes": round(seconds["distill"] / 60, 2),
        "teacher_params_m": sizes["teacher"].get("params_m"), "student_params_m": sizes["student"].get("params_m"),
        "teacher_size_mb": sizes["teacher"].get("size_mb"), "student_size_mb": sizes["student"].get("size_mb"),
        "alpha": args.alpha, "repeats": args.repeats, "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }))


if __name__ == "__main__":
    main()
