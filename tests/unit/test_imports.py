"""The import rules of docs/development.md, read off the source: every import in mt/ and cli/, at the
top of a module, inside a function or under TYPE_CHECKING, is a dependency a reader has to follow."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

ROOT = REPO

# The layers of mt, lowest first (docs/development.md): a module imports only from its own package and
# the layers below it. The modules at the top of mt/ are the leaves; cli/ is installed as mt.cli.
LAYERS = [
    ("leaves",),
    ("mt.config",),
    ("mt.model", "mt.search"),
    ("mt.experiment",),
    ("mt.data",),
    ("mt.training", "mt.decoding"),
    ("mt.text",),  # sentences, long segments and languages around Translator: the commands and mt serve
    ("mt.documents",),  # files in their formats, found and written back around the text layer
    ("mt.apps",),
    ("mt.cli",),
]
PACKAGES = [p for layer in LAYERS[1:] for p in layer]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "cli":
        parts = ("mt", *parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> every module it imports (`from mt import x` counts as mt.x; third-party as named)."""
    paths = {module_name(p): p for p in sorted([*ROOT.glob("mt/**/*.py"), *ROOT.glob("cli/**/*.py")])}
    paths.pop("mt.__main__")  # the entry point, above every layer
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


def package_of(module: str) -> str:
    """The package (a name of LAYERS) a module of mt belongs to; "leaves" for the modules at mt's top."""
    return next((p for p in PACKAGES if inside(module, p)), "leaves")


def rank(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package_of(module) in layer)


def test_every_module_imports_only_its_own_package_and_the_layers_below():
    for module, names in GRAPH.items():
        wrong = [n for n in names if inside(n, "mt") and package_of(n) != package_of(module)
                 and rank(n) >= rank(module)]
        assert not wrong, f"{module} ({package_of(module)}) imports {wrong}"


def test_leaves_import_only_errors_and_log():
    for module, names in GRAPH.items():
        if package_of(module) == "leaves" and module != "mt":
            assert {n for n in names if inside(n, "mt")} <= {"mt.errors", "mt.log"}, module


def test_config_needs_no_torch():
    for module, names in of("mt.config").items():
        assert not any(inside(n, "torch") for n in names), module


def test_model_and_search_know_only_leaves_and_the_config_schema():
    for module, names in {**of("mt.model"), **of("mt.search")}.items():
        own = package_of(module)
        wrong = [n for n in names if inside(n, "mt") and not (package_of(n) == "leaves" or n == "mt.config.schema"
                                                              or inside(n, own))]
        assert not wrong, f"{module} imports {wrong}"


def test_data_knows_nothing_of_models_search_or_checkpoints():
    for module, names in of("mt.data").items():
        assert not [n for n in names if inside(n, "mt.model", "mt.search", "mt.experiment.checkpoint_file")], module


def test_the_package_list_in_pyproject_names_every_package():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {module_name(p.parent / "__init__.py") for p in [*ROOT.glob("mt/**/__init__.py"), ROOT / "cli/__init__.py"]}
    assert listed == folders
