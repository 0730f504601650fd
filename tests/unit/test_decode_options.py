"""mt.decoding.options: what a call asks of the search is checked when it is made, by the flags' words."""

from __future__ import annotations

import pytest

from mt.decoding.options import DecodeOptions, Sampling
from mt.errors import ConfigError


@pytest.mark.parametrize("make, needle", [
    (lambda: DecodeOptions(beam=3.5), "--beam 3.5: expected an integer"),  # was torch's TypeError in the search
    (lambda: DecodeOptions(nbest=2.0), "--nbest 2.0: expected an integer"),
    (lambda: DecodeOptions(beam="3"), "--beam '3': expected an integer"),  # was a bare TypeError
    (lambda: DecodeOptions(alpha="0.6"), "--alpha '0.6': expected a number"),
    (lambda: DecodeOptions(alignment_layer=True), "--alignment-layer True: expected an integer"),
    (lambda: Sampling(top_k=2.5), "--top-k 2.5: expected an integer"),
    (lambda: Sampling(temperature="1"), "--temperature '1': expected a number"),
    (lambda: Sampling(temperature=float("inf")), "--temperature inf: must be above 0 and finite"),  # was NaN in torch
    (lambda: Sampling(temperature=float("nan")), "--temperature nan: must be above 0 and finite"),
])
def test_an_option_of_another_type_is_refused_when_it_is_made(make, needle):
    with pytest.raises(ConfigError) as exc:
        make()
    assert str(exc.value) == needle
    assert DecodeOptions(alpha=1, max_len_a=2).alpha == 1  # an integer is a number
