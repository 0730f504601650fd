"""Documents round trip and speed: each format built from test2016, translated by mt.documents, read
back with the format's own library, against plain sentence-by-sentence translation of the same text.

    python -m bench.documents --exp EXP --data data/multi30k [--src en --tgt de] [--formats txt html ...]
                              [--sentences 1000] [--repeats 3] [--threads 2] [--out FILE]

Inputs: a trained experiment (nothing is written into it) and Multi30k's raw text files. Each format's
document is made from the first --sentences test sentences, in paragraphs of 3 (txt: one sentence a
line; html: a page of <p> paragraphs with a link and bold words; docx: paragraphs with a bold run and a
hyperlink, every fifth in a table; xliff and po: a unit per paragraph; srt and vtt: each sentence over
1-3 cues with italics and bold; md: a paragraph, list item or heading per sentence with bold, links and
inline code). Every source sentence is given a final stop where it has none (5% of test2016), in the
plain baseline too.. For each format:
- structure: the output parsed with the format's library has the input's structure (same elements,
  cues and timings, units and IDs: `same` per format below);
- BLEU: the translation read back from the output, per paragraph, against the references, beside the
  plain translation of the same text (`mt translate` of each paragraph as a line: its sentences found
  and translated; goal: within 0.3), and beside the sentence-level translations joined (test2016 has
  sentences without a final stop, which no segmenter splits off in a paragraph: the difference between
  the two baselines is the segmenter's, not the format's);
- speed: sentences per second through the document against plain translation of the same sentences,
  measured interleaved (plain, document, plain, ...), medians of --repeats; goal >= 0.8x.
Prints a table, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import html
import io
import re
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable

from bench.common import read_split, report


def groups(lines: list[str], size: int = 3) -> list[list[str]]:
    return [lines[i : i + size] for i in range(0, len(lines), size)]


@dataclass
class Case:
    """A format's document from sentences, and from a translated document: its paragraphs' text and
    its structure (what must not change)."""

    name: str
    build: Callable[[list[str]], bytes]
    paragraphs: Callable[[bytes, list[str]], list[str]]  # per group of 3 sentences, or per sentence
    structure: Callable[[bytes], object]
    per_sentence: bool = False


# --- txt: one sentence a line, a blank line between paragraphs of 3
def txt_build(sentences: list[str]) -> bytes:
    return "\n\n".join("\n".join(g) for g in groups(sentences)).encode() + b"\n"


def txt_paragraphs(data: bytes, sentences: list[str]) -> list[str]:
    return [line for line in data.decode().splitlines() if line.strip()]


def txt_structure(data: bytes) -> object:
    return [bool(line.strip()) for line in data.decode().splitlines()]


# --- html: a page, a <p> per paragraph: the first sentence's second word bold, the last sentence a link
def html_build(sentences: list[str]) -> bytes:
    body = []
    for k, (first, *rest) in enumerate(groups(sentences)):
        words = [html.escape(w) for w in first.split()]
        if len(words) > 2:
            words[1] = f"<b>{words[1]}</b>"
        parts = [" ".join(words)] + [html.escape(s) for s in rest[:-1]]
        if rest:
            parts.append(f'<a href="/p/{k}">{html.escape(rest[-1])}</a>')
        body.append(f"<p>{' '.join(parts)}</p>")
    page = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>test2016</title></head>\n<body>\n'
    return (page + "\n".join(body) + "\n</body></html>\n").encode()


def html_paragraphs(data: bytes, sentences: list[str]) -> list[str]:
    import lxml.html

    return [p.text_content() for p in lxml.html.document_fromstring(data.decode()).iter("p")]


def html_structure(data: bytes) -> object:
    import lxml.html

    root = lxml.html.document_fromstring(data.decode())
    return [(el.tag, sorted((k, v) for k, v in el.attrib.items() if k != "lang")) for el in root.iter()]


# --- docx: a paragraph per group (every fifth in a table's cell), its second word bold, its last
# sentence a hyperlink
def docx_build(sentences):
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.oxml.ns import qn
    from docx.oxml.parser import OxmlElement

    d = docx.Document()
    table = None
    for k, (first, *rest) in enumerate(groups(sentences)):
        if k % 5 == 4:  # every fifth paragraph in a table's cell, two a row
            if table is None or len(table.rows[-1].cells[1].paragraphs[0].text):
                table = d.add_table(rows=1, cols=2) if table is None else table
                if table.rows[-1].cells[0].paragraphs[0].text:
                    table.add_row()
            cell = table.rows[-1].cells[0 if not table.rows[-1].cells[0].paragraphs[0].text else 1]
            p = cell.paragraphs[0]
        else:
            table = None
            p = d.add_paragraph()
        words = first.split()
        if len(words) > 2:
            p.add_run(words[0] + " ")
            p.add_run(words[1]).bold = True
            p.add_run(" " + " ".join(words[2:]))
        else:
            p.add_run(first)
        if rest:
            p.add_run(" " + " ".join(rest[:-1]) + (" " if len(rest) > 1 else " "))
            rid = p.part.relate_to(f"https://example.org/{k}", RT.HYPERLINK, is_external=True)
            link = OxmlElement("w:hyperlink")
            link.set(qn("r:id"), rid)
            run = OxmlElement("w:r")
            t = OxmlElement("w:t")
            t.text = rest[-1]
            run.append(t)
            link.append(run)
            p._p.append(link)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def docx_paragraphs(data, sentences):
    import docx
    from docx.oxml.ns import qn

    body = docx.Document(io.BytesIO(data)).element.body
    texts = ["".join(t.text or "" for t in p.iter(qn("w:t"))) for p in body.iter(qn("w:p"))]
    return [t for t in texts if t.strip()]


def docx_structure(data):
    import docx
    from docx.oxml.ns import qn

    d = docx.Document(io.BytesIO(data))
    body = d.element.body
    shape = [(child.tag.split("}")[1]) for child in body]
    paragraphs = [
        (
            len(p.findall(qn("w:hyperlink"))),
            [h.get(qn("r:id")) for h in p.findall(qn("w:hyperlink"))],
            any(
                r.find(qn("w:rPr")) is not None and r.find(qn("w:rPr")).find(qn("w:b")) is not None
                for r in p.iter(qn("w:r"))
            ),
        )
        for p in body.iter(qn("w:p"))
    ]
    tables = [(len(t.rows), len(t.columns)) for t in d.tables]
    return shape, paragraphs, tables


def toolkit(name: str):
    """translate-toolkit's storage module `name` (its package is `translate`, a name bench/ also has)."""
    import importlib

    return importlib.import_module(f"translate.storage.{name}")


# --- xliff: a unit per paragraph, its second word in <g>, a note each
def xliff_build(sentences):
    units = []
    for k, (first, *rest) in enumerate(groups(sentences)):
        words = [html.escape(w, quote=False) for w in first.split()]
        if len(words) > 2:
            words[1] = f'<g id="{k}b">{words[1]}</g>'
        text = " ".join([" ".join(words)] + [html.escape(s, quote=False) for s in rest])
        units.append(f'<trans-unit id="u{k}"><source>{text}</source><note>paragraph {k}</note></trans-unit>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file original="test2016" source-language="en" datatype="plaintext"><body>'
        + "\n".join(units)
        + "</body></file></xliff>\n"
    ).encode()


def xliff_paragraphs(data, sentences):
    xliff = toolkit("xliff")

    return [
        "".join(t.itertext()) if (t := u.get_target_dom()) is not None else ""
        for u in xliff.xlifffile.parsestring(data).units
    ]


def xliff_structure(data):
    from lxml import etree

    xliff = toolkit("xliff")

    units = xliff.xlifffile.parsestring(data).units
    return [
        (
            u.getid(),
            u.getnotes(),
            etree.tostring(u.get_source_dom(), with_tail=False),
            sorted((etree.QName(e).localname, sorted(e.attrib.items())) for e in u.get_source_dom().iterdescendants()),
        )
        for u in units
    ]


# --- po: an entry per paragraph, with a context and a location
def po_build(sentences):
    pypo = toolkit("pypo")

    store = pypo.pofile()
    store.init_headers(charset="UTF-8")
    for k, group in enumerate(groups(sentences)):
        unit = store.addsourceunit(" ".join(group))
        unit.setcontext(f"p{k}")
        unit.addlocation(f"test2016:{k}")
    return bytes(store)


def po_paragraphs(data, sentences):
    pypo = toolkit("pypo")

    return [str(u.target) for u in pypo.pofile.parsestring(data).units if not u.isheader()]


def po_structure(data):
    pypo = toolkit("pypo")

    return [(u.getid(), u.getlocations()) for u in pypo.pofile.parsestring(data).units if not u.isheader()]


# --- srt and vtt: each sentence over 1-3 cues by its length, every 4th cue in italics, a word in bold
# every 5th sentence; read back per sentence by its cues
TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")


def cues_of(i: int, sentence: str) -> list[str]:
    words = sentence.split()
    k = 1 if len(words) < 8 else 2 if len(words) < 14 else 3
    cut = [round(j * len(words) / k) for j in range(k + 1)]
    parts = [" ".join(words[a:b]) for a, b in zip(cut, cut[1:])]
    if i % 5 == 0 and len(parts[0].split()) > 2:
        first = parts[0].split()
        first[1] = f"<b>{first[1]}</b>"
        parts[0] = " ".join(first)
    return [f"<i>{p}</i>" if (i + j) % 4 == 0 else p for j, p in enumerate(parts)]


def seen(text: str) -> str:
    return " ".join(html.unescape(TAG.sub("", text)).split())


def per_sentence(cues: list[str], sentences: list[str]) -> list[str]:
    out, at = [], 0
    for i, sentence in enumerate(sentences):
        n = len(cues_of(i, sentence))
        out.append(" ".join(cues[at : at + n]))
        at += n
    return out


def srt_build(sentences: list[str]) -> bytes:
    import srt

    subs, t = [], 1.0
    for i, sentence in enumerate(sentences):
        for part in cues_of(i, sentence):
            subs.append(srt.Subtitle(len(subs) + 1, timedelta(seconds=t), timedelta(seconds=t + 1.5), part))
            t += 1.6
        t += 0.5
    return srt.compose(subs, reindex=False).encode()


def srt_paragraphs(data: bytes, sentences: list[str]) -> list[str]:
    import srt

    return per_sentence([seen(c.content) for c in srt.parse(data.decode())], sentences)


def srt_structure(data: bytes) -> object:
    import srt

    return [(c.index, c.start, c.end) for c in srt.parse(data.decode())]


def vtt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def vtt_build(sentences: list[str]) -> bytes:
    import webvtt

    captions, t = [], 1.0
    for i, sentence in enumerate(sentences):
        for part in cues_of(i, sentence):
            text = part.replace("<i>", "<c.it>").replace("</i>", "</c>")
            captions.append(webvtt.Caption(vtt_time(t), vtt_time(t + 1.5), text))
            t += 1.6
        t += 0.5
    return webvtt.WebVTT(captions=captions).content.encode()


def vtt_paragraphs(data: bytes, sentences: list[str]) -> list[str]:
    import webvtt

    return per_sentence([seen(c.raw_text) for c in webvtt.from_string(data.decode()).captions], sentences)


def vtt_structure(data: bytes) -> object:
    import webvtt

    return [(c.start, c.end, c.identifier) for c in webvtt.from_string(data.decode()).captions]


# --- md: a paragraph per sentence, some bold, some with a link, inline code, list items and headings
def md_build(sentences: list[str]) -> bytes:
    out = ["# Test 2016", ""]
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        if i % 3 == 0 and len(words) > 3:
            words[1] = f"**{words[1]}**"
        if i % 4 == 1 and len(words) > 4:
            words[-2] = f'[{words[-2]}](https://example.com/{i} "t")'
        line = " ".join(words) + (" `mt --help`" if i % 6 == 2 else "")
        out += [f"- {line}" if i % 5 == 4 else f"## {line}" if i % 7 == 6 else line, ""]
    return "\n".join(out).encode()


def md_inline(data: bytes) -> list:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").parse(data.decode())


def md_paragraphs(data: bytes, sentences: list[str]) -> list[str]:
    found = []
    for token in md_inline(data):
        if token.type == "inline":
            text = "".join(
                c.content if c.type == "text" else " " if c.type == "softbreak" else "" for c in token.children
            )
            found.append(" ".join(text.split()))
    return found[1:]


def md_structure(data: bytes) -> object:
    return [(t.type, t.tag, t.markup) for t in md_inline(data) if t.type != "inline"]


CASES = {
    "txt": Case("txt", txt_build, txt_paragraphs, txt_structure, per_sentence=True),
    "html": Case("html", html_build, html_paragraphs, html_structure),
    "docx": Case("docx", docx_build, docx_paragraphs, docx_structure),
    "xliff": Case("xliff", xliff_build, xliff_paragraphs, xliff_structure),
    "po": Case("po", po_build, po_paragraphs, po_structure),
    "srt": Case("srt", srt_build, srt_paragraphs, srt_structure, per_sentence=True),
    "vtt": Case("vtt", vtt_build, vtt_paragraphs, vtt_structure, per_sentence=True),
    "md": Case("md", md_build, md_paragraphs, md_structure, per_sentence=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp", type=Path, required=True, help="a trained experiment (only read)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k's text files")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--formats", nargs="*", default=list(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()

    from mt.decoding.options import DecodeOptions
    from mt.decoding.translator import Translator
    from mt.documents.formats import FORMATS, DocumentOptions
    from mt.documents.translate import translate_content
    from mt.documents.units import TranslatorUnits
    from mt.experiment.config import read_experiment
    from mt.hardware import cpu_name, set_threads
    from mt.metrics import score
    from mt.text.translate import translate

    set_threads(args.threads)
    exp, cfg = read_experiment(args.exp)
    translator = Translator.load(exp, cfg)
    src = read_split(args.data, "test_2016_flickr", args.src)[: args.sentences]
    # Every sentence ends with a stop (5% of test2016's do not), for the plain baseline too: paragraphs
    # and cue groups are then cut where the sentences end, so that what differs is the format's doing.
    src = [s if s.rstrip()[-1:] in ".!?" else s.rstrip() + "." for s in src]
    ref = read_split(args.data, "test_2016_flickr", args.tgt)[: args.sentences]
    units = TranslatorUnits(translator, DecodeOptions())
    options = DocumentOptions(args.tgt)

    plain_times: list[float] = []

    def plain() -> list[str]:
        start = time.perf_counter()
        out = translate(translator, src)
        plain_times.append(time.perf_counter() - start)
        return out

    sentence_level = plain()
    rows = []
    for name in args.formats:
        case = CASES[name]
        document = case.build(src)
        times, translated = [], b""
        for _ in range(args.repeats):
            plain()
            start = time.perf_counter()
            translated = translate_content(document, FORMATS[name], units, options)
            times.append(time.perf_counter() - start)
        same = case.structure(translated) == case.structure(document)
        got = case.paragraphs(translated, src)
        if case.per_sentence:
            hyps, refs, base = got, ref, sentence_level
        else:
            hyps = got
            refs = [" ".join(g) for g in groups(ref)]
            base = translate(translator, [" ".join(g) for g in groups(src)])
        joined = [" ".join(g) for g in groups(sentence_level)] if not case.per_sentence else sentence_level
        doc_bleu = score(hyps, refs)["bleu"] if len(hyps) == len(refs) else float("nan")
        plain_bleu = score(base, refs)["bleu"]
        doc_speed = len(src) / statistics.median(times)
        plain_speed = len(src) / statistics.median(plain_times[-args.repeats :])
        rows.append(
            {
                "format": name,
                "structure_same": same,
                "paragraphs": len(got),
                "expected_paragraphs": len(refs),
                "bleu": round(doc_bleu, 2),
                "plain_bleu": round(plain_bleu, 2),
                "bleu_gap": round(plain_bleu - doc_bleu, 2),
                "sentence_level_bleu": round(score(joined, refs)["bleu"], 2),
                "sent_per_s": round(doc_speed, 1),
                "plain_sent_per_s": round(plain_speed, 1),
                "speed_ratio": round(doc_speed / plain_speed, 2),
            }
        )

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"documents: {len(src)} test2016 sentences, {args.src}->{args.tgt}, {cpu_name()}")
    for column in (
        "format",
        "structure",
        "BLEU",
        "plain BLEU",
        "gap",
        "sentences joined",
        "sent/s",
        "plain sent/s",
        "ratio",
    ):
        table.add_column(column, justify="left" if column == "format" else "right")
    for r in rows:
        table.add_row(
            r["format"],
            "same" if r["structure_same"] else "CHANGED",
            f"{r['bleu']:.2f}",
            f"{r['plain_bleu']:.2f}",
            f"{r['bleu_gap']:+.2f}",
            f"{r['sentence_level_bleu']:.2f}",
            f"{r['sent_per_s']:.1f}",
            f"{r['plain_sent_per_s']:.1f}",
            f"{r['speed_ratio']:.2f}x",
        )
    Console(stderr=True).print(table)
    result = {"exp": str(args.exp), "cpu": cpu_name(), "threads": args.threads, "sentences": len(src), "rows": rows}
    report(result, args.out)


if __name__ == "__main__":
    main()
