"""Lines in, translations out: tokenize, batch by length, search, detokenize, restore input order.

`Translator` holds plain objects: the model(s) (`mt.decoding.models` loads them), the tokenizers,
the experiment's decode.* settings and the device. Every search takes the call's `DecodeOptions`
(mt.decoding.options), filled in from those settings; `mt.decoding.output` streams and formats.
"""

from __future__ import annotations

import threading
import unicodedata
import weakref
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import torch

from mt import log
from mt.config.schema import DecodeConfig, ExperimentConfig
from mt.data.batching import length_groups
from mt.data.shortlist import load_table
from mt.decoding.alignment import Encoded, encode_sources, members, word_alignments
from mt.decoding.directions import Directions
from mt.decoding.engine import CTranslate2Engine, engine
from mt.decoding.models import load_models
from mt.decoding.options import DecodeOptions
from mt.decoding.processes import SearchProcesses
from mt.decoding.shortlist import Shortlist, shortlisted, to_indices, to_tokens
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.hardware import checked_device
from mt.search.beam import beam_search
from mt.search.constrained import constrained_beam_search, split_constrained_line
from mt.search.parallel import search_batches, split_for, workers_for
from mt.search.single_path import greedy_search, sample_search
from mt.search.steps import Hypothesis
from mt.tokenizer import EOS_ID, PAD_ID, Tokenizer, language_tag

# Padded source tokens whose encoder output the alignment pass computes ahead, while CTranslate2 searches
# (a call's first groups: all of a server's; a file's are bounded in memory: 16 MB a member at d_model
# 256 in fp32).
ENCODE_AHEAD_TOKENS = 16384


def line_name(names: list[str] | None, first_line: int, index: int) -> str:
    """What a warning calls line `index` of a call: its name, else its input line."""
    return names[index] if names is not None else f"input line {first_line + index + 1}"


class Translator:
    """Trained model(s) with their tokenizers and decoding options; `Translator.load` makes one
    from an experiment's checkpoints.

    model: a Transformer or an Ensemble, in eval mode on `device`, in the precision it runs in
    (`precision`, or `quantize` int8); decode_cfg: the experiment's decode.* settings, which fill in
    what a call's DecodeOptions leave unset (kept, not copied: a change applies to the next search);
    checkpoint_paths: the files the weights came from, for records (scores, reports); averaged_from:
    for each of these that is an average, the checkpoints it averages."""

    def __init__(
        self,
        model: torch.nn.Module,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        decode_cfg: DecodeConfig,
        device: torch.device | str = "cpu",
        checkpoint_paths: list[Path] | None = None,
        precision: str = "fp32",
        quantize: str | None = None,
        directions: Directions | None = None,
        shortlist: Shortlist | None = None,
    ):
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        # The lexical shortlist that decode.shortlist decodes with: given, or the experiment's
        # (`Translator.load`'s, in load_args), read when a search first asks for it.
        self.shortlist = shortlist
        self.directions = directions or Directions((("src", "tgt"),))  # what it translates; tags if multilingual
        self.decode_cfg = decode_cfg
        self.device = torch.device(device)
        self.precision, self.quantize = precision, quantize
        self.checkpoint_paths = list(checkpoint_paths or [])
        self.checkpoint_path = self.checkpoint_paths[0] if self.checkpoint_paths else None
        self.averaged_from: dict[Path, list[str]] = {}  # `Translator.load` fills it
        self.load_args: dict | None = None  # how `Translator.load` made it: search processes load the same
        # (size, mtime_ns) of each checkpoint as `Translator.load` read it: an engine built from the file
        # later must find the same file, or it would decode other weights than this model (training
        # saves last.pt and best.pt again)
        self.checkpoint_stats: list[tuple[int, int]] = []
        self._processes: SearchProcesses | None = None  # started by the first search that asks for them
        self._stop_processes: Callable[[], object] = lambda: None  # their finalizer (`search_processes`)
        self._processes_lock = threading.Lock()
        self.engine: CTranslate2Engine | None = None  # CTranslate2 (decode.engine), loaded by the first call for it
        self.engine_failure: str | None = None  # why CTranslate2 could not be built or loaded (engine auto)
        self._said: set[str] = set()
        self._align_lock = threading.Lock()  # one alignment pass at a time (`_aligned`)
        # The Unicode form training text was cleaned to (data.normalize: NFC, NFKC), the input's too:
        # a tokenizer that normalises nothing itself (tokenizer.normalization identity) would otherwise
        # read a decomposed "é" as two unknown pieces. `Translator.load` sets it from the config.
        self.unicode_form: str | None = None
        # Room for EOS; longer inputs are cut rather than crash the position table.
        self.max_src_tokens = self.model.max_positions - 1

    @classmethod
    def load(
        cls,
        exp: Experiment,
        cfg: ExperimentConfig,
        checkpoint: str | list[str] | None = None,
        device: str = "cpu",
        precision: str = "fp32",
        quantize: str | None = None,
    ) -> Translator:
        """The experiment's tokenizers and checkpoint(s) (`checkpoint`, else decode.checkpoint: best,
        last, average, step_N or a .pt file; several make an ensemble), each checked against the
        tokenizers and, when it is this experiment's own, against its model config; run on `device`
        in `precision` (fp32, bf16, fp16) or with `quantize` int8 (CPU) instead."""
        torch_device = torch.device(checked_device(device, "device"))
        tokenizers = exp.load_tokenizers(cfg.tokenizer.joint)
        names = [checkpoint] if isinstance(checkpoint, str) else list(checkpoint or [cfg.decode.checkpoint])
        model, paths, averaged, stats = load_models(exp, cfg, names, tokenizers, torch_device, precision, quantize)
        directions = Directions.of(cfg.data.pairs(), cfg.data.multilingual, tokenizers[0])
        translator = cls(model, *tokenizers, cfg.decode, torch_device, paths, precision, quantize, directions)
        translator.averaged_from = averaged
        form = cfg.data.cleaning("train")  # the form training text was cleaned to (None: read strictly)
        if form not in (None, "none"):
            translator.unicode_form = form.upper()
        translator.checkpoint_stats = stats  # as they were before they were read
        translator.load_args = dict(
            exp=exp, cfg=cfg, checkpoint=checkpoint, device=device, precision=precision, quantize=quantize
        )
        return translator

    def close(self) -> None:
        """Stop the search processes, if any ran (decode.parallel: processes); also when the Translator
        is collected or left as a context manager (`with Translator.load(...) as translator:`)."""
        if self._processes is not None:
            self._stop_processes()  # the finalizer, which calls SearchProcesses.close
            self._processes = None

    def __enter__(self) -> Translator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def say(self, message: str) -> None:
        """Log `message` once per Translator (which engine decodes, and why)."""
        if message not in self._said:
            self._said.add(message)
            log.info(message)

    def search_processes(self, workers: int, threads: int | None = None) -> SearchProcesses:
        """`workers` search processes over this Translator's model, `threads` each (default: a share of
        the calling thread's); started once, then kept until `close` or another count is asked for.
        Threads asking at once share one set (each started its own, and all but the last ran on)."""
        with self._processes_lock:
            if self._processes is None or self._processes.count != workers:
                if self._processes is not None:
                    self._processes.close_when_idle()
                self.close()
                threads = threads or max(1, torch.get_num_threads() // workers)
                # The files this model was read from, not their names again: `last` or `best` saved
                # anew by training since (or best.pt made after a fall back to last.pt) is refused.
                args = dict(self.load_args or {})
                if self.checkpoint_paths and args:
                    args.update(
                        checkpoint=[str(p) for p in self.checkpoint_paths], expected_stats=self.checkpoint_stats
                    )
                self._processes = SearchProcesses(type(self).load, args, workers, threads)
                # A Translator dropped unclosed stops them when it is collected, not at the program's end.
                self._stop_processes = weakref.finalize(self, self._processes.close)
            return self._processes

    def translate(self, lines: list[str]) -> list[str]:
        """Translations of `lines` in the same order; an empty (or blank) line gives an empty line."""
        return [hyps[0][0] for hyps in self.search(lines)]

    def search(
        self,
        lines: list[str],
        options: DecodeOptions | None = None,
        first_line: int = 0,
        progress: Callable[[int], None] | None = None,
        reseed: bool = True,
        names: list[str] | None = None,
    ) -> list[list[tuple]]:
        """For each line, up to `options.nbest` (translation, score) pairs, best first; with
        `options.alignment_layer`, (translation, score, alignment) triples. With `options.constraints`
        each line is SOURCE<TAB>PHRASE<TAB>...: every translation contains each target phrase
        (mt.search.constrained). Warnings name input lines counted from `first_line` + 1 (or by `names`,
        where the lines are pieces of texts), and sampling draws from its seed + `first_line` (`reseed`
        False: the caller seeds each call itself). `progress` is called with the number of lines done as
        each batch finishes (not when pivoting)."""
        options = (options or DecodeOptions()).resolved(self.decode_cfg)
        if options.sampling is not None and first_line and reseed:  # a stream's later calls draw anew
            options = replace(
                options, sampling=replace(options.sampling, seed=(options.sampling.seed + first_line) % 2**63)
            )
        if options.pivot is not None:
            return self._pivot(lines, options, first_line, names)
        tag = self.directions.tag(options.src_lang, options.tgt_lang)
        phrases = None
        if options.constraints:
            lines, phrases = (
                (list(column) for column in zip(*map(split_constrained_line, lines))) if lines else ([], [])
            )
        empty = ("", 0.0) if options.alignment_layer is None else ("", 0.0, "")
        results: list[list[tuple]] = [[empty] for _ in lines]
        todo, encoded, cuts = self.encode_lines(lines, first_line, tag, names)
        for warning in cuts:
            log.warn(warning)
        if progress is not None and len(todo) < len(lines):
            progress(len(lines) - len(todo))  # blank lines: done
        phrase_ids, unmet = None, []
        if phrases is not None:
            # A phrase that normalisation empties (a zero-width character, say) constrains nothing.
            # normalised as the sources are (data.normalize): a decomposed é of a phrase was byte pieces
            form = self.unicode_form
            normal = [[p if form is None else unicodedata.normalize(form, p) for p in found] for found in phrases]
            phrase_ids = [[ids for ids in self.tgt_tok.encode(normal[i]) if ids] if normal[i] else [] for i in todo]
            searched = set(todo)
            for i in (i for i, found in enumerate(phrases) if found and i not in searched):
                log.warn(f"{line_name(names, first_line, i)}: no source to translate: its constraints are not used")
        for i, hyps in zip(todo, self.search_encoded(encoded, options, phrase_ids, unmet, progress)):
            results[i] = hyps
        for k in unmet:
            log.warn(
                f"{line_name(names, first_line, todo[k])}: not every constraint fits within the length limit "
                f"(--max-len-a/--max-len-b); the translation that met the most"
            )
        return results

    def encode_lines(
        self, lines: list[str], first_line: int = 0, tag: int | None = None, names: list[str] | None = None
    ) -> tuple[list[int], list[list[int]], list[str]]:
        """The indices of the non-blank lines, their source ids (no EOS; after `tag`, a multilingual
        model's target token: `directions.tag`) cut to the model's positions, and one warning per cut
        line ("input line N: T tokens, cut to M"; `names`: what each line is called instead). A line the tokenizer reads as nothing (only
        zero-width characters, which its normalisation removes) is blank too: searched from EOS
        alone, the model would write a sentence that is not in the input."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        form = self.unicode_form
        texts = [lines[i] if form is None else unicodedata.normalize(form, lines[i]) for i in todo]
        encoded = self.src_tok.encode(texts) if todo else []
        cuts = []
        # A multilingual model's tag written in the text ("<2fr> ...") would be read as the tag itself,
        # a second target against the one asked for: left out, said.
        tags = {tag_id: lang for lang, tag_id in self.directions.tags.items()}
        for k, ids in enumerate(encoded):
            if tags and not tags.keys().isdisjoint(ids):
                written = ", ".join(language_tag(tags[i]) for i in dict.fromkeys(ids) if i in tags)
                cuts.append(
                    f"{line_name(names, first_line, todo[k])}: {written} in the text is the model's language "
                    "tag: left out (the target is the one asked for)"
                )
                kept = [i for i in ids if i not in tags]
                encoded[k] = kept if self.src_tok.decode([kept])[0].strip() else []  # a tag alone: blank
        if not all(encoded):
            todo, encoded = [i for i, ids in zip(todo, encoded) if ids], [ids for ids in encoded if ids]
        room = self.max_src_tokens - (tag is not None)
        for k, ids in enumerate(encoded):
            if len(ids) > room:
                cuts.append(f"{line_name(names, first_line, todo[k])}: {len(ids)} tokens, cut to {room}")
                encoded[k] = ids[:room]
        if tag is not None:
            encoded = [[tag, *ids] for ids in encoded]
        return todo, encoded, cuts

    def _pivot(
        self, lines: list[str], options: DecodeOptions, first_line: int, names: list[str] | None = None
    ) -> list[list[tuple]]:
        """src -> pivot -> tgt: each line's best translation into the pivot, translated on (`--pivot`)."""
        src_lang, tgt_lang = self.directions.resolve(options.src_lang, options.tgt_lang)
        replace(options, src_lang=src_lang, tgt_lang=tgt_lang)  # made to be checked: a pivot that is neither
        self.directions.check_pivot(src_lang, tgt_lang, options.pivot)  # and both legs are directions
        into = replace(options, pivot=None, tgt_lang=options.pivot, nbest=1, beam=options.beam)
        middle = [hyps[0][0] for hyps in self.search(lines, into, first_line, names=names)]
        onward = replace(options, pivot=None, src_lang=options.pivot, tgt_lang=tgt_lang)
        return self.search(middle, onward, first_line, names=names)

    def search_encoded(
        self,
        encoded: list[list[int]],
        options: DecodeOptions | None = None,
        constraints: list[list[list[int]]] | None = None,
        unmet: list[int] | None = None,
        progress: Callable[[int], None] | None = None,
        split: bool = True,
    ) -> list[list[tuple]]:
        """`search` over lines already encoded (`encode_lines`: non-empty, cut): `mt serve` counts
        their tokens to form its batches before it searches. Lines with `constraints` (target ids per
        phrase) are searched by mt.search.constrained, in batches of their own; the indices of those
        whose constraints did not all fit are appended to `unmet`. `split` False: CTranslate2's batches
        of the call are not re-balanced across its workers (`mt serve` runs calls side by side)."""
        options = (options or DecodeOptions()).resolved(self.decode_cfg)
        if constraints and any(constraints):
            options = replace(options, constraints=True)
        if options.alignment_layer is not None:  # 0-based here; before the search, not after it (an IndexError)
            count = min(len(m.decoder) for m in members(self.model))
            if not 0 <= options.alignment_layer < count:
                raise ConfigError(
                    f"alignment_layer {options.alignment_layer}: the model has {count} decoder layers "
                    f"(0-{count - 1} here; --alignment-layer counts from 1)"
                )
        if options.shortlist:
            self._shortlist()  # read here, once, before batches are searched side by side
        fast = engine(self, options)
        if fast is not None:
            return self._search_engine(fast, encoded, options, progress, split)
        results: list[list[tuple]] = [[] for _ in encoded]
        generator = None
        if options.sampling is not None:
            generator = torch.Generator(device=self.device).manual_seed(options.sampling.seed)
        constrained = [k for k in range(len(encoded)) if constraints and constraints[k]]
        plain = [k for k in range(len(encoded)) if not (constraints and constraints[k])]
        batches = [
            (False, [plain[i] for i in group])
            for group in length_groups([len(encoded[k]) for k in plain], options.max_tokens)
        ]
        batches += [
            (True, [constrained[i] for i in group])
            for group in length_groups([len(encoded[k]) for k in constrained], options.max_tokens)
        ]

        def search(batch: tuple[bool, list[int]]) -> tuple[torch.Tensor, list]:
            src_ids = self.pad_sources([encoded[k] for k in batch[1]])
            if batch[0]:
                return src_ids, self._search_constrained(src_ids, [constraints[k] for k in batch[1]], options)
            return src_ids, self.search_batch(src_ids, options, generator)

        # One at a time where a search shares state: the sampling generator. (Alignments are captured per
        # thread, and their passes run here, one at a time, while the workers search the next batches.)
        workers = 1 if generator is not None else workers_for(options.workers, self.device)
        if workers > 1 and options.parallel == "processes" and not constrained and self.load_args is not None:
            # A group cut in halves keeps the whole group's shortlist candidates: the halves' own would
            # make the translations differ from the same group's searched in threads.
            vocabs = [
                self._group_vocabulary([encoded[k] for k in g]) if options.shortlist else None for _, g in batches
            ]
            halves = [
                (half, vocab) for (_, g), vocab in zip(batches, vocabs) for half in split_for(g, len(batches), workers)
            ]
            batches = [(False, half) for half, _ in halves]
            one = replace(options, workers=1)
            batched = self.search_processes(workers).map([([encoded[k] for k in h], one, v) for h, v in halves])
            searched: Iterator[tuple[torch.Tensor | None, list]] = _without_sources(batched)
        else:
            searched = search_batches(batches, search, workers)
        # closing: a failed alignment pass stops the workers' pool now, not when its frame is collected
        with closing(searched):
            for (is_constrained, group), (src_ids, found) in zip(batches, searched):
                if is_constrained:
                    if unmet is not None:
                        unmet += [k for k, result in zip(group, found) if not result.all_met]
                    found = [result.hypotheses for result in found]
                    if options.beam == 1:  # greedy's score, the log-probability, as the other lines' at beam 1
                        found = [[replace(h, score=h.logprob) for h in hyps] for hyps in found]
                for k, hyps in zip(group, found):
                    texts = self.tgt_tok.decode([h.tokens for h in hyps])
                    results[k] = [(text, h.score) for text, h in zip(texts, hyps)]
                if options.alignment_layer is not None:
                    outputs = [[h.tokens for h in hyps] for hyps in found]
                    aligned = self._aligned([encoded[k] for k in group], outputs, options.alignment_layer, src_ids)
                    for k, alignments in zip(group, aligned):
                        results[k] = [(*r, a) for r, a in zip(results[k], alignments)]
                if progress is not None:
                    progress(len(group))
        return results

    def _search_engine(
        self,
        fast: CTranslate2Engine,
        encoded: list[list[int]],
        options: DecodeOptions,
        progress: Callable[[int], None] | None,
        split: bool,
    ) -> list[list[tuple]]:
        """`search_encoded` through CTranslate2, and the same forced alignment pass as after mt's own
        search; its encoder's half runs for the first groups while CTranslate2 searches."""
        answers: list[list[tuple]] = []
        groups: list[list[int]] = []
        ahead: list[tuple[torch.Tensor, Encoded]] = []  # the first groups' padded sources, encoded
        if options.alignment_layer is not None:
            groups = length_groups([len(ids) for ids in encoded], options.max_tokens)

        # torch's threads for the pass, in this thread only (OpenMP keeps a count per thread): one while
        # CTranslate2's workers search on the cores, and one for the rest where other calls run beside
        # this one (mt serve's, split False); the calling thread's count otherwise, and after the call.
        threads = torch.get_num_threads()

        def meanwhile() -> None:
            torch.set_num_threads(1)
            budget = ENCODE_AHEAD_TOKENS
            for group in groups:
                budget -= len(group) * (max(len(encoded[k]) for k in group) + 1)  # padded, with EOS
                if budget < 0:
                    break
                src_ids = self.pad_sources([encoded[k] for k in group])
                ahead.append((src_ids, encode_sources(self.model, src_ids)))
            if split:
                torch.set_num_threads(threads)

        try:
            decoded = fast.search(self, encoded, options, progress, split, meanwhile if groups else None)
            for hyps in decoded:
                texts = self.tgt_tok.decode([ids for ids, _ in hyps])
                answers.append([(text, score) for text, (_, score) in zip(texts, hyps)])
            for g, group in enumerate(groups):
                outputs = [[ids for ids, _ in decoded[k]] for k in group]
                src_ids, first = ahead[g] if g < len(ahead) else (None, None)
                aligned = self._aligned([encoded[k] for k in group], outputs, options.alignment_layer, src_ids, first)
                for k, alignments in zip(group, aligned):
                    answers[k] = [(*r, a) for r, a in zip(answers[k], alignments)]
        finally:
            if groups:
                torch.set_num_threads(threads)
        return answers

    def _aligned(
        self,
        encoded: list[list[int]],
        outputs: list[list[list[int]]],
        layer: int,
        src_ids: torch.Tensor | None,
        ahead: Encoded | None = None,
    ) -> list[list[str]]:
        """Each output's word alignment (mt.decoding.alignment: one teacher-forced pass of this model,
        whichever search found the outputs; `ahead`: its encoder's half, if it ran already), the
        decoder's halves one at a time: `mt serve` aligns its engine batches on two threads, and two
        passes at once took the cores CTranslate2's workers search on (html served at 0.86-0.87x the
        sentences a second)."""
        if src_ids is None:  # searched in processes: the batch's sources padded here
            src_ids = self.pad_sources(encoded)
        with self._align_lock:
            return word_alignments(self.model, src_ids, encoded, outputs, self.src_tok, self.tgt_tok, layer, ahead)

    def encode_line(self, line: str, tag: int | None = None) -> tuple[torch.Tensor, list[int]]:
        """One line's source ids (after `tag`, as `encode_lines`): (1, src_len) with EOS, ready for
        search, and the ids without EOS."""
        _, encoded, cuts = self.encode_lines([line], 0, tag)
        if not encoded:
            raise MtError(f"{line!r}: nothing to translate (no text the tokenizer reads)")
        for warning in cuts:
            log.warn(warning)
        return self.pad_sources(encoded), encoded[0]

    def best_hypothesis(self, src_ids: torch.Tensor, options: DecodeOptions | None = None) -> Hypothesis:
        """The best translation of one sentence, src_ids (1, src_len), under `options`."""
        return self.search_batch(src_ids, (options or DecodeOptions()).resolved(self.decode_cfg), None)[0][0]

    def search_batch(
        self,
        src_ids: torch.Tensor,
        options: DecodeOptions,
        generator: torch.Generator | None = None,
        vocab: torch.Tensor | None = None,
    ) -> list[list[Hypothesis]]:
        """One padded batch (sentences, src_len) searched as `options` (resolved) ask: sampling, greedy
        (beam 1) or beam search; each sentence's hypotheses, best first. With `options.shortlist`, over
        the batch's candidates (mt.decoding.shortlist), or `vocab`'s (those of the group it is part of)."""
        o = options
        if o.shortlist:
            vocab = self._shortlist().batch_vocabulary(src_ids) if vocab is None else vocab
            found = self._search(shortlisted(self.model, vocab), src_ids, o, generator)
            return to_tokens(vocab, found)
        return self._search(self.model, src_ids, o, generator)

    def _group_vocabulary(self, sources: list[list[int]]) -> torch.Tensor:
        """The shortlist candidates of a batch of these source ids, as `search_batch` finds them."""
        return self._shortlist().batch_vocabulary(self.pad_sources(sources))

    def _shortlist(self) -> Shortlist:
        """The shortlist a search with decode.shortlist uses: the experiment's, read the first time."""
        if self.shortlist is None:
            exp = (self.load_args or {}).get("exp")
            if exp is None:
                raise MtError("--shortlist (decode.shortlist): this Translator was given no shortlist")
            table = load_table(exp)
            if table.meta.get("tokenizer_sha256") != {"src": self.src_tok.sha256, "tgt": self.tgt_tok.sha256}:
                raise MtError(
                    f"{exp.shortlist_path}: built with another tokenizer; build it again with "
                    f"`mt shortlist --exp {exp.root} --force`"
                )
            self.shortlist = Shortlist(table, self.tgt_tok.vocab_size, self.device)
        return self.shortlist

    def _search(self, model, src_ids: torch.Tensor, o: DecodeOptions, generator) -> list[list[Hypothesis]]:
        if o.sampling is not None:
            hyps = sample_search(
                model,
                src_ids,
                o.max_len_a,
                o.max_len_b,
                o.sampling.temperature,
                o.sampling.top_k,
                o.sampling.top_p,
                generator,
                o.no_repeat_ngram,
            )
            return [[h] for h in hyps]
        if o.beam == 1:
            return [[h] for h in greedy_search(model, src_ids, o.max_len_a, o.max_len_b, o.no_repeat_ngram)]
        return beam_search(
            model,
            src_ids,
            o.beam,
            o.alpha,
            o.length_penalty,
            o.max_len_a,
            o.max_len_b,
            nbest=o.nbest,
            stop=o.stop,
            no_repeat_ngram=o.no_repeat_ngram,
        )

    def _search_constrained(self, src_ids, constraints: list[list[list[int]]], options: DecodeOptions) -> list:
        o = options
        if o.no_repeat_ngram and not getattr(self, "_said_no_repeat", False):
            self._said_no_repeat = True  # once: constrained search has no repetition guard
            log.warn(
                f"no_repeat_ngram {o.no_repeat_ngram} (the repetition guard) is not applied to lines with constraints"
            )
        model, vocab = self.model, None
        if o.shortlist:  # the constraints' tokens are candidates too, as indices among them
            vocab = self._shortlist().batch_vocabulary(src_ids, [t for c in constraints for p in c for t in p])
            model = shortlisted(self.model, vocab)
            constraints = [[to_indices(vocab, phrase) for phrase in c] for c in constraints]
        found = constrained_beam_search(
            model,
            src_ids,
            constraints,
            o.beam,
            o.alpha,
            o.length_penalty,
            o.max_len_a,
            o.max_len_b,
            nbest=o.nbest,
            stop=o.stop,
        )
        if vocab is not None:
            for result in found:
                result.hypotheses = to_tokens(vocab, [result.hypotheses])[0]
        return found

    def pad_sources(self, sequences: list[list[int]]) -> torch.Tensor:
        """Source ids (no EOS) as one right-padded (sentences, longest + 1) tensor, each ending in EOS."""
        width = max(len(s) for s in sequences) + 1
        src_ids = torch.full((len(sequences), width), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sequences):
            src_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            src_ids[row, len(ids)] = EOS_ID
        return src_ids.to(self.device)


def _without_sources(batched: Iterator[list]) -> Iterator[tuple[None, list]]:
    """The search processes' answers as (no padded sources, hypotheses); closed, it closes `batched`,
    which lets go of the processes for the next call (`SearchProcesses.map` holds them while it runs)."""
    with closing(batched):
        for found in batched:
            yield None, found
