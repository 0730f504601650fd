"""Language identification (mt/text/language.py: lingua, offline) on aligned test sentences: how often it
names each sentence's language, and what it costs per sentence.

    python -m bench.language_id                                     # Multi30k test2016 en/de/fr, 3,000 sentences
    python -m bench.language_id --data data/multi30k --split test_2016_flickr --langs en,de,fr

Rows:
- restricted: `LanguageIdentifier(LANGS).identify`, what `mt serve`'s /detect and `source: auto` run for
  a model reading LANGS (the ranker over LANGS, and the guard over every language);
- all languages: lingua over the 75 languages it knows (high accuracy), which mt does not run: it is
  what the restricted identifier is measured against (about 1 GB of models, several ms a sentence);
- the guard: for a bilingual model reading one of LANGS, the share of its own language's sentences taken
  for foreign (refused under auto) and of the other languages' sentences caught (refused, rightly).
Timings are the best of --repeats passes over all sentences, one thread, after a warm-up pass (lingua
loads its models on first use). Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import date
from pathlib import Path


def timed(function, sentences: list[str], repeats: int) -> tuple[list, float]:
    """(answers, best seconds per sentence over `repeats` passes), after one warm-up pass."""
    answers = [function(s) for s in sentences]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for s in sentences:
            function(s)
        best = min(best, (time.perf_counter() - start) / len(sentences))
    return answers, best


def guarded(lang: str, sentences: list[str], gold: list[str]) -> dict[str, float]:
    """For a model reading `lang` only: the share of its sentences taken for foreign, and of the others'."""
    from mt.text.language import LanguageIdentifier

    one = LanguageIdentifier([lang])
    foreign = [one.identify(s).foreign is not None for s in sentences]
    own = [f for f, g in zip(foreign, gold) if g == lang]
    others = [f for f, g in zip(foreign, gold) if g != lang]
    return {"own_refused": sum(own) / len(own), "others_caught": sum(others) / len(others)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="the folder of SPLIT.LANG files")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--langs", default="en,de,fr", help="the languages of the files, and the model's")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from lingua import LanguageDetectorBuilder
    from rich.console import Console
    from rich.table import Table

    from mt.hardware import cpu_name
    from mt.text.language import LanguageIdentifier

    langs = args.langs.split(",")
    gold, sentences = [], []
    for lang in langs:
        path = args.data / f"{args.split}.{lang}"
        if not path.is_file():
            sys.exit(f"{path}: no such file (--data, --split, --langs)")
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        gold += [lang] * len(lines)
        sentences += lines
    n = len(sentences)

    identifier = LanguageIdentifier(langs)
    found, restricted_s = timed(identifier.identify, sentences, args.repeats)
    restricted = sum(f.language == g for f, g in zip(found, gold)) / n
    refused = sum(f.foreign is not None for f in found) / n
    every = LanguageDetectorBuilder.from_all_languages().build()
    named, every_s = timed(every.detect_language_of, sentences, 1)
    overall = sum(x is not None and x.iso_code_639_1.name.lower() == g for x, g in zip(named, gold)) / n
    guard = {lang: guarded(lang, sentences, gold) for lang in langs}

    rows = [
        (f"restricted to {args.langs} (mt)", f"{restricted:.2%}", f"{refused:.2%} taken for foreign", restricted_s),
        ("all 75 languages lingua knows", f"{overall:.2%}", "", every_s),
        *(
            (f"guard, a model reading {lang} only", "", f"{g['own_refused']:.2%} of {lang} refused, "
             f"{g['others_caught']:.2%} of the others caught", None)
            for lang, g in guard.items()
        ),
    ]
    table = Table(title=f"language identification, {args.split} {args.langs} ({n} sentences); {cpu_name()}")
    for column in ("identifier", "accuracy", "refusals", "ms a sentence"):
        table.add_column(column)
    for name, accuracy, note, seconds in rows:
        table.add_row(name, accuracy, note, "" if seconds is None else f"{seconds * 1000:.3f}")
    Console(width=140).print(table)
    print(json.dumps({
        "what": "bench/language_id.py", "date": str(date.today()), "cpu": f"{cpu_name()}, {os.cpu_count()} cores",
        "command": " ".join(["python -m bench.language_id", *sys.argv[1:]]), "sentences": n, "langs": langs,
        "restricted_accuracy": round(restricted, 5), "restricted_taken_for_foreign": round(refused, 5),
        "restricted_ms": round(restricted_s * 1000, 4), "all_languages_accuracy": round(overall, 5),
        "all_languages_ms": round(every_s * 1000, 4), "guard": guard,
    }))


if __name__ == "__main__":
    main()
