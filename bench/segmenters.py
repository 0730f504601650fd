"""Sentence segmenters compared: which one `mt.text.sentences` uses, chosen by measurement.

    python -m bench.segmenters --data data/multi30k [--out FILE]

Candidates: mt's own (sentencex with two Golden Rules where its rules miss them), and (each installed
from the package index; one that is missing is skipped) sentencex
(Wikimedia's, Rust, ~300 languages by fallback chains), pysbd (Golden Rules, 23 languages), syntok
(segtok's successor: en, de, es, nl), sentence-splitter (Koehn and Schroeder's Moses splitter, in
Python), and a plain regex (cut after . ! ? followed by a space and a capital) as the floor.

Accuracy: each split's .en/.de/.fr files (val and test_2016_flickr) grouped into paragraphs of 3
consecutive sentences joined with a space; a paragraph counts as right when the segmenter gives back
exactly its 3 sentences (whitespace stripped). Then hard cases written by hand (abbreviations, numbers,
quotes, ellipsis, CJK) with their expected sentences. Speed: sentences segmented per second over the
English paragraphs, after one untimed pass of each, the median of --repeats passes taken in turn (one
process, timings are noisy on a shared machine). Prints a table and, as its
last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

HARD_CASES = [  # (language, text, expected sentences)
    ("en", "Dr. Smith saw Mr. Jones at 3.5 p.m. today. They talked.",
     ["Dr. Smith saw Mr. Jones at 3.5 p.m. today.", "They talked."]),
    ("en", 'He said "Stop!" and ran. She waited... Then she left.',
     ['He said "Stop!" and ran.', "She waited...", "Then she left."]),
    ("en", "The U.S. team won 2.5 million dollars. Fans cheered!",
     ["The U.S. team won 2.5 million dollars.", "Fans cheered!"]),
    ("en", "Is it true? Yes. It is e.g. a test, i.e. a check.",
     ["Is it true?", "Yes.", "It is e.g. a test, i.e. a check."]),
    ("en", '"Where are you going?" he asked. "Home."',
     ['"Where are you going?" he asked.', '"Home."']),
    ("de", "Das ist z. B. ein Test. Er kam am 3. Mai um 14.30 Uhr.",
     ["Das ist z. B. ein Test.", "Er kam am 3. Mai um 14.30 Uhr."]),
    ("de", "Dr. Müller wohnt in der Hauptstr. 5. Sie ist nett.",
     ["Dr. Müller wohnt in der Hauptstr. 5.", "Sie ist nett."]),
    ("de", "Er sagte: „Komm her!“ Dann ging er. Usw. usf.",
     ["Er sagte: „Komm her!“", "Dann ging er.", "Usw. usf."]),
    ("fr", "M. Dupont est arrivé. Il a dit « Bonjour ! » puis il est parti.",
     ["M. Dupont est arrivé.", "Il a dit « Bonjour ! » puis il est parti."]),
    ("fr", "Il coûte 3,5 euros, etc. Mme Martin paie.",
     ["Il coûte 3,5 euros, etc.", "Mme Martin paie."]),
    ("ja", "今日は晴れです。明日は雨でしょう！本当ですか？",
     ["今日は晴れです。", "明日は雨でしょう！", "本当ですか？"]),
    ("zh", "我喜欢猫。你呢？他不知道。",
     ["我喜欢猫。", "你呢？", "他不知道。"]),
    ("de", "Der 2. Weltkrieg endete 1945. Im 19. Jahrhundert war das anders.",
     ["Der 2. Weltkrieg endete 1945.", "Im 19. Jahrhundert war das anders."]),
    ("fr", "Je vois M. Dupont et J.-P. Sartre. Ils parlent.",
     ["Je vois M. Dupont et J.-P. Sartre.", "Ils parlent."]),
    ("es", "Vi a J. García ayer. Llegó tarde.",
     ["Vi a J. García ayer.", "Llegó tarde."]),
    ("en", "I like plan B. It works. I saw J. Smith.",
     ["I like plan B.", "It works.", "I saw J. Smith."]),
]


def regex_split(lang: str, text: str) -> list[str]:
    """The floor: cut after . ! ? (and CJK 。！？) followed by whitespace and an upper-case letter or quote."""
    return re.split(r"(?<=[.!?])\s+(?=[\"'„“«A-ZÀ-Ý])|(?<=[。！？])", text)


def segmenters() -> dict:
    """name -> function(lang, text) -> sentences, for the candidates that are installed."""
    found = {}
    from mt.text.sentences import sentence_spans

    # mt's segmenter: sentencex with the two Golden Rules it misses in some languages (mt.text.sentences)
    found["mt"] = lambda lang, text: [text[a:b] for a, b in sentence_spans(text, lang)]
    try:
        import sentencex

        found["sentencex"] = lambda lang, text: list(sentencex.segment(lang, text))
    except ImportError:
        pass
    try:
        import pysbd

        cache: dict = {}

        def pysbd_split(lang: str, text: str) -> list[str]:
            if lang not in cache:
                try:
                    cache[lang] = pysbd.Segmenter(language=lang, clean=False)
                except ValueError:
                    cache[lang] = pysbd.Segmenter(language="en", clean=False)
            return cache[lang].segment(text)

        found["pysbd"] = pysbd_split
    except ImportError:
        pass
    try:
        from syntok import segmenter

        found["syntok"] = lambda lang, text: [
            "".join(t.spacing + t.value for t in sentence) for para in segmenter.process(text) for sentence in para
        ]
    except ImportError:
        pass
    try:
        from sentence_splitter import SentenceSplitter

        splitters: dict = {}

        def moses_split(lang: str, text: str) -> list[str]:
            if lang not in splitters:
                try:
                    splitters[lang] = SentenceSplitter(language=lang)
                except Exception:  # a language without a prefix list: English's
                    splitters[lang] = SentenceSplitter(language="en")
            return splitters[lang].split(text)

        found["sentence-splitter"] = moses_split
    except ImportError:
        pass
    found["regex"] = regex_split
    return found


def paragraphs(data: Path, lang: str) -> list[list[str]]:
    """val and test_2016_flickr in `lang`, as groups of 3 consecutive sentences."""
    groups = []
    for split in ("val", "test_2016_flickr"):
        lines = [line.strip() for line in (data / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()]
        groups += [lines[i : i + 3] for i in range(0, len(lines) - 2, 3)]
    return groups


def right(split, lang: str, text: str, expected: list[str]) -> bool:
    try:
        return [s.strip() for s in split(lang, text) if s.strip()] == expected
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes of each segmenter (the median is given)")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    corpus = {lang: paragraphs(args.data, lang) for lang in ("en", "de", "fr")}
    # A paragraph whose first or second sentence ends without . ! ? cannot be split by any rule: the ceiling.
    ceiling = {lang: sum(all(re.search(r"[.!?]\W*$", s) for s in g[:2]) for g in groups) / len(groups)
               for lang, groups in corpus.items()}
    found = segmenters()
    texts = [" ".join(g) for g in corpus["en"]]
    for split in found.values():  # one untimed pass each: a first call's set-up (rules loaded) is no speed
        for text in texts:
            split("en", text)
    seconds: dict[str, list[float]] = {name: [] for name in found}
    names = list(found)
    for repeat in range(args.repeats):  # side by side, in turn, each first once in a while: medians
        for name in names[repeat % len(names):] + names[: repeat % len(names)]:
            start = time.perf_counter()
            for text in texts:
                found[name]("en", text)
            seconds[name].append(time.perf_counter() - start)
    rows = []
    for name, split in found.items():
        row: dict = {"segmenter": name}
        row["sentences_per_s"] = round(3 * len(texts) / statistics.median(seconds[name]))
        for lang, groups in corpus.items():
            row[f"paragraphs_{lang}"] = sum(right(split, lang, " ".join(g), g) for g in groups) / len(groups)
        row["hard_cases"] = sum(right(split, lang, text, want) for lang, text, want in HARD_CASES)
        row["hard_failed"] = [i for i, (lang, text, want) in enumerate(HARD_CASES) if not right(split, lang, text, want)]
        rows.append(row)
    table = Table(title=f"sentence segmenters: paragraphs of 3 Multi30k sentences (val + test2016, {len(corpus['en'])} each)")
    for column in ("segmenter", "en", "de", "fr", f"hard ({len(HARD_CASES)})", "sentences/s"):
        table.add_column(column, justify="left" if column == "segmenter" else "right")
    table.add_row("(ceiling: sentences 1, 2 end in . ! ?)", *(f"{100 * ceiling[lang]:.2f}%" for lang in corpus), "", "")
    for r in rows:
        table.add_row(r["segmenter"], *(f"{100 * r[f'paragraphs_{lang}']:.2f}%" for lang in corpus),
                      str(r["hard_cases"]), f"{r['sentences_per_s']:,}")
    Console().print(table)
    result = {"paragraphs": len(corpus["en"]), "ceiling": ceiling, "hard_cases": len(HARD_CASES), "repeats": args.repeats,
              "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
