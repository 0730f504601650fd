"""mt.atomic_files: which output would replace its own input."""

from __future__ import annotations

import os

from mt.atomic_files import same_file


def test_one_file_under_two_names_is_the_same_file(tmp_path):
    """By device and inode, not by resolved name: on a case-insensitive file system (macOS, Windows)
    `--input README.md --output readme.md` resolve apart, and `--force` replaced the input."""
    first = tmp_path / "README.md"
    first.write_text("x", encoding="utf-8")
    os.link(first, tmp_path / "readme.md")  # another name for the same file, as case-folding gives
    (tmp_path / "link.md").symlink_to(first)
    assert same_file(first, tmp_path / "readme.md") and same_file(tmp_path / "link.md", first)
    # sub/ does not exist, but writing there makes it, and then the path is README.md (it was replaced)
    assert same_file(first, tmp_path / "sub" / ".." / "README.md")
    (tmp_path / "copy.md").write_text("x", encoding="utf-8")
    assert not same_file(first, tmp_path / "copy.md") and not same_file(first, tmp_path / "missing.md")
