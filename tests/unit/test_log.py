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


def test_a_status_line_shows_paths_and_text_as_written_and_a_heading_in_bold(capsys, monkeypatch):
    """A status line quoting an experiment at "exp[v2]" lost its "[v2]", and "[/b]" raised MarkupError."""
    monkeypatch.setattr(log, "quiet", False)
    log.info("translations written to /tmp/exp[v2]/translations/valid.hyp; pip install -e '.[export]' [/b]")
    log.heading("evaluate test", " ([v2])")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "translations written to /tmp/exp[v2]/translations/valid.hyp; pip install -e '.[export]' [/b]",
        "evaluate test ([v2])",
    ]
