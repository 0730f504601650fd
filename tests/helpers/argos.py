"""Argos Translate (argostranslate, as argos-translate-lt installs it) run in a subprocess over a
temporary home: its settings are read when it is imported, and it creates its directories then, so
that each call starts with an empty package directory and never touches the real home. Every
address it or MiniSBD could download from points to a closed loopback port: a download fails
the call instead of passing unnoticed where a network is reachable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLOSED = "http://127.0.0.1:9/"  # the discard port: nothing listens there

SCRIPT = r"""
import json, sys
request = json.load(sys.stdin)
from argostranslate import package, translate
for path in request["install"]:
    package.install_from_path(path)
installed = sorted((p.from_code, p.to_code, str(p.package_path.name)) for p in package.get_installed_packages())
out = {"installed": installed, "translations": {}, "splitters": {}}
for key, (src, tgt, lines) in request["translate"].items():
    languages = {lang.code: lang for lang in translate.get_installed_languages()}
    translation = languages[src].get_translation(languages[tgt])
    out["translations"][key] = [translation.translate(line) for line in lines]
    inner = getattr(translation, "underlying", translation)
    splitter = getattr(inner, "sentencizer", None)
    out["splitters"][key] = [type(splitter).__name__, str(getattr(splitter, "lang", ""))]
print()
print(json.dumps(out))  # the last line: whatever Argos printed before it is not read
"""


def argos_env(home: Path, beam: int = 1) -> dict[str, str]:
    """The environment of a sealed Argos: its home, data, config and cache under `home`; CPU, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOS_", "XDG_", "MINISBD_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
               XDG_CACHE_HOME=str(home / "cache"), ARGOS_PACKAGES_DIR=str(home / "packages"),
               ARGOS_PACKAGE_INDEX=CLOSED, MINISBD_REPO_URL=CLOSED, ARGOS_DEVICE_TYPE="cpu",
               ARGOS_BEAM_SIZE=str(beam), ARGOS_INTRA_THREADS="1", ARGOS_INTER_THREADS="1", OMP_NUM_THREADS="1")
    return env


def argos_translate(home: Path, install: list[Path], translate: dict[str, tuple[str, str, list[str]]],
                    beam: int = 1) -> dict:
    """Install the packages `install` into a fresh Argos under `home`, then translate each
    key: (source, target, lines); the installed packages, the translations and the splitter used."""
    home.mkdir(parents=True, exist_ok=True)
    request = {"install": [str(p) for p in install], "translate": translate}
    done = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(request), capture_output=True,
                          text=True, env=argos_env(home, beam), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def downloaded(home: Path) -> list[str]:
    """Model files under `home` that are not inside an installed package: what Argos or MiniSBD fetched."""
    packages = home / "packages"
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and packages not in p.parents and p.suffix in (".onnx", ".pt", ".json", ".zip")
                  and p.name != "settings.json")
