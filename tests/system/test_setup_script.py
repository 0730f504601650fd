"""setup.sh: what it refuses before it installs anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_misspelt_extra_is_refused_before_anything_is_installed():
    """pip takes an extra it does not know with a warning and exit 0: `./setup.sh exprot` ended "ready"."""
    done = subprocess.run(["bash", str(ROOT / "setup.sh"), "--no-quickstart", "export", "exprot"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("setup: no extra exprot in pyproject.toml (there are: export huggingface")
    assert "apt-get" not in done.stderr and "pip install" not in done.stderr
