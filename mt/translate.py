"""Lines in, translations out: tokenize, batch by length, search, detokenize, restore input order.

`Translator.stream()` reads lines as they arrive and writes each group of `buffer` lines as soon
as it is translated, so `mt translate` works in a pipe that stays open.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import torch

from mt import log
from mt.checkpoint import load_checkpoint, model_from_checkpoint, resolve_checkpoint
from mt.config import DecodeConfig, ExperimentConfig
from mt.errors import MtError
from mt.experiment import Experiment
from mt.search import beam_search, greedy_search
from mt.tokenizer import EOS_ID, PAD_ID, load_tokenizers


class Translator:
    """A trained model with its tokenizers and decoding options."""

    def __init__(self, exp: Experiment, cfg: ExperimentConfig, checkpoint: str | None = None, device: str = "cpu"):
        self.decode_cfg: DecodeConfig = cfg.decode
        self.device = torch.device(device)
        self.src_tok, self.tgt_tok = load_tokenizers(exp, cfg)
        path = resolve_checkpoint(exp, checkpoint or cfg.decode.checkpoint)
        state = load_checkpoint(path)
        expected = {"src": self.src_tok.sha256, "tgt": self.tgt_tok.sha256}
        if state.get("tokenizer_sha256") != expected:
            raise MtError(f"{path}: trained with a different tokenizer than {exp.tokenizer_dir}")
        self.checkpoint_path = path
        self.model = model_from_checkpoint(state).to(self.device).eval()
        # Room for EOS; longer inputs are cut rather than crash the position table.
        self.max_src_tokens = self.model.max_positions - 1

    def translate(self, lines: list[str]) -> list[str]:
        """Translations of `lines` in the same order; an empty (or blank) line gives an empty line."""
        outputs = [""] * len(lines)
        todo = [i for i, line in enumerate(lines) if line.strip()]
        if not todo:
            return outputs
        encoded = self.src_tok.encode([lines[i] for i in todo])
        for k, ids in enumerate(encoded):
            if len(ids) > self.max_src_tokens:
                log.warn(f"input line {todo[k] + 1}: {len(ids)} tokens, cut to {self.max_src_tokens}")
                encoded[k] = ids[: self.max_src_tokens]
        for group in self._length_batches([len(ids) for ids in encoded]):
            src_ids = self._pad([encoded[k] for k in group])
            for k, tokens in zip(group, self._search(src_ids)):
                outputs[todo[k]] = tokens
        return outputs

    def _search(self, src_ids: torch.Tensor) -> list[str]:
        cfg = self.decode_cfg
        if cfg.beam == 1:
            hyps = greedy_search(self.model, src_ids, cfg.max_len_a, cfg.max_len_b)
        else:
            best = beam_search(
                self.model, src_ids, cfg.beam, cfg.alpha, cfg.length_penalty, cfg.max_len_a, cfg.max_len_b
            )
            hyps = [h[0] for h in best]
        return self.tgt_tok.decode([h.tokens for h in hyps])

    def _length_batches(self, lengths: list[int]) -> Iterator[list[int]]:
        """Indices grouped by similar length, each group's padded size within max_tokens."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        group: list[int] = []
        for i in order:
            longest = lengths[i] + 1  # sorted ascending: the newest member is the longest
            if group and longest * (len(group) + 1) > self.decode_cfg.max_tokens:
                yield group
                group = []
            group.append(i)
        if group:
            yield group

    def _pad(self, sequences: list[list[int]]) -> torch.Tensor:
        width = max(len(s) for s in sequences) + 1
        src_ids = torch.full((len(sequences), width), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sequences):
            src_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            src_ids[row, len(ids)] = EOS_ID
        return src_ids.to(self.device)

    def stream(self, lines: Iterable[str], write: Callable[[str], None], buffer: int = 256) -> int:
        """Translate lines as they come, `buffer` at a time; write each output line in input order."""
        count = 0
        pending: list[str] = []
        for line in lines:
            pending.append(line.rstrip("\r\n"))
            if len(pending) >= buffer:
                count += self._flush(pending, write)
                pending = []
        if pending:
            count += self._flush(pending, write)
        return count

    def _flush(self, pending: list[str], write: Callable[[str], None]) -> int:
        for output in self.translate(pending):
            write(output)
        return len(pending)
