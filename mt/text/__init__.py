"""The text around the model: sentences, markup and languages, between the commands and Translator."""
