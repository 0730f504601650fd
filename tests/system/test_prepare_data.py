"""data/*/prepare.py on tiny corpora written here: checksums, local copies (plain and .gz), a download
from a loopback HTTP server, missing splits, refusal to overwrite, and WMT14 from a save_to_disk folder.

The scripts are not a package, so they are loaded from their file paths."""

import functools
import gzip
import hashlib
import importlib.util
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO


def load_script(corpus: str):
    spec = importlib.util.spec_from_file_location(f"prepare_{corpus}", ROOT / "data" / corpus / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m30k = load_script("multi30k")

REQUIRED = ("train", "val", "test_2016_flickr")
OPTIONAL = ("test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")


def text_of(name: str) -> bytes:
    """Two short lines per file, different in every file, with non-ASCII text."""
    return f"{name}: eine Möwe am Strand\n{name}: deux chiens courent\n".encode()


def all_names() -> list[str]:
    return [f"{split}.{lang}" for split in m30k.SPLITS for lang in m30k.LANGS]


def gz_bytes(name: str) -> bytes:
    return gzip.compress(text_of(name), mtime=0)


def digest(data: bytes) -> tuple[str, int]:
    return hashlib.sha256(data).hexdigest(), len(data)


@pytest.fixture
def checksums() -> dict:
    """A checksum table like the script's, for the tiny files: plain and compressed."""
    table = {}
    for name in all_names():
        table[name] = digest(text_of(name))
        table[f"{name}.gz"] = digest(gz_bytes(name))
    return table


def write_copy(folder: Path, splits=REQUIRED, compressed=("train",)) -> Path:
    """A local copy of the given splits; those in `compressed` as .gz, the rest plain."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        for lang in m30k.LANGS:
            name = f"{split}.{lang}"
            if split in compressed:
                (folder / f"{name}.gz").write_bytes(gz_bytes(name))
            else:
                (folder / name).write_bytes(text_of(name))
    return folder


def run_main(monkeypatch, checksums, *argv: str) -> int:
    monkeypatch.setattr(m30k, "CHECKSUMS", checksums)
    return m30k.main([str(a) for a in argv])


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_local_copy_plain_and_gz_is_checked_and_written(tmp_path, checksums, capsys):
    source = write_copy(tmp_path / "copy", REQUIRED + ("test_2017_flickr",), compressed=("train", "test_2017_flickr"))
    out = tmp_path / "out"
    written = m30k.prepare(out, source, checksums=checksums)
    expected = [f"{s}.{lang}" for s in REQUIRED + ("test_2017_flickr",) for lang in m30k.LANGS]
    assert sorted(p.name for p in written) == sorted(expected)
    assert listing(out) == sorted(expected)  # no temporary files left over
    for name in expected:
        assert (out / name).read_bytes() == text_of(name)
    err = capsys.readouterr()
    assert err.out == ""
    assert "skipping the test_2017_mscoco" in err.err and "skipping the test_2018_flickr" in err.err
    assert "test_2017_flickr" not in err.err.split("skipped")[0]  # present, so no warning about it


def test_gz_compressed_anew_passes_on_its_text(tmp_path, checksums):
    source = write_copy(tmp_path / "copy", compressed=())
    (source / "val.de").unlink()
    (source / "val.de.gz").write_bytes(gzip.compress(text_of("val.de"), compresslevel=1, mtime=12345))
    m30k.prepare(tmp_path / "out", source, checksums=checksums)
    assert (tmp_path / "out" / "val.de").read_bytes() == text_of("val.de")


@pytest.mark.parametrize("compressed", [(), ("val",)], ids=["plain", "gz"])
def test_corrupted_file_is_a_checksum_error_and_leaves_nothing(tmp_path, checksums, monkeypatch, capsys, compressed):
    source = write_copy(tmp_path / "copy", compressed=compressed)
    bad = source / ("val.de.gz" if compressed else "val.de")
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit
    bad.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: {bad}: checksum mismatch")
    wanted_sha = checksums["val.de.gz" if compressed else "val.de"][0]
    assert wanted_sha in err and hashlib.sha256(bytes(data)).hexdigest() in err
    assert listing(out) == []  # the files that did check out were not left behind either


def test_missing_optional_splits_warn_and_are_skipped(tmp_path, checksums, monkeypatch, capsys):
    source = write_copy(tmp_path / "copy")
    (source / "test_2018_flickr.en").write_bytes(text_of("test_2018_flickr.en"))  # one language of three
    out = tmp_path / "out"
    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 0
    err = capsys.readouterr().err
    for split in OPTIONAL:
        assert f"warning: {source}: no " in err and f"skipping the {split} test set" in err
    assert "no test_2018_flickr.de, test_2018_flickr.fr;" in err
    assert listing(out) == sorted(f"{s}.{lang}" for s in REQUIRED for lang in m30k.LANGS)


def test_missing_required_split_is_an_error(tmp_path, checksums, monkeypatch, capsys):
    source = write_copy(tmp_path / "copy")
    (source / "test_2016_flickr.fr").unlink()
    out = tmp_path / "out"
    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {source}: missing test_2016_flickr.fr (required:")
    assert listing(out) == []


def test_existing_output_is_refused_without_force_and_replaced_with_it(tmp_path, checksums, monkeypatch, capsys):
    source = write_copy(tmp_path / "copy")
    out = tmp_path / "out"
    out.mkdir()
    (out / "val.en").write_text("my own notes\n")
    (out / "train.de").write_bytes(text_of("train.de"))  # already right
    right_inode = (out / "train.de").stat().st_ino

    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"error: {out / 'val.en'}: exists and differs from Multi30k's val.en; pass --force to replace it"
    assert (out / "val.en").read_text() == "my own notes\n"
    assert listing(out) == ["train.de", "val.en"]

    assert run_main(monkeypatch, checksums, "--from", source, "--out", out, "--force") == 0
    assert (out / "val.en").read_bytes() == text_of("val.en")
    assert (out / "train.de").stat().st_ino == right_inode  # up to date: left alone
    assert "wrote 8 files" in capsys.readouterr().err
    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 0  # now all up to date
    assert "wrote 0 files" in capsys.readouterr().err


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A loopback HTTP server over tmp_path/raw holding every .gz file; yields (folder, base URL)."""
    for key in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    folder = tmp_path / "raw"
    folder.mkdir()
    for name in all_names():
        (folder / f"{name}.gz").write_bytes(gz_bytes(name))

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}/raw/"
    finally:
        server.shutdown()
        server.server_close()


def test_download_checks_and_unpacks_every_file(tmp_path, checksums, served):
    _, base_url = served
    out = tmp_path / "out"
    m30k.prepare(out, checksums=checksums, base_url=base_url)
    assert listing(out) == sorted(all_names())
    for name in all_names():
        assert (out / name).read_bytes() == text_of(name)


def test_download_failures_are_one_line_errors(tmp_path, checksums, served):
    folder, base_url = served
    out = tmp_path / "out"
    (folder / "test_2018_flickr.fr.gz").unlink()
    with pytest.raises(m30k.PrepareError, match=r"test_2018_flickr\.fr\.gz: download failed \(HTTP 404"):
        m30k.prepare(out, checksums=checksums, base_url=base_url)
    assert listing(out) == []

    (folder / "test_2018_flickr.fr.gz").write_bytes(gzip.compress(b"something else\n", mtime=0))
    with pytest.raises(m30k.PrepareError, match=r"raw/test_2018_flickr\.fr\.gz: checksum mismatch") as caught:
        m30k.prepare(out, checksums=checksums, base_url=base_url)
    assert "\n" not in str(caught.value)
    assert listing(out) == []


def test_shipped_table_covers_every_file_compressed_and_not():
    assert sorted(m30k.CHECKSUMS) == sorted(all_names() + [f"{n}.gz" for n in all_names()])
    assert m30k.CHECKSUMS["train.de"] == ("2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72", 2110398)
    assert m30k.COMMIT in m30k.BASE_URL


# ---------------------------------------------------------------------------------------------
# WMT14


def test_wmt14_from_save_to_disk(tmp_path, monkeypatch, capsys):
    import datasets  # slow to import: only here

    wmt14 = load_script("wmt14")

    def split(tag: str):
        return datasets.Dataset.from_dict({"translation": [
            {"de": f"{tag}: Guten Morgen.", "en": f"{tag}: Good morning."},
            {"de": f"{tag}: Zwei\nZeilen", "en": f"{tag}: two lines"},
        ]})

    disk = tmp_path / "disk"
    datasets.DatasetDict({"train": split("tr"), "validation": split("nt13"), "test": split("nt14")}).save_to_disk(disk)
    out = tmp_path / "out"
    capsys.readouterr()
    assert wmt14.main(["--from", str(disk), "--out", str(out)]) == 0
    assert listing(out) == ["test.de", "test.en", "train.de", "train.en", "valid.de", "valid.en"]
    assert (out / "valid.de").read_text(encoding="utf-8") == "nt13: Guten Morgen.\nnt13: Zwei Zeilen\n"
    assert (out / "test.en").read_text(encoding="utf-8") == "nt14: Good morning.\nnt14: two lines\n"
    err = capsys.readouterr().err
    assert "line breaks inside 1 pairs" in err and "wrote train 2, valid 2, test 2 lines" in err

    # As data/multi30k/prepare.py: the same files again are up to date; another one needs --force.
    before = {name: (out / name).stat().st_mtime_ns for name in listing(out)}
    assert wmt14.main(["--from", str(disk), "--out", str(out)]) == 0
    assert "6 up to date" in capsys.readouterr().err
    assert {name: (out / name).stat().st_mtime_ns for name in listing(out)} == before
    (out / "train.en").write_text("stale\n")
    assert wmt14.main(["--from", str(disk), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {out / 'train.en'}: exists and differs from what {disk} gives; pass --force to replace it"
    assert (out / "train.en").read_text() == "stale\n" and listing(out) == sorted(before)  # nothing moved, no temporaries
    assert wmt14.main(["--from", str(disk), "--out", str(out), "--force"]) == 0
    assert "1 files written, 5 up to date" in capsys.readouterr().err
    assert (out / "train.en").read_text(encoding="utf-8") == "tr: Good morning.\ntr: two lines\n"

    # Input that is not there, or not a dataset, leaves no output folder behind.
    for missing in (tmp_path / "nonexistent", tmp_path / "disk" / "train"):
        assert wmt14.main(["--from", str(missing), "--out", str(tmp_path / "new" / "out")]) == 1
        assert capsys.readouterr().err.startswith(f"error: {missing}: ")
        assert not (tmp_path / "new").exists()
    broken = tmp_path / "broken"  # loads, then fails while writing: the folder made for it goes again
    lacking = datasets.Dataset.from_dict({"translation": [{"en": "no German"}]})
    datasets.DatasetDict({"train": lacking, "validation": lacking, "test": lacking}).save_to_disk(broken)
    assert wmt14.main(["--from", str(broken), "--out", str(tmp_path / "new" / "out")]) == 1
    assert "a 'translation' record lacks 'de' or 'en'" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()

    partial = tmp_path / "partial"
    datasets.DatasetDict({"train": split("tr")}).save_to_disk(partial)
    fresh = tmp_path / "fresh"
    assert wmt14.main(["--from", str(partial), "--out", str(fresh)]) == 1
    assert "no validation, test split (has: train)" in capsys.readouterr().err
    assert listing(fresh) == []

    files = tmp_path / "files"  # one JSON-lines file per split, flat records
    files.mkdir()
    for name in ("train", "validation", "test"):
        (files / f"{name}.jsonl").write_text(f'{{"de": "{name} ja", "en": "{name} yes"}}\n', encoding="utf-8")
    assert wmt14.prepare(fresh, files, cache_dir=str(tmp_path / "cache")) == {"train": 1, "valid": 1, "test": 1}
    assert (fresh / "valid.en").read_text(encoding="utf-8") == "validation yes\n"
    # a record without one side (datasets reads it as None): an empty reference line was written
    (files / "test.jsonl").write_text('{"de": "a", "en": "b"}\n{"de": "c"}\n', encoding="utf-8")
    with pytest.raises(wmt14.PrepareError, match=r"test: record 2 has no en text \(None\)"):
        wmt14.prepare(tmp_path / "gap", files, cache_dir=str(tmp_path / "cache2"))
    assert not (tmp_path / "gap").exists()


def test_multi30k_bt_keeps_a_last_line_without_its_line_break(tmp_path, monkeypatch, capsys):
    """Was: split on "\\n" and the last piece dropped, a German sentence lost when the file did not end
    with a line break."""
    bt = load_script("multi30k_bt")
    source, out = tmp_path / "m30k", tmp_path / "out"
    source.mkdir()
    n = bt.PAIRS + 3
    (source / "train.en").write_text("".join(f"en {i}\n" for i in range(n)), encoding="utf-8")
    (source / "train.de").write_text("\n".join(f"de {i}" for i in range(n)), encoding="utf-8")  # no last break
    monkeypatch.setattr("sys.argv", ["prepare.py", "--from", str(source), "--out", str(out)])
    bt.main()
    assert (out / "mono19k.de").read_text(encoding="utf-8").splitlines() == [f"de {i}" for i in range(bt.PAIRS, n)]


def test_multi30k_bt_refuses_a_file_of_other_line_endings_or_bytes_in_one_line(tmp_path, monkeypatch):
    """Was: an existing output compared as text (universal newlines): one with CRLF line endings counted
    as the same and was replaced without --force; one not UTF-8 was a traceback."""
    bt = load_script("multi30k_bt")
    source, out = tmp_path / "m30k", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    n = bt.PAIRS + 3
    for lang in ("en", "de"):
        (source / f"train.{lang}").write_text("".join(f"{lang} {i}\n" for i in range(n)), encoding="utf-8")
    monkeypatch.setattr("sys.argv", ["prepare.py", "--from", str(source), "--out", str(out)])
    crlf = "".join(f"de {i}\r\n" for i in range(bt.PAIRS, n)).encode()
    for mine in (crlf, b"\xff\xfe not text\n"):
        (out / "mono19k.de").write_bytes(mine)
        with pytest.raises(SystemExit) as exc:
            bt.main()
        assert str(exc.value) == f"{out / 'mono19k.de'}: exists and holds other lines; --force replaces it"
        assert (out / "mono19k.de").read_bytes() == mine


def test_a_damaged_gz_beside_a_good_plain_copy_uses_the_plain_one(tmp_path, checksums, monkeypatch, capsys):
    """The .gz is preferred; cut short, it stopped the run though the plain file beside it was good."""
    source = write_copy(tmp_path / "copy", compressed=("val",))
    (source / "val.de").write_bytes(text_of("val.de"))
    gz = source / "val.de.gz"
    gz.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) // 2])
    out = tmp_path / "out"
    assert run_main(monkeypatch, checksums, "--from", source, "--out", out) == 0
    assert (out / "val.de").read_bytes() == text_of("val.de")
    assert f"{source / 'val.de'} beside it is used instead" in capsys.readouterr().err
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the failed copy's temporary is gone
