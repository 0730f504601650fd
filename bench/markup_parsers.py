"""HTML parsers compared: which one `mt.text.markup` reads fragments with, chosen by measurement.

    python -m bench.markup_parsers [--seconds S] [--out FILE]

Candidates (one that is not installed is skipped): lxml (libxml2's HTML parser, `lxml.html`; a
dependency of sacreBLEU, so always there), BeautifulSoup with Python's html.parser and with lxml,
html5lib (the HTML5 algorithm in Python) and selectolax (lexbor, C). Each parses a fragment and writes
it back with its own serializer. Fidelity: how many of the snippets below come back byte for byte,
and what changes in the rest. Speed: the snippets joined 20 times (a 2 kB page), parsed and written
back as often as fits in `--seconds`, in MB of markup a second (one process; noisy on a shared
machine). Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

SNIPPETS = [
    "<p>A <b>man</b> rides a bicycle.</p>",
    "Text first <i>then</i> more &amp; &lt;tags&gt; <br> after<br/>end",
    "  <a href=\"/x?a=1&amp;b=2\" title='q \"x\"' data-k=v>link</a> tail  ",
    '<div><p>One. Two.</p><ul><li>a <span class="notranslate">Keep</span></li><li>b</li></ul></div>',
    "<!-- note --><script>if (a < b && c) {}</script><style>p>b{}</style>",
    "<p>Run <code>ls -l</code> <pre>  x\n  y</pre> done</p>",
    "<b>bold <i>both</b> italic</i>",
    "<table><tr><td>Cell</td></tr></table>",
    "<p>caf&eacute; &#233; &nbsp;x</p>",
    '<img src="a.png" alt="An image"> <input disabled>',
]


def lxml_html(text: str) -> str:
    import lxml.html

    root = lxml.html.fragment_fromstring(text, create_parent="div")
    inner = lxml.html.tostring(root, encoding="unicode")
    return inner[len("<div>") : -len("</div>")]


def bs4_with(builder: str):
    def run(text: str) -> str:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(text, builder)
        body = soup.body if builder == "lxml" else None
        return body.decode_contents(formatter="minimal") if body else soup.decode(formatter="minimal")

    return run


def html5lib_fragment(text: str) -> str:
    import html5lib

    fragment = html5lib.parseFragment(text, treebuilder="etree", namespaceHTMLElements=False)
    return html5lib.serialize(fragment, tree="etree", quote_attr_values="always", omit_optional_tags=False,
                              minimize_boolean_attributes=False, resolve_entities=False)


def selectolax_fragment(text: str) -> str:
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser(f"<div id=mt-root>{text}</div>").css_first("#mt-root").inner_html


CANDIDATES = {
    "lxml": ("lxml", lxml_html),
    "bs4 + html.parser": ("bs4", bs4_with("html.parser")),
    "bs4 + lxml": ("bs4", bs4_with("lxml")),
    "html5lib": ("html5lib", html5lib_fragment),
    "selectolax (lexbor)": ("selectolax", selectolax_fragment),
}


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def measure(run, seconds: float) -> dict:
    """Snippets given back byte for byte, the changed ones, and MB a second over a 2 kB page."""
    changed = {}
    for snippet in SNIPPETS:
        try:
            out = run(snippet)
        except Exception as exc:  # a parser that refuses a snippet: counted as changed
            out = f"error: {type(exc).__name__}: {exc}"
        if out != snippet:
            changed[snippet] = out
    page = "".join(SNIPPETS) * 20
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        run(page)
        count += 1
    rate = len(page.encode()) * count / (time.perf_counter() - start) / 1e6
    return {"identical": len(SNIPPETS) - len(changed), "snippets": len(SNIPPETS), "mb_per_s": round(rate, 2),
            "changed": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="time each parser's round trips this long")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()
    results = {}
    print(f"{'parser':22} {'identical':>9} {'MB/s':>7}")
    for name, (module, run) in CANDIDATES.items():
        if not installed(module):
            print(f"{name:22} not installed")
            continue
        results[name] = measure(run, args.seconds)
        print(f"{name:22} {results[name]['identical']:>6}/{len(SNIPPETS)} {results[name]['mb_per_s']:>7.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
