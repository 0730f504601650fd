"""Every benchmark script and tool still runs: each `--help` prints its usage, and every name it imports
from mt, at the top or inside a function, still exists (a script that reaches mt only after its
arguments are parsed would otherwise rot unnoticed until someone measures with it)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys

import pytest
from helpers import REPO

ROOT = REPO
SCRIPTS = sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "tools").glob("*.py")])


def test_there_are_scripts():
    assert len(SCRIPTS) > 10


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in SCRIPTS])
def test_every_name_imported_from_mt_exists(script):
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] in ("mt", "cli"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or (hasattr(module, "__path__") and importlib.util.find_spec(f"{node.module}.{alias.name}")), \
                    f"{script.name}:{node.lineno}: {node.module} has no {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("mt", "cli"):
                    importlib.import_module(alias.name)


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in SCRIPTS])
def test_help_prints_the_usage(script, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [script.name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")
