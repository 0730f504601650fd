"""Lines in, translations out: tokenize, batch by length, search, detokenize, restore input order.

`Translator.load()` reads an experiment (tokenizers, checkpoints, precision) into a `Translator`,
which holds only plain objects: the model(s), the tokenizers, the decoding options, the device.
`Translator.stream()` reads lines as they arrive and writes each group of `buffer` lines (or what
has arrived when a pipe pauses) as soon as it is translated, so `mt translate` answers line by line
in a pipe that stays open and memory stays flat on any input size.

What a call asks beyond the experiment's decode.* settings (n-best lists, sampling, alignments,
constraints) is one `DecodeOptions`, which also decides which of these go together.

Output formats of `stream` (one input line gives):
- "plain": one line, the translation;
- "scores": one line, `SCORE<TAB>TRANSLATION`;
- "nbest": `DecodeOptions.nbest` lines `LINE<TAB>SCORE<TAB>TRANSLATION`, best first, LINE counting
  input lines from 1 (an empty input line gives one line with an empty translation and score 0);
- "moses": the same n best as Moses writes them, which Marian's and fairseq users' scripts read:
  `ID ||| TRANSLATION ||| mt= SCORE ||| SCORE`, ID counting input lines from 0.
SCORE is what the search ranks by: the log-probability divided by the length penalty (beam), or
the log-probability (greedy, sampling). With alignments (`alignment_layer`), every output line gets
one more field, `<TAB>ALIGNMENT`: Pharaoh `i-j` pairs over whitespace-separated words (`mt.alignment`);
an empty input line gives an empty translation and an empty alignment.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Literal

import torch

from mt import log
from mt.alignment import word_alignments
from mt.checkpoint import check_model_config, check_tokenizer, load_checkpoint, model_from_checkpoint
from mt.config.schema import MAX_BEAM, DecodeConfig, ExperimentConfig, InferencePrecision, LengthPenalty, Quantize
from mt.config.values import coerce
from mt.data.batching import length_groups
from mt.directions import Directions
from mt.errors import ConfigError, MtError
from mt.experiment import Experiment
from mt.search.beam import beam_search, greedy_search, sample_search
from mt.search.constrained import constrained_beam_search, split_constrained_line
from mt.search.ensemble import Ensemble
from mt.search.parallel import search_batches, workers_for
from mt.search.steps import Hypothesis
from mt.tokenizer import EOS_ID, PAD_ID, Tokenizer

OutputFormat = Literal["plain", "scores", "nbest", "moses"]  # what one input line gives: module docstring


@dataclass(frozen=True)
class Sampling:
    """Draw translations instead of searching for the best (back-translation)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        # Written so that NaN fails too.
        if not self.temperature > 0:
            raise ConfigError(f"--temperature {self.temperature}: must be above 0")
        if self.top_k < 0:
            raise ConfigError(f"--top-k {self.top_k}: must be 0 (all tokens) or more")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p {self.top_p}: must be in (0, 1]")


@dataclass(frozen=True)
class DecodeOptions:
    """What one call asks of the search beyond the experiment's decode.* settings. Which of these go
    together is decided here, so that `mt translate`, a Python caller of `Translator` and `mt serve`
    refuse the same combinations in the same words. Frozen: `mt serve` batches the sentences of
    requests with equal options. Messages name the options as `mt translate`'s flags (`mt serve` names
    its request fields, the same words)."""

    beam: int | None = None  # this call's beam; None: decode.beam, widened to nbest
    alpha: float | None = None  # None: decode.alpha
    length_penalty: LengthPenalty | None = None  # None: decode.length_penalty
    nbest: int = 1  # hypotheses per line, best first
    sampling: Sampling | None = None  # draw one translation per line instead of searching
    alignment_layer: int | None = None  # 0-based decoder layer whose attention aligns words; None: none
    constraints: bool = False  # each line is SOURCE<TAB>PHRASE<TAB>...: constrained beam search
    src_lang: str | None = None  # the direction (mt.directions): a multilingual model's tag; None: the only one
    tgt_lang: str | None = None
    pivot: str | None = None  # translate into this language first, then from it into tgt_lang

    def __post_init__(self) -> None:
        if self.beam is not None and not 1 <= self.beam <= MAX_BEAM:
            raise ConfigError(f"--beam {self.beam}: must be from 1 to {MAX_BEAM}")
        if self.length_penalty is not None:
            coerce(self.length_penalty, LengthPenalty, "--length-penalty")
        if self.nbest < 1:
            raise ConfigError(f"--nbest {self.nbest}: must be at least 1")
        if self.beam is not None and self.nbest > self.beam:
            raise ConfigError(f"--nbest {self.nbest} is more than --beam {self.beam}: the n best come from the beam")
        if self.sampling is None:
            return
        if self.beam is not None or self.alpha is not None or self.nbest > 1:
            raise ConfigError("--beam, --alpha and --nbest are for beam search; --sample draws one translation per line")
        if self.constraints:
            raise ConfigError("--constraints needs beam search; it cannot be combined with --sample")

    def check_pivot(self) -> None:
        """A pivot translates twice: what only one search can give (alignments to the source, the
        source's constraints) does not go with it."""
        if self.pivot is not None and (self.alignment_layer is not None or self.constraints):
            raise ConfigError("--pivot translates twice; --alignments and --constraints need one translation")
        if self.pivot is not None and self.pivot in (self.src_lang, self.tgt_lang):
            raise ConfigError(f"--pivot {self.pivot}: the pivot is a third language, not the source or target")

    def resolved(self, decode: DecodeConfig) -> DecodeOptions:
        """These options with decode.*'s beam (at least nbest wide), alpha and length penalty filled in."""
        if self.sampling is not None:
            return self
        beam = self.beam if self.beam is not None else max(decode.beam, self.nbest)
        alpha = self.alpha if self.alpha is not None else decode.alpha
        return replace(self, beam=beam, alpha=alpha, length_penalty=self.length_penalty or decode.length_penalty)


def set_precision(model: torch.nn.Module, precision: str, quantize: str | None, device: torch.device):
    """The model in bf16/fp16, or with int8 dynamic quantization of its linear layers (CPU)."""
    coerce(quantize, Quantize, "--quantize")  # one-line errors naming the flag and its choices
    coerce(precision, InferencePrecision, "--precision")
    if quantize == "int8":
        if device.type != "cpu":
            raise MtError("--quantize int8 runs on the CPU; use --precision bf16 or fp16 on a GPU")
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():  # torch marks its quantized tensors as deprecated; they still work
            warnings.simplefilter("ignore")
            return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    if precision == "bf16":
        if device.type == "cpu":
            os.environ.setdefault(ONEDNN_CACHE, "16")
        return model.to(torch.bfloat16)
    if precision == "fp16":
        if device.type != "cuda":
            raise MtError("--precision fp16 needs a GPU; use bf16 on the CPU")
        return model.to(torch.float16)
    return model


# oneDNN, which runs bf16 matmuls on the CPU, caches a primitive (with the weights packed for it) per
# shape, up to 1,024: decoding's shapes change every step, so the cache kept 100-150 MB of copies of
# a 7.6M-parameter model's weights (peak RSS 685 MB against 533 with 16 kept, same speed: EPYC (Zen 4),
# 2026-12-04). Read when oneDNN first makes one; a value the user set is kept.
ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


class Translator:
    """Trained model(s) with their tokenizers and decoding options; `Translator.load` makes one
    from an experiment's checkpoints.

    model: a Transformer or an Ensemble, in eval mode on `device`, in the precision it runs in
    (`precision`, or `quantize` int8); decode_cfg: the decoding settings (kept, not copied: a change
    to it applies to the next search); checkpoint_paths: the files the weights came from, for records
    (scores, reports); averaged_from: for each of these that is an average, the checkpoints it averages."""

    def __init__(self, model: torch.nn.Module, src_tok: Tokenizer, tgt_tok: Tokenizer, decode_cfg: DecodeConfig,
                 device: torch.device | str = "cpu", checkpoint_paths: list[Path] | None = None,
                 precision: str = "fp32", quantize: str | None = None, directions: Directions | None = None):
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        self.directions = directions or Directions((("src", "tgt"),))  # what it translates; tags if multilingual
        self.decode_cfg = decode_cfg
        self.device = torch.device(device)
        self.precision, self.quantize = precision, quantize
        self.checkpoint_paths = list(checkpoint_paths or [])
        self.checkpoint_path = self.checkpoint_paths[0] if self.checkpoint_paths else None
        self.averaged_from: dict[Path, list[str]] = {}  # `Translator.load` fills it
        # Room for EOS; longer inputs are cut rather than crash the position table.
        self.max_src_tokens = self.model.max_positions - 1

    @classmethod
    def load(cls, exp: Experiment, cfg: ExperimentConfig, checkpoint: str | list[str] | None = None,
             device: str = "cpu", precision: str = "fp32", quantize: str | None = None) -> Translator:
        """The experiment's tokenizers and checkpoint(s) (`checkpoint`, else decode.checkpoint: best,
        last, average, step_N or a .pt file; several make an ensemble), each checked against the
        tokenizers and, when it is this experiment's own, against its model config; run on `device`
        in `precision` (fp32, bf16, fp16) or with `quantize` int8 (CPU) instead."""
        torch_device = torch.device(device)
        src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
        names = [checkpoint] if isinstance(checkpoint, str) else list(checkpoint or [cfg.decode.checkpoint])
        expected = {"src": src_tok.sha256, "tgt": tgt_tok.sha256}
        models, paths, averaged = [], [], {}
        for name in names:
            path = exp.find_checkpoint(name)
            state = load_checkpoint(path)
            check_tokenizer(path, state, expected, exp.tokenizer_dir)
            if path.resolve().parent == exp.checkpoints_dir.resolve():  # another experiment's has its own model
                check_model_config(path, state, cfg.model, exp.config_path)
            models.append(model_from_checkpoint(state).to(torch_device).eval())
            paths.append(path)
            if "averaged_from" in state:
                averaged[path] = list(state["averaged_from"])
        model = models[0] if len(models) == 1 else Ensemble(models).eval()
        model = set_precision(model, precision, quantize, torch_device)
        directions = Directions.of(cfg.data.pairs(), cfg.data.multilingual, src_tok)
        translator = cls(model, src_tok, tgt_tok, cfg.decode, torch_device, paths, precision, quantize, directions)
        translator.averaged_from = averaged
        return translator

    def translate(self, lines: list[str]) -> list[str]:
        """Translations of `lines` in the same order; an empty (or blank) line gives an empty line."""
        return [hyps[0][0] for hyps in self.search(lines)]

    def search(self, lines: list[str], options: DecodeOptions | None = None, first_line: int = 0,
               progress: Callable[[int], None] | None = None) -> list[list[tuple]]:
        """For each line, up to `options.nbest` (translation, score) pairs, best first; with
        `options.alignment_layer`, (translation, score, alignment) triples. With `options.constraints`
        each line is SOURCE<TAB>PHRASE<TAB>...: every translation contains each target phrase
        (mt.search.constrained). Warnings name input lines counted from `first_line` + 1. `progress`
        is called with the number of lines done as each batch finishes (not when pivoting)."""
        options = (options or DecodeOptions()).resolved(self.decode_cfg)
        options.check_pivot()
        if options.sampling is not None and first_line:  # a stream's later calls draw anew, not repeat the first's
            options = replace(options, sampling=replace(options.sampling, seed=options.sampling.seed + first_line))
        if options.pivot is not None:
            return self._pivot(lines, options, first_line)
        tag = self.directions.tag(options.src_lang, options.tgt_lang)
        phrases = None
        if options.constraints:
            lines, phrases = (list(column) for column in zip(*map(split_constrained_line, lines))) if lines else ([], [])
        empty = ("", 0.0) if options.alignment_layer is None else ("", 0.0, "")
        results: list[list[tuple]] = [[empty] for _ in lines]
        todo, encoded, cuts = self.encode_lines(lines, first_line, tag)
        for warning in cuts:
            log.warn(warning)
        if progress is not None and len(todo) < len(lines):
            progress(len(lines) - len(todo))  # blank lines: done
        phrase_ids, unmet = None, []
        if phrases is not None:
            # A phrase that normalisation empties (a zero-width character, say) constrains nothing.
            phrase_ids = [[ids for ids in self.tgt_tok.encode(phrases[i]) if ids] if phrases[i] else [] for i in todo]
        for i, hyps in zip(todo, self.search_encoded(encoded, options, phrase_ids, unmet, progress)):
            results[i] = hyps
        for k in unmet:
            log.warn(f"input line {first_line + todo[k] + 1}: not every constraint fits within the length limit "
                     f"(--max-len-a/--max-len-b); the translation that met the most")
        return results

    def encode_lines(self, lines: list[str], first_line: int = 0,
                     tag: int | None = None) -> tuple[list[int], list[list[int]], list[str]]:
        """The indices of the non-blank lines, their source ids (no EOS; after `tag`, a multilingual
        model's target token: `directions.tag`) cut to the model's positions, and one warning per cut
        line ("input line N: T tokens, cut to M")."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        encoded = self.src_tok.encode([lines[i] for i in todo]) if todo else []
        room = self.max_src_tokens - (tag is not None)
        cuts = []
        for k, ids in enumerate(encoded):
            if len(ids) > room:
                cuts.append(f"input line {first_line + todo[k] + 1}: {len(ids)} tokens, cut to {room}")
                encoded[k] = ids[:room]
        if tag is not None:
            encoded = [[tag, *ids] for ids in encoded]
        return todo, encoded, cuts

    def _pivot(self, lines: list[str], options: DecodeOptions, first_line: int) -> list[list[tuple]]:
        """src -> pivot -> tgt: each line's best translation into the pivot, translated on (`--pivot`)."""
        src_lang, tgt_lang = self.directions.resolve(options.src_lang, options.tgt_lang)
        replace(options, src_lang=src_lang, tgt_lang=tgt_lang).check_pivot()  # the target it resolved to, too
        into = replace(options, pivot=None, tgt_lang=options.pivot, nbest=1, beam=options.beam)
        middle = [hyps[0][0] for hyps in self.search(lines, into, first_line)]
        return self.search(middle, replace(options, pivot=None, src_lang=options.pivot, tgt_lang=tgt_lang), first_line)

    def search_encoded(self, encoded: list[list[int]], options: DecodeOptions | None = None,
                       constraints: list[list[list[int]]] | None = None,
                       unmet: list[int] | None = None,
                       progress: Callable[[int], None] | None = None) -> list[list[tuple]]:
        """`search` over lines already encoded (`encode_lines`: non-empty, cut): `mt serve` counts
        their tokens to form its batches before it searches. Lines with `constraints` (target ids per
        phrase) are searched by mt.search.constrained, in batches of their own; the indices of those
        whose constraints did not all fit are appended to `unmet`."""
        options = (options or DecodeOptions()).resolved(self.decode_cfg)
        results: list[list[tuple]] = [[] for _ in encoded]
        generator = None
        if options.sampling is not None:
            generator = torch.Generator(device=self.device).manual_seed(options.sampling.seed)
        constrained = [k for k in range(len(encoded)) if constraints and constraints[k]]
        plain = [k for k in range(len(encoded)) if not (constraints and constraints[k])]
        batches = [(False, [plain[i] for i in group])
                   for group in length_groups([len(encoded[k]) for k in plain], self.decode_cfg.max_tokens)]
        batches += [(True, [constrained[i] for i in group])
                    for group in length_groups([len(encoded[k]) for k in constrained], self.decode_cfg.max_tokens)]

        def search(batch: tuple[bool, list[int]]) -> tuple[torch.Tensor, list]:
            src_ids = self.pad_sources([encoded[k] for k in batch[1]])
            if batch[0]:
                return src_ids, self._search_constrained(src_ids, [constraints[k] for k in batch[1]], options)
            return src_ids, self._search(src_ids, options, generator)

        # One at a time where a search shares state: the sampling generator, attention being captured.
        workers = 1 if generator is not None or options.alignment_layer is not None else \
            workers_for(self.decode_cfg.workers, self.device)
        for (is_constrained, group), (src_ids, found) in zip(batches, search_batches(batches, search, workers)):
            if is_constrained:
                if unmet is not None:
                    unmet += [k for k, result in zip(group, found) if not result.all_met]
                found = [result.hypotheses for result in found]
            for k, hyps in zip(group, found):
                texts = self.tgt_tok.decode([h.tokens for h in hyps])
                results[k] = [(text, h.score) for text, h in zip(texts, hyps)]
            if options.alignment_layer is not None:
                aligned = word_alignments(self.model, src_ids, [encoded[k] for k in group], found,
                                          self.src_tok, self.tgt_tok, options.alignment_layer)
                for k, alignments in zip(group, aligned):
                    results[k] = [(*r, a) for r, a in zip(results[k], alignments)]
            if progress is not None:
                progress(len(group))
        return results

    def encode_line(self, line: str, tag: int | None = None) -> tuple[torch.Tensor, list[int]]:
        """One line's source ids (after `tag`, as `encode_lines`): (1, src_len) with EOS, ready for
        search, and the ids without EOS."""
        _, encoded, cuts = self.encode_lines([line], 0, tag)
        for warning in cuts:
            log.warn(warning)
        return self.pad_sources(encoded), encoded[0]

    def best_hypothesis(self, src_ids: torch.Tensor) -> Hypothesis:
        """The best translation of one sentence, src_ids (1, src_len), under the decoding settings."""
        return self._search(src_ids, DecodeOptions().resolved(self.decode_cfg), None)[0][0]

    def _search(self, src_ids, options: DecodeOptions, generator) -> list[list[Hypothesis]]:
        cfg = self.decode_cfg
        if options.sampling is not None:
            sampling = options.sampling
            hyps = sample_search(self.model, src_ids, cfg.max_len_a, cfg.max_len_b, sampling.temperature,
                                 sampling.top_k, sampling.top_p, generator)
            return [[h] for h in hyps]
        if options.beam == 1:
            return [[h] for h in greedy_search(self.model, src_ids, cfg.max_len_a, cfg.max_len_b)]
        return beam_search(self.model, src_ids, options.beam, options.alpha, options.length_penalty, cfg.max_len_a,
                           cfg.max_len_b, nbest=options.nbest, stop=cfg.stop)

    def _search_constrained(self, src_ids, constraints: list[list[list[int]]], options: DecodeOptions) -> list:
        cfg = self.decode_cfg
        return constrained_beam_search(self.model, src_ids, constraints, options.beam, options.alpha,
                                       options.length_penalty, cfg.max_len_a, cfg.max_len_b, nbest=options.nbest,
                                       stop=cfg.stop)

    def pad_sources(self, sequences: list[list[int]]) -> torch.Tensor:
        """Source ids (no EOS) as one right-padded (sentences, longest + 1) tensor, each ending in EOS."""
        width = max(len(s) for s in sequences) + 1
        src_ids = torch.full((len(sequences), width), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sequences):
            src_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            src_ids[row, len(ids)] = EOS_ID
        return src_ids.to(self.device)

    def stream(self, lines: Iterable[str | None], write: Callable[[str], None], buffer: int = 256,
               options: DecodeOptions | None = None, output: OutputFormat = "plain") -> int:
        """Translate lines as they come, `buffer` at a time, and what is pending whenever `lines` gives
        None (the input has paused: `input_lines`); write the output in input order, in the `output`
        format of the module docstring; returns the number of lines."""
        if buffer < 1:
            raise ConfigError(f"--buffer {buffer}: must be at least 1")
        coerce(output, OutputFormat, "output")
        count = 0
        pending: list[str] = []
        at_pauses = options is None or options.sampling is None  # samples depend on the batches: keep them fixed
        for line in lines:
            if line is not None:
                pending.append(line.rstrip("\r\n"))
            if pending and ((line is None and at_pauses) or len(pending) >= buffer):
                self._flush(pending, write, count, options, output)
                count += len(pending)
                pending = []
        if pending:
            self._flush(pending, write, count, options, output)
            count += len(pending)
        return count

    def _flush(self, pending: list[str], write, first_line: int, options: DecodeOptions | None, output: str) -> None:
        for offset, hyps in enumerate(self.search(pending, options, first_line)):
            if output == "nbest":
                for text, score, *alignment in hyps:
                    write("\t".join([f"{first_line + offset + 1}", f"{score:.4f}", text, *alignment]))
            elif output == "moses":
                for text, score, *alignment in hyps:
                    write(" ||| ".join([f"{first_line + offset}", text, f"mt= {score:.4f}", f"{score:.4f}", *alignment]))
            elif output == "scores":
                text, score, *alignment = hyps[0]
                write("\t".join([f"{score:.4f}", text, *alignment]))
            else:
                write("\t".join([hyps[0][0], *hyps[0][2:]]))
