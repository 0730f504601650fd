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


def test_counts_in_the_data_table_take_the_unit_of_their_rounded_figure():
    """999,600 tokens showed as "1000k" and 999.96M as "1000.0M"."""
    from mt.cli.render import count

    assert [count(n) for n in (99_999, 100_000, 999_499, 999_600, 1_234_567, 999_960_000, 2_500_000_000)] == [
        "99,999", "100k", "999k", "1.0M", "1.2M", "1.0B", "2.5B"]
