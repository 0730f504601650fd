"""The Argos package against mt: does Argos Translate, given the package `mt export --format argos`
writes, translate a test split as mt's greedy search does?

    python -m bench.argos_parity --exp EXP [--split test] [--limit N]

The experiment's checkpoint is exported as an Argos package into a temporary directory and installed
with argostranslate.package.install_from_path into an Argos home of its own there (HOME, XDG_*,
ARGOS_PACKAGES_DIR; the package index and MiniSBD's download address at a closed loopback port, so
that a download fails instead of passing unnoticed); Argos translates every source line with
ARGOS_BEAM_SIZE=1 (one thread), and mt translates the same lines whole, greedily (beam 1, the
experiment's length limits; no sentence splitting: Argos splits with the package's own splitter).
A line counts as equal when the two texts are the same string. Lines where mt stopped at its length
limit, which Argos (at most 256 tokens) may continue, are counted apart. Prints a table and, as its
last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from bench.common import sealed_argos_env

ARGOS = r"""
import json, sys
request = json.load(sys.stdin)
from argostranslate import package, translate
package.install_from_path(request["package"])
languages = {lang.code: lang for lang in translate.get_installed_languages()}
translation = languages[request["src"]].get_translation(languages[request["tgt"]])
print()
print(json.dumps([translation.translate(line) for line in request["lines"]]))
"""


def argos_translations(package: Path, home: Path, src: str, tgt: str, lines: list[str]) -> list[str]:
    """`lines` translated by Argos at beam 1 with `package` installed into a sealed home."""
    env = sealed_argos_env(home, beam=1)
    request = json.dumps({"package": str(package), "src": src, "tgt": tgt, "lines": lines})
    done = subprocess.run([sys.executable, "-c", ARGOS], input=request, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"argostranslate failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mt_greedy(exp, cfg, lines: list[str]) -> list[tuple[str, bool]]:
    """mt's greedy translation of each whole line, and whether it ended before mt's length limit."""
    import torch

    from mt.decoding.translator import Translator
    from mt.search.single_path import greedy_search
    from mt.search.steps import max_lengths

    translator = Translator.load(exp, cfg)
    out = []
    for ids in translator.src_tok.encode(lines):
        src = translator.pad_sources([ids[: translator.max_src_tokens]])
        limit = int(max_lengths(src, cfg.decode.max_len_a, cfg.decode.max_len_b, translator.model.max_positions - 1)[0])
        with torch.no_grad():
            tokens = greedy_search(translator.model, src, cfg.decode.max_len_a, cfg.decode.max_len_b)[0].tokens
        out.append((translator.tgt_tok.decode([tokens])[0], len(tokens) + 1 < limit))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", required=True, help="a trained experiment of one direction")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=0, help="the first N lines only (0: all)")
    args = parser.parse_args()

    import torch

    from mt.apps.export.directory import export
    from mt.data.corpus import load_split
    from mt.experiment.paths import Experiment
    from mt.hardware import cpu_name

    torch.set_num_threads(1)
    exp = Experiment(Path(args.exp))
    cfg = exp.load_config()
    lines = load_split(cfg.data.sources(args.split))[0]
    lines = lines[: args.limit] if args.limit else lines
    src, tgt = cfg.data.src_lang, cfg.data.tgt_lang
    with tempfile.TemporaryDirectory() as tmp:
        export(exp, cfg, Path(tmp) / "argos", fmt="argos")
        package = next((Path(tmp) / "argos").glob("*.argosmodel"))
        theirs = argos_translations(package, Path(tmp) / "home", src, tgt, lines)
    ours = mt_greedy(exp, cfg, lines)
    ended = [i for i, (_, done) in enumerate(ours) if done]
    equal = sum(ours[i][0] == theirs[i] for i in range(len(lines)))
    equal_ended = sum(ours[i][0] == theirs[i] for i in ended)
    result = {
        "what": "bench/argos_parity.py",
        "exp": args.exp,
        "split": args.split,
        "lines": len(lines),
        "equal": equal,
        "equal_share": round(equal / len(lines), 4),
        "mt_ended_before_limit": len(ended),
        "equal_where_mt_ended": equal_ended,
        "equal_share_where_mt_ended": round(equal_ended / max(len(ended), 1), 4),
        "cpu": cpu_name(),
        "date": date.today().isoformat(),
    }
    print(f"{'lines':<34}{len(lines):>8}")
    print(f"{'Argos (beam 1) == mt greedy':<34}{equal:>8}  {100 * equal / len(lines):.2f}%")
    print(
        f"{'  where mt ended before its limit':<34}{equal_ended:>8} of {len(ended)}  "
        f"{100 * equal_ended / max(len(ended), 1):.2f}%"
    )
    for i in [i for i in range(len(lines)) if ours[i][0] != theirs[i]][:5]:
        print(f"  differs, line {i + 1}:\n    mt:    {ours[i][0]}\n    Argos: {theirs[i]}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
