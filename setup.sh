#!/usr/bin/env bash
# Set mt up on Debian or Ubuntu (Python 3.10 or newer) and run the quickstart:
#
#   ./setup.sh                      Debian's packages, .venv, torch, mt; then the README's quickstart
#   ./setup.sh export huggingface   the same, with extras of pyproject.toml (export, huggingface, onnx, ...)
#   ./setup.sh --no-quickstart      set up only
#
# Safe to rerun: it installs only what is missing, and `mt run` skips the steps already done. torch is
# the CPU build unless nvidia-smi finds a GPU (PyPI's Linux torch is the CUDA build, several GB);
# MT_TORCH_INDEX=URL takes torch from that package index instead (MT_TORCH_INDEX= : PyPI's).
set -euo pipefail  # (no `grep -q` after a pipe: its early exit would fail the pipe)
cd "$(dirname "$0")"
say() { printf 'setup: %s\n' "$*" >&2; }

quickstart=true
extras=()
for arg in "$@"; do
    case $arg in
        --no-quickstart) quickstart=false ;;
        -h | --help) sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        -*) say "unknown option $arg (./setup.sh --help)"; exit 2 ;;
        *) extras+=("$arg") ;;
    esac
done
# pip takes an extra it does not know with a warning, exit 0: a misspelt one would be set up as "ready"
known=$(sed -n '/^\[project.optional-dependencies\]/,/^\[/p' pyproject.toml | sed -n 's/^\([A-Za-z0-9_-]*\) *= *\[.*/\1/p')
for arg in ${extras[@]+"${extras[@]}"}; do
    for extra in ${arg//,/ }; do  # pip's `a,b`; its names compared as pip compares them: case, - _ .
        name=$(printf '%s' "$extra" | tr 'A-Z_.' 'a-z--')
        printf '%s\n' "$known" | grep -x -- "$name" >/dev/null || {
            say "no extra $extra in pyproject.toml (there are: $(echo $known))"; exit 2; }
    done
done

# Debian's packages: venv; the Ding dictionary that the quickstart trains on; tcmalloc, which mt runs
# with when it is there (long CPU training runs 1.2-1.5x faster, docs/benchmarks.md).
missing=()
for package in python3-venv trans-de-en libtcmalloc-minimal4; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep 'ok installed' >/dev/null || missing+=("$package")
done
if ((${#missing[@]})); then
    as_root=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { say "installing ${missing[*]} needs root or sudo"; exit 1; }
        as_root=(sudo)
    fi
    say "apt-get install ${missing[*]}"
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# a .venv whose Python is gone (removed, upgraded) still has its scripts: it is made again
if [ ! -x .venv/bin/pip ] || ! .venv/bin/python -c '' 2>/dev/null; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { say "mt needs Python 3.10 or newer"; exit 1; }
    say "python3 -m venv --clear .venv"
    python3 -m venv --clear .venv
fi

# torch first, from the index that has the right build; `pip install -e .` then finds its pin satisfied.
torch=$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)  # the pin, e.g. torch==2.13.0
installed=$(.venv/bin/python -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null || true)
gpu=false
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null; then gpu=true; fi
# an install cut short leaves its version behind: it is there when it imports; the CPU build on a
# machine that has a GPU now (set up before it had one) is replaced by PyPI's CUDA build
cpu_build_on_gpu=false
if $gpu && [ "${installed#*+}" = cpu ] && [ -z "${MT_TORCH_INDEX+set}" ]; then cpu_build_on_gpu=true; fi
if [ "torch==${installed%%+*}" = "$torch" ] && .venv/bin/python -c 'import torch' 2>/dev/null && ! $cpu_build_on_gpu; then
    say "torch $installed: there"
else
    if [ -n "${MT_TORCH_INDEX+set}" ]; then
        index=$MT_TORCH_INDEX
    elif $gpu; then
        index=""  # PyPI's: the CUDA build
    else
        index=https://download.pytorch.org/whl/cpu
        if ! .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)' \
            "$index/torch/" 2>/dev/null; then
            say "$index is out of reach: torch from PyPI's index instead (on Linux maybe the CUDA build, several GB)"
            index=""
        fi
    fi
    again=()  # its version there (not importable, or the CPU build): pip would take it as installed
    [ "torch==${installed%%+*}" = "$torch" ] && again=(--force-reinstall --no-deps)
    say "pip install ${again[*]+${again[*]} }$torch${index:+ --index-url $index}"
    .venv/bin/pip install ${again[@]+"${again[@]}"} "$torch" ${index:+--index-url "$index"}
fi

spec=.
if ((${#extras[@]})); then
    spec=".[$(IFS=,; echo "${extras[*]}")]"
fi
say "pip install -e '$spec'"
.venv/bin/pip install -q -e "$spec"
# a failure inside $(...) given to a command does not stop a `set -e` script: checked here
version=$(.venv/bin/mt --version) || { say "mt does not start (above): the set-up failed"; exit 1; }
say "$version"

if $quickstart; then
    say "the quickstart: mt run recipes/quickstart.yaml (about 8 minutes on 2 cores; a rerun skips what is done)"
    .venv/bin/mt run recipes/quickstart.yaml
    printf 'Ich habe keine Zeit.\nWo ist der Bahnhof?\nDas Wetter ist heute schön.\n' |
        .venv/bin/mt translate --exp experiments/quickstart
fi
say "ready: .venv/bin/mt --help (or . .venv/bin/activate, then mt); the tests: bash .ci/run"
