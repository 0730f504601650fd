"""End to end through the real CLI: every subcommand as a subprocess on a few hundred sentence pairs.

train-tokenizer -> binarize -> train -> translate (stdin and files) -> evaluate -> info, then
resuming, `mt run RECIPE` (twice), and bad input: each a one-line error, the right exit code, and
nothing written. The model is tiny and trains for seconds; the checks are about the command line
(stdout, stderr, exit codes, files), not translation quality. The corpus is written here: image
descriptions in the style of Multi30k, English-German, put together from phrases, so that the test
needs nothing outside the repository.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SPLITS = {"train": 400, "val": 50, "test": 50}  # lines
DATA_LISTS = ("data.train", "data.valid", "data.test")
TRAIN_FLAGS = ["--preset", "tiny", "--max-steps", "30", "--max-tokens", "1000", "--warmup-steps", "10",
               "--set", "train.valid_every=15", "--set", "train.save_every=15", "--set", "train.log_every=10"]

def mt(cwd: Path, *args: str, stdin: str | bytes = b"") -> subprocess.CompletedProcess:
    """`python -m mt ARGS` in cwd, as a user would run it: stdout and stderr are pipes, not a terminal."""
    env = {**os.environ, "COLUMNS": "80", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MT_DEBUG", None)
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    done = subprocess.run([sys.executable, "-m", "mt", *args], cwd=cwd, input=data, capture_output=True,
                          env=env, timeout=300)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8"),
                                       done.stderr.decode("utf-8"))


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"{result.args}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def error(result: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The command failed with `code` and ends in one `error:` line naming every needle; stdout empty."""
    assert result.returncode == code, f"{result.args}: exit {result.returncode}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr
    assert sum(line.startswith("error:") for line in lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[-1], f"{needle!r} not in {lines[-1]!r}"
    return lines[-1]


def snapshot(root: Path) -> dict[str, str]:
    """Every file under root with a hash of its bytes: to show that a refused command wrote nothing."""
    if not root.exists():
        return {}
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest() for p in files}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# (English, German, plural) subjects; (English, German singular, German plural) verbs; places.
SUBJECTS = [("A man", "Ein Mann", 0), ("A woman", "Eine Frau", 0), ("A young boy", "Ein kleiner Junge", 0),
            ("A little girl", "Ein kleines Mädchen", 0), ("Two dogs", "Zwei Hunde", 1),
            ("A group of people", "Eine Gruppe von Menschen", 0), ("An old man", "Ein alter Mann", 0),
            ("A black dog", "Ein schwarzer Hund", 0), ("Three children", "Drei Kinder", 1),
            ("A woman in a red dress", "Eine Frau in einem roten Kleid", 0),
            ("A man with a hat", "Ein Mann mit einem Hut", 0), ("A brown horse", "Ein braunes Pferd", 0)]
VERBS = [("walking", "geht", "gehen"), ("running", "läuft", "laufen"), ("sitting", "sitzt", "sitzen"),
         ("playing", "spielt", "spielen"), ("standing", "steht", "stehen"), ("waiting", "wartet", "warten"),
         ("dancing", "tanzt", "tanzen"), ("jumping", "springt", "springen")]
PLACES = [("on the beach", "am Strand"), ("in the park", "im Park"), ("on a busy street", "auf einer belebten Straße"),
          ("in the snow", "im Schnee"), ("near the water", "in der Nähe des Wassers"),
          ("in front of a building", "vor einem Gebäude"), ("on the grass", "auf dem Gras"),
          ("in a small kitchen", "in einer kleinen Küche"), ("at night", "in der Nacht"),
          ("under a tree", "unter einem Baum")]


def descriptions() -> list[tuple[str, str]]:
    """Every (English, German) sentence the phrases make, in a fixed random order."""
    pairs = [(f"{en} {'are' if plural else 'is'} {verb[0]} {place[0]}.", f"{de} {verb[1 + plural]} {place[1]}.")
             for (en, de, plural), verb, place in itertools.product(SUBJECTS, VERBS, PLACES)]
    random.Random(0).shuffle(pairs)
    return pairs


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A directory holding train/val/test.{en,de}: disjoint sentence pairs."""
    root = tmp_path_factory.mktemp("cli")
    pairs = iter(descriptions())
    for split, count in SPLITS.items():
        chosen = list(itertools.islice(pairs, count))
        for side, lang in enumerate(("en", "de")):
            (root / f"{split}.{lang}").write_text("".join(pair[side] + "\n" for pair in chosen), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def built(work: Path) -> dict:
    """train-tokenizer -> binarize -> train on `exp`; keeps each step's result, and a copy of the
    experiment as it was before training (`untrained`)."""
    steps = {}
    steps["train-tokenizer"] = ok(mt(work, "train-tokenizer", "--exp", "exp", "--train", "files:train",
                                     "--valid", "files:val", "--test", "files:test", "--src-lang", "en",
                                     "--tgt-lang", "de", "--vocab-size", "400"))
    steps["binarize"] = ok(mt(work, "binarize", "--exp", "exp"))
    shutil.copytree(work / "exp", work / "untrained")
    steps["train"] = ok(mt(work, "train", "--exp", "exp", *TRAIN_FLAGS))
    return steps


@pytest.mark.slow
def test_end_to_end(work: Path, built: dict):
    exp = work / "exp"
    for step, result in built.items():
        assert result.stdout == "", f"{step} wrote to stdout: {result.stdout!r}"  # status goes to stderr
    assert "tokenizer written to" in built["train-tokenizer"].stderr
    table = built["binarize"].stderr
    assert "too long" in table and "…" not in table  # the data table fits 80 columns
    assert "stopped at step 30" in built["train"].stderr
    assert "precision auto: " in built["train"].stderr  # the default: the fastest here, timed

    # The experiment directory.
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["data"]["src_lang"] == "en" and config["data"]["tgt_lang"] == "de"
    assert config["tokenizer"]["vocab_size"] == 400
    assert config["model"]["d_model"] == 64 and config["train"]["max_steps"] == 30
    overrides = {(r["key"], r["old"], r["new"]) for r in jsonl(exp / "overrides.jsonl") if r["key"] not in DATA_LISTS}
    lists = {r["key"]: (r["old"], r["new"]) for r in jsonl(exp / "overrides.jsonl") if r["key"] in DATA_LISTS}
    assert lists == {f"data.{split}": ([], [f"files:{work / name}"])
                     for split, name in (("train", "train"), ("valid", "val"), ("test", "test"))}
    assert {("tokenizer.vocab_size", 8000, 400), ("data.src_lang", "de", "en"), ("model.d_model", 512, 64),
            ("train.max_steps", 100_000, 30), ("train.valid_every", 1000, 15)} <= overrides
    assert (exp / "tokenizer" / "spm.model").is_file()
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            assert (exp / "data" / f"{split}.{side}.ids.npy").is_file()
            assert (exp / "data" / f"{split}.{side}.offsets.npy").is_file()
    assert (exp / "checkpoints" / "last.pt").is_file() and (exp / "checkpoints" / "best.pt").is_file()
    records = [r for r in jsonl(exp / "train.jsonl") if "loss" in r]
    assert [r["step"] for r in records] == [10, 15, 20, 30]  # log_every 10, plus the validations at 15, 30
    for record in records:
        assert {"step", "loss", "lr", "tgt_tokens_per_s"} <= set(record)

    # translate from stdin: one output line per input line, in order; an empty line stays empty.
    test_en = (work / "test.en").read_text(encoding="utf-8").splitlines()
    lines = [test_en[0], "", test_en[1], test_en[2], test_en[0], test_en[3], "", test_en[1]]
    text = "\n".join(lines) + "\n"
    stdin_run = ok(mt(work, "translate", "--exp", "exp", "--buffer", "3", "--threads", "1", stdin=text))
    assert stdin_run.stdout.endswith("\n")
    outputs = stdin_run.stdout.split("\n")[:-1]
    assert len(outputs) == len(lines)
    assert outputs[1] == "" and outputs[6] == ""
    assert outputs[4] == outputs[0] and outputs[7] == outputs[2]  # same sentence, same translation

    # translate --input/--output; an existing output is not replaced without --force.
    (work / "in.txt").write_text(text, encoding="utf-8")
    to_file = ok(mt(work, "translate", "--exp", "exp", "-i", "in.txt", "-o", "out.txt", "--threads", "1"))
    assert to_file.stdout == ""
    assert (work / "out.txt").read_text(encoding="utf-8") == stdin_run.stdout
    (work / "out.txt").write_text("keep me\n", encoding="utf-8")
    error(mt(work, "translate", "--exp", "exp", "-i", "in.txt", "-o", "out.txt"), 1, "out.txt", "--force")
    assert (work / "out.txt").read_text(encoding="utf-8") == "keep me\n"

    # evaluate the test split: scores on stdout, with sacrebleu's signature; saved in the experiment.
    evaluated = ok(mt(work, "evaluate", "--exp", "exp", "--threads", "1"))
    assert "BLEU" in evaluated.stdout and "chrF" in evaluated.stdout
    assert "nrefs:1" in evaluated.stdout and "tok:13a" in evaluated.stdout
    saved = json.loads((exp / "scores" / "test.json").read_text())
    assert {"bleu", "chrf", "bleu_signature"} <= set(saved)
    assert len((exp / "translations" / "test.hyp").read_text(encoding="utf-8").splitlines()) == 50
    as_json = ok(mt(work, "evaluate", "--exp", "exp", "--json", "--threads", "1"))
    scores = json.loads(as_json.stdout)  # exactly one JSON object, nothing else
    assert scores["bleu"] == pytest.approx(saved["bleu"]) and "tok:13a" in scores["bleu_signature"]

    # info
    info = ok(mt(work, "info", "--exp", "exp"))
    assert "checkpoints" in info.stdout and "best" in info.stdout and "last" in info.stdout
    info_json = json.loads(ok(mt(work, "info", "--exp", "exp", "--json")).stdout)
    assert {"best", "last"} <= set(info_json["checkpoints"])

    # evaluate --hyp --ref: no experiment needed; a perfect hypothesis scores 100.
    perfect = ok(mt(work, "evaluate", "--hyp", "test.de", "--ref", "test.de"))
    assert perfect.stdout.splitlines()[0].startswith("BLEU 100.00")
    hyp = ok(mt(work, "evaluate", "--hyp", str(exp / "translations" / "test.hyp"), "--ref", "test.de", "--json"))
    assert json.loads(hyp.stdout)["bleu"] == pytest.approx(saved["bleu"])


@pytest.mark.slow
def test_train_resumes(work: Path, built: dict):
    shutil.copytree(work / "exp", work / "resumed")
    before = len(jsonl(work / "resumed" / "train.jsonl"))
    result = ok(mt(work, "train", "--exp", "resumed", "--max-steps", "40"))
    assert "resuming at step 30" in result.stderr
    new = jsonl(work / "resumed" / "train.jsonl")[before:]
    assert new and all(r["step"] > 30 for r in new) and new[-1]["step"] == 40
    last_override = jsonl(work / "resumed" / "overrides.jsonl")[-1]
    assert (last_override["key"], last_override["old"], last_override["new"]) == ("train.max_steps", 30, 40)
    import torch

    state = torch.load(work / "resumed" / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert state["step"] == 40


@pytest.mark.slow
def test_run_recipe_then_again(work: Path):
    recipe = {
        "exp": "run_exp",
        "steps": ["train-tokenizer", "binarize", "train", "average", "evaluate"],
        "translate_examples": ["A man is walking.", "Two dogs play in the snow."],
        "data": {"src_lang": "en", "tgt_lang": "de", "train": ["files:train"], "valid": ["files:val"],
                 "test": ["files:test"]},
        "tokenizer": {"vocab_size": 400},
        "preset": "tiny",
        "train": {"max_steps": 10, "max_tokens": 1000, "warmup_steps": 5, "valid_every": 5,
                  "save_every": 5, "log_every": 5},
        "decode": {"checkpoint": "average", "average_last": 2},
    }
    (work / "recipe.yaml").write_text("# mt run recipe.yaml\n" + yaml.safe_dump(recipe, sort_keys=False))
    first = ok(mt(work, "run", "recipe.yaml"))
    out = first.stdout.splitlines()
    assert len(out) == 4, first.stdout
    assert out[0].startswith("valid: BLEU") and out[1].startswith("test: BLEU") and "tok:13a" in out[1]
    assert out[2].startswith("A man is walking.  ->  ") and out[3].startswith("Two dogs play in the snow.  ->  ")
    exp = work / "run_exp"
    # A few test sentences with reference and translation, on stderr (the quality, not only the number).
    err = first.stderr.splitlines()
    shown = err.index(next(line for line in err if line.startswith("test samples (4 of 50")))
    hyps = (exp / "translations" / "test.hyp").read_text(encoding="utf-8").splitlines()
    refs = (work / "test.de").read_text(encoding="utf-8").splitlines()
    sources = (work / "test.en").read_text(encoding="utf-8").splitlines()
    for k in range(4):
        source, ref, hyp = (line.strip() for line in err[shown + 1 + 3 * k: shown + 4 + 3 * k])
        i = sources.index(source)
        assert ref == f"ref: {refs[i]}" and hyp == f"mt:  {hyps[i]}".strip()
    assert yaml.safe_load((exp / "config.yaml").read_text())["model"]["d_model"] == 64
    assert json.loads((exp / "scores" / "test.json").read_text())["sentences"] == 50
    import torch

    averaged = torch.load(exp / "checkpoints" / "average.pt", map_location="cpu", weights_only=True)
    assert averaged["averaged_from"] == ["step_0000005.pt", "step_0000010.pt"]

    files = snapshot(exp)
    again = ok(mt(work, "run", "recipe.yaml"))
    for step in ("train-tokenizer", "binarize", "train", "average", "evaluate valid", "evaluate test"):
        assert f"{step}: done already" in again.stderr, again.stderr
    assert again.stdout.splitlines()[:2] == out[:2]
    assert snapshot(exp) == files  # nothing redone
    # --dry-run says what a real run would do: every step done, but evaluate again with other options
    dry = ok(mt(work, "run", "recipe.yaml", "--dry-run"))
    assert "train done, average done, evaluate done" in dry.stderr, dry.stderr
    for change in ("decode.beam=2", "decode.max_len_b=3", "decode.checkpoint=last"):  # scores of other decoding
        dry = ok(mt(work, "run", "recipe.yaml", "--dry-run", "--set", change))
        assert "evaluate to run" in dry.stderr, (change, dry.stderr)  # was "done"; a real run evaluates again
    assert snapshot(exp) == files


@pytest.mark.slow
def test_bad_corpus_is_one_line_and_writes_nothing(work: Path, built: dict):  # built: `exp` below
    lines = (work / "train.de").read_text(encoding="utf-8").splitlines(keepends=True)
    (work / "short.de").write_text("".join(lines[:-1]), encoding="utf-8")
    result = mt(work, "train-tokenizer", "--exp", "bad", "--train", "files:train.en|short.de",
                "--vocab-size", "400")
    error(result, 1, "train.en", "short.de", "400", "399")
    assert not (work / "bad").exists()

    raw = (work / "train.en").read_bytes().splitlines(keepends=True)
    raw[6] = b"A caf\xe9 in Latin-1.\n"
    (work / "latin1.en").write_bytes(b"".join(raw))
    result = mt(work, "train-tokenizer", "--exp", "bad", "--train", "files:latin1.en|train.de",
                "--vocab-size", "400", "--set", "data.clean=false")
    error(result, 1, "latin1.en:7", "UTF-8")
    assert not (work / "bad").exists()
    result = mt(work, "train-tokenizer", "--exp", "cleaned", "--train", "files:latin1.en|train.de",
                "--vocab-size", "400")  # cleaning (the default for training data) skips the line and names it
    assert result.returncode == 0 and "skipped" in result.stderr and "latin1.en:7: not valid UTF-8" in result.stderr

    result = mt(work, "train-tokenizer", "--exp", "bad", "--train", "files:nowhere", "--vocab-size", "400")
    error(result, 1, "nowhere.de")  # src_lang de by default
    assert not (work / "bad").exists()

    error(mt(work, "translate", "--exp", "exp", "--input", "nowhere.txt"), 1, "nowhere.txt")
    error(mt(work, "evaluate", "--exp", "nowhere"), 1, "nowhere", "not an experiment")
    assert not (work / "nowhere").exists()


@pytest.mark.slow
def test_bad_flags_and_config(work: Path, built: dict):
    files = snapshot(work / "exp")
    error(mt(work, "train", "--exp", "exp", "--set", "train.max_stpes=5"), 2, "train.max_stpes")
    error(mt(work, "train", "--exp", "exp", "--set", "train.max_steps=abc"), 2, "train.max_steps", "abc")
    error(mt(work, "train", "--exp", "exp", "--max-steps", "abc"), 2, "--max-steps")
    error(mt(work, "train", "--exp", "exp", "--max-time", "soon"), 2, "max_time", "soon")
    # Fields that made the tokenizer, data or checkpoints can no longer change.
    error(mt(work, "train-tokenizer", "--exp", "exp", "--vocab-size", "600"), 2, "tokenizer.vocab_size", "--exp")
    error(mt(work, "train", "--exp", "exp", "--preset", "small"), 2, "--preset small", "model.")
    error(mt(work, "binarize", "--exp", "exp", "--set", "data.src_lang=fr"), 2, "data.src_lang")
    error(mt(work, "binarize", "--exp", "exp", "--train-segmentations", "4"), 2, "tokenizer.train_segmentations", "binarized")
    # A command that reads one checkpoint refuses two (click kept the last: an export of the wrong one).
    for command in (["export", "--format", "ctranslate2", "--output", "out"], ["attention", "A dog."], ["report"]):
        error(mt(work, *command, "--exp", "exp", "--checkpoint", "best", "--checkpoint", "last"), 2,
              "--checkpoint", "given 2 times (best, last)")
    assert not (work / "out").exists()
    assert snapshot(work / "exp") == files

    (work / "typo.yaml").write_text("exp: typo_exp\ntrain:\n  max_stpes: 5\n")
    error(mt(work, "run", "typo.yaml"), 2, "typo.yaml", "train.max_stpes")
    (work / "typo.yaml").write_text("exp: typo_exp\ntrian:\n  max_steps: 5\n")
    error(mt(work, "run", "typo.yaml"), 2, "typo.yaml", "trian")
    assert not (work / "typo_exp").exists()
    error(mt(work, "train-tokenizer", "--exp", "typo_exp", "--train", "file:train"), 2, "data.train", "file:train",
          "files:PREFIX")
    error(mt(work, "train-tokenizer", "--exp", "typo_exp", "--train", "files:train", "--valid", "files:val*2"), 2,
          "data.valid", "training data only")
    assert not (work / "typo_exp").exists()

    # An experiment written before data.train/valid/test: refused, with its new lists written out.
    shutil.copytree(work / "exp", work / "legacy")
    config = yaml.safe_load((work / "legacy" / "config.yaml").read_text())
    config["data"] = {**{k: v for k, v in config["data"].items() if k not in ("train", "valid", "test")},
                      "source": "files", "train_prefix": str(work / "train"), "valid_prefix": str(work / "val")}
    (work / "legacy" / "config.yaml").write_text(yaml.safe_dump(config))
    files = snapshot(work / "legacy")
    error(mt(work, "translate", "--exp", "legacy"), 2, "data.train_prefix",
          f"data.train: [files:{work / 'train'}]; data.valid: [files:{work / 'val'}]")
    assert snapshot(work / "legacy") == files


@pytest.mark.slow
def test_refusals(work: Path, built: dict):
    """What is already there is never overwritten; what is missing is named with the next step."""
    untrained = work / "untrained"
    files = snapshot(untrained)
    error(mt(work, "train-tokenizer", "--exp", "untrained"), 1, "already has a tokenizer")
    error(mt(work, "binarize", "--exp", "untrained"), 1, "already binarized")
    error(mt(work, "translate", "--exp", "untrained"), 1, "train first")
    assert snapshot(untrained) == files

    shutil.copytree(work / "exp", work / "corrupt")
    last = work / "corrupt" / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    files = snapshot(work / "corrupt")
    error(mt(work, "translate", "--exp", "corrupt", "--checkpoint", "last"), 1, "last.pt")
    error(mt(work, "train", "--exp", "corrupt"), 1, "last.pt")  # resuming reads it
    assert snapshot(work / "corrupt") == files
