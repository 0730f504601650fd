"""Reading and checking what a request to `mt serve` asks (`mt.apps.serve.app` has the routes): the body as
UTF-8 text, JSON or LibreTranslate's forms, the API key, the language pair, the size limits and the
decoding options of /v1. Each refusal is an `ApiError`: a status and a one-line message naming the
field, answered as {"error": MESSAGE}. /v1's types are JSON's (as JSON Schema reads them, GET
/openapi.json): a whole number is an integer, 4 or 4.0 (JSON has one kind of number), never "4"; a
number an integer or a float (not "0.5"), a flag true or false; LibreTranslate's
/translate reads a form, where everything is text, so there "2" is a number too.
"""

from __future__ import annotations

import hmac
import json
import math
import re
from typing import Any, Callable, get_args
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect

from mt.config.schema import MAX_ALPHA, LengthPenalty
from mt.decoding.options import DecodeOptions
from mt.documents.encoding import BOMS
from mt.errors import ConfigError


class ApiError(Exception):
    """An answer other than 200: the status, the one-line message of {"error": ...}, extra headers. The
    message may quote what the client sent: an unpaired surrogate there is written as its escape."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


async def bounded_body(
    request, limit: int, declared_too_big: str, too_big: str, hold: Callable[[int], None] | None = None
) -> bytes:
    """The body, read as it arrives (a chunked body too, which declares no length: nothing past the
    limit is held): 413 with `declared_too_big` (formatted with `declared`, the Content-Length) or
    `too_big` once it passes `limit` bytes, 499 (logged only) when the client leaves before it has sent
    it all (or is cut off: `mt.apps.serve.http.guarded_protocol`). Kept as the request's body, where
    starlette's request.form() reads it. `hold`: told each chunk's bytes before it is kept (it may
    refuse them: a budget shared by the bodies being read)."""
    declared = request.headers.get("content-length", "")
    # ASCII digits only ("²".isdigit() too), and no more than any length: int() of either would raise
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        raise ApiError(413, declared_too_big.format(declared=declared))
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, too_big)
            if hold is not None:
                hold(len(chunk))
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(499, "the client closed the connection before it sent the whole request") from None
    request._body = b"".join(chunks)
    return request._body


async def body_text(request, limit: int) -> str:
    """The body as text (`bounded_body`), 400 when it is not UTF-8 (or what its byte-order mark says)."""
    raw = await bounded_body(
        request,
        limit,
        f"the request body has {{declared}} bytes: at most {limit}",
        f"the request body has more than {limit} bytes: at most {limit}",
    )
    # A byte-order mark names the encoding (Flask, which LibreTranslate's clients were written against,
    # reads JSON so): UTF-8's is dropped, UTF-16's and UTF-32's decode the rest.
    bom, codec = next(((b, c) for b, c in BOMS if raw.startswith(b)), (b"", "utf-8"))
    try:
        return raw[len(bom) :].decode(codec)
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the request body is not valid {codec.upper()} (byte {exc.start})") from None


def json_object(text: str, status: int) -> dict:
    """A JSON object, or `status` with where the JSON went wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(status, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError:  # Python's own limit on a number's digits (sys.get_int_max_str_digits)
        raise ApiError(status, "invalid JSON: a number with more digits than any field takes") from None
    except RecursionError:
        raise ApiError(status, "invalid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(status, "invalid JSON: expected an object, {...}")
    return data


def unicode_text(value: str, name: str, status: int) -> str:
    """`value` unless it holds an unpaired surrogate (JSON's "\\ud800" escape decodes to one; no UTF-8
    text can): that is not text, and the tokenizer refuses it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(status, f"{name}: not valid Unicode (an unpaired surrogate at character {exc.start})") from None
    return value


async def libre_fields(request, limit: int) -> dict:
    """LibreTranslate's fields as it reads them (Flask's request.values, or the JSON body): from the
    query string (deep-translator sends every field there, with no body), then a URL-encoded or
    multipart form, the query string's first where both give one; or a JSON body, with the query
    string's for the fields it lacks. q given several times in a query or in a form is a list (one of
    each is the query's)."""
    text = await body_text(request, limit)
    query = query_pairs(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        return {**form_fields(query), **json_object(text, 400)}
    if kind == "multipart/form-data":
        try:
            form = await request.form()
        except (MultiPartException, HTTPException) as exc:  # starlette's refusal (an HTTPException in an app)
            message = exc.message if isinstance(exc, MultiPartException) else exc.detail
            raise ApiError(400, f"the multipart form is not valid: {message}") from None
        pairs = [(name, value) for name, value in form.multi_items() if isinstance(value, str)]
    else:
        try:
            pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
        except UnicodeDecodeError:
            raise ApiError(400, "the form is not valid UTF-8") from None
    fields = {**form_fields(pairs), **form_fields(query)}  # the query's first, as Flask's request.values; q not merged
    # A browser's form writes each line break as CRLF; LibreTranslate reads its lines (and counts the
    # characters) with LF only, and so its own page's texts come back
    q = fields.get("q")
    if isinstance(q, str):
        fields["q"] = q.replace("\r\n", "\n")
    elif isinstance(q, list):
        fields["q"] = [item.replace("\r\n", "\n") for item in q]
    return fields


def query_pairs(request) -> list[tuple[str, str]]:
    """The query string's fields, in order (400 for one that is not UTF-8)."""
    try:
        return parse_qsl(
            request.scope.get("query_string", b"").decode("latin-1"), True, encoding="utf-8", errors="strict"
        )
    except UnicodeDecodeError:
        raise ApiError(400, "the query string is not valid UTF-8") from None


def form_fields(pairs: list[tuple[str, str]]) -> dict:
    """A form's fields: each name's first value, q's every value (a list when there are several)."""
    fields: dict[str, Any] = {}
    for name, value in pairs:
        if name == "q" and "q" in fields:
            if isinstance(fields["q"], str):
                fields["q"] = [fields["q"]]
            fields["q"].append(value)  # in place: a form of 100,000 q's is read in linear time
        else:
            fields.setdefault(name, value)
    return fields


async def v1_fields(request, limit: int, known: tuple[str, ...]) -> dict:
    """The JSON object of a /v1 request (whatever its content type says); an unknown field is 422."""
    data = json_object(await body_text(request, limit), 422)
    for name in data:
        if name not in known:
            shown = name if name.isidentifier() and len(name) <= 40 else json.dumps(name)[:40]  # as sent, bounded
            raise ApiError(422, f"{shown}: unknown field; expected {', '.join(known)}")
    return data


def header_key(request) -> str | None:
    """The key of `Authorization: Bearer KEY` or `X-API-Key: KEY`."""
    authorization = request.headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return request.headers.get("x-api-key")


def field_key(fields: dict, header: str | None) -> str | None:
    """The key a LibreTranslate request gives: its api_key field, else the header's. A field that is
    not a string is the client's mistake whatever the server's key (400, as the schema says)."""
    value = fields.get("api_key")
    if value is not None and not isinstance(value, str):
        raise ApiError(400, f"api_key: expected a string, got {json.dumps(value)[:40]}")
    return value or header


def key_matches(expected: str, given: Any) -> bool:
    """Whether `given` is the server's key (compared in constant time)."""
    if not given or not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


NO_KEY = "Please contact the server operator to get an API key"  # LibreTranslate's words: clients match them


def check_key(expected: str | None, given: Any, libre: bool = False) -> None:
    """Unless the server has no key or `given` is it: 403 for another key; for none, 403 (/v1), or on
    LibreTranslate's routes (`libre`) its 400 and its words (Dialect reads them as "a key is needed")."""
    if expected is None:
        return
    if not given or not isinstance(given, str):
        if libre:
            raise ApiError(400, NO_KEY)
        raise ApiError(403, f"{NO_KEY} (the header Authorization: Bearer KEY, or X-API-Key)")
    if not key_matches(expected, given):
        raise ApiError(403, "Invalid API key")


def check_pair(data: dict, status: int = 422) -> tuple[str | None, str | None]:
    """ "source" and "target" (None: not given, or source "auto"); `status` when one is not a non-empty
    string. Whether the model translates them is the direction's to say (mt.decoding.directions: 400)."""
    for name in ("source", "target"):
        value = data.get(name)
        if value is not None and (
            not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,35}", value)
        ):  # BCP 47's
            raise ApiError(status, f"{name}: expected a language code (a string), got {json.dumps(value)[:40]}")
    source = data.get("source")
    return (None if source == "auto" else source), data.get("target")


def check_size(texts: list[str], max_chars: int, max_lines: int) -> None:
    """413 past --max-chars characters or --max-lines lines."""
    chars = sum(len(text) for text in texts)
    if chars > max_chars:
        raise ApiError(413, f"text: {chars} characters, more than --max-chars {max_chars}")
    if len(texts) > max_lines:
        raise ApiError(413, f"text: {len(texts)} lines, more than --max-lines {max_lines}")


def text_items(data: dict) -> list[str]:
    """ "text" as a list of lines: a string or a non-empty list of strings, none with a line break
    ("\\n", as `mt translate` reads lines: `split_lines`)."""
    text = data.get("text")
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, list) or not texts or not all(isinstance(item, str) for item in texts):
        raise ApiError(422, "text: expected a string or a non-empty list of strings")
    for i, item in enumerate(texts):
        name = f"text[{i}]" if isinstance(text, list) else "text"  # the field as the request gave it
        unicode_text(item, name, 422)
        if "\n" in item:
            raise ApiError(422, f"{name}: a line break; give one line per item")
    return texts


def split_lines(text: str) -> tuple[list[str], list[str]]:
    """The lines of `text` and the break after each ("" after the last), split where `mt translate`
    splits its input: at "\\n" and "\\r\\n", not at the other characters str.splitlines() takes
    (U+2028, "\\x0c", a lone "\\r"...), which stay in their line. "".join(line + break) is `text`."""
    parts = re.split(r"(\r?\n)", text)
    return parts[0::2], [*parts[1::2], ""]


def whole_number(
    value: Any, name: str, status: int, low: int = 0, high: int | None = None, *, text: bool = False
) -> int | None:
    """An integer field, None staying None: JSON's integer, 4.0 too (module docstring), or with `text`
    (a form's field) its digits too."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if text and isinstance(value, str) and (digits := re.fullmatch(r"\s*([-+]?)([0-9]+)\s*", value)):
        sign, number = digits.groups()
        # More than 18 digits stand for "more than any limit": int() of a long run of digits is slow.
        value = int(sign + number) if len(number) <= 18 else int(sign + "1" + "0" * 18)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f" from {low} to {high}" if high is not None else f" {low} or more" if low > -(2**63) else ""
        raise ApiError(status, f"{name}: expected a whole number{bounds}, got {json.dumps(value)[:40]}")
    return value


def flag(data: dict, name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ApiError(422, f"{name}: expected true or false, got {json.dumps(value)[:40]}")
    return value


def v1_options(data: dict, defaults, max_beam: int, model) -> DecodeOptions:
    """The decoding options of a /v1 request within the server's limits; the config's where not given."""
    from mt.decoding.alignment import check_layer

    beam = whole_number(data.get("beam"), "beam", 422, 1, max_beam)
    nbest = whole_number(data.get("nbest"), "nbest", 422, 1, max_beam) or 1
    if beam is not None:  # a beam holds no more than its width: as many as it has (the schema cannot say nbest <= beam)
        nbest = min(nbest, beam)
    alpha = data.get("alpha", defaults.alpha)
    number = math.nan  # not a number: refused below
    if isinstance(alpha, float) or (isinstance(alpha, int) and not isinstance(alpha, bool) and abs(alpha) < 10**6):
        number = float(alpha)
    if not (math.isfinite(number) and 0 <= number <= MAX_ALPHA):  # written so that NaN fails too
        raise ApiError(422, f"alpha: expected a number from 0 to {MAX_ALPHA:g}, got {json.dumps(alpha)[:40]}")
    penalty = data.get("length_penalty", defaults.length_penalty)
    if penalty not in get_args(LengthPenalty):
        choices = ", ".join(get_args(LengthPenalty))
        raise ApiError(422, f"length_penalty: expected {choices}, got {json.dumps(penalty)[:40]}")
    layer = check_layer(model, None, "alignments") if flag(data, "alignments") else None
    try:
        return DecodeOptions(
            beam=beam, alpha=number, length_penalty=penalty, nbest=nbest, alignment_layer=layer
        ).resolved(defaults)
    except ConfigError as exc:  # what does not go together (nbest over beam): mt translate's words, as fields
        raise ApiError(422, re.sub(r"--([\w-]+)", lambda m: m.group(1).replace("-", "_"), str(exc))) from None
