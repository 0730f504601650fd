"""mt.apps.serve.requests, the request parsing of `mt serve`, against what strangers write (hypothesis):
whatever the unicode, sizes, nesting and numbers, each part either gives its value or raises the one
documented error (ApiError with a 4xx and one line) and nothing else. The same for the grammar of
corpus source specs is in test_sources_properties.py."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from helpers import tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from mt.apps.serve import requests as req
from mt.config.schema import DecodeConfig
from mt.decoding.options import DecodeOptions

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
NUMBERS = st.one_of(st.integers(), st.integers(min_value=-10**400, max_value=10**400), st.floats(allow_nan=True),
                    st.sampled_from([0, 1, -1, 2**53, 1e308, -1e308, math.inf, -math.inf, math.nan]))
TEXT = st.text(st.characters(), max_size=40)  # every code point, unpaired surrogates included
JSON = st.recursive(st.none() | st.booleans() | NUMBERS | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
FIELDS = ["text", "beam", "alpha", "length_penalty", "nbest", "alignments", "source", "target", "layer", "encoder"]
MODEL = tiny_model()


def refused_properly(exc: req.ApiError) -> None:
    assert 400 <= exc.status < 500 and exc.message and "\n" not in exc.message
    exc.message.encode("utf-8")  # the answer can be written (no unpaired surrogate left in it)


@SETTINGS
@given(st.one_of(TEXT, JSON.map(lambda v: json.dumps(v, ensure_ascii=False) if _dumpable(v) else "{"),
                 st.integers(1, 6000).map(lambda n: "[" * n), st.integers(1, 6000).map(lambda n: "9" * n)))
def test_json_bodies_give_an_object_or_a_4xx(text):
    try:
        assert isinstance(req.json_object(text, 422), dict)
    except req.ApiError as exc:
        refused_properly(exc)


@SETTINGS
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6))
def test_v1_fields_give_options_or_a_4xx(data):
    try:
        texts = req.text_items(data)
        assert texts and all(isinstance(t, str) and "\n" not in t for t in texts)
    except req.ApiError as exc:
        refused_properly(exc)
    try:
        options = req.v1_options(data, DecodeConfig(), 8, MODEL)
        assert isinstance(options, DecodeOptions) and 1 <= options.nbest <= options.beam <= 8
        assert math.isfinite(options.alpha) and options.alpha >= 0
    except req.ApiError as exc:
        refused_properly(exc)
    for check in (lambda: req.check_pair(data), lambda: req.flag(data, "encoder"),
                  lambda: req.check_key("s3cret", data.get("text"))):
        try:
            check()
        except req.ApiError as exc:
            refused_properly(exc)


@SETTINGS
@given(JSON, st.booleans())
def test_whole_numbers_are_ints_in_range_or_a_4xx(value, text):
    try:
        number = req.whole_number(value, "beam", 422, 1, 8, text=text)
        assert number is None or (isinstance(number, int) and 1 <= number <= 8)
    except req.ApiError as exc:
        refused_properly(exc)


@SETTINGS
@given(st.text(st.characters(blacklist_categories=["Cs"]), max_size=60))
def test_split_lines_gives_the_text_back_with_its_own_breaks(text):
    lines, breaks = req.split_lines(text)
    assert "".join(line + brk for line, brk in zip(lines, breaks)) == text
    assert all("\n" not in line for line in lines) and breaks[-1] == ""


@SETTINGS
@given(st.binary(max_size=300), st.sampled_from(["application/json", "application/x-www-form-urlencoded",
                                                 "multipart/form-data; boundary=b", "text/plain", ""]),
       st.booleans())
def test_any_body_gives_libretranslate_fields_or_a_4xx(body, content_type, chunked):
    async def read():
        return await req.libre_fields(_request(body, content_type, chunked), limit=200)

    try:
        assert isinstance(asyncio.run(read()), dict)
    except req.ApiError as exc:
        refused_properly(exc)


def _dumpable(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (ValueError, TypeError):
        return False


def _request(body: bytes, content_type: str, chunked: bool) -> Request:
    """A real starlette Request over `body`, sent in pieces (as a chunked upload) or whole with its length."""
    headers = [(b"content-type", content_type.encode())]
    if not chunked:
        headers.append((b"content-length", str(len(body)).encode()))
    pieces = [body[i:i + 17] for i in range(0, len(body), 17)] if chunked else [body]
    messages = [{"type": "http.request", "body": p, "more_body": True} for p in pieces[:-1]]
    messages.append({"type": "http.request", "body": pieces[-1] if pieces else b"", "more_body": False})

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    # "app" as the server's scope has it: starlette then raises its form errors as HTTPException
    scope = {"type": "http", "method": "POST", "path": "/translate", "headers": headers, "query_string": b"", "app": None}
    return Request(scope, receive)


@pytest.mark.parametrize("size", [199, 200, 201, 5000])
def test_the_body_limit_holds_for_chunked_and_declared_bodies(size):
    for chunked in (False, True):
        try:
            text = asyncio.run(req.body_text(_request(b"a" * size, "text/plain", chunked), limit=200))
            assert size <= 200 and text == "a" * size
        except req.ApiError as exc:
            assert size > 200 and exc.status == 413
