"""Markup translation measured: where the inline tags of an HTML fragment land in its translation, mt's
placement by alignments (mt.text.placement) against three baselines, all with the same model.

    python -m bench.markup --exp EXP [--data data/multi30k] [--split test_2016_flickr] [--th-venv DIR]
        [--seed 1] [--threads 2] [--repeats 3] [--out FILE] [--dump FILE]

The tagged set: every source sentence of the split gets inline elements over runs of 1-3 consecutive
words (drawn with --seed): one element (45%), two apart (35%), or one of 2-4 words with one of 1-2
inside it (20%); <b>, <i>, <a href>, <span class="x">, never the same twice in a sentence; no <br> (it
ends a sentence in mt, which would change the text). The systems, each with the experiment's model and
its beam (decode.beam):
- mt: `mt.text.markup_translate.translate(translator, fragments, "html")`;
- edges: the sentence translated without tags, every element around the whole translation (an element
  inside another stays inside);
- fuzzy, MinT's way: the sentence and each element's text translated apart; the element goes around
  the n words of the sentence's translation nearest to its text's translation of n words
  (Levenshtein distance, lowercased, punctuation stripped), when under MinT's cutoff of 3 edits (an
  inner element is searched inside its outer one's words, an element apart outside the other's);
  else around the whole translation (the outer's words), as edges;
- translatehtml: LibreTranslate's HTML mode, translatehtml 1.5.3 over argos-translate-lt 1.12.1 with
  the package `mt export --format argos` writes (CTranslate2, beam decode.beam, one thread, Argos's own
  length penalty), in the virtual environment --th-venv with an Argos home of its own.

Gold, in each system's output: words are \\w-runs (with inner ' or -); other characters are punctuation
and count for nothing. eflomal (IBM1+HMM+fertility, default iterations) aligns the source with the
reference and with every distinct output text (tags stripped) in one run, the train split beside them
so that it has data enough, both directions symmetrised by grow-diag-final-and (--symmetrise). An
element's gold words in a text: the words from the first to the last aligned to a source word it
covers (the hull). An element whose words are aligned to nothing in the reference or in an output is
left out for all systems (counted). What an element covers in an output: the words with a character
inside it. Exact: it covers exactly the gold words; F1: of the covered words against the gold ones. An
element missing, twice, or in an output that does not parse as XML scores 0 for both.
Text: BLEU and chrF (sacreBLEU) of each output without tags against the references and against mt's
translation of the sentences as plain text. Seconds: the whole set, translation included (the model
loaded before), the median of --repeats runs (edges and fuzzy: mt's plain translation's time added).
Prints a table, and as its last line one JSON object. Needs eflomal and rapidfuzz (the markup-bench
extra); --th-venv: a virtual environment with argos-translate-lt 1.12.1, beautifulsoup4 4.9.3 and
translatehtml 1.5.3 installed without its dependencies (docs/benchmarks.md, "Markup").
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Callable

from bench.common import sealed_argos_env

TOKEN = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")  # a word, or one punctuation mark
WORD = re.compile(r"\w")
KINDS = (("b", ()), ("i", ()), ("a", (("href", "https://example.org/page"),)), ("span", (("class", "x"),)))
PUNCT = (
    ",./#!$%^&*;:\"'{}=_`~()?!-„“”«»‚‘’"  # stripped from a word's ends before fuzzy matching (MinT's set, and quotes)
)
CUTOFF = 3  # MinT's: a word n-gram matches when fewer edits than this apart
TRANSLATEHTML = r"""
import json, sys, time
request = json.load(sys.stdin)
from argostranslate import package, translate
from translatehtml import translate_html
package.install_from_path(request["package"])
languages = {lang.code: lang for lang in translate.get_installed_languages()}
translation = languages[request["src"]].get_translation(languages[request["tgt"]])
translate_html(translation, "<p>A <b>warm</b> start.</p>")
seconds = []
for _ in range(request["repeats"]):
    start = time.perf_counter()
    outputs = [str(translate_html(translation, fragment)) for fragment in request["fragments"]]
    seconds.append(time.perf_counter() - start)
print()
print(json.dumps({"outputs": outputs, "seconds": sorted(seconds)[len(seconds) // 2]}))
"""

Placed = tuple[str, tuple, int, int]  # an element: name, attributes, [start, end) of the text


@dataclass
class Fragment:
    """A tagged source sentence: its text, its elements (a parent before its child) and its markup."""

    text: str
    tags: list[Placed]
    parents: list[int | None]
    markup: str


@dataclass
class Read:
    """An output parsed back: its text without tags and its elements (None: it is not well-formed)."""

    text: str
    tags: list[Placed] | None


def tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN.finditer(text)]


def words_in(text: str, start: int, end: int) -> set[int]:
    """Indices (among all tokens) of the words with a character in [start, end)."""
    return {k for k, (a, b) in enumerate(tokens(text)) if a < end and start < b and WORD.match(text, a)}


def with_tags(text: str, placed: list[Placed]) -> str:
    """`text` escaped, with each element around its span; spans nest or lie apart, and of two equal ones
    the earlier is outside."""
    events = []
    for k, (name, attrs, start, end) in enumerate(placed):
        attributes = "".join(f' {a}="{v}"' for a, v in ((a, html.escape(v, quote=True)) for a, v in attrs))
        opening = f"<{name}{attributes}>"
        if start == end:
            events.append((start, 1, 0, k, opening + f"</{name}>"))
        else:
            events.append((start, 2, -end, k, opening))
            events.append((end, 0, -start, -k, f"</{name}>"))
    parts, at = [], 0
    for position, *_, markup in sorted(events):
        parts += [html.escape(text[at:position], quote=False), markup]
        at = position
    return "".join(parts) + html.escape(text[at:], quote=False)


def tagged(text: str, rng: random.Random) -> Fragment:
    """`text` with one or two elements over runs of words (module docstring)."""
    words = [(a, b) for a, b in tokens(text) if WORD.match(text, a)]
    if not words:
        return Fragment(text, [], [], html.escape(text, quote=False))
    kinds = rng.sample(KINDS, 2)

    def run(lo: int, hi: int, shortest: int, longest: int) -> tuple[int, int]:
        n = rng.randint(shortest, min(longest, hi - lo))
        first = rng.randint(lo, hi - n)
        return first, first + n

    layout = rng.random()
    if layout < 0.45 or len(words) < 4:
        runs, parents = [run(0, len(words), 1, 3)], [None]
    elif layout < 0.8:
        a, b = run(0, len(words), 1, 3)
        room = [(lo, hi) for lo, hi in ((0, a), (b, len(words))) if hi > lo]
        second = run(*rng.choice(room), 1, 3)
        runs, parents = sorted([(a, b), second]), [None, None]  # in document order
    else:
        a, b = run(0, len(words), 2, 4)
        runs, parents = [(a, b), run(a, b, 1, min(2, b - a - 1))], [None, 0]
    placed = [(name, attrs, words[a][0], words[b - 1][1]) for (name, attrs), (a, b) in zip(kinds, runs)]
    return Fragment(text, placed, parents, with_tags(text, placed))


def read(markup: str) -> Read:
    """An output's text and elements; its elements None when it is not well-formed XML."""
    import lxml.etree
    import lxml.html

    try:
        root = lxml.etree.fromstring(f"<fragment>{markup}</fragment>")
    except lxml.etree.XMLSyntaxError:
        return Read(lxml.html.fragment_fromstring(markup, create_parent="div").text_content(), None)
    parts: list[str] = []
    found: list[Placed] = []

    def walk(element) -> None:
        parts.append(element.text or "")
        for child in element:
            start, index = len("".join(parts)), len(found)
            found.append(("", (), 0, 0))
            walk(child)
            found[index] = (child.tag, tuple(child.attrib.items()), start, len("".join(parts)))
            parts.append(child.tail or "")

    walk(root)
    return Read("".join(parts), found)


def nearest(text: str, key: str, lo: int, hi: int, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """[start, end) of the n words of text[lo:hi] nearest to `key`'s n words (MinT's fuzzy match, the
    best under the cutoff instead of the first), overlapping nothing in `taken`; None if none."""
    from rapidfuzz.distance import Levenshtein

    want = [w.strip(PUNCT).lower() for w in key.split()]
    want = [w for w in want if w]
    spans = [m.span() for m in re.finditer(r"\S+", text) if lo <= m.start() and m.end() <= hi]
    best = None
    for i in range(len(spans) - len(want) + 1 if want else 0):
        gram = spans[i : i + len(want)]
        start, end = gram[0][0], gram[-1][1]
        if any(start < e and s < end for s, e in taken):
            continue
        distance = Levenshtein.distance(" ".join(text[a:b].strip(PUNCT).lower() for a, b in gram), " ".join(want))
        if distance < CUTOFF and (best is None or distance < best[0]):
            best = (distance, start, end)
    if best is None:
        return None
    _, start, end = best
    while end > start + 1 and text[end - 1] in PUNCT:
        end -= 1
    return start, end


def fuzzy(fragment: Fragment, translation: str, keys: list[str]) -> tuple[str, int]:
    """MinT's way (module docstring): the markup, and how many elements fell back to the edges."""
    placed: list[Placed] = []
    matched: list[bool] = []
    for (name, attrs, _, _), parent, key in zip(fragment.tags, fragment.parents, keys):
        lo, hi = (0, len(translation)) if parent is None else placed[parent][2:]
        taken = [p[2:] for p, q, m in zip(placed, fragment.parents, matched) if q == parent and m]
        span = nearest(translation, key, lo, hi, taken)
        matched.append(span is not None)
        placed.append((name, attrs, *(span or (lo, hi))))
    return with_tags(translation, placed), matched.count(False)


def symmetrise(forward: set[tuple[int, int]], reverse: set[tuple[int, int]], how: str) -> set[tuple[int, int]]:
    """Two directions' links as one: their intersection, or grown by grow-diag-final-and (Koehn et al.)."""
    links = forward & reverse
    if how == "intersection":
        return links
    union = forward | reverse
    rows, cols = {i for i, _ in links}, {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)):
                p = (i + di, j + dj)
                if p in union and p not in links and (p[0] not in rows or p[1] not in cols):
                    links.add(p)
                    rows.add(p[0])
                    cols.add(p[1])
                    grown = True
    for direction in (forward, reverse):
        for i, j in sorted(direction):
            if i not in rows and j not in cols:
                links.add((i, j))
                rows.add(i)
                cols.add(j)
    return links


def align(pairs: list[tuple[str, str]], how: str) -> list[set[tuple[int, int]]]:
    """Token links (source index, target index) of each pair of texts, by eflomal."""
    from eflomal import Aligner

    def line(text: str) -> str:
        return " ".join(text[a:b] for a, b in tokens(text)) or "∅"  # eflomal needs a word on every line

    def links(path: Path) -> list[set[tuple[int, int]]]:
        return [
            {(int(i), int(j)) for i, j in (p.split("-") for p in row.split())}
            for row in path.read_text(encoding="utf-8").splitlines()
        ]

    with tempfile.TemporaryDirectory() as tmp:
        forward, reverse = Path(tmp) / "forward", Path(tmp) / "reverse"
        Aligner().align(
            [line(s) + "\n" for s, _ in pairs],
            [line(t) + "\n" for _, t in pairs],
            links_filename_fwd=str(forward),
            links_filename_rev=str(reverse),
        )
        return [symmetrise(f, r, how) for f, r in zip(links(forward), links(reverse))]


def gold(source: str, tag: Placed, target: str, links: set[tuple[int, int]]) -> set[int]:
    """The gold words of an element in `target`: the hull of the words aligned to the words it covers."""
    covered = words_in(source, tag[2], tag[3])
    aligned = {j for i, j in links if i in covered}
    words = words_in(target, 0, len(target))
    hull = [j for j in aligned if j in words]
    return {j for j in words if min(hull) <= j <= max(hull)} if hull else set()


def run_translatehtml(args, fragments: list[str]) -> tuple[list[str], float]:
    """translatehtml's outputs and seconds, in --th-venv with the exported package (module docstring)."""
    from mt.apps.export.directory import export
    from mt.experiment.config import read_experiment

    exp, cfg = read_experiment(args.exp)
    with tempfile.TemporaryDirectory() as tmp:
        export(exp, cfg, Path(tmp) / "argos", fmt="argos")
        package = next((Path(tmp) / "argos").glob("*.argosmodel"))
        env = sealed_argos_env(Path(tmp) / "home", beam=cfg.decode.beam, threads=args.argos_threads)
        request = {
            "package": str(package),
            "src": args.src,
            "tgt": args.tgt,
            "fragments": fragments,
            "repeats": args.repeats,
        }
        python = str(args.th_venv / "bin" / "python")
        done = subprocess.run(
            [python, "-c", TRANSLATEHTML], input=json.dumps(request), capture_output=True, text=True, env=env
        )
    if done.returncode != 0:
        raise SystemExit(f"translatehtml failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["outputs"], answer["seconds"]


def systems(args, fragments: list[Fragment]) -> tuple[dict[str, list[str]], dict[str, float], list[str], dict]:
    """Each system's outputs and seconds, mt's plain translations, and notes (fallbacks, equal texts)."""
    from mt.decoding.translator import Translator
    from mt.experiment.config import read_experiment
    from mt.hardware import set_threads
    from mt.text.markup_translate import translate as translate_markup
    from mt.text.translate import translate

    set_threads(args.threads)
    exp, cfg = read_experiment(args.exp)
    translator = Translator.load(exp, cfg)
    translate(translator, [f.text for f in fragments[:16]])  # warm up

    def timed(work: Callable[[], Any]) -> tuple[Any, float]:
        """What `work` gives, and its median seconds over --repeats runs."""
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = work()
            seconds.append(time.perf_counter() - start)
        return result, statistics.median(seconds)

    def mint() -> list[tuple[str, int]]:
        keys = iter(translate(translator, [f.text[s:e] for f in fragments for _, _, s, e in f.tags]))
        return [fuzzy(f, t, [next(keys) for _ in f.tags]) for f, t in zip(fragments, plain)]

    outputs, seconds = {}, {}
    outputs["mt"], seconds["mt"] = timed(lambda: translate_markup(translator, [f.markup for f in fragments], "html"))
    plain, seconds["plain"] = timed(lambda: translate(translator, [f.text for f in fragments]))
    outputs["edges"], seconds["edges"] = timed(
        lambda: [with_tags(t, [(n, a, 0, len(t)) for n, a, _, _ in f.tags]) for f, t in zip(fragments, plain)]
    )
    placed, seconds["fuzzy"] = timed(mint)
    outputs["fuzzy"] = [markup for markup, _ in placed]
    seconds["edges"] += seconds["plain"]
    seconds["fuzzy"] += seconds["plain"]
    notes = {"fuzzy_fallbacks": sum(n for _, n in placed)}
    if args.th_venv:
        outputs["translatehtml"], seconds["translatehtml"] = run_translatehtml(args, [f.markup for f in fragments])
    return outputs, seconds, plain, notes


def evaluate(args, fragments: list[Fragment], refs: list[str], outputs: dict[str, list[str]], plain: list[str]):
    """Per system: well-formed, tags kept, text scores, placement against the gold (module docstring)."""
    from mt.metrics import score

    reads = {name: [read(o) for o in outs] for name, outs in outputs.items()}
    texts = {name: tuple(r.text for r in rs) for name, rs in reads.items()}
    distinct = list(dict.fromkeys([tuple(refs), *texts.values()]))
    train = [
        (s.rstrip("\n"), t.rstrip("\n"))
        for s, t in zip(
            (args.data / f"train.{args.src}").read_text(encoding="utf-8").splitlines(),
            (args.data / f"train.{args.tgt}").read_text(encoding="utf-8").splitlines(),
        )
    ]
    pairs = [(f.text, t) for targets in distinct for f, t in zip(fragments, targets)]
    start = time.perf_counter()
    links = align(train + pairs, args.symmetrise)[len(train) :]
    align_seconds = time.perf_counter() - start
    golds = [  # per distinct text list, per fragment, per element
        [
            [gold(f.text, tag, t, links[d * len(fragments) + k]) for tag in f.tags]
            for k, (f, t) in enumerate(zip(fragments, targets))
        ]
        for d, targets in enumerate(distinct)
    ]
    total = sum(len(f.tags) for f in fragments)
    no_ref = {(k, e) for k, f in enumerate(fragments) for e in range(len(f.tags)) if not golds[0][k][e]}
    no_out = {
        (k, e)
        for d in range(1, len(distinct))
        for k, f in enumerate(fragments)
        for e in range(len(f.tags))
        if not golds[d][k][e]
    } - no_ref
    scored = [(k, e) for k, f in enumerate(fragments) for e in range(len(f.tags)) if (k, e) not in no_ref | no_out]
    results = {}
    for name, rs in reads.items():
        d = distinct.index(texts[name])
        exact, f1s = 0, []
        kept = [
            r.tags is not None and Counter(t[:2] for t in r.tags) == Counter(t[:2] for t in f.tags)
            for f, r in zip(fragments, rs)
        ]
        for k, e in scored:
            tags = rs[k].tags or []
            mine = [t for t in tags if t[:2] == fragments[k].tags[e][:2]]
            if len(mine) != 1:
                f1s.append(0.0)
                continue
            covered, want = words_in(rs[k].text, mine[0][2], mine[0][3]), golds[d][k][e]
            exact += covered == want
            f1s.append(2 * len(covered & want) / (len(covered) + len(want)))
        text = [r.text for r in rs]
        vs_ref, vs_plain = score(text, refs), score(text, plain)
        results[name] = {
            "well_formed": round(100 * sum(r.tags is not None for r in rs) / len(rs), 2),
            "tags_kept_once": round(100 * sum(kept) / len(rs), 2),
            "bleu": round(vs_ref["bleu"], 2),
            "chrf": round(vs_ref["chrf"], 2),
            "bleu_vs_mt_plain": round(vs_plain["bleu"], 2),
            "chrf_vs_mt_plain": round(vs_plain["chrf"], 2),
            "text_equals_mt_plain": round(100 * sum(a == b for a, b in zip(text, plain)) / len(rs), 2),
            "exact": round(100 * exact / len(scored), 2),
            "f1": round(100 * sum(f1s) / len(scored), 2),
        }
    counts = {
        "fragments": len(fragments),
        "tags": total,
        "no_reference_alignment": len(no_ref),
        "no_output_alignment": len(no_out),
        "scored": len(scored),
        "align_seconds": round(align_seconds, 1),
        "aligned_pairs": len(train) + len(pairs),
    }
    return results, counts, golds, distinct, reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", type=Path, required=True, help="a trained experiment (only read)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--split", default="test_2016_flickr", help="the split tagged and translated")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--seed", type=int, default=1, help="draws the tagged words")
    parser.add_argument("--limit", type=int, default=0, help="the first N sentences only (0: all)")
    parser.add_argument("--threads", type=int, default=2, help="mt's threads")
    parser.add_argument("--repeats", type=int, default=1, help="time each system this often (the median)")
    parser.add_argument("--argos-threads", type=int, default=1, help="CTranslate2's threads under translatehtml")
    parser.add_argument("--th-venv", type=Path, help="a virtual environment with translatehtml (else not run)")
    parser.add_argument("--symmetrise", choices=("grow-diag-final-and", "intersection"), default="grow-diag-final-and")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    parser.add_argument("--dump", type=Path, help="write every fragment, output and gold here (JSON lines)")
    args = parser.parse_args()

    from mt.hardware import cpu_name

    for path in (args.out, args.dump):
        if path is not None and path.exists():
            raise SystemExit(f"{path}: exists; remove it first")
    src = (args.data / f"{args.split}.{args.src}").read_text(encoding="utf-8").splitlines()
    refs = (args.data / f"{args.split}.{args.tgt}").read_text(encoding="utf-8").splitlines()
    src, refs = (src[: args.limit], refs[: args.limit]) if args.limit else (src, refs)
    rng = random.Random(args.seed)
    fragments = [tagged(line, rng) for line in src]
    outputs, seconds, plain, notes = systems(args, fragments)
    results, counts, golds, distinct, reads = evaluate(args, fragments, refs, outputs, plain)
    for name in results:
        results[name]["seconds"] = round(seconds[name], 1)
    results["fuzzy"]["fallbacks"] = notes["fuzzy_fallbacks"]

    print(
        f"{args.split}: {counts['fragments']} fragments, {counts['tags']} elements; left out: "
        f"{counts['no_reference_alignment']} aligned to nothing in the reference, "
        f"{counts['no_output_alignment']} in an output; scored: {counts['scored']}"
    )
    print(
        "| system | well-formed % | tags kept once % | exact % | F1 % | BLEU | chrF | BLEU vs mt plain | "
        "chrF vs mt plain | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['well_formed']:.1f} | {r['tags_kept_once']:.1f} | {r['exact']:.1f} | {r['f1']:.1f} | "
            f"{r['bleu']:.2f} | {r['chrf']:.2f} | {r['bleu_vs_mt_plain']:.2f} | {r['chrf_vs_mt_plain']:.2f} | "
            f"{r['seconds']:.1f} |"
        )
    summary = {
        "what": "bench/markup.py",
        "exp": str(args.exp),
        "split": args.split,
        "seed": args.seed,
        "aligner": f"eflomal 2.0.0, {args.symmetrise}, with the train split",
        "counts": counts,
        "mt_plain_seconds": round(seconds["plain"], 1),
        "systems": results,
        "cpu": cpu_name(),
        "date": date.today().isoformat(),
    }
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as out:
            for k, f in enumerate(fragments):
                row = {"source": f.markup, "reference": refs[k], "gold_reference": [sorted(g) for g in golds[0][k]]}
                for name, outs in outputs.items():
                    d = distinct.index(tuple(r.text for r in reads[name]))
                    row[name] = outs[k]
                    row[f"gold_{name}"] = [sorted(g) for g in golds[d][k]]
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
