"""The import rules of docs/development.md, read off the source: every import in mt/ and cli/, at the
top of a module, inside a function or under TYPE_CHECKING, is a dependency a reader has to follow."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

ROOT = REPO
LEAVES = {"mt.errors", "mt.log", "mt.atomic_files", "mt.tokenizer", "mt.allocator", "mt.hardware", "mt.metrics"}
APPLICATIONS = ("mt.serve", "mt.report", "mt.export", "mt.distill", "mt.backtranslate", "mt.run")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> every module it imports (`from mt import x` counts as mt.x; third-party as named)."""
    paths = {module_name(p): p for p in sorted([*ROOT.glob("mt/**/*.py"), *ROOT.glob("cli/**/*.py")])}
    found = {}
    for module, path in paths.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                          for a in node.names}
        found[module] = names - {module}
    return found


GRAPH = imports()


def of(prefix: str) -> dict[str, set[str]]:
    return {module: names for module, names in GRAPH.items() if module == prefix or module.startswith(prefix + ".")}


def inside(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_cycles():
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for name in GRAPH[module] & GRAPH.keys():
            assert state.get(name) != "open", " -> ".join([*path, module, name])
            if name not in state:
                visit(name, [*path, module])
        state[module] = "done"

    for module in GRAPH:
        if module not in state:
            visit(module, [])


def test_leaves_import_only_errors_and_log():
    for module in LEAVES:
        assert {n for n in GRAPH[module] if inside(n, "mt")} <= {"mt.errors", "mt.log"}, module


def test_config_needs_no_torch_and_nothing_above_it():
    for module, names in of("mt.config").items():
        assert not any(inside(n, "torch") for n in names), module
        assert all(n in LEAVES or inside(n, "mt.config") for n in names if inside(n, "mt")), module


def test_model_and_search_know_only_leaves_and_the_config_schema():
    for module, names in {**of("mt.model"), **of("mt.search")}.items():
        own = "mt.model" if inside(module, "mt.model") else "mt.search"
        allowed = [n for n in names if inside(n, "mt") and not (n in LEAVES or n == "mt.config.schema" or inside(n, own))]
        assert not allowed, f"{module} imports {allowed}"


def test_data_knows_nothing_of_models_search_or_training():
    for module, names in of("mt.data").items():
        assert not [n for n in names if inside(n, "mt.model", "mt.search", "mt.training", "mt.checkpoint")], module


def test_training_never_imports_decoding_or_applications():
    for module, names in of("mt.training").items():
        assert not [n for n in names if inside(n, "mt.translate", "mt.evaluate", "cli", *APPLICATIONS)], module


def test_the_library_never_imports_an_application():
    library = {m: names for m, names in of("mt").items() if not inside(m, *APPLICATIONS, "mt.__main__")}
    for module, names in library.items():
        assert not [n for n in names if inside(n, *APPLICATIONS, "cli")], module


def test_only_the_entry_points_import_cli():
    for module, names in GRAPH.items():
        if not inside(module, "cli", "mt.__main__"):
            assert not [n for n in names if inside(n, "cli")], module
