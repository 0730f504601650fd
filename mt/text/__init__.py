"""Text around the model: a text (a line, a request's item) cut into sentences and long sentences into
pieces the model translates well, translated through `Translator`, and put back together with the
source's own whitespace (docs/development.md: where new work goes)."""
