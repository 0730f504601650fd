"""Markup's format side and tag placement (mt.text.markup, mt.text.placement) without a model: each
sentence "translated" by a stand-in that writes its words in capitals in reverse order and aligns them
so, which moves every tag; the output read back by parsers (helpers.markup)."""

from __future__ import annotations

import pytest
from helpers import balanced, markup_tags, markup_text

from mt.text.markup import MarkupError, parse, render, segments, write
from mt.text.placement import place_segment
from mt.text.sentences import sentence_spans


def reverse(text: str, fmt: str = "html", drop: frozenset[str] = frozenset()) -> str:
    """`text` through the stand-in translation; source words in `drop` are left unaligned."""
    fragment = parse(text, fmt)  # type: ignore[arg-type]
    translated = []
    for segment in segments(fragment):
        spans = sentence_spans(segment.plain, "en")
        outputs, alignments = [], []
        for a, b in spans:
            words = segment.plain[a:b].split()
            n = len(words)
            outputs.append(" ".join(w.upper() for w in reversed(words)))
            alignments.append(" ".join(f"{i}-{n - 1 - i}" for i, w in enumerate(words) if w not in drop))
        translated.append(place_segment(segment, spans, outputs, alignments))
    return render(fragment, fmt, iter(translated))  # type: ignore[arg-type]


def test_inline_tags_go_around_the_words_they_covered_wherever_those_move():
    source = '<p>A <b>man</b> rides a <a href="/x?a=1&amp;b=2" title=\'say "hi"\'>bicycle</a>.</p>'
    out = reverse(source)
    # the period outside the link, as in the source (the word "bicycle." is copied, in capitals)
    assert out == '<p><a href="/x?a=1&amp;b=2" title="say &quot;hi&quot;">BICYCLE</a>. A RIDES <b>MAN</b> A</p>'
    assert markup_tags(out) == markup_tags(source) and balanced(out)


CASES = [
    "Plain text. Two sentences here.",
    "<p>A <b>man</b> and <i>a dog</i> run.</p>",
    '<p>See <a href="https://example.org/?q=1&amp;r=2" target="_blank" data-x="">the park</a> now.</p>',
    '<div>Red <span class="c" style="color: red">house</span> blue.</div>',
    "One line<br>two line<br/>three <br> four",
    "Cats &amp; dogs &lt;3 &gt; all, caf&eacute;&nbsp;ok.",
    "A <!-- a comment --> man <!--x--> runs.",
    "<b>Bold <i>and italic <u>deep</u></i> words</b> end.",
    "<script>if (a < b && c) { x(); }</script><style>p > b { color: red }</style>Text.",
    "Run <code>ls -l</code> here. <pre>  keep\n  this </pre> After.",
    '<p>Say <span translate="no">Berlin</span> and <em class="x notranslate">Paris</em> twice.</p>',
    "<div><p>First block.</p><ul><li>item one</li><li>item <b>two</b></li></ul>tail text</div>",
    '<table><tr><td>Cell <img src="a.png" alt="An image"> one</td><th>Head</th></tr></table>',
    "<b>broken <i>nesting</b> here</i>",
    "  <i>spaces</i>  around  ",
    "",
    "   ",
    "<br>",
]


@pytest.mark.parametrize("source", CASES)
def test_every_tag_survives_once_with_its_attributes_and_the_output_parses(source):
    out = reverse(source)
    assert balanced(out), out
    assert markup_tags(out) == markup_tags(source), out
    assert write(parse(out, "html"), "html") == out  # read back as written: nothing the parser fixes


def test_kept_elements_are_verbatim_and_untranslated():
    out = reverse(CASES[8] + CASES[9] + CASES[10])
    for kept in ("<script>if (a < b && c) { x(); }</script>", "<style>p > b { color: red }</style>",
                 "<code>ls -l</code>", "<pre>  keep\n  this </pre>", '<span translate="no">Berlin</span>',
                 '<em class="x notranslate">Paris</em>'):
        assert kept in out
    assert "TEXT." in out and "HERE. RUN" in out and "AFTER." in out


def test_block_elements_bound_segments_inline_ones_do_not():
    fragment = parse(CASES[11] + CASES[3], "html")
    assert [s.text for s in segments(fragment)] == ["First block.", "item one", "item two", "tail text",
                                                     "Red house blue."]
    # A form's label and button bound theirs (were one word with their neighbours: "EmailSend")
    form = parse('<form><label>Your email</label><input name="e"><button>Send it</button></form>', "html")
    assert [s.text for s in segments(form)] == ["Your email", "Send it"]
    assert reverse('<label>Your email</label><input name="e"><button>Send it</button>') == (
        '<label>EMAIL YOUR</label><input name="e"><button>IT SEND</button>')


def test_elements_side_by_side_are_separate_words_a_word_cut_by_one_is_not():
    """A menu of links with no space between them (a style sheet spaces them out) was one word to the
    model ("HomeAboutBlog"); a word styled in part, punctuation after an element and scripts written
    without spaces stay joined."""
    texts = {
        "<nav><a>Home</a><a>About</a><span><b>Blog</b></span></nav>": "Home About Blog",
        "un<u>der</u>line": "underline",
        "<b>Note</b><i>: read</i>": "Note: read",
        "<span>東京</span><span>大学</span>": "東京大学",
        "Klick<img src=i.png><b>hier</b>": "Klickhier",
        "<a>Home</a> <a>About</a>": "Home About",
    }
    for source, text in texts.items():
        (segment,) = segments(parse(source, "html"))
        assert segment.text == segment.plain == text, source
    out = reverse('<nav><a href="/">Home</a><a href="/a">About us</a></nav>')
    assert out == '<nav><a href="/a">US ABOUT</a> <a href="/">HOME</a></nav>'


def test_a_br_ends_a_sentence_and_stays_in_place_a_line_break_in_the_text_does_not():
    (segment,) = segments(parse("a b<br>c d", "html"))
    assert segment.plain == "a b\nc d" and sentence_spans(segment.plain, "en") == [(0, 3), (4, 7)]
    assert reverse("a b<br>c d") == "B A<br>D C"
    (segment,) = segments(parse("a b\nc d", "html"))
    assert segment.plain == "a b c d" and sentence_spans(segment.plain, "en") == [(0, 7)]
    assert reverse("<p>\n  a b\nc d\n</p>") == "<p>\n  D C B A\n</p>"  # the spaces around kept


def test_text_is_escaped_again_and_entities_are_translated_as_characters():
    (segment,) = segments(parse("Cats &amp; dogs &lt;3", "html"))
    assert segment.text == "Cats & dogs <3"
    assert reverse("Cats &amp; dogs &lt;3") == "&lt;3 DOGS &amp; CATS"


def test_a_tab_or_line_break_in_an_xml_attribute_is_written_as_its_reference():
    """Written raw, an XML reader normalises it to a space (XLIFF, say: `title="x&#9;y"` became "x y")."""
    from lxml import etree

    source = '<g title="x&#9;y&#10;z&#13;">t</g>'
    written = write(parse(source, "xml"), "xml")
    assert written == source and etree.fromstring(written).get("title") == "x\ty\nz\r"
    assert write(parse('<a title="x\ty">t</a>', "html"), "html") == '<a title="x\ty">t</a>'  # html: as it was


def test_nested_elements_stay_nested_and_a_tag_crossing_others_is_clipped():
    assert reverse("<b>x <i>y</i></b> z.") == "Z. <b><i>Y</i> X</b>"
    out = reverse("<b>one</b> <i>two</i>", drop=frozenset({"two"}))  # i's word aligned to nothing
    assert out == "TWO <b>ONE</b><i></i>"  # after the word before it, empty


def test_an_element_whose_words_are_aligned_to_nothing_takes_the_words_between_its_neighbours():
    out = reverse("one <b>two</b> three", drop=frozenset({"two"}))
    assert out == "THREE <b>TWO</b> ONE"  # between THREE (three's) and ONE (one's), whichever order they are in


def aligned(source: str, output: str, alignment: str) -> str:
    """`source`, one sentence, translated as `output` with the word alignment `alignment`."""
    fragment = parse(source, "html")
    [segment] = segments(fragment)
    placed = place_segment(segment, [(0, len(segment.plain))], [output], [alignment])
    return render(fragment, "html", iter([placed]))


def test_an_element_aligned_to_nothing_at_a_sentence_edge_takes_the_words_up_to_the_edge():
    assert aligned("<b>a</b> man runs", "ein Mann läuft", "1-1 2-2") == "<b>ein</b> Mann läuft"
    assert aligned("a man <b>runs</b>", "ein Mann läuft schnell", "0-0 1-1") == "ein Mann <b>läuft schnell</b>"
    assert aligned("<b>a</b> man", "Mann", "1-0") == "<b></b>Mann"  # nothing there: empty, as before


def test_an_element_aligned_to_words_far_apart_goes_around_one_run_of_them():
    # busy -> both Straße; und (between them) -> street: the run nearest a's and street's words
    assert aligned("a <b>busy</b> street", "eine Straße und Straße", "0-0 1-1 1-3 2-2") == "eine <b>Straße</b> und Straße"
    # the longest run, wherever it is
    out = aligned("a <b>busy</b> street", "eine Straße und sehr Straße", "0-0 1-1 1-3 1-4 2-2")
    assert out == "eine Straße und <b>sehr Straße</b>"
    # words between that are aligned to nothing, or to the element's words too, do not split it
    assert aligned("a <b>busy</b> street", "eine Straße und Straße", "0-0 1-1 1-3 2-1") == "eine <b>Straße und Straße</b>"


def test_empty_elements_follow_the_target_word_of_the_word_before_them():
    # with the space it stood after (was glued to its word: "ONE<img ...>", "Ein<code>ls</code>")
    assert reverse("one <img src=x> two three") == "THREE TWO ONE <img src=\"x\">"
    assert reverse("Run <code>ls</code> now.") == "NOW. RUN <code>ls</code>"
    assert reverse("A <span translate=\"no\">Brand</span> dog runs.") == 'RUNS. DOG A <span translate="no">Brand</span>'
    assert reverse("one<img src=x>two") == "ONE<img src=\"x\">TWO"  # inside a word copied: where it was
    assert reverse("<!--c-->one two") == "<!--c-->TWO ONE"


def test_without_tags_the_text_is_the_plain_translation():
    assert reverse("A man. A dog  runs.") == "MAN. A RUNS. DOG A"


def test_xml_keeps_namespaces_empty_elements_and_refuses_what_is_not_well_formed():
    source = ('<p xmlns:its="http://www.w3.org/2005/11/its" xml:lang="de">Say <its:x its:translate="no">Kept</its:x> '
              'and <g id="1">this word</g><ph id="2"/> too.</p>')
    out = reverse(source, "xml")
    assert markup_tags(out, "xml") == markup_tags(source, "xml")
    assert '<its:x its:translate="no">Kept</its:x>' in out and '<g id="1">' in out and '<ph id="2"/>' in out
    assert markup_text(out, "xml") == "TOO. WORD THIS AND SAY Kept"  # the kept element: after its word before
    with pytest.raises(MarkupError, match="not well-formed XML"):
        parse("<a>unclosed", "xml")
    # A line with its XML declaration (was: "XML declaration allowed only at the start of the document")
    assert reverse('<?xml version="1.0" encoding="UTF-8"?> <doc>one two</doc>', "xml") == (
        '<?xml version="1.0" encoding="UTF-8"?> <doc>TWO ONE</doc>')


def test_a_whole_document_keeps_its_doctype_html_head_and_body_and_its_title_is_translated():
    source = ('<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>A title</title></head>'
              '<body><p>A <b>man</b>.</p></body></html>')
    assert reverse(source) == ('<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>TITLE A</title>'
                               '</head><body><p>MAN. A</p></body></html>').replace("MAN.", "<b>MAN</b>.")


def test_an_empty_element_inside_a_word_takes_no_words_with_it():
    """<wbr> and <img> inside a word (soft hyphenation, an inline icon) cover no character: they once
    took the word's aligned target words as their place, and a void element's place is dropped."""
    assert reverse("<p>Donaudampf<wbr>schifffahrt ist lang.</p>") == "<p><wbr>LANG. IST DONAUDAMPFSCHIFFFAHRT</p>"
    out = reverse('<p>Klick<img src="i.png">hier bitte. Danke schön.</p>')
    assert markup_text(out) == "BITTE. KLICKHIER SCHÖN. DANKE" and '<img src="i.png">' in out


def test_a_document_keeps_what_comes_before_its_doctype_and_after_its_end():
    """A page saved by a browser starts with a comment, a file may start with a byte-order mark: the
    page is still a document (its doctype, html, head and body kept); comments between the doctype
    and <html>, and content after </html> or after a fragment's stray </body>, are kept and translated."""
    saved = ('<!-- saved from url=(0014)about:internet -->\n<!DOCTYPE html>\n<html lang="de"><head><title>A title'
             '</title></head><body class="x"><p>A man.</p></body></html>\n')
    assert reverse(saved) == saved.replace("A title", "TITLE A").replace("A man.", "MAN. A")
    assert reverse("\ufeff<!DOCTYPE html><html><body>one two</body></html>") == (
        "\ufeff<!DOCTYPE html><html><body>TWO ONE</body></html>")
    assert reverse('<!DOCTYPE html><!-- c --><html lang="de"><body>x</body></html>') == (
        '<!DOCTYPE html><!-- c --><html lang="de"><body>X</body></html>')
    assert reverse("<html><body><p>One.</p></body></html>\n<p>Two here.</p>") == (
        "<html><body><p>ONE.</p></body></html><p>HERE. TWO</p>")
    assert reverse("<p>One.</p></body>\n<p>Two here.</p>") == "<p>ONE.</p>\n<p>HERE. TWO</p>"
    # A text that starts with body or head is a document without its html (was a fragment: both dropped)
    assert reverse('<body class="x"><p>one two</p></body>') == '<body class="x"><p>TWO ONE</p></body>'
    assert reverse("<head><title>one two</title></head><body>three</body>") == (
        "<head><title>TWO ONE</title></head><body>THREE</body>")
    # A comment left open runs to the end, closed (was: the parser's </body></html> inside it)
    assert reverse("one two <!-- a note") == "TWO ONE <!-- a note-->"
    # One in a script, a style or a comment is their text (was dropped from it)
    assert reverse('<script>var s = "</body>";</script> one two') == '<script>var s = "</body>";</script> TWO ONE'
    assert reverse("<!-- </html> --> one two<style>p::after { content: '</BODY>' }</style>") == (
        "<!-- </html> --> TWO ONE<style>p::after { content: '</BODY>' }</style>")


def test_a_processing_instruction_is_written_back_as_it_was_and_not_translated():
    """Was: libxml2's HTML parser made a comment of it (`<!--?php echo $x; ?-->`): a PHP template came back broken."""
    out = reverse("<p>Hello <?php echo $name; ?> world.</p>")  # placed as a comment is: after HELLO
    assert out.count("<?php echo $name; ?>") == 1 and "HELLO" in out and "WORLD." in out and "<!--" not in out
    for kept in ("<!-- <?php x ?> --> <b>a</b>", "<script>if (a<?b?>c) {}</script>"):  # inside: theirs
        assert write(parse(kept, "html"), "html") == kept


@pytest.mark.parametrize("text, expected", [
    ("A dog <div runs.", "RUNS. &lt;DIV DOG A"),  # a tag left open at the end is text (was `<div runs.<="" body="">`)
    ("Dogs run. <i", "RUN. DOGS &lt;I"),
])
def test_a_tag_left_open_at_the_end_is_text(text, expected):
    assert reverse(text) == expected


def test_a_script_left_open_at_the_end_takes_no_wrapper_tags():
    """Was: `x <script>a <b` came back with `</body></html>` inside the script, the wrapper's."""
    assert write(parse("x <script>a <b", "html"), "html") == "x <script>a <b</script>"


@pytest.mark.parametrize("text", [
    '<p title="a <!-- b">Dogs run.</p>',  # "<!--" in an attribute's value, and in a script's text,
    '<script>var s = "<!--";</script><p>Dogs run.</p>',  # opens no comment: "-->" was added, as text
])
def test_a_comment_mark_inside_a_tag_or_a_script_opens_no_comment(text):
    out = reverse(text)
    assert out.endswith(">RUN. DOGS</p>") and "--&gt;" not in out and "--&gt;" not in markup_text(out), out


def test_the_obsolete_void_elements_stay_void():
    """Was: `<frame src="a">` came back as `<frame src="a"></frame>`, which no browser reads so."""
    assert write(parse('<frameset><frame src="a"><frame src="b"></frameset>', "html"), "html") == (
        '<frameset><frame src="a"><frame src="b"></frameset>')


def test_a_doctype_alone_comes_back_as_it_is():
    """Was: an error ("not an HTML document: Document is empty") that stopped `mt translate --format
    html` on a page given line by line, at its first line."""
    for text in ("<!DOCTYPE html>", "<!doctype html>  "):
        assert write(parse(text, "html"), "html") == text


def test_markup_indentation_tabs_do_not_cut_a_sentence():
    """A tab of a pretty-printed page inside a sentence: the sentence is one piece, not cut at it."""
    (segment,) = segments(parse("<p>This is a long\n\t\tsentence that wraps.</p>", "html"))
    assert "\t" not in segment.plain and sentence_spans(segment.plain, "en") == [(0, len(segment.plain))]


def test_a_processing_instruction_in_an_attribute_or_a_title_is_its_text():
    """The marker that keeps a processing instruction was left in an attribute and a title's text."""
    for text in ('<a title="<?php echo $t ?>">Link</a>', "<title>A <?= $t ?> page</title>"):
        out = write(parse(text, "html"), "html")
        assert "mt-processing-instruction" not in out and ("&lt;?" in out or "<?" in out), out


def test_no_space_is_added_beside_a_kept_element_in_a_script_written_without_spaces():
    (segment,) = segments(parse("Run <code>ls</code> now.", "html"))
    nodes = place_segment(segment, sentence_spans(segment.plain, "en"), ["运行现在。"], ["0-0 1-1"])
    assert render(parse("Run <code>ls</code> now.", "html"), "html", iter([nodes])) == "运行现在。<code>ls</code>"


def test_an_address_stands_before_the_punctuation_after_it_and_a_link_of_its_url_keeps_its_spaces():
    """The model reads "Visit ." for "Visit https://example.com.": its word "Sie." took the period, and
    the address went after it ("Besuchen Sie. https://..."); a link written as its URL took the space
    before it inside ("Sie.<a> https://x.com</a>")."""
    from mt.text.markup import parse, render, segments
    from mt.text.placement import place_segment

    cases = [
        ("Visit https://example.com.", "Besuchen Sie.", "0-0 0-1", "Besuchen Sie https://example.com."),
        ("Write to me@example.com, please.", "Schreib mir, bitte.", "0-0 1-1 2-2",
         "Schreib mir me@example.com, bitte."),
        ('Visit <a href="https://x.com">https://x.com</a>.', "Besuchen Sie.", "0-0 0-1",
         'Besuchen Sie <a href="https://x.com">https://x.com</a>.'),
        ('Visit <a href="https://x.com">https://x.com</a> now.', "Besuchen Sie jetzt.", "0-0 0-1 1-2",
         'Besuchen Sie <a href="https://x.com">https://x.com</a> jetzt.'),
        # the brackets or quotes right around one stay around it (they were left behind, empty: "x.org()")
        ("See the article (https://x.org/Foo_(bar)).", "Siehe den Artikel.", "0-0 1-1 2-2",
         "Siehe den Artikel (https://x.org/Foo_(bar))."),
        ('He said "https://example.com".', "Er sagte.", "0-0 1-1", 'Er sagte "https://example.com".'),
        # at the edge of an ordinary element: its space kept (the edge rule is a link-of-its-URL's)
        ("See <b>https://x.org for details</b>.", "Einzelheiten siehe.", "0-1 2-0 3-0",
         "<b>Einzelheiten https://x.org</b> siehe."),
    ]
    for source, translation, alignment, expected in cases:
        nodes = parse(source, "html")
        (segment,) = segments(nodes)
        placed = place_segment(segment, [(0, len(segment.plain.rstrip()))], [translation], [alignment])
        assert render(nodes, "html", iter([placed])) == expected, source


def test_an_address_beside_a_line_break_an_image_or_a_comment_is_kept_one_glued_to_a_placeholder_is_not():
    """Only what a word can run on through (an inline element, a placeholder) leaves an address in the
    text; beside a <br>, an image or a comment it went to the model again."""
    from mt.text.markup import parse, segments

    for source in ("Line one<br>https://x.org/docs", "Visit https://x.org<br>Next", "Web: <img src=a.png>www.x.org here",
                   "See <!-- c -->https://x.org"):
        (segment,) = segments(parse(source, "html"))
        assert "x.org" not in segment.plain and any(getattr(i.node, "address", False) for i in segment.items), source
    (segment,) = segments(parse('See https://x.org/<span translate="no">%s</span>/docs', "html"))
    assert "https://x.org/" in segment.plain  # its tail (/docs) is beyond the placeholder


def test_an_element_on_part_of_a_word_the_translation_copies_covers_the_same_characters():
    """H<sub>2</sub>O came back as <sub>H2O</sub>: a word covered in part counted as covered whole."""
    assert reverse("H<sub>2</sub>O is water.") == "WATER. IS H<sub>2</sub>O"
    assert reverse("a room of 5 m<sup>2</sup>.") == "M<sup>2</sup>. 5 OF ROOM A"
    assert reverse("Ctrl+<sub>C</sub> copies") == "COPIES CTRL+<sub>C</sub>"
    # a word translated otherwise: the element goes around the whole word, as before
    assert aligned("der <b>Donau</b>dampfer", "the Danube steamer", "0-0 1-1 1-2") == "the <b>Danube steamer</b>"
    # the same word in other letters of another length ("MASSE" is "Maße" folded): not copied, the whole word
    assert aligned("die MASS<b>E</b> ist gut", "the Maße is good", "0-0 1-1 2-2 3-3") == "the <b>Maße</b> is good"


def test_a_footnote_mark_keys_and_formulas_are_kept_as_they_are():
    """`runs<sup>1</sup>` came back with the mark gone or translated and the footnote's link around
    other words; keys, formulas and variables were translated."""
    assert reverse("a dog runs<sup>1</sup> and sleeps<sup><a href='#fn2'>[2]</a></sup>.") == (
        'SLEEPS<sup><a href="#fn2">[2]</a></sup>. AND RUNS<sup>1</sup> DOG A'
    )
    assert reverse("5 m<sup>2</sup> big") == "BIG M<sup>2</sup> 5"
    # the word translated: the mark after its translation (was: around it, the "1" gone)
    assert aligned("ein Hund rennt<sup>1</sup> und", "a dog runs and", "0-0 1-1 2-2 3-3") == "a dog runs<sup>1</sup> and"
    # (after the translation of the word before them, as every element kept verbatim)
    assert reverse("press <kbd>Enter</kbd> now") == "NOW PRESS <kbd>Enter</kbd>"
    assert reverse("area <math><mi>r</mi></math> big") == "BIG AREA <math><mi>r</mi></math>"
    # within a word, or with letters, or after a space, it is read with its text as before
    assert reverse("H<sub>2</sub>O is water") == "WATER IS H<sub>2</sub>O"
    assert reverse("the 5<sup>th</sup> dog") == "DOG 5<sup>TH</sup> THE"
    assert reverse("see <b>42</b> now") == "NOW <b>42</b> SEE"


def test_punctuation_outside_an_element_stays_outside_its_translation():
    """`<a>snow</a>.` came back `<a>Schnee.</a>`: the target word, its full stop with it, went inside."""
    assert aligned("in the <a>snow</a>.", "im Schnee.", "0-0 1-0 2-1") == "im <a>Schnee</a>."
    assert aligned("a <b>bike</b>!", "ein Fahrrad!", "0-0 1-1") == "ein <b>Fahrrad</b>!"
    assert aligned('he said "<i>yes</i>"', "er sagte „ja“", "0-0 1-1 2-2") == "er sagte „<i>ja</i>“"
    assert aligned("(<b>see</b> above)", "(siehe oben)", "0-0 1-1") == "(<b>siehe</b> oben)"
    # punctuation inside the element stays inside
    assert aligned("in the <a>snow.</a>", "im Schnee.", "0-0 1-0 2-1") == "im <a>Schnee.</a>"


KEPT = '<span translate="no">{}</span>'


def test_an_empty_element_glued_to_a_word_stays_with_that_words_translation():
    """`File '%s' not found` came back "Datei%s '' ...": an element inside a word, or at its start,
    went after the word before it."""
    ph = KEPT.format("%s")
    assert aligned(f"File '{ph}' not found", "Datei '' nicht gefunden", "0-0 1-1 2-3 3-2") == \
        f"Datei '{ph}' nicht gefunden"
    assert aligned(f"Size ({ph}) exceeded", "Größe () überschritten", "0-0 1-1 2-2") == f"Größe ({ph}) überschritten"
    name = KEPT.format("{file}")
    assert aligned(f"Open {name}.txt now", "Öffne jetzt .txt", "0-0 1-2 2-1") == f"Öffne jetzt {name}.txt"
    note = KEPT.format("[^b]")  # a footnote's mark before the punctuation of a word translated otherwise
    assert aligned(f"and more{note}.", "und mehr.", "0-0 1-1") == f"und mehr{note}."
    assert aligned(f"said \"{ph}here\"", "sagte \"hier\"", "0-0 1-1") == f"sagte \"{ph}hier\""
    pair = KEPT.format("%d") + KEPT.format("%%")  # side by side in the source: no space put between them
    assert aligned(f"Progress: {pair} complete", "Fortschritt: vollständig", "0-0 1-1") == \
        f"Fortschritt: {pair} vollständig"
