"""The configuration: its schema (typed dataclasses), the corpus source specs, recipes and presets, and
resolving them with flags into one config. Pure Python: nothing here needs torch."""
