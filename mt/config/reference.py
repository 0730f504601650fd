"""The configuration reference, docs/config.md, generated from the dataclasses in `mt.config.schema`.

Each section of `ExperimentConfig` becomes a table of its fields: name, type, default, and the
comments the source gives the field (the `# ...` on its lines and the comment lines directly above
it). The class docstring opens the section. Generated, so it cannot drift from the schema; a test
compares the file with `markdown()`.

    python -m mt.config.reference > docs/config.md     write it
    python -m mt.config.reference --check              exit 1 if docs/config.md differs
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import sys
import tokenize
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from mt.config import schema as config

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "config.md"
COMMAND = "python -m mt.config.reference > docs/config.md"

INTRO = f"""\
# Configuration reference

Generated from the dataclasses in `mt/config/schema.py` by `{COMMAND}`;
edit the comments there, not this file. A recipe sets a field inside its section (`model:`, then
`d_model: 256`); on the command line it is `--set model.d_model=256`, and `--set
train.max_time=null` unsets an optional number. The first step on a new experiment writes every
field into the experiment's `config.yaml`; later steps read them from there.
"""


def comment_lines(source: str) -> dict[int, str]:
    """Line number -> the text of the `#` comment on that line, from the tokenizer (so a `#` inside
    a string is not taken for one)."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    return comments


def field_comments(cls: type, source: str, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Field name -> (the comment lines directly above the field, the comments on its own lines),
    each joined into one line."""
    lines = source.splitlines()
    comments = comment_lines(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    found = {}
    for statement in node.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        above = []
        number = statement.lineno - 1
        while number in comments and lines[number - 1].lstrip().startswith("#"):
            above.insert(0, comments[number])
            number -= 1
        own = [comments[n] for n in range(statement.lineno, statement.end_lineno + 1) if n in comments]
        found[statement.target.id] = (" ".join(filter(None, above)), " ".join(filter(None, own)))
    return found


def type_text(hint: Any) -> str:
    """A field type as written in Python, with aliases such as `StopRule` spelled out."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return " | ".join(f'"{arg}"' for arg in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_text(arg) for arg in args)}]"
    if hint is type(None):
        return "None"
    return getattr(hint, "__name__", str(hint))


def default_text(spec: dataclasses.Field) -> str:
    """The default as a recipe would write it (YAML: null, true, [])."""
    if spec.default is not dataclasses.MISSING:
        value = spec.default
    elif spec.default_factory is not dataclasses.MISSING:
        value = spec.default_factory()
    else:
        return ""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value if value else '""'
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()


def cell(text: str) -> str:
    """A comment made safe inside a Markdown table cell: no table breaks, tags or emphasis in the
    prose; `code spans` kept as they are but for the pipe."""
    parts = text.split("`")
    paired = len(parts) % 2 == 1  # an unpaired backtick makes it all prose
    for i, part in enumerate(parts):
        if i % 2 == 0 or not paired:
            part = part.replace("\\", "\\\\").replace("<", "&lt;").replace("*", "\\*")
        parts[i] = part.replace("|", "\\|")
    return "`".join(parts) if paired else "\\`".join(parts)


def code_cell(text: str) -> str:
    """`text` as code inside a table cell (in a code span only the pipe needs escaping)."""
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def comment_cell(above: str, own: str) -> str:
    """A field's comments in its table cell: the block above it, a line break, its own comment."""
    return "<br>".join(cell(text) for text in (above, own) if text)


def section_markdown(name: str, cls: type, source: str, tree: ast.Module) -> str:
    hints = get_type_hints(cls)
    comments = field_comments(cls, source, tree)
    parts = [f"## `{name}` ({cls.__name__})", ""]
    doc = inspect.getdoc(cls)
    if doc and not doc.startswith(f"{cls.__name__}("):  # dataclasses invent a signature when there is none
        parts += [doc, ""]
    parts += ["| field | type | default | what |", "|---|---|---|---|"]
    for spec in dataclasses.fields(cls):
        parts.append(
            f"| `{spec.name}` | {code_cell(type_text(hints[spec.name]))} | {code_cell(default_text(spec))} "
            f"| {comment_cell(*comments.get(spec.name, ('', '')))} |"
        )
    return "\n".join(parts) + "\n"


ENVIRONMENT = """\
## Environment variables

Not config fields, but read by every `mt` command:

| variable | effect |
|---|---|
| `MT_DEBUG` | set: every error prints its traceback, as `--debug` does (in `mt serve`'s worker too) |
| `MT_ALLOCATOR` | `tcmalloc` (the default where Debian's libtcmalloc-minimal4 is installed: `mt` restarts itself with it) or `system` |
| `MT_API_KEY` | `mt serve --api-key`'s value when the flag is not given |
| `ONEDNN_PRIMITIVE_CACHE_CAPACITY` | oneDNN's cache of bf16 matmul plans on the CPU; mt sets 16 for bf16 decoding unless it is set (the default 1,024 kept a copy of the packed weights per batch shape) |
| `HF_HUB_OFFLINE`, `HF_ENDPOINT`, `HTTPS_PROXY` | for `hf:` sources: the hub's own; when its host does not answer (and no proxy is set) mt sets offline mode, so only the local cache is tried |
| `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT` | set by `torchrun`: `mt train` joins the process group they describe |
"""


def markdown() -> str:
    """docs/config.md: the intro, one table per section of ExperimentConfig, in order, and the
    environment variables."""
    source = Path(config.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    sections = [INTRO]
    for spec in dataclasses.fields(config.ExperimentConfig):
        cls = get_type_hints(config.ExperimentConfig)[spec.name]
        sections.append(section_markdown(spec.name, cls, source, tree))
    return "\n".join([*sections, ENVIRONMENT])


def check(path: Path = DOC_PATH) -> str | None:
    """None when `path` holds what markdown() makes, else the one-line reason it does not."""
    root = DOC_PATH.parents[1]
    name = path.resolve().relative_to(root) if path.resolve().is_relative_to(root) else path
    if not path.exists():
        return f"{name} is missing: write it with `{COMMAND}`"
    if path.read_text(encoding="utf-8") != markdown():
        return f"{name} is out of date with mt/config/schema.py: regenerate it with `{COMMAND}`"
    return None


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problem = check()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m mt.config.reference [--check]", file=sys.stderr)
        return 2
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
