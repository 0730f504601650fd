"""LibreTranslate's own clients, installed from the package index, against a real `mt serve` on loopback:
libretranslatepy (urllib: URL-encoded forms, a GET with a body for /languages) and deep-translator's
LibreTranslator (requests: every field in the query string, an empty body, and an api_key always).
Every call they make is answered as LibreTranslate answers it, with and without a server key; /detect,
`source: auto` and the fields read from the query string, a form or JSON, on conftest's bilingual
(de -> en) toy model. The multilingual model's detection: tests/integration/test_multilingual.py.
"""

from __future__ import annotations

import json
import urllib.error
from urllib.parse import urlencode

import pytest
from helpers import LINES, Served, call, load, ok

from mt.apps.serve.app import Limits, build_app
from mt.decoding.options import DecodeOptions

pytestmark = pytest.mark.usefixtures("single_thread")

ENGLISH = "A man in a blue shirt is riding his bicycle down a busy street."
FRENCH = "Un homme en chemise bleue fait du vélo dans une rue très animée."
LISTED = [{"code": "de", "name": "German", "targets": ["en"]}, {"code": "en", "name": "English", "targets": []}]


@pytest.fixture(scope="module")
def expected(trained_experiment) -> list[str]:
    """The first three lines' translations, from the translator called directly."""
    return [hyps[0][0] for hyps in load(trained_experiment).search(LINES[:3], DecodeOptions())]


@pytest.fixture(scope="module")
def servers(trained_experiment):
    """(a server without a key, one with the key SECRET)."""
    limits = Limits(max_wait_ms=0)
    with Served(build_app(load(trained_experiment), limits, threads=1)) as plain, Served(
        build_app(load(trained_experiment), limits, api_key="SECRET", threads=1)
    ) as keyed:
        yield plain, keyed


def test_libretranslatepy_translates_detects_and_lists_as_from_libretranslate(servers, expected):
    from libretranslatepy import LibreTranslateAPI

    plain, keyed = servers
    for served, key in ((plain, None), (keyed, "SECRET")):
        client = LibreTranslateAPI(served.url, api_key=key)
        assert client.translate(LINES[0], "de", "en") == expected[0]
        assert client.translate(LINES[1], "auto", "en") == expected[1]
        assert client.detect(LINES[2]) == [{"confidence": 100.0, "language": "de"}]
        assert client.languages() == LISTED
    for call_it in (lambda c: c.translate(LINES[0], "de", "en"), lambda c: c.detect(LINES[0])):
        with pytest.raises(urllib.error.HTTPError) as refused:
            call_it(LibreTranslateAPI(keyed.url, api_key="WRONG"))
        assert refused.value.code == 403 and json.loads(refused.value.read()) == {"error": "Invalid API key"}
    client = LibreTranslateAPI(plain.url)
    assert client.detect(ENGLISH) == [{"confidence": 0.0, "language": "de"}]  # none of the model's: all 0
    # A text already in the target language comes back as it is, as from LibreTranslate (was a 400)
    assert client.translate(ENGLISH, "auto", "en") == ENGLISH
    assert client.translate(LINES[0], "de", "de") == LINES[0]
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.translate(FRENCH, "auto", "en")
    error = json.loads(refused.value.read())["error"]
    assert refused.value.code == 400 and error.startswith("fr is not supported: the text looks like French (fr)")
    assert "translates from de" in error


def test_spec_describes_the_libretranslate_api_where_clients_look_for_it(servers):
    """Dialect (GNOME's translation app) takes a server for a LibreTranslate instance only if GET /spec
    answers a document whose info.title is "LibreTranslate" (it was 404)."""
    plain, keyed = servers
    for served in (plain, keyed):  # no key needed to read it, as from LibreTranslate
        spec = ok(f"{served.url}/spec")
        assert spec["info"]["title"] == "LibreTranslate" and spec["info"]["x-implementation"].startswith("mt ")
        assert {"/translate", "/detect", "/languages", "/translate_file"} <= set(spec["paths"])
    assert ok(f"{plain.url}/openapi.json")["info"]["title"] == "mt"


def test_deep_translator_sends_its_fields_in_the_query_string_and_is_answered(servers, expected):
    from deep_translator import LibreTranslator
    from deep_translator.exceptions import AuthorizationException, ServerException

    plain, keyed = servers
    for served, key in ((plain, "not needed"), (keyed, "SECRET")):
        client = LibreTranslator(source="German", target="en", api_key=key, custom_url=f"{served.url}/")
        assert client.translate(LINES[0]) == expected[0]
        assert client.translate_batch(LINES[:3]) == expected
        auto = LibreTranslator(source="auto", target="English", api_key=key, custom_url=f"{served.url}/")
        assert auto.translate(LINES[1]) == expected[1]
    with pytest.raises(AuthorizationException):
        LibreTranslator(source="de", target="en", api_key="WRONG", custom_url=f"{keyed.url}/").translate(LINES[0])
    with pytest.raises(ServerException):  # 400: French is not what this model reads
        LibreTranslator(source="auto", target="en", api_key="x", custom_url=f"{plain.url}/").translate(FRENCH)


def test_fields_come_from_the_query_string_a_form_or_json_as_libretranslate_reads_them(servers, expected):
    plain, _ = servers
    url = f"{plain.url}/translate"
    query = urlencode({"q": LINES[0], "source": "de", "target": "en", "format": "text", "alternatives": "2"})
    answer = ok(f"{url}?{query}", raw=b"")  # deep-translator's shape: a POST with no body
    assert answer["translatedText"] == expected[0] and isinstance(answer["alternatives"], list)
    # A form's fields and the query's together (Flask's request.values); the query's first where both give one.
    both = ok(f"{url}?source=de&target=en", form={"q": LINES[1], "target": "fr"})
    assert both == {"translatedText": expected[1]}
    assert ok(f"{url}?target=fr&source=auto", {"q": LINES[2], "target": "en"}) == {  # JSON's over the query's
        "translatedText": expected[2],
        "detectedLanguage": {"confidence": 100.0, "language": "de"},
    }
    status, _, data = call(f"{url}?{urlencode({'q': 'Hallo.', 'source': 'de', 'target': 'en', 'format': 'markdown'})}",
                           raw=b"")
    assert status == 400 and data["error"].startswith("markdown format is not supported")
    status, _, data = call(f"{url}?source=de&target=en", raw=b"")
    assert status == 400 and data == {"error": "Invalid request: missing q parameter"}


def test_detect_answers_libretranslates_shape_and_auto_refuses_a_language_the_model_cannot_read(servers, expected):
    plain, keyed = servers
    assert ok(f"{plain.url}/detect", {"q": LINES[0]}) == [{"confidence": 100.0, "language": "de"}]
    assert ok(f"{plain.url}/detect?{urlencode({'q': LINES[0]})}", raw=b"") == [{"confidence": 100.0, "language": "de"}]
    assert ok(f"{keyed.url}/detect", {"q": LINES[0], "api_key": "SECRET"})[0]["language"] == "de"
    assert call(f"{keyed.url}/detect", {"q": LINES[0]})[0] == 400  # no key: LibreTranslate's 400
    assert call(f"{plain.url}/detect", {"q": ""})[2] == {"error": "Invalid request: missing q parameter"}
    assert ok(f"{plain.url}/detect", {"q": "12 345"}) == [{"confidence": 0.0, "language": "de"}]  # no letters: was 100
    # any length, as LibreTranslate answers (a document's text, to choose its model): judged by --max-chars
    long = " ".join([LINES[0]] * (Limits().max_chars // len(LINES[0]) + 5))
    assert ok(f"{plain.url}/detect", {"q": long}) == [{"confidence": 100.0, "language": "de"}]
    assert ok(f"{plain.url}/detect", {"q": [LINES[0]] * (Limits().max_lines + 5)})[0]["language"] == "de"
    listed = ok(f"{plain.url}/translate", {"q": [LINES[0], LINES[1]], "source": "auto", "target": "en"})
    assert listed == {"translatedText": expected[:2], "detectedLanguage": [{"confidence": 100.0, "language": "de"}] * 2}
    mixed = ok(f"{plain.url}/translate", {"q": [LINES[0], ENGLISH], "source": "auto", "target": "en", "alternatives": 1})
    assert mixed["translatedText"] == [expected[0], ENGLISH] and mixed["alternatives"][1] == []
    assert [d["language"] for d in mixed["detectedLanguage"]] == ["de", "en"]
    assert mixed["detectedLanguage"][1]["confidence"] > 50
    html = ok(f"{plain.url}/translate", {"q": f"<p>{ENGLISH}</p>", "source": "auto", "target": "en", "format": "html"})
    assert html["translatedText"] == f"<p>{ENGLISH}</p>"
    same = ok(f"{plain.url}/translate", {"q": [LINES[0], ENGLISH], "source": "en", "target": "en"})
    assert same == {"translatedText": [LINES[0], ENGLISH]}  # LibreTranslate's identity: nothing to translate
    status, _, data = call(f"{plain.url}/translate", {"q": [LINES[0], FRENCH], "source": "auto", "target": "en"})
    assert status == 400 and data["error"].startswith("fr is not supported")
    status, _, data = call(f"{plain.url}/translate", {"q": "Hallo.", "source": "fr", "target": "fr"})
    assert status == 400 and data["error"].startswith("fr is not supported")  # a language it does not know
    # Codes as LibreTranslate reads them: any case (was 400 "DE is not supported")
    assert ok(f"{plain.url}/translate", {"q": LINES[0], "source": "DE", "target": "En"}) == {
        "translatedText": expected[0]}
    status, _, data = call(f"{plain.url}/v1/translate", {"text": [LINES[0], ENGLISH], "source": "auto"})
    assert status == 400 and data["error"].startswith("text[1]: en is not supported")
    v1 = ok(f"{plain.url}/v1/translate", {"text": LINES[:2], "source": "auto"})
    assert [t["text"] for t in v1["translations"]] == expected[:2]
    assert ok(f"{plain.url}/languages") == LISTED
