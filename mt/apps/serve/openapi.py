"""The API of `mt serve` as an OpenAPI schema (GET /openapi.json): what each route takes and answers,
written out here because the routes read their bodies themselves (mt.apps.serve.requests) to answer every
mistake in one documented shape. Clients generate code from it; tests/system/test_serve_schema.py fuzzes
the live server against it (schemathesis).
"""

from __future__ import annotations

from typing import Any, get_args

from mt.config.schema import MAX_ALPHA, LengthPenalty

ERROR = {
    "type": "object",
    "properties": {"error": {"type": "string"}},
    "required": ["error"],
    "additionalProperties": False,
}
# Not parameters of the schema: a fuzzer breaking a query field that the body gives again would see it
# accepted, as LibreTranslate accepts it.
QUERY_TOO = (
    "LibreTranslate's fields, as it reads them: JSON, a form, or the query string (deep-translator sends "
    "them there, with an empty body); a JSON body's field wins over the query's of the same name, the "
    "query's over a form's (as LibreTranslate's request.values)"
)
LINE = {"type": "string", "pattern": "^[^\\n]*$"}  # one line, as `mt translate` reads lines


def _or_null(schema: dict) -> dict:
    """A /v1 field that may also be null, which the server reads as not given (OpenAPI 3.1)."""
    enum = {"enum": [*schema["enum"], None]} if "enum" in schema else {}
    return {**schema, "type": [schema["type"], "null"], **enum}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[int, dict]:
    reasons = {
        400: "a bad request (LibreTranslate's shape: also its limits)",
        403: "no API key, or the wrong one",
        404: "no such file",
        413: "over a size limit",
        422: "a field of the wrong type or out of range",
        499: "the client left before its answer",
        503: "busy (Retry-After) or the worker has stopped",
        500: "a fault of the server, never of the request",
    }
    return {status: {"description": reasons[status], **_json(ERROR)} for status in statuses}


def routes(
    sources: list[str],
    targets: list[str],
    max_chars: int,
    max_lines: int,
    max_beam: int,
    max_attention_tokens: int,
    layers: int,
    v1_sources: list[str] | None = None,
    max_file_bytes: int = 10_000_000,
    file_formats: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """FastAPI's `openapi_extra` and `responses` of each route, for the source languages /translate takes
    ("auto" among them: identified) and /v1's (`v1_sources`, default the same: zero-shot
    sources and "auto", which /v1 reads as not given), its targets, its decoder's `layers`, the
    extensions of the documents /translate_file takes (`file_formats`) and these limits."""
    # The limits are on the whole request (characters, lines); the schema promises what always fits.
    item = {**LINE, "maxLength": max_chars // max_lines}
    text_list = {"type": "array", "items": item, "minItems": 1, "maxItems": max_lines}
    lines = f"^([^\\n]*\\n){{0,{max_lines - 1}}}[^\\n]*$"  # at most max_lines lines
    q = {"type": "string", "minLength": 1, "maxLength": max_chars, "pattern": lines}
    libre = {
        "type": "object",
        "required": ["q", "source", "target"],
        "properties": {
            "q": {"oneOf": [q, text_list]},
            "source": {"type": "string", "enum": sources},
            "target": {"type": "string", "enum": targets},
            # html: mt.text.markup_translate; "" is text, as LibreTranslate reads an empty field
            "format": {"type": "string", "enum": ["text", "html", ""]},
            # As LibreTranslate, more than the beam holds is not an error: it gives what it has
            # (--max-beam - 1 at most).
            "alternatives": {  # a negative number is none, as LibreTranslate reads it (no minimum)
                "type": "integer",
                "description": f"alternative translations wanted (none below 1); at most {max_beam - 1} are given",
            },
            "api_key": {"type": "string"},
        },
    }
    form = {**libre, "properties": {**libre["properties"], "q": q}}
    detection = {
        "type": "object",
        "required": ["confidence", "language"],
        "properties": {
            "confidence": {"type": "number", "minimum": 0, "maximum": 100},
            "language": {"type": "string", "enum": [lang for lang in sources if lang != "auto"]},
        },
    }
    # /translate's detectedLanguage is the target itself for a text already in it (it comes back as it is)
    known = list(dict.fromkeys([lang for lang in sources if lang != "auto"] + list(targets)))
    detected = {**detection, "properties": {**detection["properties"], "language": {"type": "string", "enum": known}}}
    pair = {
        "source": _or_null({"type": "string", "enum": v1_sources or sources}),
        "target": _or_null({"type": "string", "enum": targets}),
    }
    v1 = {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {"oneOf": [{**LINE, "maxLength": max_chars}, text_list]},
            **pair,
            "beam": _or_null({"type": "integer", "minimum": 1, "maximum": max_beam}),
            "alpha": {"type": "number", "minimum": 0, "maximum": MAX_ALPHA},
            "length_penalty": {"type": "string", "enum": list(get_args(LengthPenalty))},
            "nbest": _or_null({"type": "integer", "minimum": 1, "maximum": max_beam}),
            "alignments": {"type": "boolean"},
        },
    }
    attention = {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            # At most max_attention_tokens characters, and as many tokens: rare characters (byte pieces) can
            # make a shorter text too long (413).
            "text": {**LINE, "minLength": 1, "maxLength": max_attention_tokens, "pattern": "^[^\\n]*\\S[^\\n]*$"},
            # the translation to look at (forced decoding); without it, the model's own
            "translation": {
                **LINE,
                "minLength": 1,
                "maxLength": max_attention_tokens,
                "pattern": "^[^\\n]*\\S[^\\n]*$",
            },
            **pair,
            "layer": _or_null({"type": "integer", "minimum": 1, "maximum": layers}),
            "encoder": {"type": "boolean"},
        },
    }
    hypothesis = {
        "type": "object",
        "required": ["text", "score"],
        "properties": {"text": {"type": "string"}, "score": {"type": "number"}, "alignment": {"type": "string"}},
    }
    translation = {
        **hypothesis,
        "properties": {**hypothesis["properties"], "nbest": {"type": "array", "items": hypothesis}},
    }
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "/translate": {
            "openapi_extra": {
                "requestBody": {
                    "required": True,
                    "description": QUERY_TOO,
                    "content": {
                        "application/json": {"schema": libre},
                        "application/x-www-form-urlencoded": {"schema": form},
                    },
                },
            },
            "responses": {
                200: {
                    "description": "the translation(s), as LibreTranslate answers",
                    **_json(
                        {
                            "type": "object",
                            "required": ["translatedText"],
                            "properties": {
                                "translatedText": {"anyOf": [{"type": "string"}, strings]},
                                "alternatives": {"anyOf": [strings, {"type": "array", "items": strings}]},
                                "detectedLanguage": {"anyOf": [detected, {"type": "array", "items": detected}]},
                            },
                        }
                    ),
                },
                **_errors(400, 403, 413, 499, 500, 503),
            },
        },
        "/detect": _detect_route(q, text_list, detection),
        **_file_routes(sources, targets, max_file_bytes, file_formats or []),
        "/v1/translate": {
            "openapi_extra": {"requestBody": {"required": True, **_json(v1)}},
            "responses": {
                200: {
                    "description": "one translation per text item",
                    **_json(
                        {
                            "type": "object",
                            "required": ["translations", "warnings"],
                            "properties": {
                                "translations": {"type": "array", "items": translation},
                                "warnings": strings,
                            },
                        }
                    ),
                },
                **_errors(400, 403, 413, 422, 499, 500, 503),
            },
        },
        "/v1/attention": {
            "openapi_extra": {"requestBody": {"required": True, **_json(attention)}},
            "responses": {
                200: {
                    "description": "the sentence's attention weights (mt attention's JSON)",
                    **_json({"type": "object", "required": ["translation", "warnings"]}),
                },
                **_errors(400, 403, 413, 422, 499, 500, 503),
            },
        },
        "/languages": {
            "responses": {
                200: {
                    "description": "every language the model knows, each with the targets it reaches",
                    **_json({"type": "array", "items": {"type": "object", "required": ["code", "name", "targets"]}}),
                }
            }
        },
        "/health": {
            "responses": {
                200: {"description": "the worker is running", **_json({"type": "object", "required": ["status"]})},
                **_errors(503),
            }
        },
    }


def _detect_route(q: dict, text_list: dict, detection: dict) -> dict[str, Any]:
    """POST /detect's part: LibreTranslate's q (a text, or a list of them as JSON) and api_key, answered
    with the model's source languages. Any length (within the body's bytes): judged by its first
    --max-chars characters."""
    q = {key: value for key, value in q.items() if key not in ("maxLength", "pattern")}
    item = {key: value for key, value in text_list["items"].items() if key != "maxLength"}
    text_list = {"type": "array", "items": item, "minItems": 1}
    detect_form = {"type": "object", "required": ["q"], "properties": {"q": q, "api_key": {"type": "string"}}}
    detect = {**detect_form, "properties": {**detect_form["properties"], "q": {"oneOf": [q, text_list]}}}
    return {
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "description": QUERY_TOO,
                "content": {
                    "application/json": {"schema": detect},
                    "application/x-www-form-urlencoded": {"schema": detect_form},
                },
            },
        },
        "responses": {
            200: {
                "description": "the model's source languages, likeliest first (confidence 0 to 100; all 0: "
                "a language the model cannot read)",
                **_json({"type": "array", "items": detection}),
            },
            **_errors(400, 403, 413, 499, 500, 503),
        },
    }


def _file_routes(sources: list[str], targets: list[str], max_file_bytes: int, formats: list[str]) -> dict[str, Any]:
    """/translate_file, /download_file/{filename} and /frontend/settings: LibreTranslate's documents."""
    upload = {
        "type": "object",
        "required": ["file", "source", "target"],
        "properties": {
            "file": {
                "type": "string",
                "format": "binary",
                "description": f"the document, named with its extension ({', '.join(formats) or 'none'}); "
                f"at most {max_file_bytes} bytes",
            },
            "source": {"type": "string", "enum": sources},
            "target": {"type": "string", "enum": targets},
            "api_key": {"type": "string"},
        },
    }
    language = {"type": "object", "required": ["code", "name"]}
    settings = {
        "type": "object",
        "required": ["charLimit", "apiKeys", "keyRequired", "suggestions", "supportedFilesFormat", "language"],
        "properties": {
            "charLimit": {"type": "integer"},
            "apiKeys": {"type": "boolean"},
            "keyRequired": {"type": "boolean"},
            "suggestions": {"type": "boolean"},
            "filesTranslation": {"type": "boolean"},
            "supportedFilesFormat": {"type": "array", "items": {"type": "string"}},
            "maxBeam": {"type": "integer", "minimum": 1, "description": "mt's: the widest beam (--max-beam)"},
            "language": {"type": "object", "properties": {"source": language, "target": language}},
        },
    }
    return {
        "/translate_file": {
            "openapi_extra": {
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": upload,
                            # The file's name says its format: a part as LibreTranslate's page sends it.
                            "encoding": {
                                "file": {
                                    "headers": {
                                        "Content-Disposition": {
                                            "schema": {
                                                "type": "string",
                                                "example": 'form-data; name="file"; filename="document.txt"',
                                            }
                                        }
                                    }
                                }
                            },
                        }
                    },
                },
            },
            "responses": {
                200: {
                    "description": "where to download the translated document, as LibreTranslate answers",
                    **_json(
                        {
                            "type": "object",
                            "required": ["translatedFileUrl"],
                            "properties": {"translatedFileUrl": {"type": "string"}},
                        }
                    ),
                },
                **_errors(400, 403, 413, 499, 500, 503),
            },
        },
        "/download_file/{filename}": {
            "responses": {
                200: {
                    "description": "the translated document, as an attachment named as the upload was",
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                404: {"description": "no such file, or no longer kept (--file-ttl, --max-files)", **_json(ERROR)},
            },
        },
        "/frontend/settings": {
            "responses": {
                200: {"description": "LibreTranslate's page settings: limits and file formats", **_json(settings)}
            }
        },
    }
