"""mt.data.text_files on tiny real files: UTF-8 lines (plain, .gz, CRLF, BOM), parallel files, batches, errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mt.data import corpus, text_files
from mt.data.text_files import count_lines, existing, line_batches, read_lines, read_parallel_files
from mt.errors import MtError


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_plain_gz_and_crlf(tmp_path):
    src = write(tmp_path / "train.de", "Hallo Welt\r\n  zwei  Leerzeichen \r\n\r\nletzte ohne Ende")
    with gzip.open(tmp_path / "train.en.gz", "wb") as handle:
        handle.write("hello world\n  two  spaces \n\nlast without end\n".encode("utf-8"))
    de, en = read_parallel_files(src, tmp_path / "train.en.gz")
    # Only the line ending goes: inner/outer spaces and empty lines stay, so lines stay aligned.
    assert de == ["Hallo Welt", "  zwei  Leerzeichen ", "", "letzte ohne Ende"]
    assert en == ["hello world", "  two  spaces ", "", "last without end"]


def test_only_newline_ends_a_line(tmp_path):
    # U+2028 and form feeds are line breaks to str.splitlines(); in a corpus they are just text.
    src = write(tmp_path / "a.de", "\ufeffeins\u2028zwei\x0cdrei\nvier\n")
    assert read_lines(src) == ["eins\u2028zwei\x0cdrei", "vier"]
    # mt.data.corpus still offers the readers under their old names.
    assert corpus.read_lines is read_lines and corpus.read_parallel_files is read_parallel_files


def test_mismatched_counts_name_both_files(tmp_path):
    src = write(tmp_path / "x.de", "a\nb\nc\n")
    tgt = write(tmp_path / "x.en", "A\nB\n")
    with pytest.raises(MtError) as err:
        read_parallel_files(src, tgt)
    message = str(err.value)
    assert str(src) in message and str(tgt) in message
    assert "3" in message and "2" in message
    assert "\n" not in message
    assert message == str(text_files.mismatch_error(src, 3, tgt, 2))


def test_invalid_utf8_names_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.de", b"gut\nauch gut\nschlecht \xff hier\n")
    write(tmp_path / "bad.en", "a\nb\nc\n")
    with pytest.raises(MtError, match=r"bad\.de:3: not valid UTF-8 \(byte 0xff\)"):
        read_parallel_files(bad, tmp_path / "bad.en")


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(MtError, match=r"nope\.de: no such file"):
        read_lines(tmp_path / "nope.de")
    write(tmp_path / "fake.gz", "not gzip at all\n")
    with pytest.raises(MtError, match=r"fake\.gz"):
        read_lines(tmp_path / "fake.gz")
    with pytest.raises(MtError, match="is a directory, expected a text file"):
        read_lines(tmp_path)


def test_line_batches_number_their_lines_and_drop_the_bom(tmp_path):
    path = write(tmp_path / "b.txt", "\ufeffl1\r\nl2\nl3\nl4\nl5")
    assert list(line_batches(str(path), 2)) == [(0, [b"l1", b"l2"]), (2, [b"l3", b"l4"]), (4, [b"l5"])]
    assert list(line_batches(str(write(tmp_path / "empty.txt", b"")), 2)) == []


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    assert count_lines(str(write(tmp_path / "a", "x\ny\n"))) == 2
    assert count_lines(str(write(tmp_path / "b", "x\ny"))) == 2
    assert count_lines(str(write(tmp_path / "c", ""))) == 0
    assert count_lines(str(write(tmp_path / "d", "\n\n\n"))) == 3


def test_existing_finds_the_gz_only_when_the_plain_file_is_absent(tmp_path):
    plain, packed = tmp_path / "c.de", tmp_path / "c.de.gz"
    assert existing(str(plain)) == str(plain)  # neither exists: the plain name, for the error message
    write(packed, gzip.compress(b"x\n"))
    assert existing(str(plain)) == str(packed)
    write(plain, "x\n")
    assert existing(str(plain)) == str(plain)


def test_input_lines_leave_out_a_utf8_byte_order_mark(tmp_path):
    """Was: the mark was the first line's text (three byte pieces before its first word); the corpus
    readers and `mt evaluate` left it out."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfDer Hund.\n\xef\xbb\xbfzwei\n")
    assert list(text_files.input_lines(path)) == ["Der Hund.\n", "\ufeffzwei\n"]  # a mark inside is text


def test_a_carriage_return_inside_a_last_line_without_a_line_feed_is_its_text(tmp_path):
    """Was refused as a file of lines ended by CR alone, after the lines before it were translated."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"Ein Hund.\nDie Katze.\rDer Mann.")
    assert list(text_files.input_lines(path)) == ["Ein Hund.\n", "Die Katze.\rDer Mann."]
    path.write_bytes(b"Ein Hund.\rDie Katze.\r")
    with pytest.raises(MtError, match="in.txt:1: its lines end in a carriage return alone"):
        list(text_files.input_lines(path))


def test_files_that_are_not_utf8_text_are_refused_by_name_gzip_by_its_bytes(tmp_path):
    """UTF-16 (ASCII in it is valid UTF-8 with NULs: pairs of garbage, `G u t e n`), xz/bzip2/zstd/zip
    (counted as invalid UTF-8 line by line) and lines ended by CR alone (the whole file one line,
    dropped as too long) were read as text; gzip under another name was one of those."""
    text = "Guten Tag\nHallo Welt\n"
    cases = {
        "u16.de": ("\ufeff" + text).encode("utf-16-le"),
        "u16be.de": ("\ufeff" + text).encode("utf-16-be"),
        "nobom.de": text.encode("utf-16-le"),
        "c.de.xz": b"\xfd7zXZ\x00\x00\x04rest",
        "c.de.bz2": b"BZh91AY&SYrest",
        "c.de.zst": b"\x28\xb5\x2f\xfdrest",
        "c.zip": b"PK\x03\x04rest",
        "mac.de": b"Guten Tag\rHallo Welt\r",
    }
    reasons = ["UTF-16", "UTF-16", "NUL bytes", "xz", "bzip2", "zstd", "zip", "carriage return alone"]
    for (name, data), reason in zip(cases.items(), reasons):
        with pytest.raises(MtError, match=rf"^{tmp_path / name}: .*{reason}"):
            read_lines(write(tmp_path / name, data))
        with pytest.raises(MtError, match=reason):
            count_lines(str(tmp_path / name))
    assert read_lines(write(tmp_path / "gz.de", gzip.compress(text.encode()))) == ["Guten Tag", "Hallo Welt"]
    assert read_lines(write(tmp_path / "bz.de", "BZh ist kein Archiv\n")) == ["BZh ist kein Archiv"]
    assert read_lines(write(tmp_path / "r.de", "x")) == ["x"] and read_lines(write(tmp_path / "e.de", "")) == []
    assert read_lines(write(tmp_path / "nul.de", "ein\x00Satz\nzwei\n")) == ["ein\x00Satz", "zwei"]  # cleaning's


def test_a_pipe_is_read_once_whole_plain_or_gzip(tmp_path):
    """The file was opened twice (once to look for gzip's bytes): a FIFO or <(...) lost its first
    block, and `mt evaluate --hyp <(...)` scored a truncated set."""
    import os
    import threading

    lines = [f"Zeile {i}" for i in range(3000)]
    for name, data in (("plain", "\n".join(lines).encode() + b"\n"), ("gz", gzip.compress("\n".join(lines).encode()))):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        def write(fifo=fifo, data=data):
            try:
                fifo.write_bytes(data)
            except BrokenPipeError:  # the reader closed it early (what this test catches)
                pass

        got: list = []
        writer = threading.Thread(target=write, daemon=True)
        reader = threading.Thread(target=lambda fifo=fifo: got.append(read_lines(fifo)), daemon=True)
        writer.start()
        reader.start()
        reader.join(20)  # reopened, the FIFO would wait for a writer for ever
        assert got == [lines], name


def test_input_lines_of_a_fifo_pause_when_it_does_and_keep_every_byte(tmp_path):
    """A FIFO given with --input (`<(...)`) was read as a file: nothing was translated until 256 lines
    or its end, where stdin's lines are answered each time the pipe pauses. Its first block (read to
    look for gzip) is kept; a gzip FIFO is read whole."""
    import os
    import threading

    from mt.data.text_files import input_lines

    for name, first, rest in (("plain", b"eins\nzw", b"ei\ndrei\n"), ("gz", gzip.compress(b"eins\nzwei\ndrei\n"), b"")):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        more = threading.Event()
        if not rest:  # gzip: read whole, no pause waited for
            more.set()

        def write(fifo=fifo, first=first, rest=rest, more=more):
            with open(fifo, "wb", buffering=0) as pipe:
                pipe.write(first)
                more.wait(20)
                pipe.write(rest)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        got = []
        for line in input_lines(fifo):
            got.append(line)
            if line is None:  # a pause: what came so far is all answered; now the rest
                more.set()
        more.set()
        writer.join(20)
        if name == "plain":
            assert got[:2] == ["eins\n", None] and [line for line in got if line] == ["eins\n", "zwei\n", "drei\n"]
        else:
            assert got == ["eins\n", "zwei\n", "drei\n"]


def test_input_lines_of_a_gzip_file_are_its_text(tmp_path):
    """`mt translate --input text.de.gz` said "text.de.gz:1: not valid UTF-8"."""
    from mt.data.text_files import input_lines

    path = write(tmp_path / "text.de.gz", gzip.compress("eins\nzwei\n".encode()))
    assert [line for line in input_lines(path) if line is not None] == ["eins\n", "zwei\n"]


def test_a_gzip_file_cut_short_or_damaged_is_one_line_naming_it_wherever_it_is_read(tmp_path):
    """Was: a traceback (EOFError) from counting lines or reading mt translate's input, and for a bad
    CRC gzip's message alone, naming no file."""
    import gzip

    from mt.data.text_files import count_lines, input_lines, read_lines

    whole = gzip.compress(b"".join(b"line %d\n" % i for i in range(2000)))
    cut = tmp_path / "train.de"  # gzip whatever the name, as a download saved without .gz
    cut.write_bytes(whole[: len(whole) // 2])
    damaged = tmp_path / "valid.de.gz"
    damaged.write_bytes(whole[:-8] + bytes([whole[-8] ^ 0xFF]) + whole[-7:])  # the CRC
    for path in (cut, damaged):
        for read in (count_lines, read_lines, lambda p: list(input_lines(Path(p)))):
            with pytest.raises(MtError) as exc:
                read(str(path))
            message = str(exc.value)
            assert message.startswith(f"{path}: ") and "gzip" in message and "\n" not in message, message
