"""How to decode, in one shape from the flags, the config and a request down to the search.

`DecodeOptions` is what one call asks: the search's settings (the fields of the config's decode.*
section; None: the experiment's own value) and what only a call can ask (n-best lists, sampling,
alignments, constraints, the direction). Every caller makes one (`mt translate` and the other
commands from their flags, `mt serve` from a request, distill and back-translation from theirs,
Python callers directly), and every check of what goes together is made here, when it is made, so
that all of them refuse the same things in the same words. `resolved` fills it in from an
experiment's decode.* just before a search; `record` says how a translation was made, for the
files that keep it (scores, distilled and back-translated corpora). Frozen: `mt serve` batches the
sentences of requests whose options are equal.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from mt.config.schema import MAX_BEAM, DecodeConfig, Engine, LengthPenalty, Parallel, StopRule, decode_checks
from mt.config.values import coerce
from mt.errors import ConfigError

# The fields of the config's decode section that a call may change, in the order --help lists their flags.
SEARCH_FIELDS = (
    "beam",
    "alpha",
    "length_penalty",
    "stop",
    "max_len_a",
    "max_len_b",
    "no_repeat_ngram",
    "max_tokens",
    "workers",
    "parallel",
    "shortlist",
    "engine",
)
SEGMENT_TOKENS = 100  # source tokens of a piece at most (mt.text): bounds the time and the output of one
BEAM_ONLY = ("beam", "alpha", "length_penalty", "stop")  # what sampling has no use for


@dataclass(frozen=True)
class Sampling:
    """Draw translations instead of searching for the best (back-translation: Edunov et al., 2018)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        _numbers(self, {"top_k": int, "seed": int, "temperature": float, "top_p": float})
        # Written so that NaN fails too; infinity divides the model's -inf scores into NaN.
        if not 0 < self.temperature < math.inf:
            raise ConfigError(f"--temperature {self.temperature}: must be above 0 and finite")
        if self.top_k < 0:
            raise ConfigError(f"--top-k {self.top_k}: must be 0 (all tokens) or more")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p {self.top_p}: must be in (0, 1]")
        if not 0 <= self.seed < 2**63:  # torch's generator takes a 64-bit signed seed; mt adds to it
            raise ConfigError(f"--seed {self.seed}: must be from 0 to {2**63 - 1}")


@dataclass(frozen=True)
class DecodeOptions:
    """What one call asks of the search (module docstring). Messages name the options as `mt
    translate`'s flags; `mt serve` turns them into its request fields, the same words."""

    # The search: decode.* of the config, None where the experiment's value holds.
    beam: int | None = None  # widened to nbest when not given
    alpha: float | None = None
    length_penalty: LengthPenalty | None = None
    stop: StopRule | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    no_repeat_ngram: int | None = None  # the repetition guard: no n-gram twice (0: off)
    max_tokens: int | None = None  # source tokens per batch
    workers: int | None = None  # batches searched side by side on the CPU (mt.search.parallel)
    parallel: Parallel | None = None  # the workers as threads or processes (mt.decoding.processes)
    shortlist: bool | None = None  # score only the lexical shortlist's candidates (mt.decoding.shortlist)
    engine: Engine | None = None  # mt's search, CTranslate2, or auto (mt.decoding.engine)
    # The call.
    nbest: int = 1  # hypotheses per line, best first
    sampling: Sampling | None = None  # draw one translation per line instead of searching
    alignment_layer: int | None = None  # 0-based decoder layer whose attention aligns words; None: none
    constraints: bool = False  # each line is SOURCE<TAB>PHRASE<TAB>...: constrained beam search
    src_lang: str | None = None  # the direction (mt.decoding.directions); None: the model's only one
    tgt_lang: str | None = None
    pivot: str | None = None  # translate into this language first, then from it into tgt_lang
    # Read by mt.text, which cuts texts into pieces before `Translator.search` (one-best, plain):
    sentences: bool = True  # each text translated sentence by sentence; False: a line is one segment
    segment_tokens: int = SEGMENT_TOKENS  # a sentence of more source tokens is cut at clauses, then spaces
    recase: bool = True  # a piece in capitals, title or lower case searched in the model's casing (mt.text.casing)

    def __post_init__(self) -> None:
        _numbers(self, {"nbest": int, "segment_tokens": int, "alignment_layer": int})
        self._check_search()
        if not 1 <= self.nbest <= MAX_BEAM:
            raise ConfigError(f"--nbest {self.nbest}: must be from 1 to {MAX_BEAM}")
        if self.beam is not None and self.nbest > self.beam:
            raise ConfigError(f"--nbest {self.nbest} is more than --beam {self.beam}: the n best come from the beam")
        if self.sampling is not None:
            if any(getattr(self, name) is not None for name in BEAM_ONLY) or self.nbest > 1:
                raise ConfigError(
                    "--beam, --alpha, --length-penalty, --stop and --nbest are for beam search; "
                    "--sample draws one translation per line"
                )
            if self.constraints:
                raise ConfigError("--constraints needs beam search; it cannot be combined with --sample")
        if self.segment_tokens < 1:
            raise ConfigError(f"--segment-tokens {self.segment_tokens}: must be at least 1")
        if self.pivot is not None and (self.alignment_layer is not None or self.constraints):
            raise ConfigError("--pivot translates twice; --alignments and --constraints need one translation")
        if self.pivot is not None and self.pivot in (self.src_lang, self.tgt_lang):
            raise ConfigError(f"--pivot {self.pivot}: the pivot is a third language, not the source or target")

    def _check_search(self) -> None:
        """The given search fields, by the config's own rules (mt.config.schema.decode_checks); each
        set of values once (`mt serve` makes several options a request, all alike)."""
        fields = tuple((name, type(value), value) for name, value in self.search_overrides().items())
        try:
            hash(fields)
        except TypeError:  # a value of no type a flag has (a list, say): checked, and refused, uncached
            _checked_search.__wrapped__(fields)
            return
        _checked_search(fields)

    def search_overrides(self) -> dict[str, Any]:
        """The search fields this call sets (field -> value), the rest left to the experiment."""
        return {name: getattr(self, name) for name in SEARCH_FIELDS if getattr(self, name) is not None}

    def resolved(self, decode: DecodeConfig) -> DecodeOptions:
        """These options with every search field filled in from `decode` (the experiment's decode.*)
        where this call left it; a beam not given is at least nbest wide. Sampling leaves the beam's
        fields unset."""
        filled = {name: getattr(decode, name) for name in SEARCH_FIELDS if getattr(self, name) is None}
        if self.sampling is not None:
            filled = {name: value for name, value in filled.items() if name not in BEAM_ONLY}
        elif self.beam is None:
            filled["beam"] = max(decode.beam, self.nbest)
        return replace(self, **filled) if filled else self  # resolved already: `mt serve` asks again

    def record(self) -> dict[str, Any]:
        """How a translation was made, for the files that keep it (resolved options): the beam's
        settings, or the sampling's with the batch size its draws depend on."""
        lengths = {"max_len_a": self.max_len_a, "max_len_b": self.max_len_b}
        if self.no_repeat_ngram:  # recorded where it is on: the records of before it are unchanged
            lengths["no_repeat_ngram"] = self.no_repeat_ngram
        if self.shortlist:  # the same
            lengths["shortlist"] = True
        if self.engine not in (None, "mt"):  # the same
            lengths["engine"] = self.engine
        if self.sampling is not None:
            return {**dataclasses.asdict(self.sampling), **lengths, "max_tokens": self.max_tokens}
        return {
            "beam": self.beam,
            "alpha": self.alpha,
            "length_penalty": self.length_penalty,
            "stop": self.stop,
            **lengths,
        }


def _numbers(options: Any, kinds: dict[str, type]) -> None:
    """Each field of `kinds` given (not None) is an integer (not a bool) or a real number, as its flag
    takes it: 3.5 beams or a "3" got past the checks and failed inside the search (torch's TypeError)."""
    for name, kind in kinds.items():
        value = getattr(options, name)
        if value is None:
            continue
        whole = isinstance(value, int) and not isinstance(value, bool)
        if kind is int and not whole:
            raise ConfigError(f"--{name.replace('_', '-')} {value!r}: expected an integer")
        if kind is float and not (whole or isinstance(value, float)):
            raise ConfigError(f"--{name.replace('_', '-')} {value!r}: expected a number")


# The search fields that are numbers, by their config type (decode.*).
NUMBER_FIELDS = {
    name: hint
    for name, hint in typing.get_type_hints(DecodeConfig).items()
    if name in SEARCH_FIELDS and hint in (int, float)
}


@functools.lru_cache(maxsize=256)  # an error is not cached: a bad set is checked, and refused, every time
def _checked_search(fields: tuple[tuple[str, type, Any], ...]) -> None:
    """DecodeOptions' search fields (name, type, value), by the config's rules; raises ConfigError."""
    given = {name: value for name, _, value in fields}
    _numbers(SimpleNamespace(**given), {name: kind for name, kind in NUMBER_FIELDS.items() if name in given})
    for name, kind, flag in (
        ("length_penalty", LengthPenalty, "--length-penalty"),
        ("stop", StopRule, "--stop"),
        ("parallel", Parallel, "--parallel"),
        ("engine", Engine, "--engine"),
    ):
        if name in given:
            coerce(given[name], kind, flag)
    for ok, message in decode_checks(DecodeConfig(**given)):
        if not ok:
            raise ConfigError(message)
