"""mt.log: status lines on stderr."""

from __future__ import annotations

from mt import log


def test_a_warning_shows_users_text_as_written_brackets_and_all(capsys):
    """Warnings quote users' text (a subtitle's `[music]`, a line with `[/b]`) and paths: rich read their
    brackets as markup, dropping a tag-like word or raising MarkupError (a traceback)."""
    log.warn("not translated: '[music] Привет [/b] мир' (data.train[de-en])")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert " ".join(captured.err.split()) == "warning: not translated: '[music] Привет [/b] мир' (data.train[de-en])"
