"""An experiment written by an earlier mt still translates and resumes as it did.

tests/fixtures/saved_experiment/ is a tiny experiment (1+1 layers, d_model 16, vocabulary 100)
trained for 200 updates by the mt of the date in saved_experiment.expected.json: its config,
tokenizer, binarized data and checkpoints (last.pt with the optimizer and RNG states, ema.pt). What
that mt printed for its translations and for a resume of four more updates is stored beside it;
today's mt must print the same, so a reorganised library or a new checkpoint field cannot strand
the experiments users already have. Numbers are compared to 1e-3 (another CPU sums in another
order); the translations exactly.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES

from mt.cli import main as cli

EXPECTED = json.loads((FIXTURES / "saved_experiment.expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def saved(tmp_path) -> Path:
    """A copy of the saved experiment (the commands below write into it)."""
    root = tmp_path / "exp"
    shutil.copytree(FIXTURES / "saved_experiment", root)
    (tmp_path / "in.txt").write_text("\n".join(EXPECTED["inputs"]) + "\n", encoding="utf-8")
    return root


def mt(capsys, monkeypatch, *args) -> str:
    """`mt ARGS` in this process; its stdout (a failure shows its stderr)."""
    monkeypatch.setattr(sys, "argv", ["mt", *map(str, args)])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.mark.parametrize("command", [key for key in EXPECTED if key.startswith("translate ")])
def test_translates_as_before(saved, capsys, monkeypatch, command):
    flags = command.split()[1:]
    out = mt(capsys, monkeypatch, "translate", "--exp", saved, "--input", saved.parent / "in.txt", *flags)
    rows = [line.split("\t") for line in out.splitlines()]
    assert [text for _, text in rows] == [text for _, text in EXPECTED[command]]
    assert [float(score) for score, _ in rows] == pytest.approx([s for s, _ in EXPECTED[command]], abs=1e-3)


def test_resumes_as_before(saved, capsys, monkeypatch, single_thread):
    command = next(key for key in EXPECTED if key.startswith("train "))
    mt(capsys, monkeypatch, "train", "--exp", saved, *command.split()[1:])
    log = [json.loads(line) for line in (saved / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    resumed = [{key: record[key] for key in ("step", "loss", "nll", "grad_norm", "valid_nll") if key in record}
               for record in log if record["step"] > 200]
    expected = EXPECTED[command]
    assert [r["step"] for r in resumed] == [r["step"] for r in expected]
    for got, want in zip(resumed, expected):
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-3, abs=1e-3), (got["step"], key)
