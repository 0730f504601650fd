"""Every benchmark script and tool still runs: each `--help` prints its usage, and every name it imports
from mt (or from bench.common), at the top or inside a function, still exists (a script that reaches mt
only after its arguments are parsed would otherwise rot unnoticed until someone measures with it).

The benchmarks run from the repository's root as modules (`python -m bench.translate`): they import mt
as installed and, of bench, only bench.common, and none of them or the tools edits sys.path to get there.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO
HELPERS = {"__init__.py", "common.py"}  # bench's shared code, not scripts
SCRIPTS = sorted([*(p for p in (ROOT / "bench").glob("*.py") if p.name not in HELPERS), *(ROOT / "tools").glob("*.py")])
SOURCES = sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "tools").glob("*.py")])


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _imports(path: Path):
    """(line, module, names) of every import in the file, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, ("." * node.level) + (node.module or ""), [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def test_there_are_scripts():
    assert len(SCRIPTS) > 10


@pytest.mark.parametrize("script", SOURCES, ids=map(_id, SOURCES))
def test_every_name_imported_from_mt_exists(script):
    for lineno, module_name, names in _imports(script):
        if module_name.split(".")[0] not in ("mt", "cli", "bench"):
            continue
        module = importlib.import_module(module_name)
        for name in names:
            assert hasattr(module, name) or (hasattr(module, "__path__") and importlib.util.find_spec(f"{module_name}.{name}")), \
                f"{script.name}:{lineno}: {module_name} has no {name}"


@pytest.mark.parametrize("script", SOURCES, ids=map(_id, SOURCES))
def test_scripts_import_mt_and_bench_common_only(script):
    siblings = {p.stem for p in SOURCES}
    for lineno, module_name, _ in _imports(script):
        where = f"{_id(script)}:{lineno}: {module_name}"
        assert not module_name.startswith("."), f"{where}: a relative import"
        assert module_name.split(".")[0] not in siblings, f"{where}: another script by its bare name"
        if module_name.split(".")[0] == "bench":
            assert script.parent.name == "bench", f"{where}: a tool imports a benchmark"
            assert module_name == "bench.common", f"{where}: a script imports only bench.common of bench"


@pytest.mark.parametrize("script", SOURCES, ids=map(_id, SOURCES))
def test_no_sys_path_edits(script):
    # The one exception: bench.translate's --old, a worker that imports another checkout's mt.
    allowed = 1 if _id(script) == "bench/common.py" else 0
    assert script.read_text(encoding="utf-8").count("sys.path") == allowed


@pytest.mark.parametrize("script", SCRIPTS, ids=map(_id, SCRIPTS))
def test_help_prints_the_usage(script, monkeypatch, capsys):
    if script.parent.name == "bench":
        module = importlib.import_module(f"bench.{script.stem}")
    else:
        spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [script.name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


def test_a_benchmark_runs_as_a_module_from_the_root():
    done = subprocess.run([sys.executable, "-m", "bench.throughput", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_every_result_file_the_docs_name_exists():
    """`bench/results/<topic>/<file>` in the docs, README, recipes and scripts (`{a,b}` alternatives
    expanded; names with CPU/DATE or .... are templates)."""
    import itertools
    import re

    named = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "recipes").glob("*"), *SOURCES]
    missing = []
    for path in named:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in re.findall(r"bench/results/[A-Za-z0-9_.{},/\-]*[A-Za-z0-9}]", line):
                if "CPU-DATE" in ref or "...." in ref:
                    continue
                parts = re.split(r"(\{[^}]*\})", ref)
                for choice in itertools.product(*(p[1:-1].split(",") if p.startswith("{") else [p] for p in parts)):
                    if not (ROOT / "".join(choice)).exists():
                        missing.append(f"{path.relative_to(ROOT)}:{lineno}: {''.join(choice)}")
    assert not missing, "\n".join(missing)
