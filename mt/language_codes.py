"""Language codes as mt's readers of text take them: LibreTranslate's (Argos's) own codes for two
languages, zt (Chinese in traditional characters) and pb (Brazil's Portuguese), are no ISO 639 codes,
so the tools that know a language by its code (sacrebleu, lingua, the sentence rules, a document's
language tag) read them here as the language they are."""

from __future__ import annotations

ARGOS_CODES = {"zt": "zh-TW", "pb": "pt-BR"}  # as language tags (BCP 47)
# LibreTranslate's requests' spellings of the models' codes: zh-Hans is a model's zh, zh-Hant its zt
LIBRE_ALIASES = {"zh-hans": "zh", "zh-hant": "zt", "pt-br": "pb"}


def base_language(code: str) -> str:
    """The ISO 639 code of a language code, without region or script: "pt-BR", "pt_BR" and "pb" are
    "pt", "zh-Hant" and "zt" "zh", "eng_Latn" "eng"."""
    base = code.replace("_", "-").split("-")[0].lower()
    return ARGOS_CODES[base].split("-")[0] if base in ARGOS_CODES else base


def language_tag(code: str) -> str:
    """`code` as a document names its language (BCP 47): zt is zh-TW, pb pt-BR; others as they are."""
    return ARGOS_CODES.get(code.lower(), code)
