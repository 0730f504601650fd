"""From lines to translations: the decoding options (options), the engine (translator), directions of a
multilingual model, word alignments, precision, and the output formats."""
