"""Documents in, documents out: a file's translatable text found by its format's own library, translated
through the text layer (`mt.text`: sentences, markup), and written back in place.

`formats` names the formats and the extras they need; `encoding` reads and writes a text file's
encoding and line endings as they were; `units` is what a format asks to translate (texts or markup
fragments, all of a file's at once); `translate` reads a file, picks its format and writes the
translation. One module per format (txt, ...): each has `translate(content, units, options) -> content`
(`formats.DocumentOptions`), content being text for a text format and bytes for a binary one.
"""
