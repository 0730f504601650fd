"""mt.config.sources against what strangers write (hypothesis): whatever the unicode and the characters
of the grammar, a corpus source spec either parses or raises ConfigError with one line naming the
split's field, and nothing else. The same for `mt serve`'s requests is in test_serve_requests.py."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mt.config.sources import SPLITS, absolute_spec, parse_source
from mt.errors import ConfigError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
TEXT = st.text(st.characters(), max_size=40)  # every code point, unpaired surrogates included


@SETTINGS
@given(st.one_of(TEXT, st.text(st.sampled_from("files:tsvjolhdg:|@*.-0123456789/ \\\x00"), max_size=40)),
       st.sampled_from(SPLITS))
def test_source_specs_parse_or_name_the_spec_in_one_line(spec, split):
    try:
        source = parse_source(spec, split, ("de", "en"))
        assert source.weight > 0
    except ConfigError as exc:
        assert str(exc).startswith(f"data.{split}:") and "\n" not in str(exc)
    try:
        absolute_spec(spec)
    except ConfigError as exc:
        assert "\n" not in str(exc)
