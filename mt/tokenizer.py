"""SentencePiece subword models loaded with mt's fixed special ids: encode and decode.

The paper uses byte-pair encoding with a shared source-target vocabulary of about 37000 tokens for
EN-DE (Sec. 5.1); mt trains SentencePiece (unigram by default, or BPE) on raw text, joint by default
so that the embeddings can be shared (Sec. 3.4): `mt.data.train_tokenizer`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from mt import log
from mt.errors import MtError

# Fixed in every model we train, so that batching, the model and search can use them as constants.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def language_tag(lang: str) -> str:
    """The token that asks a multilingual model for `lang` (Johnson et al., 2017): the first of its
    source, a user symbol of the SentencePiece model, which never splits it."""
    return f"<2{lang}>"


TAG = re.compile(r"<2[A-Za-z]\w*>")  # any language's tag, as a piece
# Back-translation (mt.apps.backtranslate): the tag before each synthetic source (Caswell et al., 2019), and
# the filler that noise puts in place of words (Edunov et al., 2018). User symbols of a tokenizer
# trained on back-translated pairs: never split.
BACK_TRANSLATION_TAG = "<BT>"
NOISE_FILLER = "<blank>"
_DROPPED_ON_DECODE = frozenset((PAD_ID, BOS_ID, EOS_ID))
# SentencePiece's list calls start a thread pool each time, which costs many times one short line's
# encoding: fewer lines than this go one at a time (`mt serve`'s one-sentence requests).
BATCH_CALL_LINES = 32
# The lines of the last few calls of fewer lines than that, remembered: `mt serve` encodes a request's
# sentence three times (to cut it, to check it is readable, to search it), each costing its event loop
# a trip out of the interpreter; most lines of batch calls are met once. Lines up to RECENT_CHARS long.
RECENT_LINES, RECENT_CHARS = 256, 1000
SPELLINGS = 1 << 16  # words whose spelling's cost is remembered (spelling_costs)
# Control characters and line/paragraph separators (with the spaces around them) in a decoded
# translation: byte pieces can spell them (a sampled <0x0A> is a newline), and one would split one
# translation over two output lines, or a TAB-separated output line in two fields.
_LINE_BREAKING = re.compile("\\s*[\x00-\x1f\x7f-\x9f\u2028\u2029]+\\s*")


WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")  # letters, with an apostrophe inside ("DON'T")
DOTTED_I = frozenset({"tr", "az", "crh", "gag"})  # i/İ and ı/I are two letters, not one


def dotted_i(language: str | None) -> bool:
    """Whether `language` writes i and ı as two letters (Turkish: "İstanbul", "ISPARTA" is "Isparta")."""
    return bool(language) and language.replace("_", "-").split("-")[0].lower() in DOTTED_I


def lower(text: str, language: str | None = None) -> str:
    """`text` in lower case as `language` writes it: in Turkish "İ" is "i" and "I" is "ı" (Python's
    lower() makes "İ" an "i" with a dot above, which no vocabulary spells as a word)."""
    return (text.replace("İ", "i").replace("I", "ı") if dotted_i(language) else text).lower()


def upper(text: str, language: str | None = None) -> str:
    """`text` in capitals as `language` writes it: in Turkish "i" is "İ" (and "ı" is "I", as Python has it)."""
    return (text.replace("i", "İ") if dotted_i(language) else text).upper()


def capitalised(word: str, language: str | None = None) -> str:
    """`word` with its first letter a capital, the rest as it is ("istanbul": "İstanbul" in Turkish)."""
    first = upper(word[:1], language) if dotted_i(language) else word[:1].title()
    return first + word[1:]


TABLE_MIN = 2  # times a word is met in the training text for `casing_table` to say how it is written
TABLE_WORDS = 200_000  # the commonest words it keeps (a few megabytes; rarer words are the vocabulary's)
TABLE_SHARE = 0.7  # of a word's uses, the share its form in the table must have (chosen on val)
SENTENCE_STARTS = re.compile(r"(?<=[.!?…:])[\"'”’“‘»«)\]]*\s+|^\W*-\s+")  # a line's later sentences, a dialogue's dash


def casing_table(lines: Iterable[str], language: str | None = None) -> dict[str, str]:
    """Each word of `lines` (a source language's training text) in the casing it writes the word in,
    by the word in capitals ("MANN": "Mann", "STRASSE": "Straße", "PARK": "park", "NASA": "NASA"): its
    form inside sentences (not a sentence's first word, where every word has a capital) where at least
    TABLE_SHARE of its uses have that form ("Paar" and "paar" both common: neither), of the
    TABLE_WORDS commonest words met TABLE_MIN times or more; words of no case (Chinese, Arabic) are
    not kept; words in capitals as `language` writes them (Turkish "İ"). Saved beside the tokenizer;
    mt.text.casing reads text in capitals, title case or lower case by it."""
    counts: Counter[str] = Counter()
    for line in lines:
        for sentence in SENTENCE_STARTS.split(line):
            counts.update(WORD.findall(sentence)[1:])
    totals: Counter[str] = Counter()
    best: dict[str, tuple[int, str]] = {}
    for word, count in counts.items():
        key = upper(word, language)
        if key == lower(word, language):
            continue  # no case
        totals[key] += count
        if count > best.get(key, (0, ""))[0]:
            best[key] = (count, word)
    return {
        key: best[key][1]
        for key, total in totals.most_common(TABLE_WORDS)
        if total >= TABLE_MIN and best[key][0] >= TABLE_SHARE * total
    }


def read_casing(path: Path) -> dict[str, dict[str, str]]:
    """Casing tables as `mt train-tokenizer` writes them (language -> `casing_table`); {} where there is
    no file (a tokenizer trained before them)."""
    try:
        tables = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or not JSON
        raise MtError(f"{path}: unreadable ({exc}); remove it (`mt train-tokenizer` writes it again)") from None
    if not isinstance(tables, dict) or not all(
        isinstance(table, dict) and all(isinstance(v, str) for v in table.values()) for table in tables.values()
    ):
        raise MtError(f"{path}: not a casing table (language -> word -> casing); remove it")
    return tables


def model_path(prefix: Path) -> Path:
    """SentencePiece's model file for a prefix ("spm" -> "spm.model"; "spm.src" -> "spm.src.model")."""
    return Path(f"{prefix}.model")


class Tokenizer:
    """A loaded SentencePiece model with the fixed special ids above."""

    def __init__(self, path: Path, proto: bytes, threads: int = 2):
        self.path = Path(path)
        self.proto = proto  # the model file's bytes: binarize's worker processes load it from these
        self.sha256 = hashlib.sha256(proto).hexdigest()
        self.threads = threads  # for encode()
        self._recent: dict[str, tuple[int, ...]] = {}  # line -> ids, of short calls (RECENT_LINES)
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(proto)
        except (RuntimeError, OSError):
            raise MtError(f"{self.path}: not a SentencePiece model (corrupt or truncated)") from None
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise MtError(
                f"{self.path}: special ids pad/unk/bos/eos are {ids}, expected "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; train it with `mt train-tokenizer`"
            )
        self.vocab_size: int = self._sp.vocab_size()
        # byte_fallback's <0xNN> pieces, id -> byte: a search may end a character halfway (see decode)
        self._bytes = {i: int(self._sp.id_to_piece(i)[1:-1], 16) for i in range(self.vocab_size) if self._sp.is_byte(i)}
        self._characters: dict[str, bool] = {}  # character -> whether the vocabulary writes it (unknown_character)
        self._costs: dict[str, tuple[int, int, float]] = {}  # word -> its spelling's cost (spelling_costs)
        self.casing_file: Path | None = None  # its experiment's casing tables (Experiment.load_tokenizers)
        self._casing: dict[str, dict[str, str]] | None = None

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        path = Path(path)
        try:
            proto = path.read_bytes()
        except FileNotFoundError:
            raise MtError(f"{path}: tokenizer model not found") from None
        except OSError as exc:
            raise MtError(f"{path}: cannot read tokenizer model ({exc.strerror})") from None
        return cls(path, proto)

    def encode(self, lines: list[str]) -> list[list[int]]:
        """Subword ids per line, without BOS/EOS (batching adds them)."""
        lines = list(lines)
        try:
            if len(lines) < BATCH_CALL_LINES:
                return [self._recalled(line) for line in lines]
            return self._sp.encode(lines, out_type=int, num_threads=self.threads)
        except (TypeError, UnicodeEncodeError, RuntimeError):  # sentencepiece's answers to a str that is not text
            _check_unicode(lines)
            raise

    def _recalled(self, line: str) -> list[int]:
        """One line's ids, from the lines of recent short calls where it is one of them (RECENT_LINES)."""
        ids = self._recent.get(line)
        if ids is None:
            ids = tuple(self._sp.encode(line, out_type=int))
            if len(line) <= RECENT_CHARS:
                if len(self._recent) >= RECENT_LINES:
                    self._recent.clear()
                self._recent[line] = ids
        return list(ids)

    def sample(self, lines: list[str], alpha: float) -> list[list[int]]:
        """A segmentation per line drawn at random from all of them (subword regularization; BPE-dropout
        for a BPE model). Not reproducible: sentencepiece's generator is per thread and cannot be seeded
        per call (google/sentencepiece#540), so the binarized data, not a seed, are what is kept."""
        lines = list(lines)
        try:
            return self._sp.encode(
                lines, out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=self.threads
            )
        except (TypeError, UnicodeEncodeError):
            _check_unicode(lines)
            raise

    @property
    def casing(self) -> dict[str, dict[str, str]]:
        """A source language -> its words in the casing its training text writes them (`casing_table`),
        read from `casing_file` when first asked (only text that is recased needs it: training, binarize
        and export never read it); {} where the experiment has none. A damaged file: a one-line error."""
        if self._casing is None:
            try:
                self._casing = read_casing(self.casing_file) if self.casing_file is not None else {}
            except MtError as exc:  # said once; the vocabulary reads casing alone (a server goes on)
                log.warn(f"{exc}; text in capitals, title or lower case is read by the vocabulary alone")
                self._casing = {}
        return self._casing

    @casing.setter
    def casing(self, tables: dict[str, dict[str, str]]) -> None:
        self._casing = tables

    def spelling_costs(self, words: list[str]) -> list[tuple[int, int, float]]:
        """How hard each word is for the vocabulary to write: the pieces it lacks (byte pieces, <unk>),
        its pieces, then their negated scores (a unigram model's log probabilities, a BPE model's merge
        order). A casing the training text used costs fewer pieces than one it never saw
        (mt.text.casing). Remembered, a bounded number; safe from several threads (`mt serve`)."""
        costs = self._costs
        found = [costs.get(word) for word in words]
        missing = list(dict.fromkeys(word for word, cost in zip(words, found) if cost is None))
        if not missing:
            return found
        new = {}
        if len(missing) < BATCH_CALL_LINES:  # (not through `encode`: its recent lines are a server's)
            encoded = [self._sp.encode(word, out_type=int) for word in missing]
        else:
            encoded = self._sp.encode(missing, out_type=int, num_threads=self.threads)
        for word, ids in zip(missing, encoded):
            score = -sum(self._sp.get_score(i) for i in ids if i not in self._bytes and i != UNK_ID)
            new[word] = (self.unknown_pieces(ids), len(ids), score)
        if len(costs) + len(new) > SPELLINGS:
            costs.clear()
        costs.update(new)
        return [cost if cost is not None else new[word] for word, cost in zip(words, found)]

    def unknown_character(self, character: str) -> bool:
        """Whether the vocabulary cannot write `character` (it is spelt in byte pieces or <unk>); cached."""
        known = self._characters.get(character)
        if known is None:
            known = self._characters[character] = self.unknown_pieces(self.encode([character])[0]) == 0
        return not known

    def unknown_pieces(self, ids: list[int]) -> int:
        """How many of `ids` stand for characters the vocabulary does not hold: byte_fallback's pieces
        (spelling them byte by byte) and <unk> (without byte fallback). A script the tokenizer never
        saw is nothing but these."""
        unk = self._sp.unk_id()
        return sum(1 for i in ids if i in self._bytes or i == unk)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text per id sequence, one line each; PAD/BOS/EOS are dropped, UNK shows as sentencepiece's
        ' ⁇ ', control characters spelt by byte pieces become a space. Leading and trailing whitespace
        is stripped: a model that emits a run of "▁" pieces (a short one printed "A" and 27 spaces)
        must not leave it in the translation."""
        cleaned = [[int(i) for i in seq if int(i) not in _DROPPED_ON_DECODE] for seq in ids]
        if self._bytes:
            cleaned = [self._whole_characters(seq) for seq in cleaned]
        if len(cleaned) < BATCH_CALL_LINES:
            texts = [self._sp.decode(seq) for seq in cleaned]
        else:
            texts = self._sp.decode(cleaned)  # not for none: decode([]) would give one ''
        return [_LINE_BREAKING.sub(" ", text).strip() for text in texts]

    def _whole_characters(self, seq: list[int]) -> list[int]:
        """`seq` without byte pieces that do not form a UTF-8 character: a sampled or searched
        translation can stop a character halfway or emit a stray continuation byte, which
        sentencepiece would print as U+FFFD. Each run of byte pieces keeps its valid characters."""
        if not any(i in self._bytes for i in seq):
            return seq
        kept: list[int] = []
        position = 0
        while position < len(seq):
            if seq[position] not in self._bytes:
                kept.append(seq[position])
                position += 1
                continue
            lead = self._bytes[seq[position]]
            size = (
                1
                if lead < 0x80
                else 2
                if lead >> 5 == 0b110
                else 3
                if lead >> 4 == 0b1110
                else 4
                if lead >> 3 == 0b11110
                else 0
            )
            run = seq[position : position + size] if size else []
            if (
                len(run) == size > 0
                and all(i in self._bytes for i in run)
                and _is_utf8(bytes(self._bytes[i] for i in run))
            ):
                kept.extend(run)
                position += size
            else:
                position += 1  # a byte that begins no whole character: dropped
        return kept

    def tag_id(self, lang: str) -> int | None:
        """The id of `lang`'s tag (`language_tag`), or None when this model has none."""
        return self.symbol_id(language_tag(lang))

    def symbol_id(self, piece: str) -> int | None:
        """The id of a whole piece (a user symbol such as a tag), or None when this model has none."""
        piece_id = self._sp.piece_to_id(piece)
        return None if piece_id == UNK_ID else int(piece_id)

    def pieces(self, ids: list[int]) -> list[str]:
        table = self._piece_of
        return [table[i] for i in ids]

    def piece_ids(self, pieces: list[str]) -> list[int]:
        """The ids of SentencePiece pieces (another runtime's output, say); an unknown piece is UNK's."""
        get = self._id_of.get
        return [get(piece, UNK_ID) for piece in pieces]

    # The vocabulary as Python tables: a lookup per token (CTranslate2's input and output, per batch)
    # costs a fraction of a call into sentencepiece.
    @functools.cached_property
    def _piece_of(self) -> list[str]:
        return [self._sp.id_to_piece(i) for i in range(self.vocab_size)]

    @functools.cached_property
    def _id_of(self) -> dict[str, int]:
        return {piece: i for i, piece in enumerate(self._piece_of)}

    def __repr__(self) -> str:
        return f"Tokenizer({str(self.path)!r}, vocab_size={self.vocab_size})"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _check_unicode(lines: list[str]) -> None:
    """A one-line error naming the first line that holds an unpaired surrogate (a str, but not text)."""
    for number, line in enumerate(lines, start=1):
        try:
            line.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MtError(
                f"line {number}: not valid Unicode (an unpaired surrogate at character {exc.start + 1})"
            ) from None
