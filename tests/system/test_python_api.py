"""docs/python-api.md's example runs as written: a tiny model trained and translated from Python."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers import REPO

DOC = REPO / "docs" / "python-api.md"


@pytest.mark.slow
def test_the_documented_example_trains_and_translates(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the page has one example"
    done = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "max_steps 150"
    translations = eval(lines[1])  # the printed list of two translations
    assert len(translations) == 2 and all(isinstance(t, str) and t for t in translations)
    scores = [float(line.split()[0]) for line in lines[2:]]
    assert len(scores) == 2 and scores[0] >= scores[1]  # best first
    assert (tmp_path / "exp" / "toy" / "config.yaml").is_file()
    assert (tmp_path / "exp" / "toy" / "checkpoints" / "last.pt").is_file()
