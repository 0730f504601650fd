"""Fetch Multi30k task 1 (EN/DE/FR image descriptions) and unpack it to data/multi30k/<split>.<lang>.

    python data/multi30k/prepare.py                  # download from the pinned upstream commit
    python data/multi30k/prepare.py --from DIR       # a local copy: <split>.<lang> or <split>.<lang>.gz

Every file is checked against the sha256 and size table below (copied from the upstream repository at
the pinned commit, compressed and decompressed), so a run either yields exactly the corpus the
recipes were tuned on or stops with one line saying which file differs. mt ships no Multi30k text:
its repository states no licence, so each user fetches it from the source.

Outputs are staged as temporary files next to their final names and moved into place only after every
file has checked out, so a failed run leaves nothing half-written. An existing output with the right
checksum is left alone ("up to date"); one with other content is replaced only with --force.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import BinaryIO, Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TransferSpeedColumn,
)

COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
BASE_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{COMMIT}/data/task1/raw"
LANGS = ("en", "de", "fr")
SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
REQUIRED_SPLITS = ("train", "val", "test_2016_flickr")  # the rest are later test sets, optional locally
CHUNK_BYTES = 1 << 16

# sha256  file  bytes, for data/task1/raw/ at COMMIT: the .gz files as stored, then decompressed.
_TABLE = """
d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f  train.en.gz  568929
726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6  train.de.gz  637044
622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c  train.fr.gz  604242
14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28  val.en.gz  21650
f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a  val.de.gz  24681
ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9  val.fr.gz  23001
611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9  test_2016_flickr.en.gz  21077
9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8  test_2016_flickr.de.gz  22890
6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90  test_2016_flickr.fr.gz  22310
76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074  test_2017_flickr.en.gz  19138
a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee  test_2017_flickr.de.gz  21471
3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496  test_2017_flickr.fr.gz  20434
aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58  test_2017_mscoco.en.gz  8844
799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338  test_2017_mscoco.de.gz  10230
754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0  test_2017_mscoco.fr.gz  9751
ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d  test_2018_flickr.en.gz  23514
ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608  test_2018_flickr.de.gz  26461
fb2b83fcceb937a4f7e3e93c1c51c22aba92f1e342391e6b5ba392b16a920501  test_2018_flickr.fr.gz  25321
460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6  train.en  1801238
2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72  train.de  2110398
5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d  train.fr  2111303
1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227  val.en  63297
660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660  val.de  75981
5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc  val.fr  73924
399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182  test_2016_flickr.en  62076
4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16  test_2016_flickr.de  70649
cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6  test_2016_flickr.fr  72261
ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98  test_2017_flickr.en  55242
c3078bc3b36808bf9d20eb2347ed6137016179ef59ec0d2b9b8ecc3fb2880081  test_2017_flickr.de  64059
6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6  test_2017_flickr.fr  65691
43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2  test_2017_mscoco.en  24949
58277df3c75f92f7145a11b910b553d1cf82c439249d4dc237c899609eafac22  test_2017_mscoco.de  29906
39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0  test_2017_mscoco.fr  29982
4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e  test_2018_flickr.en  70603
39fcc8b3331d76fb42d648d019c6898b0d5e58baac87bc2a0bb93f44ec8db207  test_2018_flickr.de  80893
234b4a887da0da4801a3e2c6f21336231ff7dd46daeb80cfa1b551c8bbb78239  test_2018_flickr.fr  84076
"""

Checksums = dict[str, tuple[str, int]]  # file name -> (sha256 hex, size in bytes)


class PrepareError(Exception):
    """A failure the input caused; main() prints it as one line and exits 1."""


def parse_checksums(table: str) -> Checksums:
    """The 'sha256  name  bytes' lines of a table as a dict, so tests can build their own."""
    checksums: Checksums = {}
    for line in table.splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name, size = line.split()
            checksums[name] = (digest, int(size))
    return checksums


CHECKSUMS = parse_checksums(_TABLE)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def say(message: str) -> None:
    print(message, file=sys.stderr)


def new_progress() -> Progress:
    """A byte-count bar on stderr, silent when stderr is not a terminal (logs, tests)."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty(),
    )


# ---------------------------------------------------------------------------------------------
# Checking


def expected(name: str, checksums: Checksums) -> tuple[str, int]:
    try:
        return checksums[name]
    except KeyError:
        raise PrepareError(f"{name}: not in the checksum table; cannot check it") from None


def file_digest(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def check(what: str, actual: tuple[str, int], wanted: tuple[str, int]) -> None:
    """One-line error naming the file when its sha256 or size is not the one in the table."""
    if actual != wanted:
        raise PrepareError(
            f"{what}: checksum mismatch: expected sha256 {wanted[0]} ({wanted[1]} bytes), "
            f"got {actual[0]} ({actual[1]} bytes)"
        )


def copy_hashing(src: BinaryIO, dst: BinaryIO, on_bytes: Callable[[int], None], limit: int) -> tuple[str, int]:
    """Copy src to dst, returning (sha256, size); stops just past `limit` bytes (a wrong file)."""
    digest, size = hashlib.sha256(), 0
    while size <= limit:
        block = src.read(CHUNK_BYTES)
        if not block:
            break
        digest.update(block)
        dst.write(block)
        size += len(block)
        on_bytes(len(block))
    return digest.hexdigest(), size


# ---------------------------------------------------------------------------------------------
# Staging: every output is written to a temporary file beside it, then moved into place at the end


class Staging:
    """Temporary files in out_dir that become outputs on commit() and vanish on discard()."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.staged: list[tuple[Path, Path]] = []  # (temporary, final)
        self.scratch: list[Path] = []

    def temp(self, name: str) -> tuple[BinaryIO, Path]:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.out_dir)
        return os.fdopen(fd, "wb"), Path(tmp)

    def output(self, name: str) -> tuple[BinaryIO, Path]:
        f, tmp = self.temp(name)
        self.staged.append((tmp, self.out_dir / name))
        return f, tmp

    def drop(self, name: str) -> None:
        """Forget the staged outputs of `name` (a copy that failed its check), their files removed."""
        for tmp, final in [entry for entry in self.staged if entry[1].name == name]:
            tmp.unlink(missing_ok=True)
            self.staged.remove((tmp, final))

    def scratch_file(self, name: str) -> tuple[BinaryIO, Path]:
        f, tmp = self.temp(name)
        self.scratch.append(tmp)
        return f, tmp

    def commit(self) -> None:
        for tmp, final in self.staged:
            os.replace(tmp, final)
        self.staged.clear()

    def discard(self) -> None:
        for tmp in [t for t, _ in self.staged] + self.scratch:
            tmp.unlink(missing_ok=True)
        self.staged.clear()
        self.scratch.clear()


# ---------------------------------------------------------------------------------------------
# Sources: a download, a local .gz, or a local plain file


def download(url: str, name: str, staging: Staging, progress: Progress, checksums: Checksums) -> Path:
    """The checked .gz file at url, saved as a scratch file in the output folder."""
    wanted = expected(name, checksums)
    task = progress.add_task(f"download {name}", total=wanted[1])
    f, tmp = staging.scratch_file(name)
    try:
        with f, urllib.request.urlopen(url, timeout=60) as response:
            actual = copy_hashing(response, f, lambda n: progress.advance(task, n), wanted[1])
        progress.remove_task(task)  # one bar at a time on screen
    except urllib.error.HTTPError as exc:
        raise PrepareError(f"{url}: download failed (HTTP {exc.code} {exc.reason})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise PrepareError(f"{url}: download failed ({reason}); or pass --from DIR with a local copy") from None
    check(url, actual, wanted)
    return tmp


def unpack(gz_path: Path, what: str, name: str, staging: Staging, progress: Progress, checksums: Checksums) -> None:
    """Decompress a .gz file into the staged output `name`; the text must match its own checksum."""
    wanted = expected(name, checksums)
    task = progress.add_task(f"unpack {name}", total=wanted[1])
    f, _ = staging.output(name)
    try:
        with f, gzip.open(gz_path, "rb") as src:
            actual = copy_hashing(src, f, lambda n: progress.advance(task, n), wanted[1])
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise PrepareError(f"{what}: not a valid gzip file ({exc})") from None
    finally:
        progress.remove_task(task)  # one bar at a time on screen, a failed one's too
    check(f"{what} (decompressed)", actual, wanted)


def copy_plain(path: Path, name: str, staging: Staging, progress: Progress, checksums: Checksums) -> None:
    wanted = expected(name, checksums)
    task = progress.add_task(f"copy {name}", total=wanted[1])
    f, _ = staging.output(name)
    with f, open(path, "rb") as src:
        actual = copy_hashing(src, f, lambda n: progress.advance(task, n), wanted[1])
    progress.remove_task(task)
    check(str(path), actual, wanted)


def local_file(source_dir: Path, name: str) -> Path | None:
    """The copy of `name` in source_dir, compressed preferred (it is what upstream stores)."""
    for candidate in (source_dir / f"{name}.gz", source_dir / name):
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------------------------------------
# What to write


def splits_to_fetch(source_dir: Path | None, splits: tuple[str, ...], langs: tuple[str, ...]) -> list[str]:
    """All splits for a download; for a local copy those present, warning about the absent ones."""
    if source_dir is None:
        return list(splits)
    if not source_dir.is_dir():
        raise PrepareError(f"{source_dir}: no such directory (--from)")
    present, missing_required = [], []
    for split in splits:
        missing = [f"{split}.{lang}" for lang in langs if local_file(source_dir, f"{split}.{lang}") is None]
        if not missing:
            present.append(split)
        elif split in REQUIRED_SPLITS:
            missing_required += missing
        else:
            warn(f"{source_dir}: no {', '.join(missing)}; skipping the {split} test set")
    if missing_required:
        raise PrepareError(
            f"{source_dir}: missing {', '.join(missing_required)} "
            f"(required: {', '.join(REQUIRED_SPLITS)}, each in {', '.join(langs)}; plain or .gz)"
        )
    return present


def outputs_to_write(out_dir: Path, names: list[str], force: bool, checksums: Checksums) -> list[str]:
    """The names whose output is absent or different; refuses to replace a different file without force."""
    todo = []
    for name in names:
        path = out_dir / name
        if not path.exists():
            todo.append(name)
        elif file_digest(path) == expected(name, checksums):
            continue  # already the right file: counted as up to date in the summary
        elif force:
            todo.append(name)
        else:
            raise PrepareError(f"{path}: exists and differs from Multi30k's {name}; pass --force to replace it")
    return todo


def fetch(name: str, source_dir: Path | None, base_url: str, staging: Staging, progress: Progress,
          checksums: Checksums) -> None:
    """Stage one checked output from the download or the local copy."""
    if source_dir is None:
        url = f"{base_url.rstrip('/')}/{name}.gz"
        gz_path = download(url, f"{name}.gz", staging, progress, checksums)
        unpack(gz_path, url, name, staging, progress, checksums)
        return
    path = local_file(source_dir, name)
    assert path is not None  # splits_to_fetch kept only complete splits
    if path.suffix == ".gz":
        gz_wanted, gz_actual = expected(f"{name}.gz", checksums), file_digest(path)
        try:
            try:
                unpack(path, str(path), name, staging, progress, checksums)
            except PrepareError:
                if gz_actual == gz_wanted:
                    raise
                check(str(path), gz_actual, gz_wanted)  # raises: report the file as given
        except PrepareError as exc:
            plain = source_dir / name  # a good copy beside a damaged .gz (cut short): that one
            if not plain.is_file():
                raise
            staging.drop(name)
            warn(f"{exc}; {plain} beside it is used instead")
            copy_plain(plain, name, staging, progress, checksums)
        # A .gz compressed anew (other header or level) differs from upstream's bytes yet may hold
        # the same text: the decompressed checksum, checked in unpack(), decides.
    else:
        copy_plain(path, name, staging, progress, checksums)


def prepare(out_dir: str | os.PathLike, source_dir: str | os.PathLike | None = None, force: bool = False,
            checksums: Checksums = CHECKSUMS, base_url: str = BASE_URL,
            splits: tuple[str, ...] = SPLITS, langs: tuple[str, ...] = LANGS) -> list[Path]:
    """Write out_dir/<split>.<lang> for every split, checked; returns the files written this time."""
    out = Path(out_dir)
    source = Path(source_dir) if source_dir is not None else None
    names = [f"{split}.{lang}" for split in splits_to_fetch(source, splits, langs) for lang in langs]
    out.mkdir(parents=True, exist_ok=True)
    todo = outputs_to_write(out, names, force, checksums)
    staging = Staging(out)
    try:
        with new_progress() as progress:
            for name in todo:
                fetch(name, source, base_url, staging, progress, checksums)
        staging.commit()
    finally:
        staging.discard()
    skipped = [s for s in splits if not any(n.startswith(f"{s}.") for n in names)]
    say(
        f"multi30k: wrote {len(todo)} files to {out}, {len(names) - len(todo)} up to date"
        + (f"; skipped {', '.join(skipped)}" if skipped else "")
    )
    return [out / name for name in todo]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Download (or copy) Multi30k task 1 and check every file.")
    parser.add_argument("--from", dest="source_dir", metavar="DIR",
                        help="a local copy instead of downloading: <split>.<lang>, plain or .gz")
    parser.add_argument("--out", metavar="DIR", default=str(Path(__file__).resolve().parent),
                        help="where to write <split>.<lang> (default: this script's folder)")
    parser.add_argument("--force", action="store_true", help="replace existing files that differ")
    parser.add_argument("--base-url", default=BASE_URL, help="a mirror of data/task1/raw/ (default: upstream)")
    args = parser.parse_args(argv)
    try:
        prepare(args.out, args.source_dir, force=args.force, checksums=CHECKSUMS, base_url=args.base_url)
    except PrepareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # unreadable copy, full disk, no permission: the OS's words, one line
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
