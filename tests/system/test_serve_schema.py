"""`mt serve` fuzzed against its own OpenAPI schema by schemathesis: a live server on a loopback
port, every route, requests that fit the schema and requests that break it. No answer may be a 5xx,
every answer must match the schema (its status among the documented ones, a 4xx as {"error": ...}),
and what breaks the schema must be refused. Bounded: a few dozen examples per route and kind.
Two refusals of schema-valid requests are what the schema cannot describe. `source: auto`: a text
in a language the model cannot read (the fuzzer's strings are often Greek, Cyrillic or Chinese) is
400, "xx is not supported" (docs/serving.md); that answer, and no other 4xx, is let through there.
/translate_file: the file's content (the fuzzer's bytes, named document.txt, are seldom text) is
400 or 413 naming the file, and only that is let through there."""

from __future__ import annotations

import pytest
import schemathesis
from helpers import Served, load
from hypothesis import HealthCheck, given, settings
from schemathesis.config import ChecksConfig
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from mt.apps.serve.app import Limits, build_app

LIMITS = Limits(max_wait_ms=0, max_lines=4, max_chars=400, max_beam=3, max_attention_tokens=40)
EXAMPLES = 25  # per route and kind (positive, negative): about 400 requests in all


@pytest.fixture(scope="module")
def live(trained_experiment):
    translator = load(trained_experiment)
    translator.decode_cfg.max_len_b = 8  # short answers: the fuzzer's time goes to requests, not search
    with Served(build_app(translator, LIMITS, threads=1)) as served:
        yield served


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(GenerationMode), ids=str)
def test_no_request_crashes_the_server_or_breaks_its_schema(live, mode, single_thread):
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    # What breaks the schema is refused in the documented shape: 413 for a size over a limit too.
    schema.config.checks.negative_data_rejection = ChecksConfig.from_dict(
        {"negative_data_rejection": {"expected-statuses": [400, 403, 413, 422]}}).negative_data_rejection
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "POST /translate", "POST /detect", "POST /v1/translate", "POST /v1/attention", "GET /languages", "GET /health",
        "POST /translate_file", "GET /download_file/{filename}", "GET /frontend/settings"}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and operation.method.upper() == "GET":
            continue  # no body, no parameters: nothing to break

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)
        def fuzz(case):
            positive = mode is GenerationMode.POSITIVE
            auto = positive and isinstance(case.body, dict) and case.body.get("source") == "auto"
            upload = positive and case.path == "/translate_file"
            response = case.call_and_validate(base_url=live.url,
                                              excluded_checks=[positive_data_acceptance] if auto or upload else None)
            if upload and response.status_code != 200:
                assert response.status_code in (400, 413) and response.json()["error"].startswith("file")
            elif auto and response.status_code != 200:
                assert response.status_code == 400 and "is not supported: the text looks like" in response.json()["error"]

        fuzz()


def test_a_text_found_in_the_target_is_answered_as_the_schema_says(live):
    """/translate's detectedLanguage is the target for a text already in it; the schema listed only the
    sources, so a client generated from it could not read that answer."""
    import httpx

    spec = httpx.get(f"{live.url}/openapi.json", timeout=30).json()
    schema = spec["paths"]["/translate"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    english = "A man in a blue shirt is riding his bicycle down a busy street."
    answer = httpx.post(f"{live.url}/translate", json={"q": english, "source": "auto", "target": "en"}, timeout=60)
    assert answer.status_code == 200 and answer.json()["detectedLanguage"]["language"] == "en"
    single, listed = schema["properties"]["detectedLanguage"]["anyOf"]
    assert "en" in single["properties"]["language"]["enum"] and listed["items"] == single
