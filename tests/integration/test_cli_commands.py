"""The command line's own checks (issue 25): decoding flags out of range, --exp on a plain file,
translations without stray whitespace, `mt info`'s last step, the slow-precision warning, and
every subcommand's --help ending in examples.

Commands run in this process through `mt.cli.main.main`, the `mt` entry point, so that an error is
the one stderr line and exit code a user sees; on conftest's tiny trained experiment.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import typer
from helpers import mt
from typer.testing import CliRunner

from mt import hardware
from mt.cli import errors as cli_errors
from mt.cli import main as cli
from mt.experiment.checkpoint_file import load_checkpoint
from mt.experiment.paths import Experiment


@pytest.fixture(scope="module")
def experiment(trained_experiment) -> Experiment:
    """conftest's trained experiment, with two input lines beside it (in.txt)."""
    (trained_experiment.root.parent / "in.txt").write_text("Ein Mann läuft.\nDie Katze.\n", encoding="utf-8")
    return trained_experiment


def written(experiment: Experiment) -> dict[str, int]:
    """Every file of the experiment with its time: conftest's experiment is shared by the test process's
    tests, so a refusal is checked by what it wrote, not by what is there."""
    return {str(p): p.stat().st_mtime_ns for p in sorted(experiment.root.rglob("*")) if p.is_file()}


def one_error(code: int, out: str, err: str, expected_code: int, *needles: str) -> str:
    assert code == expected_code, err
    assert out == "" and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


TRANSLATE_FLAGS = [
    (["--sample", "--top-p", "5"], "--top-p"),
    (["--sample", "--top-p", "0"], "--top-p"),
    (["--sample", "--top-k", "-1"], "--top-k"),
    (["--sample", "--temperature", "0"], "--temperature"),
    (["--sample", "--temperature", "nan"], "--temperature"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--beam", "2", "--nbest", "3"], "--nbest 3 is more than --beam 2"),
    (["--beam", "1", "--nbest", "2"], "--nbest 2 is more than --beam 1"),
    (["--alpha", "-1"], "stopping bound is invalid for negative alpha"),
    (["--alpha", "nan"], "--alpha"),
    (["--alpha", "200"], "past 10 the penalty overflows"),
    (["--max-len-a", "-1"], "--max-len-a"),
    (["--max-len-b", "-1"], "--max-len-b"),
    (["--max-len-a", "inf"], "--max-len-a"),
    (["--max-len-b", "99999999999999999999"], "--max-len-b"),
    (["--beam", "100000"], "--beam"),
]


@pytest.mark.parametrize("flags, needle", TRANSLATE_FLAGS, ids=[" ".join(f) for f, _ in TRANSLATE_FLAGS])
def test_translate_refuses_decoding_flags_out_of_range(experiment, capsys, monkeypatch, flags, needle):
    inputs = str(experiment.root.parent / "in.txt")
    result = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "-i", inputs, "--threads", "1", *flags)
    one_error(*result, 2, needle, flags[-2])


OTHER_FLAGS = [
    (["evaluate"], ["--alpha", "-0.5"]),
    (["evaluate"], ["--max-tokens", "0"]),
    (["evaluate"], ["--max-len-a", "-2"]),
    (["attention", "Ein Mann."], ["--alpha", "-1"]),
    (["attention", "Ein Mann."], ["--max-len-b", "-3"]),
]


@pytest.mark.parametrize("command, flags", OTHER_FLAGS, ids=[" ".join(c[:1] + f) for c, f in OTHER_FLAGS])
def test_evaluate_and_attention_refuse_decoding_flags_out_of_range(experiment, capsys, monkeypatch, command, flags):
    before = written(experiment)
    result = mt(capsys, monkeypatch, *command, "--exp", str(experiment.root), "--threads", "1", *flags)
    one_error(*result, 2, flags[0])
    assert written(experiment) == before  # nothing written (no scores, no attention maps)


@pytest.mark.parametrize("command", [["train-tokenizer", "--vocab-size", "100"], ["binarize"], ["train"], ["info"],
                                     ["translate"], ["evaluate"], ["average"], ["report"], ["plot"],
                                     ["attention", "Ein Mann."], ["run", "RECIPE"]], ids=lambda command: command[0])
def test_exp_on_a_plain_file_is_one_line(tmp_path, capsys, monkeypatch, command):
    plain = tmp_path / "notes.txt"
    plain.write_text("not an experiment\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [train-tokenizer]\n")
    command = [str(recipe) if arg == "RECIPE" else arg for arg in command]
    one_error(*mt(capsys, monkeypatch, *command, "--exp", str(plain)), 2, f"--exp {plain}: is a file, not an experiment directory")
    assert plain.read_text() == "not an experiment\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "recipe.yaml"]


def test_a_recipes_exp_on_a_plain_file_is_one_line(tmp_path, capsys, monkeypatch):
    plain = tmp_path / "notes.txt"
    plain.write_text("not an experiment\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"exp: {plain}\nsteps: [train-tokenizer]\n")
    one_error(*mt(capsys, monkeypatch, "run", str(recipe)), 2, f"{recipe}: exp {plain}: is a file, not an experiment directory")
    assert plain.read_text() == "not an experiment\n"


def test_translations_have_no_leading_or_trailing_whitespace(experiment):
    # A real SentencePiece model decoding ids that a short model printed: "A" and a run of "▁".

    _, tgt = experiment.load_tokenizers(experiment.load_config().tokenizer.joint)
    vocabulary = tgt.pieces(list(range(tgt.vocab_size)))
    assert "\u2581" in vocabulary, "the toy vocabulary must hold the bare word-start piece"
    space = vocabulary.index("\u2581")
    a_man = tgt.encode(["a man"])[0]
    texts = tgt.decode([[space, space, *a_man, *[space] * 27], [space] * 3, a_man])
    assert texts == ["a man", "", "a man"]


def test_info_shows_the_step_of_last_pt(experiment, capsys, monkeypatch):
    records = [json.loads(line) for line in experiment.train_log_path.read_text().splitlines()]
    logged = [r["step"] for r in records if "loss" in r][-1]
    saved = load_checkpoint(experiment.checkpoint_path("last"))["step"]
    assert (logged, saved) == (36, 40)  # what this test is about: the log ends before last.pt
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(experiment.root), "--json")
    assert code == 0, err
    training = json.loads(out)["training"]
    assert (training["last_step"], training["logged_step"]) == (40, 36)
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(experiment.root))
    assert code == 0, err
    assert "(logged at step 36)" in out


def test_info_shows_names_in_brackets_as_they_are(experiment, tmp_path, capsys, monkeypatch):
    """Was: read as rich markup, `run[de-en]` shown as `run` and `avg[last].pt` as `avg`; `[/]` a traceback."""
    import shutil

    copy = tmp_path / "run[de-en]"
    shutil.copytree(experiment.root, copy)
    shutil.copy(copy / "checkpoints" / "last.pt", copy / "checkpoints" / "avg[last].pt")
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy))
    assert code == 0, err
    text = re.sub(r"[\s│]", "", out)  # the table folds long values
    assert "/run[de-en]" in text and "avg[last]" in text, out


def test_a_library_that_is_not_installed_is_one_line(experiment, capsys, monkeypatch):
    """A missing library no feature's own check names (here sentencex, as if uninstalled) is still
    one line, not ModuleNotFoundError's traceback."""
    import sys

    for name in [m for m in sys.modules if m == "sentencex" or m.startswith("sentencex.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sentencex", None)  # what `import sentencex` then raises: not installed
    text = experiment.root.parent / "in.txt"  # a document: translated sentence by sentence
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "-i", str(text),
                        "--threads", "1")
    assert code == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: this needs the Python package that provides 'sentencex'"), err


def test_an_output_named_gz_is_gzip_that_mt_reads_back(experiment, capsys, monkeypatch):
    """--output NAME.gz was plain text, which mt's readers (by the name) then refused as broken gzip:
    lines (a file of no document format) and a document (.txt) alike."""
    import gzip
    import shutil

    document = experiment.root.parent / "in.txt"
    lines = shutil.copy(document, experiment.root.parent / "in.de")
    for source in (lines, document):
        translate = ("translate", "--exp", str(experiment.root), "-i", str(source), "--threads", "1")
        code, plain, err = mt(capsys, monkeypatch, *translate)
        assert code == 0 and plain, err
        packed = experiment.root.parent / f"{source.name}.en.gz"
        code, out, err = mt(capsys, monkeypatch, *translate, "--output", str(packed))
        assert code == 0 and out == "", err
        with gzip.open(packed, "rt", encoding="utf-8") as handle:
            assert handle.read() == plain, source
        code, again, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "-i", str(packed),
                              "--threads", "1")
        assert code == 0 and len(again.splitlines()) == len(plain.splitlines()), err
    header = (experiment.root.parent / "in.de.en.gz").read_bytes()[:20]
    assert b"in.de.en\0" in header  # what it unpacks to, not the temporary's name


def test_encoding_names_the_inputs_encoding_instead_of_a_guess(experiment, tmp_path, capsys, monkeypatch):
    """A short Czech file in cp1250 is read as another code page by a guess; --encoding says which:
    a document is read and written back in it, lines are read in it (their translations are UTF-8)."""
    text = "Příliš žluťoučký kůň úpěl ďábelské ódy.\nEin Mann läuft.\n"
    document = tmp_path / "kun.txt"
    document.write_bytes(text.encode("cp1250"))
    lines = tmp_path / "kun.cs"
    lines.write_bytes(text.encode("cp1250"))
    exp = ("translate", "--exp", str(experiment.root), "--threads", "1")
    (tmp_path / "utf8.cs").write_text(text, encoding="utf-8")  # the same text in UTF-8
    code, expected, err = mt(capsys, monkeypatch, *exp, "-i", str(tmp_path / "utf8.cs"))
    assert code == 0 and len(expected.splitlines()) == 2, err
    code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(lines), "--encoding", "cp1250")
    assert code == 0 and out == expected and "not UTF-8" not in err and "guess" not in err, err
    code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(lines))
    assert code == 1 and "kun.cs:1: not valid UTF-8" in err, err
    written = tmp_path / "kun.en.txt"
    code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(document), "-o", str(written), "--encoding", "windows-1250")
    assert code == 0 and "not UTF-8" not in err, err  # no guess said
    assert written.read_bytes().decode("cp1250") == expected
    wrongly = tmp_path / "kun.latin1.txt"  # (written back in latin-1: no UTF-8 for stdout's capture)
    code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(document), "-o", str(wrongly), "--encoding", "latin-1")
    assert code == 0 and wrongly.read_bytes().decode("latin-1"), err  # read, if wrongly
    code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(document), "--encoding", "ascii")
    assert code == 1 and err.strip().splitlines()[-1] == (
        f"error: {document}: line 1: not ascii, as --encoding says (ordinal not in range(128) at byte 1)"), err
    for flags, said in (
        (("--encoding", "klingon"), "--encoding klingon: not an encoding Python knows"),
        (("--encoding", "rot13"), "--encoding rot13: not a text encoding"),
        (("--encoding", "undefined"), "--encoding undefined: not a text encoding"),  # was a traceback
        (("--encoding", "utf-16"), "--encoding utf-16: lines are cut at the byte of a line break"),
    ):
        code, out, err = mt(capsys, monkeypatch, *exp, "-i", str(lines), *flags)
        assert code == 2 and said in err and out == "", err


def test_slow_half_precision_is_warned_about_in_one_line(experiment, capsys, monkeypatch):
    """The short matmul's timings as a CPU without bf16 units gives them (100x slower), then as one with
    them (as fast): the warning follows the timings, whatever this machine's own would be."""
    inputs = str(experiment.root.parent / "in.txt")
    translate = ("translate", "--exp", str(experiment.root), "-i", inputs, "--threads", "1", "--precision", "bf16")
    monkeypatch.setattr(hardware, "short_matmul_gflops", lambda names: {"fp32": 100.0, "bf16": 1.0})
    code, out, err = mt(capsys, monkeypatch, *translate)
    assert code == 0 and len(out.splitlines()) == 2, err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        "warning: --precision bf16: bf16 is 100x slower than fp32 on this CPU (a short matmul timed here); "
        "--precision fp32 will be faster"]
    monkeypatch.setattr(hardware, "short_matmul_gflops", lambda names: {"fp32": 100.0, "bf16": 100.0})
    code, out, err = mt(capsys, monkeypatch, *translate)
    assert code == 0 and "warning:" not in err, err
    code, _, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "-i", inputs, "--threads", "1")
    assert code == 0 and "warning:" not in err


def test_every_subcommand_help_ends_in_examples_that_use_its_own_flags():
    group = typer.main.get_command(cli.app)
    assert len(group.commands) >= 11
    for name, command in group.commands.items():
        done = CliRunner().invoke(cli.app, [name, "--help"], env={"COLUMNS": "100"})
        assert done.exit_code == 0, name
        assert "Example" in done.output, f"mt {name} --help has no examples (epilog=_examples(...))"
        tail = done.output[done.output.index("Example"):]
        assert done.output.index("--help") < done.output.index("Example") and f"mt {name} " in tail, name
        assert "list[" not in done.output and " range>" not in done.output, f"mt {name} --help: a Python type as metavar"
        # Each example is a command line whose flags exist (the README's usage, kept from rotting).
        for example in command.epilog.split("\n\n")[1:]:
            words = shlex.split(example.partition("mt ")[2])
            flags = {opt for param in group.commands[words[0]].params for opt in param.opts}
            assert {w for w in words if w.startswith("-")} <= flags, example


def _no_cuda_device() -> str:
    """A --device this machine cannot use: cuda where torch has none, else a CUDA index past the last."""
    import torch

    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


RUNTIME_FLAGS = [
    (["translate"], ["--device", "gpu"], "--device gpu: expected cpu, cuda or cuda:N"),
    (["translate"], ["--device", "mps"], "--device mps"),
    (["translate"], ["--device", "NOCUDA"], "--device "),
    (["evaluate"], ["--device", "NOCUDA"], "--device "),
    (["attention", "Ein Mann."], ["--device", "NOCUDA"], "--device "),
    (["serve"], ["--device", "NOCUDA"], "--device "),
    (["translate"], ["--threads", "0"], "'--threads'"),
    (["serve"], ["--threads", "-1"], "'--threads'"),
    (["translate"], ["--threads", "100000"], "less than or equal to 1024"),  # was a segmentation fault in OpenMP
    (["serve"], ["--port", "99999"], "'--port'"),
    (["translate"], ["--input", "other.de"], "given 2 times"),  # click kept the last: the first's lines lost
    (["translate"], ["-o", "a.en", "-o", "b.en"], "given 2 times"),
    (["evaluate"], ["--hyp", "a.en", "--hyp", "b.en", "--ref", "r.en"], "given 2 times"),
    (["serve"], ["--api-key", ""], "empty: give the key"),  # "$KEY" unset: the server started open
    (["serve"], ["--api-key", "  "], "empty: give the key"),
    (["translate"], ["--top-k", "5"], "go with --sample"),
    (["translate"], ["--temperature", "0.5"], "go with --sample"),
    (["translate"], ["--sample", "--beam", "5"], "--sample draws one translation"),
]


@pytest.mark.parametrize("command, flags, needle", RUNTIME_FLAGS, ids=[" ".join(c[:1] + f) for c, f, _ in RUNTIME_FLAGS])
def test_runtime_flags_are_checked_before_anything_runs(experiment, capsys, monkeypatch, command, flags, needle):
    flags = [_no_cuda_device() if flag == "NOCUDA" else flag for flag in flags]
    inputs = ["-i", str(experiment.root.parent / "in.txt")] if command == ["translate"] else []
    before = written(experiment)
    result = mt(capsys, monkeypatch, *command, "--exp", str(experiment.root), *inputs, *flags)
    one_error(*result, 2, needle)
    assert written(experiment) == before


def test_serve_refuses_an_empty_key_from_the_environment(experiment, capsys, monkeypatch):
    monkeypatch.setenv("MT_API_KEY", "")  # click reads an empty variable as none: the server started open
    one_error(*mt(capsys, monkeypatch, "serve", "--exp", str(experiment.root)), 2, "'--api-key' (env var: 'MT_API_KEY'): empty")


def test_report_refuses_a_checkpoint_that_is_not_there(experiment, tmp_path, capsys, monkeypatch):
    page = tmp_path / "report.html"
    result = mt(capsys, monkeypatch, "report", "--exp", str(experiment.root), "--checkpoint", "nope", "-o", str(page))
    one_error(*result, 1, "no checkpoint 'nope'", "available: ")
    assert not page.exists()


def test_evaluate_names_both_files_when_they_do_not_pair_up(experiment, tmp_path, capsys, monkeypatch):
    hyp, ref = tmp_path / "out.en", tmp_path / "ref.en"
    hyp.write_text("a\nb\nc\n", encoding="utf-8")
    ref.write_text("a\nb\n", encoding="utf-8")
    result = mt(capsys, monkeypatch, "evaluate", "--hyp", str(hyp), "--ref", str(ref))
    one_error(*result, 1, f"--hyp {hyp} has 3 lines but --ref {ref} has 2")
    result = mt(capsys, monkeypatch, "evaluate", "--exp", str(experiment.root), "--hyp", str(hyp), "--ref", str(ref))
    one_error(*result, 2, "--exp translates a split")
    # several --ref: references of the same lines (the last alone was scored, nrefs:1)
    other = tmp_path / "other.en"
    other.write_text("a\nb\nc\n", encoding="utf-8")
    ref.write_text("x\ny\nz\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "evaluate", "--hyp", str(hyp), "--ref", str(ref), "--ref", str(other), "--json")
    assert code == 0 and json.loads(out)["bleu_signature"].startswith("nrefs:2|"), err


def test_evaluate_tokenized_into_chinese_is_refused_before_the_model_loads(experiment, tmp_path, capsys, monkeypatch):
    """Moses leaves a sentence without spaces one word: refused, but only once the split was translated."""
    import yaml

    config = yaml.safe_load((experiment.root / "config.yaml").read_text(encoding="utf-8"))
    config["data"]["tgt_lang"] = "zho_Hans"
    (tmp_path / "zh").mkdir()
    (tmp_path / "zh" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")  # no model at all
    result = mt(capsys, monkeypatch, "evaluate", "--exp", str(tmp_path / "zh"), "--tokenized")
    one_error(*result, 2, "--tokenized into zho_Hans: Moses' tokenizer does not cut a text written without spaces")


def test_version_names_mt_and_what_it_runs_on(capsys, monkeypatch):
    import torch

    code, out, err = mt(capsys, monkeypatch, "--version")
    assert code == 0 and err == "", err
    assert out.startswith("mt 0.") and f"torch {torch.__version__}" in out and len(out.splitlines()) == 1


def test_input_dash_reads_stdin(experiment, capsys, monkeypatch):
    text = (experiment.root.parent / "in.txt").read_bytes()
    code, from_file, err = mt(capsys, monkeypatch, "translate", "--exp", experiment.root, "--input",
                              experiment.root.parent / "in.txt")
    assert code == 0, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text), encoding="utf-8"))
    code, from_stdin, err = mt(capsys, monkeypatch, "translate", "--exp", experiment.root, "--input", "-")
    assert code == 0 and from_stdin == from_file and len(from_stdin.splitlines()) == 2, err


def test_translate_into_a_file_shows_progress_only_on_a_terminal(experiment, tmp_path, capsys, monkeypatch):
    from mt import log

    args = ["translate", "--exp", experiment.root, "--input", experiment.root.parent / "in.txt"]
    code, out, err = mt(capsys, monkeypatch, *args, "--output", tmp_path / "plain.txt")
    assert code == 0 and "2/2" not in err, err  # stderr is no terminal here
    monkeypatch.setattr(log, "progress_enabled", lambda: True)  # as on a terminal
    code, out, err = mt(capsys, monkeypatch, *args, "--output", tmp_path / "shown.txt")
    assert code == 0 and "translate" in err and "2/2" in err, err
    assert (tmp_path / "shown.txt").read_text() == (tmp_path / "plain.txt").read_text() != ""


def test_evaluate_shows_progress_only_on_a_terminal(experiment, capsys, monkeypatch):
    from mt import log

    code, out, err = mt(capsys, monkeypatch, "evaluate", "--exp", experiment.root, "--split", "valid", "--json")
    assert code == 0 and not re.search(r"\d+/\d+", err), err  # stderr is no terminal here
    monkeypatch.setattr(log, "progress_enabled", lambda: True)  # as on a terminal
    code, shown, err = mt(capsys, monkeypatch, "evaluate", "--exp", experiment.root, "--split", "valid", "--json")
    lines = json.loads(out)["sentences"]
    assert code == 0 and re.search(rf"valid .*{lines}/{lines}", err), err
    assert json.loads(shown)["bleu"] == json.loads(out)["bleu"]


def test_attention_json_on_stdout_and_files_in_output(experiment, tmp_path, capsys, monkeypatch):
    """One grammar: --json prints JSON on stdout (as evaluate and info), --output names where files go."""
    code, out, err = mt(capsys, monkeypatch, "attention", "--exp", experiment.root, "Ein Mann läuft.", "--json")
    weights = json.loads(out)
    assert code == 0 and weights["src_tokens"][-1] == "</s>" and weights["cross_attention"], err
    assert not experiment.attention_dir.exists()  # nothing written
    code, out, err = mt(capsys, monkeypatch, "attention", "--exp", experiment.root, "Ein Mann läuft.",
                        "--format", "json", "--output", tmp_path / "maps")
    assert code == 0 and json.loads((tmp_path / "maps" / "attention.json").read_text()) == weights, err
    # --target decodes the given translation: a search flag beside it was ignored without a word
    for flags, flag in ((["--beam", "1"], "--beam"), (["--no-shortlist"], "--no-shortlist")):
        result = mt(capsys, monkeypatch, "attention", "--exp", experiment.root, "Ein Mann läuft.", "--target", "A man.",
                    "--json", *flags)
        one_error(*result, 2, f"{flag} is for the model's own translation; --target is forced decoding")


def test_a_bare_mt_prints_its_help(capsys, monkeypatch):
    code, out, err = mt(capsys, monkeypatch)
    assert code == 2 and out == ""
    assert err.startswith("Usage: ") and "COMMAND" in err and "train-tokenizer" in err and "backtranslate" in err


def test_global_flags_work_after_the_subcommand(tmp_path, capsys, monkeypatch):
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", tmp_path / "none", "--debug")
    assert code == 1 and "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", tmp_path / "none", "-q")
    one_error(code, out, err, 1, "not an experiment yet")
    assert cli_errors.global_flags_first(["translate", "--debug", "--", "--debug"]) == ["--debug", "translate", "--", "--debug"]


def test_help_at_80_columns_cuts_nothing_and_keeps_examples_whole():
    # Rich's tables cut long words and option names with an ellipsis at 80 columns ("--length-penal…").
    group = typer.main.get_command(cli.app)
    for name, command in group.commands.items():
        done = CliRunner().invoke(cli.app, [name, "--help"], env={"COLUMNS": "80"})
        assert done.exit_code == 0, name
        assert "…" not in done.output, f"mt {name} --help cuts text at 80 columns"
        for param in command.params:
            for opt in param.opts:
                assert opt in done.output, f"mt {name} --help lost {opt}"
        for example in command.epilog.split("\n\n")[1:]:
            line = example.replace("\b", "").strip()
            assert line in done.output, f"mt {name} --help breaks the example {line!r}"


def test_info_says_how_each_score_was_decoded(experiment, tmp_path, capsys, monkeypatch):
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    for flags in (["--beam", "1"], ["--beam", "2", "--alpha", "0.3", "--tokenized"]):
        code, _, err = mt(capsys, monkeypatch, "evaluate", "--exp", str(copy), "--split", "valid", "--threads", "1", *flags)
        assert code == 0, err
        if flags == ["--beam", "1"]:
            plain = (copy / "translations" / "valid.hyp").read_bytes()
    # the translations beside the sacreBLEU scores stay theirs (was: replaced by the tokenized run's)
    assert (copy / "translations" / "valid.hyp").read_bytes() == plain
    assert (copy / "translations" / "valid.tokenized.hyp").is_file()
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy), "--json")
    assert code == 0, err
    record = json.loads(out)
    valid, tokenized = record["scores"]["valid"], record["scores"]["valid.tokenized"]
    assert (valid["decode"]["beam"], tokenized["decode"]["beam"], tokenized["decode"]["alpha"]) == (1, 2, 0.3)
    assert 0 <= valid["bleu"] <= 100 and record["config"]["decode"]["beam"] == experiment.load_config().decode.beam
    assert record["checkpoints"]["last"]["bytes"] == experiment.checkpoint_path("last").stat().st_size
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy))
    assert code == 0, err
    assert "(best.pt, beam 1, alpha 0.6 gnmt)" in out and "valid (tokenized)" in out and "pretok:moses-" in out
    # A multilingual split into two languages has a tokenized signature per direction (was a KeyError:
    # info failed), and scores/train.json is shown (was left out)
    from mt.apps.evaluate import _mean
    from mt.metrics import score_tokenized

    hyps = ["Ein Hund.", "Zwei Katzen."]
    split = {**_mean({"en-de": score_tokenized(hyps, hyps, "de"), "de-en": score_tokenized(hyps, hyps, "en")}),
             "split": "test", "checkpoint": "best.pt", "decode": tokenized["decode"]}
    (copy / "scores" / "test.tokenized.json").write_text(json.dumps(split), encoding="utf-8")
    (copy / "scores" / "train.json").write_text(json.dumps({**valid, "split": "train"}), encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy))
    assert code == 0, err
    assert "test (tokenized) en-de" in out and "pretok:moses-de" in out and "pretok:moses-en" in out
    assert any(line.strip("│ ").startswith("train ") and "BLEU" in line for line in out.splitlines()), out
    # A checkpoint saved after its scores: they are said to be stale (were shown as the experiment's)
    import os

    best = copy / "checkpoints" / "best.pt"
    later = (copy / "scores" / "valid.json").stat().st_mtime + 60
    import shutil

    shutil.copy(copy / "checkpoints" / "step_0000020.pt", best)  # another model saved as best.pt
    os.utime(best, (later, later))
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy), "--json")
    assert code == 0 and json.loads(out)["scores"]["valid"]["stale"] == ["best.pt saved since"], out
    code, out, err = mt(capsys, monkeypatch, "info", "--exp", str(copy))
    assert "(stale: best.pt saved since: mt evaluate again)" in " ".join(out.split()).replace("│ ", ""), out


def test_a_failed_step_leaves_the_config_as_it_was(experiment, tmp_path, capsys, monkeypatch):
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    shutil.rmtree(copy / "data")
    shutil.rmtree(copy / "checkpoints")
    before = (copy / "config.yaml").read_text(encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "train", "--exp", str(copy), "--max-steps", "7", "--lr", "0.5")
    assert code != 0 and "binarize" in err, err
    assert (copy / "config.yaml").read_text(encoding="utf-8") == before
    last = json.loads((copy / "overrides.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert "reverted" in last
    # a flag named otherwise than its field is named as typed (was "--lr-peak", a flag that does not exist)
    code, out, err = mt(capsys, monkeypatch, "train", "--exp", str(copy), "--lr", "nan")
    assert code != 0 and err.strip().splitlines()[-1].startswith("error: --lr: ") and "--lr-peak" not in err, err


def test_a_new_experiment_around_a_copied_tokenizer_records_that_tokenizer(experiment, tmp_path):
    import shutil

    from mt.errors import ConfigError
    from mt.experiment.config import open_experiment

    size = experiment.load_tokenizers(experiment.load_config().tokenizer.joint)[0].vocab_size
    assert size != experiment.load_config().__class__().tokenizer.vocab_size  # the toy's is not the default
    shutil.copytree(experiment.root / "tokenizer", tmp_path / "ft" / "tokenizer")
    with pytest.raises(ConfigError, match=f"has {size}"):
        open_experiment(tmp_path / "ft", sets=[f"tokenizer.vocab_size={size + 1}"])
    assert not (tmp_path / "ft" / "config.yaml").exists()
    _, cfg, _ = open_experiment(tmp_path / "ft", sets=["train.max_steps=5"])
    assert cfg.tokenizer.vocab_size == size and open_experiment(tmp_path / "ft")[1].tokenizer.vocab_size == size
    # how it was trained, as its file says (the defaults were recorded: unigram, nmt_nfkc, byte fallback)
    import sentencepiece
    from helpers import toy_corpus

    from mt.experiment.paths import Experiment

    prefix = Experiment(tmp_path / "bpe").spm_model_path("joint").with_suffix("")
    prefix.parent.mkdir(parents=True)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(toy_corpus(200, seed=3)[0]), model_prefix=str(prefix), vocab_size=60,
        model_type="bpe", normalization_rule_name="identity", byte_fallback=False, minloglevel=2,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    cfg = open_experiment(tmp_path / "bpe", sets=["train.max_steps=5"])[1]
    assert (cfg.tokenizer.model_type, cfg.tokenizer.normalization, cfg.tokenizer.byte_fallback) == ("bpe", "identity", False)


def test_run_dry_run_prints_the_config_and_writes_nothing(experiment, tmp_path, capsys, monkeypatch):
    import shutil

    import yaml

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [train-tokenizer, binarize, train, evaluate]\ntrain:\n  max_steps: 7\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(tmp_path / "new"), "--dry-run")
    assert code == 0, err
    assert yaml.safe_load(out)["train"]["max_steps"] == 7 and not (tmp_path / "new").exists()
    assert "train-tokenizer to run, binarize to run, train to run, evaluate to run" in err
    assert "missing" not in err  # the default corpus, Debian's Ding dictionary, is installed
    missing = tmp_path / "missing.yaml"
    missing.write_text(f"steps: [binarize, evaluate]\ndata:\n  train: [files:{tmp_path}/nope]\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "run", str(missing), "--exp", str(tmp_path / "new"), "--dry-run")
    assert code == 0 and f"missing: data.train: {tmp_path}/nope.de" in err and f"{tmp_path}/nope.en" in err, err
    from pathlib import Path

    student = Path(__file__).resolve().parents[2] / "recipes" / "multi30k_en_de_student.yaml"
    code, out, err = mt(capsys, monkeypatch, "run", str(student), "--exp", str(tmp_path / "s"), "--dry-run")
    assert code == 0 and not (tmp_path / "s").exists(), err  # the run would stop: said (was: "distill to run")
    assert f"distill would stop: the step distill writes {tmp_path / 's'}/distill/train.*" in err, err
    assert f"'data.train=[files:{tmp_path / 's'}/distill/train]'" in err, err
    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--dry-run")
    assert code == 2 and "train.max_steps 7: " in err and "is at step 40 already" in err, err  # a budget it passed
    recipe.write_text("steps: [train-tokenizer, binarize, train, evaluate]\ntrain:\n  max_steps: 40\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()}
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--dry-run",
                        "--set", "train.max_steps=99")
    assert code == 0, err
    assert yaml.safe_load(out)["train"]["max_steps"] == 99 and "train-tokenizer done, binarize done" in err
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()} == before
    scored = tmp_path / "evaluate.yaml"
    scored.write_text("steps: [evaluate]\n", encoding="utf-8")
    assert mt(capsys, monkeypatch, "run", str(scored), "--exp", str(copy), "--threads", "1")[0] == 0
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--dry-run")
    assert code == 0 and "train done, evaluate done" in err, err
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--dry-run",
                        "--set", "train.max_steps=99")  # the run would train on, then score anew
    assert code == 0 and "train to run, evaluate to run" in err, err


def test_run_says_a_corpus_file_changed_since_the_tokenizer_was_trained_on_it(tmp_path, capsys, monkeypatch):
    """Was: "train-tokenizer: done already" unchecked, and binarize then encoded a corpus fixed or
    replaced meanwhile with the earlier text's vocabulary, without a word."""
    from helpers import tiny_experiment

    exp, _ = tiny_experiment(tmp_path, {"train": 60, "valid": 8}, model={}, train={}, decode={})
    shutil.rmtree(exp.data_dir)  # the tokenizer trained, binarize not run yet
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [train-tokenizer]\n", encoding="utf-8")
    train = tmp_path / "train.de"
    lines = train.read_text(encoding="utf-8")
    train.write_text(lines, encoding="utf-8")  # the same lines, a new time: nothing to say
    code, _, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(exp.root))
    assert code == 0 and "train-tokenizer: done already" in err and "has changed" not in err, err
    train.write_text(lines.replace("e", "a", 3), encoding="utf-8")
    code, _, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(exp.root))
    assert code == 0 and f"train-tokenizer: {train} has changed since {exp.tokenizer_dir} was trained on it" in err


def test_run_notices_a_corpus_file_changed_since_it_was_binarized(tmp_path, capsys, monkeypatch):
    """data/ is done only while its files are: a training file with other lines stops the run before
    it trains on the old ones (was: "binarize: done already"); the same lines written again do not, a
    changed test file is said, and once the model is trained a changed training file is a warning."""
    from helpers import tiny_experiment

    exp, _ = tiny_experiment(tmp_path, {"train": 60, "valid": 8, "test": 8}, model=dict(enc_layers=1, dec_layers=1),
                             train=dict(max_steps=2, max_tokens=300, log_every=1), decode=dict(max_len_b=5))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [binarize, train]\n", encoding="utf-8")

    def run(*flags: str) -> tuple[int, str]:
        code, _, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(exp.root), "--threads", "1", *flags)
        return code, err

    train = tmp_path / "train.de"
    lines = train.read_text(encoding="utf-8")
    train.write_text(lines, encoding="utf-8")  # the same lines, a new time: nothing to say
    err = run("--dry-run")[1]
    assert "binarize done, train to run" in err and "would stop" not in err, err
    train.write_text(lines.replace("e", "a", 3), encoding="utf-8")  # the same size, other lines
    code, err = run("--dry-run")
    assert code == 0 and f"binarize would stop: binarize: {train} (train) has changed since" in err, err
    code, err = run()
    assert code == 1 and "Traceback" not in err and not exp.checkpoints_dir.exists(), err
    assert err.splitlines()[-1] == (
        f"error: binarize: {train} (train) has changed since {exp.data_dir} was binarized from it (other lines): "
        f"training would read its earlier lines; `mt binarize --exp {exp.root} --force` binarizes it again, "
        "or start a new --exp"), err
    train.write_text(lines, encoding="utf-8")
    assert run()[0] == 0 and exp.checkpoint_path("last").exists()
    (tmp_path / "test.en").write_text("other\n" * 8, encoding="utf-8")
    train.write_text(lines.replace("e", "a", 3), encoding="utf-8")
    code, err = run()
    assert code == 0 and f"{train} (train) has changed since" in err and "the model was trained on its earlier" in err
    assert "(test) has changed since" in err and "evaluate scores its lines as they are now" in err, err
    train.unlink()  # removed (or compressed) to save space: data/ holds its lines, said
    code, err = run()
    assert code == 0 and f"{train} (train), which {exp.data_dir} was binarized from, is gone" in err, err


def test_the_corpus_record_names_a_compressed_file_as_the_reader_opens_it(tmp_path):
    """files:PREFIX where only PREFIX.LANG.gz is there: recorded as such (was: nothing recorded, unchecked)."""
    import gzip

    from mt.config.schema import ExperimentConfig
    from mt.data.dataset import input_record

    for lang in ("de", "en"):
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("eins\nzwei\n")
    cfg = ExperimentConfig()
    cfg.data.train = [f"files:{tmp_path / 'train'}"]
    assert sorted(input_record(cfg, ["train"])) == [str(tmp_path / "train.de.gz"), str(tmp_path / "train.en.gz")]
    # A plain file compressed after binarize is the same file; compressed with other lines, it changed
    from mt.atomic_files import write_json_atomic
    from mt.data.dataset import changed_inputs

    (tmp_path / "valid.de").write_text("drei\n", encoding="utf-8")
    cfg.data.valid = [f"files:{tmp_path / 'valid.de'}|{tmp_path / 'train.en.gz'}"]
    exp = Experiment(tmp_path / "exp")
    exp.data_dir.mkdir(parents=True)
    write_json_atomic(exp.manifest_path, {"inputs": input_record(cfg, ["train", "valid"], content=True)})
    (tmp_path / "valid.de").unlink()
    with gzip.open(tmp_path / "valid.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("drei\n")
    assert changed_inputs(exp) == []
    with gzip.open(tmp_path / "valid.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("vier\n")
    assert changed_inputs(exp) == [("valid", str(tmp_path / "valid.de.gz"), "other lines")]
    # a .gz compressed again with the same lines (gzip's header holds a time): not changed
    import time

    time.sleep(1.1)
    with gzip.open(tmp_path / "train.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("eins\nzwei\n")
    assert [c for c in changed_inputs(exp) if c[1].endswith("train.de.gz")] == []


@pytest.mark.parametrize("command", [["translate", "-i", "IN"], ["plot"]], ids=lambda c: c[0])
def test_an_output_that_is_a_directory_or_a_device_is_refused_before_any_work(experiment, tmp_path, capsys,
                                                                              monkeypatch, command):
    """Was: translate everything, then "error: .adir.123-x.tmp: Is a directory"; with --force a
    character device (a /dev/null) was replaced by a regular file."""
    command = [str(experiment.root.parent / "in.txt") if part == "IN" else part for part in command]
    directory = tmp_path / "adir.png"
    directory.mkdir()
    result = mt(capsys, monkeypatch, *command, "--exp", str(experiment.root), "-o", str(directory), "--force")
    one_error(*result, 1, f"--output {directory}: is a directory")
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    result = mt(capsys, monkeypatch, *command, "--exp", str(experiment.root), "-o", str(fifo), "--force")
    one_error(*result, 1, f"--output {fifo}: not a regular file")
    assert fifo.exists() and not fifo.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["adir.png", "pipe.png"]


def test_an_atomic_write_that_cannot_start_names_its_target_not_the_temporary(tmp_path, monkeypatch):
    """Was "error: .o.txt.1129-8n09a31j.tmp: Read-only file system" (the temporary's name)."""
    import errno
    import tempfile

    from mt.atomic_files import write_text_atomic

    def read_only(dir, prefix, suffix):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.path.join(dir, f"{prefix}abc{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(OSError) as info:
        write_text_atomic(tmp_path / "out.txt", "x")
    assert info.value.filename == str(tmp_path / "out.txt") and info.value.errno == errno.EROFS
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("args, needle", [(["bad \udcff"], "the sentence: not valid Unicode (character 5"),
                                          (["Ein Mann.", "--target", "a \udcff"], "--target: not valid Unicode")])
def test_attention_names_the_argument_that_is_not_unicode(experiment, capsys, monkeypatch, args, needle):
    """A byte that is not UTF-8 in argv arrives as a lone surrogate; was "line 1: not valid Unicode"."""
    result = mt(capsys, monkeypatch, "attention", *args, "--exp", str(experiment.root), "--format", "json")
    one_error(*result, 1, needle)


@pytest.mark.parametrize("flags", [[], ["--src-lang", "auto"]], ids=["plain", "auto"])
def test_translate_answers_each_line_of_a_pipe_that_stays_open(experiment, flags):
    """Lines sent one at a time into a pipe that stays open each get their translation before the
    next is sent (was: nothing until 256 lines or the end of the input); with --src-lang auto too
    (was: a traceback at the first pause, and every line lost)."""
    import select
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MT_DEBUG", None)
    process = subprocess.Popen([sys.executable, "-m", "mt", "translate", "--exp", str(experiment.root), "--threads", "1",
                                *flags],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    answers = []
    try:
        for line in (b"Ein Mann.\n", b"\n", b"Die Katze schl\xc3\xa4ft.\n"):
            process.stdin.write(line)
            process.stdin.flush()
            assert select.select([process.stdout], [], [], 120)[0], f"no answer to {line!r} while the pipe is open"
            answers.append(process.stdout.readline().decode("utf-8").rstrip("\n"))
        process.stdin.close()
        assert process.stdout.read() == b"" and process.wait(60) == 0
    finally:
        process.kill()
    from mt.decoding.translator import Translator

    translator = Translator.load(experiment, experiment.load_config())
    assert answers == translator.translate(["Ein Mann.", "", "Die Katze schläft."]) and answers[1] == ""


def test_scores_lines_have_two_fields_whatever_tabs_the_source_has(experiment, tmp_path, capsys, monkeypatch):
    """A tab between a line's sentences is copied into its translation: in SCORE<TAB>TRANSLATION it
    was a third field (and a leading tab an empty translation for `cut -f2`)."""
    source = tmp_path / "tabs.de"
    source.write_text("Ein Mann.\tDie Katze.\n\tEin Mann.\nEin Mann.\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--input", str(source),
                        "--scores", "--threads", "1")
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [len(row) for row in rows] == [2, 2, 2] and all(row[1].strip() for row in rows)


def test_auto_identifies_a_constrained_lines_source_not_its_target_phrases(experiment, capsys, monkeypatch):
    """SOURCE<TAB>PHRASE...: the phrases are in the target language (was: an English phrase made the
    German line English, and its translation an empty line)."""
    line = "Mann.\tthe man is walking in the park with his dog today\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line.encode())))
    code, out, err = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--src-lang", "auto",
                        "--constraints", "--threads", "1")
    assert code == 0 and out.strip() and "not translated" not in err, err


def test_attention_output_that_is_a_file_is_refused_naming_it(experiment, tmp_path, capsys, monkeypatch):
    keep = tmp_path / "keep.txt"
    keep.write_text("mine\n", encoding="utf-8")
    result = mt(capsys, monkeypatch, "attention", "Ein Mann.", "--exp", str(experiment.root), "--output", str(keep))
    one_error(*result, 1, f"--output {keep}: not a directory")  # was "keep.txt: File exists"
    assert keep.read_text(encoding="utf-8") == "mine\n"


def test_a_read_only_experiment_translates_with_decoding_flags(experiment, tmp_path, capsys, monkeypatch):
    """translate and attention write nothing, so --beam on a read-only copy works and changes no file
    (overrides.jsonl included: as root, where chmod does not stop a write, that is what would fail)."""
    import shutil

    copy = tmp_path / "ro"
    shutil.copytree(experiment.root, copy)
    (copy / "overrides.jsonl").write_text("", encoding="utf-8")
    paths = [copy, *copy.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in paths if p.is_file()}
    try:
        for args in (["translate", "--exp", copy, "--beam", "3", "--input", experiment.root.parent / "in.txt"],
                     ["attention", "--exp", copy, "--beam", "3", "Ein Mann läuft.", "--json"]):
            code, out, err = mt(capsys, monkeypatch, *args)
            assert code == 0 and out.strip(), err
        after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in [copy, *copy.rglob("*")] if p.is_file()}
        assert after == before
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)


def test_run_averages_again_when_average_last_changes(experiment, tmp_path, capsys, monkeypatch):
    """average.pt is done only while it averages the last decode.average_last checkpoints (its
    averaged_from), scores from it only while they came from that average; --dry-run says the same."""
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [average, evaluate]\ndecode:\n  checkpoint: average\n  average_last: 2\n", encoding="utf-8")
    steps = [p.name for p in Experiment(copy).step_checkpoints()]
    assert len(steps) == 2

    def run(*flags: str) -> str:
        code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), *flags)
        assert code == 0, err
        return err

    def averaged_from() -> tuple[list, list]:
        test = json.loads((copy / "scores" / "test.json").read_text(encoding="utf-8"))
        return load_checkpoint(copy / "checkpoints" / "average.pt")["averaged_from"], test["decode"]["averaged_from"]

    run()
    assert averaged_from() == (steps, steps)
    assert "average done, evaluate done" in run("--dry-run")
    assert "average to run, evaluate to run" in run("--dry-run", "--set", "decode.average_last=1")  # was "done"
    err = run("--set", "decode.average_last=1")
    assert "average: done already" not in err and "evaluate test: done already" not in err, err
    assert averaged_from() == (steps[-1:], steps[-1:])  # average.pt averaged 2 and its scores were kept as fresh
    err = run("--set", "decode.average_last=1")
    assert "average: done already" in err and "evaluate test: done already" in err, err


def test_run_scores_again_after_another_checkpoints_scores_or_with_other_test_lines(
    experiment, tmp_path, capsys, monkeypatch
):
    """Scores are the experiment's own checkpoint's only by its path (another run's best.pt is not
    this one's), and of the split's lines as they are: a fixed reference is scored again."""
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [evaluate]\n", encoding="utf-8")

    def run() -> str:
        code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--threads", "1")
        assert code == 0, err
        return err

    run()
    assert "evaluate test: done already" in run()
    other = tmp_path / "other" / "best.pt"
    other.parent.mkdir()
    shutil.copy(copy / "checkpoints" / "step_0000020.pt", other)
    code, out, err = mt(capsys, monkeypatch, "evaluate", "--exp", str(copy), "--checkpoint", str(other),
                        "--threads", "1")
    assert code == 0, err
    assert json.loads((copy / "scores" / "test.json").read_text(encoding="utf-8"))["checkpoint"] == str(other.resolve())
    assert "evaluate test: done already" not in run()  # was: another model's scores, as this one's
    assert "evaluate test: done already" in run()
    scores = copy / "scores" / "test.json"
    scores.write_text("[]", encoding="utf-8")  # damaged: scored again (was: AttributeError)
    assert "evaluate test: done already" not in run() and json.loads(scores.read_text(encoding="utf-8"))["bleu"] >= 0
    for damage in (b"\xff{}", b'{"bleu": 3'):  # not UTF-8, not JSON: scored again (was: the run stopped)
        scores.write_bytes(damage)
        assert "evaluate test: done already" not in run() and json.loads(scores.read_text(encoding="utf-8"))["bleu"] >= 0
    scores.unlink()
    reference = experiment.root.parent / "test.en"  # the shared experiment's: put back as it was
    before = reference.read_bytes()
    try:
        reference.write_text(before.decode("utf-8").replace("a", "the"), encoding="utf-8")
        assert "evaluate test: done already" not in run()  # was: the scores against the old references
    finally:
        reference.write_bytes(before)


def test_run_does_not_binarize_again_for_a_finished_training_whose_data_was_removed(
    experiment, tmp_path, capsys, monkeypatch
):
    """data/ removed after training to save disk: `mt run` binarized the whole corpus again (hours on
    WMT), then skipped the training it was for."""
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment.root, copy)
    shutil.rmtree(copy / "data")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps: [binarize, train, evaluate]\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--threads", "1")
    assert code == 0, err
    assert "binarize: not needed, training is done" in " ".join(err.split()) and not (copy / "data").exists()
    assert "train: done already" in err and "test: BLEU" in out
    code, _, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--dry-run")
    assert code == 0 and "binarize to run" not in err, err  # the dry run says as the run does
    # a shortlist to build reads data/: binarized again then (the step failed on the missing data/)
    recipe.write_text("steps: [binarize, shortlist, train]\n", encoding="utf-8")
    code, out, err = mt(capsys, monkeypatch, "run", str(recipe), "--exp", str(copy), "--threads", "1")
    assert code == 0 and (copy / "data").is_dir() and (copy / "shortlist").exists(), err


def test_run_takes_patience_run_out_for_done_only_while_a_resume_would_keep_it(experiment, tmp_path):
    """A BLEU best of another sample size starts afresh on resume (patience too): `mt run` said
    "train: done already (patience ran out)" where `mt train` would have gone on."""
    import shutil

    from mt.apps.run import _training_done
    from mt.experiment.checkpoint_file import save_checkpoint

    copy = Experiment(tmp_path / "exp")
    shutil.copytree(experiment.root, copy.root)
    last = copy.checkpoint_path("last")
    state = load_checkpoint(last)
    state.update(best_metric="bleu", best_valid=12.0, bad_validations=5, best_setup="greedy BLEU on 50 sentences")
    save_checkpoint(last, state)
    cfg = copy.load_config()
    cfg.train.max_steps, cfg.train.max_time, cfg.train.patience = 10**6, None, 3
    cfg.train.valid_bleu, cfg.train.best_metric, cfg.train.valid_bleu_sentences = True, "bleu", 50
    assert "patience 3 ran out" in _training_done(copy, cfg)
    cfg.train.valid_bleu_sentences = 1000
    assert _training_done(copy, cfg) is None


# `mt ARGS` in a process of its own that says, as it exits, whether torch was imported.
WITH_TORCH_REPORTED = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'torch imported: {\"torch\" in sys.modules}\\n'))\n"
    "sys.argv = ['mt', *sys.argv[1:]]\n"
    "runpy.run_module('mt', run_name='__main__', alter_sys=True)\n"
)


def test_refusals_come_before_torch_loads(experiment, tmp_path):
    """A mistyped flag, file or experiment is answered in a fraction of a second: torch (seconds to
    import) and the precision probe's matmuls come after every check that needs no model."""
    (tmp_path / "typo.yaml").write_text("exp: typo_exp\ntrain:\n  max_stpes: 5\n", encoding="utf-8")
    env = {**os.environ, "MT_ALLOCATOR": "system"}  # no re-run of the process under tcmalloc
    refusals = [
        (["run", "typo.yaml"], "train.max_stpes", False),
        (["distill", "--teacher", "nowhere", "--exp", "student"], "--teacher nowhere", False),
        (["report", "--exp", "nowhere"], "nowhere: not an experiment", False),
        (["average", "--exp", "nowhere"], "nowhere: not an experiment", False),
        (["translate", "--exp", str(experiment.root), "--input", "nowhere.txt"], "nowhere.txt: no such input file", False),
        (["translate", "--exp", str(experiment.root), "--input", "nowhere"], "nowhere: no such input file", False),
        (["export", "--exp", str(experiment.root), "--output", str(experiment.root)], "exists; choose another", False),
        (["export", "--exp", str(experiment.root), "--output", "o", "--format", "onnx"], "--format 'onnx'", False),
        # training's modules import torch; the refusal comes before the precision probe (no "precision auto:" line)
        (["train", "--exp", "nowhere"], "no tokenizer yet", True),
    ]
    for args, needle, torch_imported in refusals:
        done = subprocess.run([sys.executable, "-c", WITH_TORCH_REPORTED, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and lines[-1] == f"torch imported: {torch_imported}", (args, done.stderr)
        assert len(lines) == 2 and lines[0].startswith("error: ") and needle in lines[0], (args, done.stderr)


def test_a_pivot_is_checked_before_any_input_naming_the_flag(experiment, tmp_path, capsys, monkeypatch):
    """A bilingual model has no pivot: refused in one line naming --pivot, before reading (was: exit 0
    on an empty input, and on a stream an error blaming --tgt-lang at the first line)."""
    empty = tmp_path / "empty.de"
    empty.write_text("", encoding="utf-8")
    result = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--input", str(empty),
                "--pivot", "fr", "--threads", "1")
    one_error(*result, 2, "--pivot fr: this model translates de-en only")


@pytest.mark.parametrize("flags, needle", [
    (["--scores", "--nbest", "2"], "--scores goes without --nbest"),  # was: --scores dropped, n-best lines
    (["--retranslate"], "--retranslate is for XLIFF and PO documents"),  # was: accepted on lines, doing nothing
    (["--segment-tokens", "9", "--nbest", "2"], "with --nbest each line is one segment"),
])
def test_flags_that_would_do_nothing_are_refused(experiment, capsys, monkeypatch, flags, needle):
    result = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--input",
                str(experiment.root.parent / "in.txt"), "--format", "text", *flags, "--threads", "1")
    one_error(*result, 2, needle)


def test_an_error_message_is_printed_as_written(experiment, capsys, monkeypatch):
    """rich's emoji codes: "--device cuda:x: ..." was printed "cuda❌ ..."."""
    result = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--device", "cuda:x:")
    assert "cuda:x:" in result[2] and "\u274c" not in result[2]


def test_int8_with_another_precision_is_refused(experiment, capsys, monkeypatch):
    """--quantize int8 runs int8 and fp32: --precision bf16 beside it was ignored without a word."""
    result = mt(capsys, monkeypatch, "translate", "--exp", str(experiment.root), "--input",
                str(experiment.root.parent / "in.txt"), "--format", "text", "--quantize", "int8", "--precision", "bf16")
    one_error(*result, 2, "--quantize int8 goes without --precision bf16")


def test_a_tokenizer_that_fails_to_train_leaves_no_experiment_behind(tmp_path, capsys, monkeypatch):
    """Was: tokenizer/inputs.json, written before the models, kept a new experiment's config.yaml (and an
    existing one's failed --vocab-size) where a failed step is undone."""
    from helpers import toy_corpus

    src, tgt = toy_corpus(40, seed=3)
    (tmp_path / "train.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    exp = tmp_path / "exp"
    code, _, err = mt(capsys, monkeypatch, "train-tokenizer", "--exp", str(exp), "--train",
                      f"files:{tmp_path / 'train'}", "--vocab-size", "50000")
    assert code != 0 and "--vocab-size 50000 is too large" in err and not exp.exists(), err


def test_command_line_shapes_help_force_documents_and_average(trained_experiment, tmp_path, capsys, monkeypatch):
    """-h is --help (was "No such option: -h"); --force without --output is refused (it was ignored);
    a binary document without --output is refused as a flag error (2) before the model loads (it was 1,
    after); `mt average` says on stdout what it wrote, as export and plot do (it said so on stderr only)."""
    import shutil

    code, out, _ = mt(capsys, monkeypatch, "translate", "-h")
    assert code == 0 and "--input" in out
    code, _, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--force")
    assert code == 2 and "--force goes with --output FILE" in err
    (tmp_path / "a.docx").write_bytes(b"not read")
    code, _, err = mt(capsys, monkeypatch, "translate", "--exp", trained_experiment.root, "--input", tmp_path / "a.docx")
    assert code == 2 and "a docx document is not text; name the file to write with --output" in err
    exp = tmp_path / "exp"
    shutil.copytree(trained_experiment.root, exp)
    code, out, _ = mt(capsys, monkeypatch, "average", "--exp", exp, "--last", "1")  # (not -q: it would stay set)
    assert code == 0 and out == f"{exp / 'checkpoints' / 'average.pt'}\n"


def test_input_that_would_be_lost_or_replaced_is_refused(experiment, tmp_path, capsys, monkeypatch):
    """Lines ending in CR alone were one line on stdout (three lines in, one out); a UTF-8 .txt with one
    stray Latin-1 byte was read whole as a DOS code page (every umlaut Cyrillic); `-o sub/../in.de
    --force`, through a folder not there yet, replaced the input with its translation."""
    exp = str(experiment.root)
    cr = tmp_path / "cr.de"
    cr.write_bytes(b"Ein Satz.\rZwei.\rDer Hund.\r")
    one_error(*mt(capsys, monkeypatch, "translate", "--exp", exp, "-i", str(cr)), 1,
              f"{cr}:1: its lines end in a carriage return alone")
    stray = tmp_path / "brief.txt"
    stray.write_bytes("Grüße aus Köln.\n€ 42 — 100\n".encode() + b"Caf\xe9 ist gut.\n")
    one_error(*mt(capsys, monkeypatch, "translate", "--exp", exp, "-i", str(stray), "-o", str(tmp_path / "out.txt")),
              1, "line 3: not valid UTF-8")
    source = tmp_path / "in.de"
    source.write_text("Ein Satz.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    one_error(*mt(capsys, monkeypatch, "translate", "--exp", exp, "-i", "in.de", "-o", "sub/../in.de", "--force"), 2,
              "is the input")
    assert source.read_text(encoding="utf-8") == "Ein Satz.\n"


def test_language_flags_are_read_as_the_model_spells_its_languages(trained_experiment, tmp_path, capsys, monkeypatch):
    """`--tgt-lang EN`, `--src-lang de-DE` were refused ("this model has no ..."), where `mt serve` read
    the same codes in a request."""
    source = tmp_path / "in.de"
    source.write_text("Ein Hund.\n", encoding="utf-8")
    exp = str(trained_experiment.root)
    code, plain, _ = mt(capsys, monkeypatch, "translate", "--exp", exp, "-i", str(source))
    assert code == 0
    code, spelled, err = mt(capsys, monkeypatch, "translate", "--exp", exp, "-i", str(source), "--src-lang", "de-DE",
                            "--tgt-lang", "EN")
    assert (code, spelled) == (0, plain), err
    from mt.decoding.directions import spelled as spelled_as

    assert [spelled_as(code, {"zh", "sr", "pt"}) for code in ("zh-Hant-TW", "sr-Latn", "pt-BR", "zh-CN")] == [
        "zh-Hant-TW", "sr-Latn", "pt", "zh"]  # a script is no region: refused where it is resolved
    assert spelled_as("pt-BR", {"pb", "pt"}) == "pb" and spelled_as("zh-TW", {"zh", "zt"}) == "zt"
