"""Back-translation (Sennrich et al., 2016): monolingual text of the target language, translated into the
source language by a model of the reverse direction, becomes synthetic training pairs.

`mt backtranslate --reverse R --mono SPEC --exp E`: R translates E's target language into E's source
language (E en->de, R de->en); SPEC is `text:FILE` (one sentence a line, .gz too) or a parallel source
spec whose target side is taken. Every non-empty line that is not a reference of E's valid or test
split (those would be scored against themselves) is translated in chunks that survive a kill
(mt.apps.chunked: E/backtranslate/chunks/), then joined into E/backtranslate/train.SRC (the synthetic
sources) and train.TGT (the monolingual text), and E/backtranslate/manifest.json, written last, says
how: once it exists the back-translation is done.

The search is R's beam search (its decode.*, or the flags), or, as Edunov et al. (2018) found better
at scale, sampling (`sampling`: top-k, top-p) or beam search plus noise (`noise`: each word deleted
with probability 0.1, replaced by the filler <blank> with 0.1, and the words shuffled no further than
3 positions). Each chunk draws from a seed of its own, so a resumed run writes the same corpus.

The synthetic pairs join E's data.train as `bt:files:E/backtranslate/train`: bt: marks them, so that
E's tokenizer keeps <BT> whole and binarize puts it before each synthetic source (tagged
back-translation, Caswell et al., 2019), with its own counts in binarize's statistics; `tagged=False`
adds them unmarked. E gets, when it has no config, R's with the direction reversed (R's training
corpus read the other way, plus the synthetic pairs); a config of its own gets the spec added, before
E has a tokenizer (one without <BT> cannot read tagged pairs) and before it has data or checkpoints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import unicodedata
from collections import Counter
from pathlib import Path

from mt import log
from mt.apps import chunked
from mt.atomic_files import write_json_atomic, write_text_atomic
from mt.config.schema import ExperimentConfig, save_yaml
from mt.config.sources import BACK_TRANSLATED, MAX_WEIGHT, absolute_spec, parse_source, reversed_spec
from mt.data.corpus import LineOrigins, clean_text, load_split
from mt.data.dataset import file_sha256
from mt.data.text_files import read_lines
from mt.decoding.options import DecodeOptions, Sampling
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.text.sentences import UNSPACED
from mt.tokenizer import NOISE_FILLER

MONO_TEXT = "text:"  # a --mono spec of one-sided text
DELETE, REPLACE, SHUFFLE_DISTANCE = 0.1, 0.1, 3  # Edunov et al. (2018), Sec. 3


def backtranslate_dir(exp: Experiment) -> Path:
    return exp.root / "backtranslate"


def corpus_spec(exp: Experiment, tagged: bool, weight: float = 1.0) -> str:
    """The synthetic corpus as a train spec of `exp` (absolute: the config works from any directory)."""
    spec = f"files:{(backtranslate_dir(exp) / 'train').resolve()}" + (f"*{weight:g}" if weight != 1 else "")
    return BACK_TRANSLATED + spec if tagged else spec


def listed_spec(cfg: ExperimentConfig, exp: Experiment) -> str | None:
    """The spec of cfg's data.train that reads `exp`'s synthetic corpus (tagged or not, any weight), or None."""
    corpus = f"files:{(backtranslate_dir(exp) / 'train').resolve()}"
    for spec in map(str, cfg.data.train):
        text = absolute_spec(spec).removeprefix(BACK_TRANSLATED).strip()
        if text == corpus or (text.startswith(corpus) and text[len(corpus) :].lstrip().startswith("*")):
            return spec
    return None


def noisy(line: str, rng: random.Random) -> str:
    """Edunov et al.'s noise on a synthetic source: words deleted, replaced by the filler, shuffled locally
    (each word's position moved by a uniform draw from [0, SHUFFLE_DISTANCE], then sorted). In a script
    written without spaces each character (with its vowel signs and tone marks) counts as a word: a
    Chinese line, one word by its spaces, was deleted whole one time in ten and left as it was otherwise.
    Words are written with a space between them unless they come from one word of the line."""
    words = []  # (the word or the filler, the line's word it comes from)
    for place, spaced in enumerate(line.split()):
        for unit in _units(spaced):
            draw = rng.random()
            if draw < DELETE:
                continue
            words.append((NOISE_FILLER if draw < DELETE + REPLACE else unit, place))
    keys = [i + rng.uniform(0, SHUFFLE_DISTANCE) for i in range(len(words))]
    shuffled = [word for _, word in sorted(zip(keys, words), key=lambda pair: pair[0])]
    return "".join(
        f"{'' if k == 0 or place == shuffled[k - 1][1] else ' '}{word}" for k, (word, place) in enumerate(shuffled)
    )


def _units(word: str) -> list[str]:
    """The words `noisy` draws for in a word between spaces: each character of a script written without
    spaces, with the combining marks after it (Thai's vowel signs and tone marks), and each run of
    other characters."""
    units: list[str] = []
    for char in word:
        joins = unicodedata.category(char).startswith("M") or not (
            UNSPACED.match(char) or (units and UNSPACED.match(units[-1][0]))
        )
        if units and joins:
            units[-1] += char
        else:
            units.append(char)
    return units


def read_mono(
    specs: list[str], lang: str, pair: tuple[str, str], quiet: bool = False
) -> tuple[list[str], int, int, LineOrigins]:
    """The non-empty lines of the monolingual specs (text:FILE, or the `lang` side of a parallel spec of
    `pair`), in order, how many empty lines and lines that are no text were left out, and where each
    line was read (for warnings).
    A line that is no text (not UTF-8, a malformed record) is left out with a warning (a crawl's one bad
    byte stopped the run), as binarize leaves out such a pair."""
    lines: list[str] = []
    invalid: list[str] = []
    origins = LineOrigins()
    for spec in specs:
        text = str(spec).strip()
        if text.startswith(MONO_TEXT):
            path = os.path.expanduser(text[len(MONO_TEXT) :].strip())
            if not path:
                raise ConfigError(f"--mono {spec!r}: text: needs a file")
            if not Path(path).is_file():
                raise MtError(f"--mono {spec!r}: {path}: no such file")
            positions: list[int] = []
            lines += read_lines(path, invalid, positions)
            origins.add(path, "line", positions)
        else:
            try:
                source = parse_source(text, "train", pair)
            except ConfigError as exc:
                raise ConfigError(f"--mono {str(exc).removeprefix('data.train: ')}") from None
            lines += load_split([source], invalid, (origins, pair.index(lang)))[pair.index(lang)]
    if invalid and not quiet:  # `quiet`: a done back-translation's check, which said it when it ran
        log.warn(f"--mono: {len(invalid):,} lines that are not text left out (first: {invalid[0]})")
    keep = [bool(line.strip()) for line in lines]
    kept = [line for line, k in zip(lines, keep) if k]
    if not kept:
        raise MtError(f"--mono {', '.join(specs)}: no text to back-translate")
    return kept, len(lines) - len(kept), len(invalid), origins.kept(keep)


def without_held_out(
    lines: list[str], exp: Experiment, reverse_cfg: ExperimentConfig, origins: LineOrigins
) -> tuple[list[str], int, LineOrigins]:
    """`lines` less those that are a reference of E's valid or test split (E's config's, else R's read
    the other way, as E's will be): trained on as targets, they would be scored against themselves. A
    warning says how many were left out."""
    own = exp.has_config()
    cfg = exp.load_config() if own else reverse_cfg
    side = 1 if own else 0  # the monolingual language: E's target, R's source
    # Compared as binarize will clean the training text (Unicode form, spaces): a reference written
    # with two spaces, or decomposed, is the same line once the synthetic corpus is cleaned
    normalize, fixed = cfg.data.normalize, Counter()  # what cleaning fixed: not counted here

    def cleaned(line: str) -> str:
        return clean_text(line, normalize, fixed)

    held: set[str] = set()
    for split in ("valid", "test"):
        if getattr(cfg.data, split):
            held.update(cleaned(line) for line in load_split(cfg.data.sources(split))[side])
    keep = [cleaned(line) not in held for line in lines]
    kept = [line for line, k in zip(lines, keep) if k]
    if len(kept) < len(lines):
        log.warn(f"--mono: {len(lines) - len(kept):,} lines are references of the valid or test split: left out")
    if not kept:
        raise MtError("--mono: every line is a reference of the valid or test split: nothing to back-translate")
    return kept, len(lines) - len(kept), origins.kept(keep)


def final_config(reverse_cfg: ExperimentConfig, exp: Experiment, spec: str) -> ExperimentConfig:
    """R's config turned around: E's direction is R's reversed, its data R's corpora read the other way
    (mt.config.sources.reversed_spec; R's own back-translations are left out) and the synthetic pairs."""
    src, tgt = reverse_cfg.data.tgt_lang, reverse_cfg.data.src_lang
    turned = {
        split: [t for item in getattr(reverse_cfg.data, split) if (t := reversed_spec(item, (tgt, src)))]
        for split in ("train", "valid", "test")
    }
    data = dataclasses.replace(
        reverse_cfg.data,
        src_lang=src,
        tgt_lang=tgt,
        train=turned["train"] + [spec],
        valid=turned["valid"],
        test=turned["test"],
    )
    return dataclasses.replace(reverse_cfg, data=data)


def prepare_final(
    reverse: Experiment, reverse_cfg: ExperimentConfig, exp: Experiment, spec: str, weight_given: bool
) -> tuple[ExperimentConfig, str]:
    """E's config (module docstring), written when new or when the synthetic corpus is added to it, and
    the spec that reads the corpus there (one E lists already keeps its weight, unless --weight says
    another; a tag other than asked is refused)."""
    made = [
        what
        for done, what in (
            (exp.has_checkpoints(), "checkpoints"),
            (exp.has_data(), "binarized data"),
            (exp.has_tokenizer(), "a tokenizer"),
        )
        if done
    ]
    if not exp.has_config():
        if made:
            raise ConfigError(f"--exp {exp.root}: has {made[0]} but no config.yaml; back-translate into a new --exp")
        cfg = final_config(reverse_cfg, exp, spec)
        exp.root.mkdir(parents=True, exist_ok=True)
        write_text_atomic(exp.config_path, save_yaml(cfg))
        log.info(
            f"backtranslate: {exp.config_path} written from {reverse.root}'s, {cfg.data.src_lang}->{cfg.data.tgt_lang}"
        )
        return cfg, spec
    cfg = exp.load_config()
    if cfg.data.multilingual:
        raise ConfigError(f"--exp {exp.root}: a multilingual experiment; back-translate into one of a single direction")
    if (cfg.data.tgt_lang, cfg.data.src_lang) != (reverse_cfg.data.src_lang, reverse_cfg.data.tgt_lang):
        raise ConfigError(
            f"--reverse {reverse.root}: translates {reverse_cfg.data.src_lang}->{reverse_cfg.data.tgt_lang}, "
            f"not {cfg.data.tgt_lang}->{cfg.data.src_lang}, the reverse of --exp {exp.root}"
        )
    listed = listed_spec(cfg, exp)
    if listed is not None:
        check_listed(exp, listed, spec, weight_given)
        return cfg, listed
    if made:
        raise ConfigError(
            f"--exp {exp.root}: has {made[0]} made without the back-translation; add {spec} to its "
            f"data.train before its first step, or back-translate into a new --exp"
        )
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, train=[*cfg.data.train, spec]))
    write_text_atomic(exp.config_path, save_yaml(cfg))
    log.info(f"backtranslate: {spec} added to {exp.config_path}'s data.train")
    return cfg, spec


def _lines_sha256(lines: list[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()[:16]


def check_listed(exp: Experiment, listed: str, spec: str, weight_given: bool) -> None:
    """The corpus as E's data.train lists it (`listed`) reads it as asked (`spec`): tagged or not as
    --tag/--no-tag say, with --weight's weight if given; a one-line refusal otherwise (they are E's
    config, which a flag does not change silently)."""
    if listed.strip().startswith(BACK_TRANSLATED) != spec.startswith(BACK_TRANSLATED):
        raise ConfigError(
            f"--exp {exp.root}: its data.train has {listed}, {'without' if spec.startswith(BACK_TRANSLATED) else 'with'} "
            f"the tag; give {'--no-tag' if spec.startswith(BACK_TRANSLATED) else '--tag'} or change its config"
        )
    if weight_given and absolute_spec(listed) != absolute_spec(spec):
        raise ConfigError(
            f"--weight: --exp {exp.root}'s data.train has {listed}; leave out --weight or change its config"
        )


def _search_record(options: DecodeOptions, noise: bool) -> dict:
    """How the synthetic sources were made (resolved `options`): a resume must make them the same way."""
    search = "sampling" if options.sampling is not None else "beam+noise" if noise else "beam"
    return {"search": search, **options.record()}


def chunk_translator(
    reverse: Experiment,
    reverse_cfg: ExperimentConfig,
    model_file: str,
    options: DecodeOptions,
    noise: bool,
    device: str,
    precision: str,
    quantize: str | None,
    origins: LineOrigins | None = None,
) -> chunked.Translate:
    """The reverse model, loaded, as mt.apps.chunked translates with it: a chunk samples from a seed of its own
    (sampling's + the chunk's number), and its noise too, so that a resumed run draws as the first did.
    Its warnings name a line where `origins` says it was read (else by its place among the lines)."""
    from mt.decoding.translator import Translator

    translator = Translator.load(reverse, reverse_cfg, [model_file], device, precision, quantize)
    sampling = options.sampling

    def translate(index: int, pair: tuple[str, str], chunk: list[str], first: int) -> list[str]:
        draws = dataclasses.replace(sampling, seed=(sampling.seed + index) % 2**63) if sampling is not None else None
        names = origins.names(first, len(chunk)) if origins is not None else None
        found = chunked.searched_or_copied(
            translator, chunk, dataclasses.replace(options, sampling=draws), first, names, reseed=False
        )
        if noise:
            rng = random.Random(f"noise-{index}")
            found = [noisy(line, rng) for line in found]
        return found

    return translate


def check_choices(mono: list[str], sampling: Sampling | None, noise: bool, tagged: bool, weight: float) -> None:
    """The flags that cannot go together, refused before anything is read or written."""
    if sampling is not None and noise:
        raise ConfigError("--noise goes with beam search, --sample draws: choose one")
    if not 0 < weight <= MAX_WEIGHT:  # written so that NaN fails too; the config's corpus spec holds it
        raise ConfigError(f"--weight {weight}: must be above 0 and at most {MAX_WEIGHT:g}")
    if noise and not tagged:
        raise ConfigError(
            "--noise puts <blank> in the synthetic sources, which only the tokenizer of a tagged "
            "(bt:) corpus keeps whole: leave out --no-tag"
        )
    if not mono:
        raise ConfigError("give the monolingual text with --mono (text:FILE, or a parallel spec)")


MANIFEST_FIELDS = {"lines": (int,), "seconds": (int, float), "corpus": (str,)}


def read_manifest(exp: Experiment) -> dict:
    """backtranslate/manifest.json, checked for what `mt backtranslate` reads of it."""
    return chunked.read_manifest(backtranslate_dir(exp) / "manifest.json", MANIFEST_FIELDS, "mt backtranslate")


def backtranslate(
    reverse: Experiment,
    exp: Experiment,
    mono: list[str],  # --mono specs: text:FILE or parallel specs (their side in the reverse's source language)
    options: DecodeOptions | None = None,  # the reverse model's search (over its decode.*), or sampling
    noise: bool = False,  # Edunov et al.'s noise on the beam's output
    tagged: bool = True,
    weight: float = 1.0,
    chunk_lines: int | None = None,
    checkpoint: str | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    quantize: str | None = None,
) -> dict:
    """Translate `mono` with `reverse` into synthetic pairs for `exp` (module docstring); returns the manifest."""
    out = backtranslate_dir(exp)
    if (out / "manifest.json").exists():  # written last: done, whatever the search flags say now
        manifest = read_manifest(exp)  # a damaged one is refused, not called done
        if manifest.get("mono") != list(mono):  # other text (a recipe edited): not this corpus
            raise MtError(
                f"{out}: back-translated from --mono {', '.join(manifest.get('mono') or ['?'])}, not "
                f"{', '.join(mono)}; remove {out} to back-translate again, or use another --exp"
            )
        if reverse.has_config():
            asked = str(reverse.find_checkpoint(checkpoint or reverse.load_config().decode.checkpoint).resolve())
            if manifest.get("reverse") != asked:  # another reverse model
                raise MtError(
                    f"{out}: back-translated by {manifest.get('reverse')}, not {asked}; remove {out} to "
                    "back-translate again, or use another --exp"
                )
            if manifest.get("reverse_sha256") not in (None, file_sha256(Path(asked))[:16]):  # trained again
                raise MtError(
                    f"{out}: back-translated by an earlier {asked} (saved again since); remove {out} to "
                    "back-translate again, or use another --exp"
                )
            if manifest.get("mono_sha256"):  # the text itself, not only its name
                reverse_cfg = reverse.load_config()
                pair = (reverse_cfg.data.src_lang, reverse_cfg.data.tgt_lang)
                try:
                    now = _lines_sha256(read_mono(mono, pair[0], (pair[1], pair[0]), quiet=True)[0])
                except MtError:  # removed since (its synthetic pairs stand): nothing to compare
                    now = manifest["mono_sha256"]
                if now != manifest["mono_sha256"]:
                    raise MtError(
                        f"{out}: the text of --mono {', '.join(mono)} has changed since it was back-translated; "
                        f"remove {out} to back-translate it again, or use another --exp"
                    )
        listed = listed_spec(exp.load_config(), exp) if exp.has_config() else None
        if listed is not None:  # done, but not as asked (was: "done", the flags ignored)
            check_listed(exp, listed, corpus_spec(exp, tagged, weight), weight != 1.0)
        log.info(f"backtranslate: done already ({out}; remove it to back-translate again)")
        return manifest
    check_choices(mono, options.sampling if options else None, noise, tagged, weight)
    if not reverse.has_config():
        raise MtError(f"--reverse {reverse.root}: no experiment there (no config.yaml)")
    reverse_cfg = reverse.load_config()
    if reverse_cfg.data.multilingual:
        raise ConfigError(
            f"--reverse {reverse.root}: a multilingual model; back-translation takes a model of one direction"
        )
    options = (options or DecodeOptions()).resolved(reverse_cfg.decode)
    reverse_pair = (reverse_cfg.data.src_lang, reverse_cfg.data.tgt_lang)
    model_file = str(reverse.find_checkpoint(checkpoint or reverse_cfg.decode.checkpoint).resolve())
    # Everything that can be refused is, before E's config is written or changed: the reverse model too.
    lines, empty, invalid, origins = read_mono(mono, reverse_pair[0], (reverse_pair[1], reverse_pair[0]))
    mono_sha256 = _lines_sha256(lines)  # as read: a done back-translation checks the text against it
    lines, held_out, origins = without_held_out(lines, exp, reverse_cfg, origins)
    how = {
        "reverse": model_file,
        "reverse_sha256": file_sha256(Path(model_file))[:16],  # the model, not only its path
        **_search_record(options, noise),
        "precision": precision,
        "quantize": quantize,
    }
    plan = chunked.plan_chunks(out, [(reverse_pair, lines)], chunk_lines, how, "the monolingual lines")
    translate = None
    if plan.todo:
        translate = chunk_translator(
            reverse, reverse_cfg, model_file, options, noise, device, precision, quantize, origins
        )
    # The final model's config is the reverse model's as saved: the flags changed only its search.
    cfg, spec = prepare_final(reverse, reverse_cfg, exp, corpus_spec(exp, tagged, weight), weight != 1.0)
    chunks, state = chunked.translate_chunks(out, plan, translate, "backtranslate")
    texts = {
        out / f"train.{cfg.data.tgt_lang}": chunked.joined(out, chunks, 0),  # the real text: E's target side
        out / f"train.{cfg.data.src_lang}": chunked.joined(out, chunks, 1),
    }
    chunked.write_joined(out, texts, "mt backtranslate")
    manifest = {
        "reverse": model_file,
        "reverse_sha256": how["reverse_sha256"],
        "mono": list(mono),
        "mono_sha256": mono_sha256,
        "lines": len(lines),
        "empty_lines_skipped": empty,
        "invalid_lines_skipped": invalid,  # not text (not UTF-8, a malformed record): said when read
        "held_out_lines_skipped": held_out,
        "chunks": len(chunks),
        "chunk_lines": state["chunk_lines"],
        **_search_record(options, noise),
        "tagged": tagged,
        "seconds": state["seconds"],
        "corpus": spec,
    }
    write_json_atomic(out / "manifest.json", manifest)  # last: marks the back-translation done
    log.info(f"backtranslate: {len(lines):,} synthetic pairs in {', '.join(str(p) for p in texts)}")
    return manifest
