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


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    """"error: No space left on device" named no file: ENOSPC from a write carries none."""
    import errno
    import os

    import pytest

    from mt import atomic_files

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic_files.os, "fsync", full)
    target = tmp_path / "checkpoints" / "last.pt"
    target.parent.mkdir()
    with pytest.raises(OSError) as raised:
        atomic_files.write_bytes_atomic(target, b"x" * 10)
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
    assert list(target.parent.iterdir()) == []  # no temporary left behind
