"""Text around the model, between the commands and `Translator`: a text (a line, a request's item) cut
into sentences and long sentences into pieces the model translates well, translated and put back
together with the source's own whitespace (sentences, translate); HTML and XML fragments, their text
translated and their inline tags placed by word alignments (markup, placement, markup_translate);
which of the model's languages a text is in (language). docs/development.md: where new work goes."""
