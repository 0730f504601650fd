"""What each route of `mt serve` does, over one Translator and its Batcher: LibreTranslate's
/translate, /languages and /health, and mt's /v1/translate and /v1/attention (`mt.apps.serve.app` wires
them to HTTP). Requests are read and checked by `mt.apps.serve.requests`; every refusal is an ApiError.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import replace
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import Response

from mt.apps.serve.languages import Languages
from mt.apps.serve.queue import Batcher, Closed, QueueFull, WorkerFailed
from mt.apps.serve.requests import (
    ApiError,
    check_key,
    check_pair,
    check_size,
    field_key,
    flag,
    header_key,
    libre_fields,
    split_lines,
    text_items,
    unicode_text,
    v1_fields,
    v1_options,
    whole_number,
)
from mt.decoding.engine import refused
from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.errors import ConfigError
from mt.text.markup import Format, MarkupError, plain_text
from mt.text.markup_translate import (
    addresses_apply,
    addresses_kept,
    aligned,
    as_fragment,
    as_text,
    columns,
    finish,
    joined_columns,
    plan,
)
from mt.text.translate import join, kept_warnings, labels, piece_names, pieces, target_language

V1_TRANSLATE_FIELDS = ("text", "source", "target", "beam", "alpha", "length_penalty", "nbest", "alignments")
V1_ATTENTION_FIELDS = ("text", "translation", "source", "target", "layer", "encoder")
OPTIONS_KEPT = 1024  # sets of decoding options a server keeps made (`Service.options`)
PART = 256  # sentences of one request (a document's, a long text's) in the batcher's queue at once
PATIENCE = 30.0  # seconds a request's later part waits for room in a full queue before it gets 503
POLL = 0.05  # seconds between its looks at the queue


class Service:
    """The routes' work: `translator` behind `batcher`, within `limits` (mt.apps.serve.app.Limits)."""

    def __init__(self, translator: Translator, batcher: Batcher, limits, api_key: str | None, checkpoint: str):
        self.translator, self.batcher, self.limits = translator, batcher, limits
        self.directions = translator.directions  # the pairs it was trained on; tags if multilingual
        self.langs = Languages(self.directions)  # /languages, /detect, source auto
        self.api_key, self.checkpoint = api_key, checkpoint
        self.defaults = translator.decode_cfg  # what a request leaves unset
        _ = translator.src_tok.casing  # read now, not on the event loop at the first request (mt.text.casing)
        self._options: dict[tuple, DecodeOptions] = {}  # `options`: made once per set of request values
        self._refusals: dict[int, tuple[DecodeOptions, str | None]] = {}  # `refusal`: by the options' identity
        # The character limit is the contract; the body may spend up to 12 bytes on a character (an
        # emoji as JSON's "\\ud83d\\ude00", or percent-encoded in a form: %F0%9F%98%80), plus room for fields.
        self.body_limit = 12 * limits.max_chars + 65536

    async def translate(
        self, request: Request, lines: list[str], options: DecodeOptions, names: list[str] | None = None
    ) -> tuple[list[list], list[str]]:
        """Each line's hypotheses (`Translator.search`'s), through the batcher, and the cut-line warnings;
        the search is called off when the client leaves before its answer. The direction's tag goes
        into the sources: sentences of every direction may then share a batch. Each line is translated
        sentence by sentence, long sentences in pieces (mt.text.translate), and put back together. A
        line with a web or mail address goes through markup's search, which keeps the address as it
        is, as `mt translate` does (mt.text.translate.search). `names`: what a warning calls each line
        (default: input line N, N its place in `lines`)."""
        names = labels(len(lines), 0, names)
        # (an n-best list asked of such a line is a list if it is one sentence, as any line's)
        addressed = (
            [i for i, line in enumerate(lines) if addresses_kept(line, self.translator.src_tok)]
            if addresses_apply(options, True)
            else []
        )
        if any("\t" in lines[i] for i in addressed):  # each column its own line, as plain text's pieces are
            cells, owner = columns(lines, names)
            by_cell, cut = await self.translate(request, [cell for cell, _ in cells], options, [n for _, n in cells])
            return joined_columns(lines, owner, by_cell), cut
        if addressed:
            rest = [i for i in range(len(lines)) if i not in addressed]
            results: list[list] = [[] for _ in lines]
            cuts: list[str] = []
            if rest:
                found, cuts = await self.translate(request, [lines[i] for i in rest], options, [names[i] for i in rest])
                for i, hyps in zip(rest, found):
                    results[i] = hyps
            escaped = [as_fragment(lines[i]) for i in addressed]
            for i, hyps in zip(addressed, await self.translate_markup(request, escaped, options, "html", True)):
                results[i] = as_text(hyps)
            return results, cuts
        texts = lines
        if options.src_lang is None and len(self.translator.directions.sources()) > 1:
            # the sentence rules of each text's language, identified (lingua): not on the event loop
            lines, plans, kept = await asyncio.to_thread(pieces, self.translator, texts, options, True)
        else:
            lines, plans, kept = pieces(self.translator, texts, options, True)  # kept: unreadable, copied
        tag, target = self._tag(options.src_lang, options.tgt_lang), target_language(self.translator, options)
        todo, encoded, cuts = self.translator.encode_lines(lines, tag=tag, names=piece_names(plans, kept, names))
        cuts += kept_warnings(plans, kept, names)  # text in a script the model cannot read, copied
        request.state.lines, request.state.tokens = len(lines), sum(len(ids) for ids in encoded)
        options = self.options(("untagged", options), lambda: replace(options, src_lang=None, tgt_lang=None))
        found = await self.searched(request, encoded, options)
        empty = ("", 0.0) if options.alignment_layer is None else ("", 0.0, "")
        results = [[empty] for _ in lines]
        for i, hyps in zip(todo, found):
            results[i] = hyps
        return join(texts, plans, results, kept, options, target), cuts

    async def searched(self, request: Request, encoded: list[list[int]], options: DecodeOptions) -> list:
        """Each sentence's hypotheses, through the batcher: a request of more sentences than PART (a
        quarter of --max-queue at most: a pasted document) goes in in parts, one after the other, so
        that it never waits for an empty queue (which a busy server never has) nor fills it; its first
        part is refused at once when the queue is full, as any request is (503), a later one waits for
        room up to PATIENCE seconds: the request is under way."""
        part = max(1, min(PART, self.batcher.max_queue // 4))
        if len(encoded) <= part:
            return await wait_for(lambda: self.batcher.submit(encoded, options), request)
        found: list = []
        for start in range(0, len(encoded), part):
            chunk = encoded[start : start + part]
            patience = PATIENCE if start else 0.0
            found += await wait_for(lambda: self.batcher.submit(chunk, options), request, patience)  # noqa: B023
        return found

    async def libre_translate(self, request: Request) -> dict[str, Any]:
        """POST /translate, as LibreTranslate answers it."""
        fields = await libre_fields(request, self.body_limit)
        check_key(self.api_key, field_key(fields, header_key(request)), libre=True)
        texts = self._libre_texts(fields)  # and the languages as the model writes them (libre_pair)
        q, source = fields.get("q"), fields.get("source")
        src_lang = None if source == "auto" else source  # a multilingual model's tag is its target's
        # As LibreTranslate: a number (a form's digits too), fewer than 0 read as 0
        asked = max(0, whole_number(fields.get("alternatives") or 0, "alternatives", 400, low=-(2**63), text=True) or 0)
        alternatives = min(asked, self.limits.max_beam - 1)  # the beam gives at most --max-beam translations
        split = [split_lines(text) for text in texts]  # each text's lines and the breaks between them
        html = (fields.get("format") or "text") == "html"  # each text one fragment; no alternatives
        self._libre_size(texts, [[text] for text in texts] if html else [lines for lines, _ in split])
        nbest, target = 1 if html else alternatives + 1, fields["target"]
        detected: list[dict[str, Any]] = []
        same = set(range(len(texts))) if source == target else set()  # already in the target: as they are
        if source == "auto":  # 400 for another language it cannot read; a fragment by its text, not its tags
            detected, same = await self.langs.auto(
                await asyncio.to_thread(markup_texts, texts) if html else texts, target=target
            )
        todo = [i for i in range(len(texts)) if i not in same]
        translated, others = list(texts), [[] for _ in texts]
        if todo:
            options = self.options(
                ("libre", nbest, src_lang, target), lambda: self._libre_options(nbest, src_lang, target)
            )
            if html:
                found = await self.translate_markup(request, [texts[i] for i in todo], options, "html")
                done = [hyps[0][0] for hyps in found], [[] for _ in todo]
            else:
                done = await self._libre_lines(request, [split[i] for i in todo], options, alternatives)
            for i, text, alternative in zip(todo, *done):
                translated[i], others[i] = text, alternative
        answer: dict[str, Any] = {"translatedText": translated[0] if isinstance(q, str) else translated}
        if asked:
            answer["alternatives"] = others[0] if isinstance(q, str) else others
        if source == "auto":
            answer["detectedLanguage"] = detected[0] if isinstance(q, str) else detected
        return answer

    def _libre_options(self, nbest: int, src_lang: str | None, target: str) -> DecodeOptions:
        """A LibreTranslate request's search: the server's, nbest wide. LibreTranslate's API cannot be
        refused what CTranslate2 cannot decode as mt would (alternatives widen the beam, which a
        gnmt penalty at beam 1 allowed): those go to mt's search, as html's alignments do."""
        options = DecodeOptions(nbest=nbest, src_lang=src_lang, tgt_lang=target).resolved(self.defaults)
        return options if self.refusal(options) is None else replace(options, engine="auto")

    async def _libre_lines(
        self, request: Request, split: list[tuple[list[str], list[str]]], options: DecodeOptions, alternatives: int
    ) -> tuple[list[str], list[list[str]]]:
        """Each text's translation, line by line between its own line breaks, and its alternatives. A
        line too long for one search (with alternatives it is not cut into sentences) is translated in
        pieces instead, without alternatives: cut to the model's positions, its end was lost unsaid."""
        lines = [line for lines, _ in split for line in lines]
        results, cuts = await self.translate(request, lines, options)
        long = sorted({int(found.group(1)) - 1 for cut in cuts if (found := CUT_LINE.match(cut))})
        if long and options.nbest > 1:
            single = self.options(("single", options), lambda: replace(options, nbest=1))
            again, _ = await self.translate(request, [lines[i] for i in long], single)
            for i, hyps in zip(long, again):
                results[i] = hyps
        translated, others, at = [], [], 0
        for lines, breaks in split:
            hyps = results[at : at + len(lines)]
            at += len(lines)
            # a line of only spaces or tabs comes back as it is (it was emptied: "A.\n\t\nB." lost its tab)
            translated.append(
                "".join((h[0][0] if line.strip() else line) + brk for h, line, brk in zip(hyps, lines, breaks))
            )
            # a text of one line, between blank ones or breaks ("Hallo Welt.\n"), has that line's alternatives
            filled = [j for j, line in enumerate(lines) if line.strip()]
            found = distinct_alternatives(hyps[filled[0]], alternatives) if len(filled) == 1 else []
            others.append(
                [
                    "".join((alt if j in filled else line) + brk for j, (line, brk) in enumerate(zip(lines, breaks)))
                    for alt in found
                ]
            )
        return translated, others

    def options(self, key: tuple, make: Callable[[], DecodeOptions]) -> DecodeOptions:
        """make(), once per `key` (the request's values, with their types: 1, 1.0 and true differ):
        a request's options are several frozen dataclasses made and checked, tens of microseconds
        of the event loop, and a server's requests nearly all ask the same. Values refused while making
        them are not kept."""
        try:
            found = self._options.get(key)
        except TypeError:  # a value no dict can hold (a list): made, and refused, each time
            return make()
        if found is None:
            if len(self._options) >= OPTIONS_KEPT:
                self._options.clear()
            found = self._options[key] = make()
        return found

    def refusal(self, options: DecodeOptions) -> str | None:
        """`refused` for this server's translator, which does not change: asked once per options made by
        `options` (a dozen checks on the event loop at every request otherwise)."""
        kept = self._refusals.get(id(options))
        if kept is None or kept[0] is not options:  # an id is only the same options while they live
            if len(self._refusals) >= OPTIONS_KEPT:
                self._refusals.clear()
            kept = self._refusals[id(options)] = (options, refused(self.translator, options))
        return kept[1]

    def _libre_texts(self, fields: dict) -> list[str]:
        """q as a list of texts, once source, target and format are this server's."""
        q = fields.get("q")
        for name in ("q", "source", "target"):
            if fields.get(name) in (None, "", []):
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        check_pair(fields, 400)
        texts = [q] if isinstance(q, str) else q
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise ApiError(400, "Invalid request: q must be a string or a list of strings")
        for text in texts:
            unicode_text(text, "q", 400)
        self.libre_pair(fields, same=True)
        fmt = fields.get("format")
        fmt = "text" if fmt is None or fmt == "" else fmt  # as the schema: a string (0, false, {} are no format)
        if fmt not in ("text", "html"):
            shown = fmt if isinstance(fmt, str) and re.fullmatch(r"[\w-]{1,20}", fmt) else json.dumps(fmt)[:40]
            raise ApiError(400, f"{shown} format is not supported: this server translates text and html")
        return texts

    def libre_pair(self, fields: dict, same: bool = False) -> tuple[str | None, str]:
        """(source, None for auto; target) of a LibreTranslate request, once this server translates them
        (with `same`, a language the server knows into itself too: /translate's identity): 400 in
        LibreTranslate's words otherwise ("fr is not supported")."""
        source, target = fields.get("source"), fields.get("target")
        for name, value in (("source", source), ("target", target)):
            if value in (None, "", []):
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        check_pair(fields, 400)
        source = fields["source"] = self.langs.canonical(source)  # `DE`, LibreTranslate's `zh-Hans`
        target = fields["target"] = self.langs.canonical(target)
        if same and source == target and self.langs.knows(target):  # nothing to translate: the texts as they are
            return source, target
        try:
            self.directions.tag(None if source == "auto" else source, target)
        except ConfigError as exc:
            bad = source if source != "auto" and not self.directions.knows_source(source) else target
            message = str(exc).replace("(--tgt-lang)", "(target)").replace("(--src-lang)", "(source)")
            raise ApiError(400, f"{bad} is not supported: {message}") from None
        return (None if source == "auto" else source), target

    async def translate_markup(
        self, request: Request, texts: list[str], options: DecodeOptions, fmt: Format, alternatives: bool = False
    ) -> list[list[tuple]]:
        """Each text, an HTML or XML fragment, translated with its tags placed by word alignments
        (mt.text.markup_translate), its sentences through the batcher as every request's; 400 for a
        fragment that does not parse. `alternatives`: the n-best list `options` asks of a text of one
        sentence (markup_translate.finish)."""
        options = aligned(self.translator, options, alternatives)
        try:  # parsing and placing tags in a thread: a long fragment does not hold the event loop
            planned = await asyncio.to_thread(plan, self.translator, texts, fmt, options)
        except MarkupError as exc:
            raise ApiError(400, str(exc).replace("input line", "text")) from None
        # (`plan` read the pieces in the model's casing already; `finish` writes capitals back)
        results, _ = await self.translate(request, planned.sources, replace(options, recase=False))
        return await asyncio.to_thread(finish, planned, results)

    def _libre_size(self, texts: list[str], lines_of: list[list[str]]) -> None:
        """400, as LibreTranslate's limit, past --max-chars characters or --max-lines lines (those with
        text: a blank line is not searched; an html fragment is one, its line breaks being spaces; and
        each text at least one, so that a form of 44,000 empty q's is refused at once)."""
        chars = sum(len(text) for text in texts)
        lines = sum(max(1, sum(1 for line in item if line.strip())) for item in lines_of)
        limits = self.limits
        if chars > limits.max_chars or lines > limits.max_lines:
            size, limit = (
                (chars, limits.max_chars) if chars > limits.max_chars else (f"{lines} lines", limits.max_lines)
            )
            raise ApiError(400, f"Invalid request: request ({size}) exceeds text limit ({limit})")

    def _tag(self, src_lang: str | None, tgt_lang: str | None, status: int = 400) -> int | None:
        """The direction's tag (mt.decoding.directions), or `status` naming the field at fault (source or target)
        when the model cannot translate it."""
        try:
            return self.directions.tag(src_lang, tgt_lang)
        except ConfigError as exc:
            unknown_source = src_lang is not None and not self.directions.knows_source(src_lang)
            field, value = ("source", src_lang) if unknown_source else ("target", tgt_lang)
            message = str(exc).replace("(--tgt-lang)", "(target)").replace("(--src-lang)", "(source)")
            raise ApiError(status, f"{field} {value!r}: {message}" if value else f"{field}: {message}") from None

    async def languages(self) -> list[dict]:
        """GET /languages: every language the model knows, with the targets each reaches (languages.py)."""
        return self.langs.listing()

    async def detect(self, request: Request) -> list[dict[str, Any]]:
        """POST /detect, as LibreTranslate answers it: [{"confidence", "language"}], likeliest first."""
        fields = await libre_fields(request, self.body_limit)
        check_key(self.api_key, field_key(fields, header_key(request)), libre=True)
        return await self.langs.detect(fields, self.limits.max_chars)

    async def health(self) -> dict[str, Any]:
        batcher = self.batcher
        if batcher.failure is not None:  # a monitor restarts what answers 503 here
            raise ApiError(503, f"{batcher.failure}; restart mt serve")
        (source, target), *_ = self.directions.pairs
        return {
            "status": "ok",
            "source": source,
            "target": target,
            "directions": self.directions.names().split(", "),
            "checkpoint": self.checkpoint,
            "queued": batcher.queued(),
            "batches": batcher.batches,
            "batching": batcher.batching,
            "widest": batcher.widest,
            "most_at_once": batcher.most_beside,
            "sentences": batcher.sentences,
            "busy_seconds": round(batcher.busy_seconds, 3),
            "engine": self._engine(),
        }

    def _engine(self) -> str:
        """decode.engine, and what decodes under it (mt.decoding.engine): "mt", "ctranslate2: CTranslate2
        4.8.5 (int8, ...)", "auto: mt's search (why)"."""
        setting, engine = self.translator.decode_cfg.engine, self.translator.engine
        if engine is not None:
            return f"{setting}: {engine.describe()}"
        failure = self.translator.engine_failure
        return setting if failure is None else f"{setting}: mt's search ({failure})"

    async def v1_translate(self, request: Request) -> dict[str, Any]:
        """POST /v1/translate: one translation per text item, its score, n best and alignments as asked."""
        check_key(self.api_key, header_key(request))
        data = await v1_fields(request, self.body_limit, V1_TRANSLATE_FIELDS)
        src_lang, tgt_lang = (self.langs.canonical(code) for code in check_pair(data))  # `DE` is `de`, as on /translate
        self._tag(src_lang, tgt_lang)
        texts = text_items(data)
        check_size(texts, self.limits.max_chars, self.limits.max_lines)
        if data.get("source") == "auto":  # each line identified; one the model cannot read is refused
            names = [f"text[{i}]" for i in range(len(texts))] if isinstance(data.get("text"), list) else ["text"]
            await self.langs.auto(texts, names)  # /v1 translates what it is given: the target's own too
        names = ("beam", "nbest", "alpha", "length_penalty", "alignments")
        # Ellipsis for a field left out: a missing field takes the default, where null is refused
        values = tuple((type(v), v) for v in (data.get(name, ...) for name in names))
        options = self.options(
            ("v1", values, src_lang, tgt_lang),
            lambda: replace(
                v1_options(data, self.defaults, self.limits.max_beam, self.translator.model),
                src_lang=src_lang,
                tgt_lang=tgt_lang,
            ),
        )
        refusal_reason = self.refusal(options)  # a search CTranslate2 cannot decode as mt would
        if refusal_reason is not None:
            raise ApiError(422, re.sub(r"--([\w-]+)", lambda m: m.group(1).replace("-", "_"), refusal_reason))
        results, warnings = await self.translate(request, texts, options)
        return {"translations": [v1_translation(hyps, options) for hyps in results], "warnings": warnings}

    async def v1_attention(self, request: Request) -> dict[str, Any]:
        """POST /v1/attention: one sentence's attention weights, as `mt attention --format json` writes them."""
        from mt.apps.report.attention_maps import attention_maps
        from mt.decoding.alignment import check_layer

        check_key(self.api_key, header_key(request))
        data = await v1_fields(request, self.body_limit, V1_ATTENTION_FIELDS)
        tag = self._tag(*(self.langs.canonical(code) for code in check_pair(data)))
        text = data.get("text")
        if not isinstance(text, str) or not text.strip() or "\n" in text:  # one line, as mt translate reads lines
            raise ApiError(422, "text: expected one sentence (a non-empty string without line breaks)")
        unicode_text(text, "text", 422)
        # a translation to look at (the page's, made sentence by sentence, as /v1/translate makes it):
        # forced decoding, no search; without it the model translates the line as one sentence
        given = data.get("translation")
        if given is not None and (not isinstance(given, str) or not given.strip() or "\n" in given):
            raise ApiError(422, "translation: expected one line of text (a non-empty string without line breaks)")
        if given is not None:
            unicode_text(given, "translation", 422)
        check_size([text], self.limits.max_chars, self.limits.max_lines)
        layer = whole_number(data.get("layer"), "layer", 422, 1)  # 1-based, as `mt attention --layer`
        try:
            index = check_layer(self.translator.model, layer, "layer")
        except ConfigError as exc:
            raise ApiError(422, str(exc)) from None
        encoder = flag(data, "encoder")
        _, encoded, cuts = self.translator.encode_lines([text], tag=tag)
        if not encoded:  # only characters the tokenizer's normalisation removes (zero-width ones)
            raise ApiError(422, "text: nothing to translate (no text the tokenizer reads)")
        request.state.lines, request.state.tokens = 1, len(encoded[0])
        limit = self.limits.max_attention_tokens
        written = self.translator.tgt_tok.encode([given])[0] if given is not None else []
        if given is not None and not written:
            raise ApiError(422, "translation: nothing to read (no text the tokenizer reads)")
        if len(written) > self.translator.max_src_tokens:
            raise ApiError(
                422, f"translation: {len(written)} tokens; this model writes at most {self.translator.max_src_tokens}"
            )
        for field, count, what in (
            ("text", len(text), "characters"),
            ("text", len(encoded[0]), "tokens"),
            ("translation", len(given or ""), "characters"),
            ("translation", len(written), "tokens"),
        ):
            if count > limit:  # the answer grows with layers x heads x tokens^2
                raise ApiError(
                    413,
                    f"{field}: {count} {what}; /v1/attention draws sentences of at most {limit} "
                    f"characters and tokens (--max-attention-tokens)",
                )

        def answer(translator) -> bytes:  # on the worker: the event loop never serialises the weights
            maps = attention_maps(translator, text, given, index, tag).to_json(encoder)
            return json.dumps({**maps, "warnings": cuts}).encode("utf-8")

        return Response(await wait_for(lambda: self.batcher.call(answer), request), media_type="application/json")


async def wait_for(submit, request: Request, patience: float = 0.0):
    """The result of work given to the batcher: 503 when it cannot take it (with Retry-After unless its
    worker has died: retrying will not help; a full queue after `patience` seconds of asking again),
    500 when it failed. Should the client leave first, the work is called off (its sentences leave the
    queue and a running search) and 499 is logged."""
    gone, left = asyncio.ensure_future(disconnected(request)), []
    try:
        future = await submitted(submit, gone, patience)
    except BaseException:  # (this task cancelled while it waited too): the watcher goes with it
        gone.cancel()
        raise
    answer = asyncio.wrap_future(future)

    def leave(_) -> None:  # the client left: the work is called off
        left.append(True)
        answer.cancel()

    gone.add_done_callback(leave)
    try:
        return await answer  # (asyncio.wait on both was a third of this function's cost to the loop)
    except asyncio.CancelledError:
        cancelling = getattr(asyncio.current_task(), "cancelling", None)  # Task.cancelling: Python 3.11 on
        # this task itself was cancelled (a server stopping), whether or not the client left; on 3.10,
        # which cannot tell, a cancel after the client left reads as its leaving (a 499 nobody reads)
        if cancelling() if cancelling is not None else not left:
            raise
        raise ApiError(499, "the client closed the connection before its answer") from None
    except Exception as exc:
        raise refusal(exc, answered=True) from None
    finally:  # also when this task is cancelled: the worker drops what is left of it
        gone.cancel()
        if not answer.done():
            answer.cancel()


async def submitted(submit, gone: asyncio.Future, patience: float):
    """submit()'s future, asked again while the queue is full for up to `patience` seconds, unless the
    client is `gone` (499); the batcher's refusal as `refusal` answers it."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return submit()
        except QueueFull as exc:
            if gone.done() and not gone.cancelled():  # a client gone waits for no room
                raise ApiError(499, "the client closed the connection before its answer") from None
            if time.monotonic() >= deadline:
                raise refusal(exc) from None
            await asyncio.sleep(POLL)
        except (Closed, WorkerFailed) as exc:
            raise refusal(exc) from None


def refusal(exc: Exception, answered: bool = False) -> ApiError:
    """The answer to the batcher's refusal of work (`answered` False: at submit) or to the failure of
    work it took (True): 503 when busy or stopping (with Retry-After: retrying helps), 503 when its
    worker has died (without: it will not), 500 when the batch failed."""
    if isinstance(exc, Closed) and answered:  # not answered before the server ran out of time to stop
        return ApiError(503, "the server is shutting down; retry in a second", {"Retry-After": "1"})
    if isinstance(exc, (QueueFull, Closed)):
        return ApiError(503, f"the server is busy: {exc}; retry in a second", {"Retry-After": "1"})
    if isinstance(exc, WorkerFailed):
        return ApiError(503, f"{exc}; restart mt serve")
    return ApiError(500, " ".join(f"Cannot translate text: {type(exc).__name__}: {exc}".split()))


async def disconnected(request: Request) -> None:
    """Returns once the client has closed the connection (the body is read: what comes now is that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def v1_translation(hyps: list[tuple], options: DecodeOptions) -> dict:
    """One line's answer: its best translation and score; the n best and alignments as asked."""

    def hypothesis(h: tuple) -> dict:
        item = {"text": h[0], "score": h[1]}
        if options.alignment_layer is not None:
            item["alignment"] = h[2]
        return item

    answer = hypothesis(hyps[0])
    if options.nbest > 1:
        answer["nbest"] = [hypothesis(h) for h in hyps]
    return answer


def distinct_alternatives(hyps: list[tuple], count: int) -> list[str]:
    """Up to `count` other translations, best first, none the same text as one before it."""
    seen, others = {hyps[0][0], ""}, []  # an empty one (a hypothesis ended at its first step) is none
    for h in hyps[1:]:
        if h[0] not in seen and len(others) < count:
            seen.add(h[0])
            others.append(h[0])
    return others


CUT_LINE = re.compile(r"input line (\d+): \d+ tokens, cut to")  # `Translator.encode_lines`'s warning of a cut line


def markup_texts(fragments: list[str]) -> list[str]:
    """Each HTML fragment's text, as its language is identified: tag names, attributes and URLs, which
    are mostly English whatever the page's language, left out; 400 for one that does not parse."""
    try:
        return [plain_text(fragment, "html") for fragment in fragments]
    except MarkupError as exc:
        raise ApiError(400, str(exc)) from None
