"""CTranslate2 as a second engine over the same weights: what decode.engine chooses between.

mt's own search (mt.search) decodes everything mt offers. CTranslate2 decodes the plain beam and
greedy searches faster on a CPU (its C++ steps, int8 kernels, and inter_threads: one batch per
thread with no interpreter between steps), so `mt translate`, `mt evaluate` and `mt serve` can hand
it what it can decode as mt's search would: decode.engine "ctranslate2" (refused, in one line, for a
call it cannot), or "auto" (CTranslate2 where it can, mt's search for the rest, each said once).

What CTranslate2 cannot decode as mt does (`unsupported`): the gnmt length penalty and the exact stop
rule (it has |Y|^alpha and stops once `beam` hypotheses finished), n-best lists without a length
penalty (then it stops once its best and `nbest` hypotheses finished, another rule), sampling (another
generator), constraints, ensembles, a precision it lacks on the device. Alignments it leaves to mt's
model, which aligns its translations in a teacher-forced pass (mt.decoding.alignment).
What it decodes the same: greedy and beam search with the length or no penalty, n-best lists and
their scores with the length penalty, the repetition guard, the lexical shortlist (exported as its
vocabulary map), a multilingual model's target tags. int8 on a CPU it decodes with its own quantized
kernels, which round otherwise than torch's: the same search, translations that differ now and then. Two differences are left, both documented: its
log-probabilities leave <pad> and <s> out of the softmax (mt.model.ctranslate2_spec), and it takes
one length limit per batch, so a hypothesis that runs to that limit is cut back to its own sentence's
limit here (greedy: the tokens mt gives; beam: what the beam held, without mt's forced </s>; its score
stays CTranslate2's for the longer hypothesis, and n-best entries that the cut made equal are one).

The model is built once per checkpoint into EXP/engines/ctranslate2-<name>-<hash>/ (float32 weights,
quantized when loaded; vmap.txt when the experiment has a shortlist), and built again when the
checkpoint, the tokenizers, the shortlist or the ctranslate2 version changed (engine.json records
them; it is written last, so a directory without it was never finished), one build at a time
(EXP/engines/.build.lock: a second process waits, then finds it built).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import torch

from mt import log
from mt.atomic_files import sync_directory, sync_tree
from mt.data.batching import length_groups
from mt.data.shortlist import VMAP_FILE, vocabulary_map
from mt.decoding.options import DecodeOptions
from mt.errors import MtError
from mt.experiment.checkpoint_file import load_checkpoint, model_from_checkpoint
from mt.search.parallel import balanced_for, workers_for
from mt.tokenizer import EOS_ID

# `translator` below is a mt.decoding.translator.Translator (not imported: it imports this module).
FORMAT = 2  # of EXP/engines/*/engine.json: a change rebuilds every engine (2: the vmap holds <unk>'s row)
# mt's precision -> CTranslate2's compute type (quantize int8 is mt's int8 on a CPU)
COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "int8"}
# The padded source tokens of one CTranslate2 batch at most on a CPU: there its batches run fastest at
# a few hundred tokens (a beam's state that stays in the core's caches), 1.4x its speed at mt's 2,000
# (docs/benchmarks.md, "Decoding speed"); a GPU takes decode.max_tokens whole.
CPU_BATCH_TOKENS = 256


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        return None
    return ctranslate2


def unsupported(translator, options: DecodeOptions) -> str | None:
    """Why CTranslate2 cannot decode this call (resolved options) as mt's search would; None if it can."""
    o = options
    beam = o.sampling is None and o.beam > 1
    ctranslate2 = _ctranslate2()
    if ctranslate2 is None:
        return "the ctranslate2 package is not installed (in mt's checkout: pip install -e '.[export]')"
    if translator.load_args is None:
        return "this Translator was not loaded from an experiment (Translator.load)"
    if len(translator.checkpoint_paths) != 1:
        return "an ensemble (several --checkpoint) is decoded by mt's search only"
    if o.sampling is not None:
        return "--sample draws with mt's generator"
    if o.constraints:
        return "--constraints (constrained beam search) is mt's own"
    if beam and o.length_penalty == "gnmt":
        return "CTranslate2 has no gnmt length penalty (--length-penalty or decode.length_penalty: length or none)"
    if beam and o.stop == "exact":
        return "CTranslate2 has no exact stop rule (--stop or decode.stop: early)"
    engine = translator.engine
    if o.shortlist and engine is not None and not engine.vmap:  # built before `mt shortlist`, or without a map
        return (
            f"--shortlist: the CTranslate2 engine in {engine.directory} has no {VMAP_FILE} (built before "
            "`mt shortlist`: restart to build it again; or the shortlist cannot be written as one: its warning says why)"
        )
    if beam and o.nbest > 1 and (o.length_penalty == "none" or o.alpha == 0):
        # without a penalty it stops once its best hypothesis finished and --nbest have, not `beam`
        return "CTranslate2 stops otherwise without a length penalty: --nbest with --length-penalty none or --alpha 0"
    compute = compute_type(translator)
    device = translator.device.type
    if device not in ("cpu", "cuda"):
        return f"CTranslate2 runs on cpu or cuda, not {device}"
    try:
        supported = _compute_types(device, translator.device.index or 0)
    except RuntimeError as exc:  # no CUDA runtime for CTranslate2, say
        return f"CTranslate2 cannot use {device} here: {' '.join(str(exc).split())}"
    if compute not in supported:
        return f"CTranslate2 has no {compute} on this {device} (it has {', '.join(sorted(supported))})"
    return None


@functools.cache
def _compute_types(device: str, index: int) -> frozenset[str]:
    """What CTranslate2 computes in on the device: asked once (each search asks whether it can decode it)."""
    return frozenset(_ctranslate2().get_supported_compute_types(device, index))


def refused(translator, options: DecodeOptions) -> str | None:
    """The one-line refusal of a call that asks for CTranslate2 (decode.engine ctranslate2) and that it
    cannot decode as mt would; None otherwise (`mt serve` answers it with 422 before queueing it)."""
    if options.engine != "ctranslate2":
        return None
    return _refusal(unsupported(translator, options))


def _refusal(reason: str | None) -> str | None:
    return None if reason is None else f"--engine ctranslate2: {reason}; --engine auto decodes it with mt's search"


def compute_type(translator) -> str:
    return COMPUTE_TYPES[translator.quantize or translator.precision]


class CTranslate2Engine:
    """One experiment checkpoint's CTranslate2 model, loaded with `inter` batches side by side of
    `intra` threads each, out of the `threads` asked for; `search` decodes encoded sources as
    `Translator.search_encoded` does."""

    def __init__(self, directory: Path, translator, inter: int, intra: int, threads: int):
        import ctranslate2

        self.directory, self.inter, self.intra = directory, inter, intra
        self.threads = threads
        self.compute_type = compute_type(translator)
        self.vmap = (directory / VMAP_FILE).exists()
        device = translator.device
        self.batch_tokens = CPU_BATCH_TOKENS if device.type == "cpu" else None
        torch_threads = torch.get_num_threads()  # CTranslate2 sets the OpenMP threads that torch reads too
        try:
            self.model = ctranslate2.Translator(
                str(directory),
                device=device.type,
                device_index=device.index or 0,
                compute_type=self.compute_type,
                inter_threads=inter,
                intra_threads=intra,
            )
        finally:
            torch.set_num_threads(torch_threads)
        self.version = ctranslate2.__version__
        self.max_positions = translator.model.max_positions

    def describe(self) -> str:
        side = f"{self.inter} batch{'es' if self.inter > 1 else ''} side by side x {self.intra} thread{'s' * (self.intra > 1)}"
        return f"CTranslate2 {self.version} ({self.compute_type}, {side})"

    def search(
        self,
        translator,
        encoded: list[list[int]],
        options: DecodeOptions,
        progress: Callable[[int], None] | None = None,
        split: bool = True,
        meanwhile: Callable[[], None] | None = None,
    ) -> list[list[tuple[list[int], float]]]:
        """For each source (ids without EOS, cut), up to nbest (target ids without EOS, score), best
        first. mt's batches (decode.max_tokens, at most CPU_BATCH_TOKENS on a CPU), cut again so that
        the side-by-side workers end together when they are few (`balanced_for`; not with `split`
        False: `mt serve` runs several calls at once), all queued at once; answered in order.
        `meanwhile` runs in this thread once they are queued, while CTranslate2's threads search."""
        o = options
        if o.shortlist and not self.vmap:
            raise MtError(
                f"--shortlist: {self.directory} has no {VMAP_FILE}: the experiment has no shortlist, or one of "
                f"another tokenizer; build it (`mt shortlist`, with --force over an old one)"
            )
        a, b, room = o.max_len_a, o.max_len_b, self.max_positions - 1
        budget = min(o.max_tokens, self.batch_tokens or o.max_tokens)
        lengths = [len(ids) for ids in encoded]
        parts = length_groups(lengths, budget)
        if split:
            parts = balanced_for(parts, lengths, self.inter, budget)  # runs no larger than the groups
        pending = []
        for part in parts:
            limits = [min(max(int(len(encoded[k]) * a + b), 1), room) for k in part]
            found = self.model.translate_batch(
                [translator.src_tok.pieces(encoded[k]) for k in part],
                beam_size=o.beam,
                num_hypotheses=o.nbest,
                length_penalty=0.0 if o.beam == 1 or o.length_penalty == "none" else o.alpha,
                no_repeat_ngram_size=o.no_repeat_ngram,
                min_decoding_length=0,  # mt allows an empty translation
                max_decoding_length=max(limits),
                max_input_length=self.max_positions,
                return_end_token=True,
                return_scores=True,
                use_vmap=bool(o.shortlist),
                asynchronous=True,
            )
            pending.append((part, limits, found))
        if meanwhile is not None:
            meanwhile()
        results: list[list[tuple[list[int], float]]] = [[] for _ in encoded]
        for part, limits, found in pending:
            for k, limit, result in zip(part, limits, found):
                hyps = result.result()
                for pieces, score in zip(hyps.hypotheses, hyps.scores):
                    ids = translator.tgt_tok.piece_ids(pieces)
                    if ids[-1:] == [EOS_ID]:
                        ids = ids[:-1]
                    ids = ids[: limit - 1]  # past this sentence's own limit (module docstring)
                    if all(ids != seen for seen, _ in results[k]):  # cut back, two may now be one
                        results[k].append((ids, score))
            if progress is not None:
                progress(len(part))
        return results


def decodes(translator, options: DecodeOptions) -> bool:
    """Whether CTranslate2 decodes a call with these (resolved) options, as `engine` decides it, asked
    without building or loading it (`mt serve`'s batcher, which batches for the engine that runs)."""
    return options.engine != "mt" and translator.engine_failure is None and unsupported(translator, options) is None


def engine(translator, options: DecodeOptions, threads: int | None = None) -> CTranslate2Engine | None:
    """The engine this call (resolved options) decodes with: CTranslate2's (loaded once, and again
    when the workers asked for change), or None for mt's search. decode.engine ctranslate2 refuses
    what CTranslate2 cannot decode; auto says once why mt's search decodes it instead. `threads`: all
    its workers' threads (default: as `load`)."""
    if options.engine == "mt":
        return None
    reason = unsupported(translator, options)
    strict = options.engine == "ctranslate2"  # asked for by name: loaded, or refused, even after auto's failure
    if reason is not None and strict:
        raise MtError(_refusal(reason))
    reason = reason or (None if strict else translator.engine_failure)
    if reason is None:
        current = load(translator, options.workers, threads, strict=strict)
        # asked again of the engine now loaded: what it was built with (a vocabulary map) can refuse the call
        reason = translator.engine_failure if current is None else unsupported(translator, options)
        if reason is not None and strict:
            raise MtError(_refusal(reason))
        if current is not None and reason is None:
            translator.say(f"engine: {current.describe()}")
            return current
    translator.say(f"engine: mt's search ({reason})")
    return None


def load(translator, workers: int, threads: int | None = None, strict: bool = True) -> CTranslate2Engine | None:
    """The Translator's CTranslate2 engine for `workers` (decode.workers) over `threads` (default: those
    it was loaded for, else the calling thread's torch threads), built (`prepared`) and loaded unless it
    is already. A failure
    (an experiment it cannot write into, CTranslate2 refusing the model) is one MtError where `strict`
    (engine ctranslate2); otherwise (auto) it is kept in translator.engine_failure, and None returned:
    mt's search decodes from then on, without trying again."""
    current = translator.engine
    threads = threads or (current.threads if current is not None else torch.get_num_threads())
    inter = workers_for(workers, translator.device, threads)  # as mt's own workers: given, or one a thread
    intra = max(1, threads // inter)
    if current is not None and (current.inter, current.intra) == (inter, intra):
        return current
    try:
        exp = translator.load_args["exp"]
        loaded = translator.checkpoint_stats[0] if translator.checkpoint_stats else None
        directory = prepared(exp, translator.checkpoint_paths[0], translator.src_tok, translator.tgt_tok, loaded)
        translator.engine = CTranslate2Engine(directory, translator, inter, intra, threads)
    except (OSError, RuntimeError, ValueError, MtError) as exc:
        message = f"{type(exc).__name__ + ': ' if not isinstance(exc, MtError) else ''}{' '.join(str(exc).split())}"
        if strict:
            raise MtError(f"--engine ctranslate2: {message}") from None
        translator.engine_failure = f"CTranslate2 could not be built or loaded: {message}"
        return None
    return translator.engine


def prepared(exp, checkpoint: Path, src_tok, tgt_tok, loaded: tuple[int, int] | None = None) -> Path:
    """EXP/engines/ctranslate2-<checkpoint>-<hash>/, built unless what it records is what it would be
    built from now (module docstring). `loaded`: the checkpoint's (size, mtime_ns) when the Translator
    read it; a file saved again since is refused (the engine would decode other weights)."""
    import ctranslate2

    checkpoint = checkpoint.resolve()
    stat = checkpoint.stat()
    if loaded is not None and (stat.st_size, stat.st_mtime_ns) != tuple(loaded):
        raise MtError(
            f"{checkpoint}: saved again since it was loaded (by training?): CTranslate2 would decode "
            f"other weights than mt's search; start again to decode the new ones"
        )
    shortlist = exp.shortlist_path
    source = {
        "format": FORMAT,
        "ctranslate2": ctranslate2.__version__,
        "checkpoint": str(checkpoint),
        "checkpoint_stat": [stat.st_size, stat.st_mtime_ns],
        "tokenizer_sha256": {"src": src_tok.sha256, "tgt": tgt_tok.sha256},
        "shortlist_stat": [shortlist.stat().st_size, shortlist.stat().st_mtime_ns] if shortlist.exists() else None,
    }
    root = exp.root / "engines"
    name = hashlib.sha256(str(checkpoint).encode()).hexdigest()[:8]
    directory = root / f"ctranslate2-{checkpoint.stem}-{name}"
    if _recorded(directory) == source:
        return directory
    root.mkdir(parents=True, exist_ok=True)
    # One build at a time (processes of `mt serve`, a `mt translate` beside it): one replacing a stale
    # engine moved it away between another's checks, which then took the empty place for a directory
    # mt had not built. A second waits, then finds the engine built.
    with open(root / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _recorded(directory) == source:
            return directory
        for left in [*root.glob(".building-*"), *root.glob(".old-*")]:  # a killed build's: none runs now
            shutil.rmtree(left, ignore_errors=True)
        _build(exp, checkpoint, src_tok, tgt_tok, source, root, directory)
    return directory


def _build(exp, checkpoint: Path, src_tok, tgt_tok, source: dict, root: Path, directory: Path) -> None:
    """`prepared`'s build, under its lock: written aside, then renamed into place, a stale one moved away."""
    from mt.model.ctranslate2_spec import build_spec

    log.info(f"engine: building the CTranslate2 model of {checkpoint.name} in {directory} (once)")
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        building.chmod(0o755)  # mkdtemp's 0700 would hide it from the experiment's other users
        src_pieces = src_tok.pieces(list(range(src_tok.vocab_size)))
        tgt_pieces = tgt_tok.pieces(list(range(tgt_tok.vocab_size)))
        model = model_from_checkpoint(load_checkpoint(checkpoint)).eval()
        read = checkpoint.stat()
        if [read.st_size, read.st_mtime_ns] != source["checkpoint_stat"]:  # saved again while it was read
            raise MtError(
                f"{checkpoint}: saved again while the engine was built (by training?): its record would name "
                "other weights; start again once it is saved"
            )
        spec = build_spec(model, src_pieces, tgt_pieces)
        spec.optimize(quantization=None)  # float32: the compute type is chosen when it is loaded
        spec.save(str(building))
        vmap = vocabulary_map(exp, src_tok, tgt_tok)
        shortlist = exp.shortlist_path
        now = [shortlist.stat().st_size, shortlist.stat().st_mtime_ns] if shortlist.exists() else None
        if now != source["shortlist_stat"]:  # built again (`mt shortlist --force`) while the engine was
            raise MtError(f"{shortlist}: built again while the engine was built; start again")
        if vmap is not None:
            (building / VMAP_FILE).write_text(vmap, encoding="utf-8")
        (building / "engine.json").write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")
        sync_tree(building)  # on disk before the rename commits it: a crash leaves no engine.json over half a model
        if directory.exists():
            if _recorded(directory) is None:  # engine.json is written last: without it, mt did not build it
                raise MtError(f"{directory}: exists and is not an engine mt built; move it away")
            old = Path(tempfile.mkdtemp(prefix=".old-", dir=root))
            os.replace(directory, old / "engine")
            shutil.rmtree(old)
        os.replace(building, directory)
        sync_directory(root)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _recorded(directory: Path) -> dict | None:
    try:
        return json.loads((directory / "engine.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
