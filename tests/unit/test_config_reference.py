"""mt.config.reference: docs/config.md is what the dataclasses in mt/config/schema.py generate, and the
generated tables carry each field's type, default and source comments."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

from mt.config import reference as config_reference
from mt.config import schema as config
from mt.config.values import literal_choices


def row(markdown: str, section: str, name: str) -> str:
    """The table row of `section.name` in the generated reference."""
    text = markdown.split(f"## `{section}` ", 1)[1].split("\n## ", 1)[0]
    return next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))


def trailing_comments(cls: type) -> dict[str, str]:
    """Field -> the `# ...` comment at the end of its line, read straight from the class source."""
    found = {}
    for line in inspect.getsource(cls).splitlines():
        code, hash_, comment = line.partition("#")
        name = code.strip().split(":", 1)[0]
        if hash_ and ":" in code and name.isidentifier() and name in {f.name for f in dataclasses.fields(cls)}:
            found[name] = comment.strip()
    return found


def test_docs_config_md_is_current():
    path = config_reference.DOC_PATH
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    assert text == config_reference.markdown(), (
        f"docs/config.md is out of date with mt/config/schema.py: regenerate it with `{config_reference.COMMAND}`"
    )


def test_every_section_and_field_has_a_row():
    markdown = config_reference.markdown()
    for section in dataclasses.fields(config.ExperimentConfig):
        for spec in dataclasses.fields(type(getattr(config.ExperimentConfig(), section.name))):
            assert row(markdown, section.name, spec.name)


def test_a_fields_line_comment_reaches_its_row():
    markdown = config_reference.markdown()
    comments = trailing_comments(config.ModelConfig)
    assert comments, "ModelConfig has no commented field left to check"
    for name, comment in comments.items():
        assert config_reference.cell(comment) in row(markdown, "model", name)


def test_comment_lines_above_a_field_reach_its_row():
    markdown = config_reference.markdown()
    lines = inspect.getsource(config.TrainConfig).splitlines()
    checked = 0
    for number, line in enumerate(lines):
        name = line.strip().split(":", 1)[0]
        if name.isidentifier() and ":" in line and number and lines[number - 1].strip().startswith("#"):
            above = lines[number - 1].strip().lstrip("#").strip()
            assert config_reference.cell(above) in row(markdown, "train", name)
            checked += 1
    assert checked, "TrainConfig has no field with a comment above it left to check"


def test_type_and_default_come_from_the_dataclass():
    markdown = config_reference.markdown()
    defaults = config.ModelConfig()
    assert f"| `int` | `{defaults.d_model}` |" in row(markdown, "model", "d_model")
    assert "`null`" in row(markdown, "train", "max_time")  # None is written as YAML writes it
    choices = literal_choices(config.StopRule)
    assert all(f'"{choice}"' in row(markdown, "decode", "stop") for choice in choices)


def test_check_names_the_command_when_the_file_differs(tmp_path: Path):
    stale = tmp_path / "config.md"
    stale.write_text("# Configuration reference\n", encoding="utf-8")
    assert config_reference.COMMAND in config_reference.check(stale)
    current = tmp_path / "current.md"
    current.write_text(config_reference.markdown(), encoding="utf-8")
    assert config_reference.check(current) is None
    assert "missing" in config_reference.check(tmp_path / "absent.md")
