"""Lexically constrained beam search: target phrases that must appear in the translation (terminology).

`mt translate --constraints` reads SOURCE<TAB>PHRASE<TAB>PHRASE... per line, as fairseq's
--constraints does; each phrase is tokenized with the target tokenizer as it would be inside a
sentence. The search is dynamic beam allocation (Post & Vilar, 2018): every hypothesis knows how many
constraint tokens it has produced, the candidates of each step are each beam's best tokens plus the
tokens that would advance its constraints, and the beam is shared out among "banks" of hypotheses
with 0, 1, ... C constraint tokens met, so that hypotheses on their way through a constraint are not
pushed out by unconstrained ones that score better for now. Constraints are unordered, and every
phrase whose beginning the output ends with is followed at once; a phrase given twice must
appear twice.

Finishing and stopping:
- EOS is open only to a hypothesis that has met every constraint, so every finished hypothesis
  satisfies them all, and the stopping rules of mt.search ("early": `beam` finished; the bound: no
  live hypothesis could beat the nbest-th finished one) count only those.
- A live hypothesis that can no longer fit its missing constraint tokens and EOS within the length
  limit can never finish: it is dropped, and does not hold up the bound.
- The length limit is the usual a * source length + b plus the constraints' tokens. If no hypothesis
  met every constraint by then, the one that met the most (then the best-scoring) is returned and
  flagged, and `mt translate` warns naming the input line.
With no constraints the search is mt.search.beam.beam_search's, candidate for candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.config.schema import LengthPenalty, StopRule
from mt.search.steps import (
    Hypothesis,
    check_stopping,
    force_eos,
    length_penalty,
    max_lengths,
    row_topk,
    select_rows,
    step_logprobs,
)
from mt.tokenizer import BOS_ID, EOS_ID


def split_constrained_line(line: str) -> tuple[str, list[str]]:
    """SOURCE<TAB>PHRASE<TAB>... -> (source, phrases); empty phrases are ignored."""
    source, *phrases = line.split("\t")
    return source, [p.strip() for p in phrases if p.strip()]


@dataclass(frozen=True)
class Progress:
    """Where a hypothesis stands with its sentence's constraints."""

    met: frozenset = frozenset()  # indices of the constraints produced in full
    # (constraint, tokens of it produced so far) for every unmet constraint whose beginning the output
    # ends with: several at once, so that phrases sharing a first token, and a phrase overlapping
    # itself ("a a b" in "a a a b"), are all followed.
    partial: frozenset = frozenset()

    def tokens_met(self, constraints: list[list[int]]) -> int:
        return sum(len(constraints[i]) for i in self.met) + max((done for _, done in self.partial), default=0)

    def all_met(self, constraints: list[list[int]]) -> bool:
        return len(self.met) == len(constraints)

    def advance(self, token: int, constraints: list[list[int]]) -> Progress:
        """The progress after producing `token`."""
        met, partial = set(self.met), set()
        grown = [(index, done + 1) for index, done in self.partial if constraints[index][done] == token]
        started = [
            (index, 1) for index, phrase in enumerate(constraints) if index not in self.met and phrase[0] == token
        ]
        # A phrase given twice is met by two occurrences, as fairseq counts it: of the copies that one
        # token completes together, one is met; the others start over at the phrase's next occurrence.
        completed: set[tuple[int, ...]] = set()
        for index, done in grown + started:
            if index in met:
                continue
            if done == len(constraints[index]):
                phrase = tuple(constraints[index])
                if phrase not in completed:
                    met.add(index)
                    completed.add(phrase)
            else:
                partial.add((index, done))
        partial = {p for p in partial if p[0] not in met}
        # a copy's partial progress is its twin's: one of them is enough to follow
        followed: dict[tuple, tuple[int, int]] = {}
        for index, done in sorted(partial):
            followed.setdefault((tuple(constraints[index]), done), (index, done))
        return Progress(frozenset(met), frozenset(followed.values()))

    def next_tokens(self, constraints: list[list[int]]) -> set[int]:
        """The tokens that would advance this hypothesis: each partial phrase's next, each unmet one's first."""
        tokens = {phrase[0] for i, phrase in enumerate(constraints) if i not in self.met}
        tokens.update(constraints[index][done] for index, done in self.partial)
        return tokens


@dataclass
class ConstrainedResult:
    hypotheses: list[Hypothesis]  # best first
    all_met: bool  # False: no hypothesis met every constraint within the length limit (the best partial one)


def allocate(candidates: list[tuple], beam: int, banks: int) -> list[tuple]:
    """Dynamic beam allocation: `candidates` (score, bank, ...) sorted best first -> up to `beam` of
    them, beam // banks from each bank (the remainder to the banks with the most met), the slots a bank
    cannot fill going to the best of the rest; returned best first."""
    slots = [beam // banks + (1 if bank >= banks - beam % banks else 0) for bank in range(banks)]
    chosen, rest = [], []
    for candidate in candidates:
        bank = candidate[1]
        if slots[bank] > 0:
            slots[bank] -= 1
            chosen.append(candidate)
        else:
            rest.append(candidate)
    chosen += rest[: beam - len(chosen)]
    return sorted(chosen, key=lambda c: -c[0])


@torch.inference_mode()
def constrained_beam_search(
    model,
    src_ids: torch.Tensor,  # (batch, src_len), each source ending in EOS, right-padded
    constraints: list[list[list[int]]],  # per sentence, its phrases' target token ids
    beam: int = 4,
    alpha: float = 0.6,
    penalty: LengthPenalty = "gnmt",
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    nbest: int = 1,
    stop: StopRule = "early",
) -> list[ConstrainedResult]:
    """The `nbest` best hypotheses of each sentence that contain all of its constraints (module docstring)."""
    check_stopping(alpha, stop)
    model.eval()
    search = _ConstrainedSearch(
        model, src_ids, constraints, beam, alpha, penalty, max_len_a, max_len_b, min(nbest, beam), stop
    )
    while search.active:
        search.step()
    return search.results()


class _ConstrainedSearch:
    """The state of one constrained beam search: each live sentence's beams (their tokens, scores and
    constraint progress), the cache, and what has finished. Rows are (active sentence x beam)."""

    def __init__(self, model, src_ids, constraints, beam, alpha, penalty, max_len_a, max_len_b, nbest, stop):
        self.model, self.constraints, self.beam, self.nbest = model, constraints, beam, nbest
        self.alpha, self.penalty, self.stop = alpha, penalty, stop
        self.device = device = src_ids.device
        batch = src_ids.size(0)
        memory, src_mask = model.encode(src_ids)
        extra = torch.tensor([sum(len(c) for c in cs) for cs in constraints], device=device)
        positions = model.max_positions - 1
        self.limits = (max_lengths(src_ids, max_len_a, max_len_b, positions) + extra).clamp(max=positions).tolist()
        self.totals = extra.tolist()  # constraint tokens per sentence
        beam_rows = torch.arange(batch, device=device).repeat_interleave(beam)
        self.memory, self.src_mask = select_rows(memory, beam_rows), select_rows(src_mask, beam_rows)
        self.cache = model.new_cache()
        self.tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
        self.scores = [[0.0] + [-float("inf")] * (beam - 1) for _ in range(batch)]  # per active sentence, per beam
        self.progress = [[Progress() for _ in range(beam)] for _ in range(batch)]
        self.active = list(range(batch))
        self.finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        self.fallback: list[Hypothesis | None] = [None] * batch
        self.step_count = 0
        self.eos = torch.zeros(0)  # this step's log-probability of EOS for every row

    def step(self) -> None:
        """One decoder step: expand every live beam, choose each sentence's next beams, let finished
        sentences leave."""
        self.step_count += 1
        top, extra = self._candidates()
        parents, next_tokens, next_scores, next_progress, still = [], [], [], [], []
        for s in range(len(self.active)):
            chosen, goes_on = self._advance(s, top, extra)
            parents += [s * self.beam + c[2] for c in chosen]
            next_tokens += [c[3] for c in chosen]
            next_scores.append([c[0] for c in chosen])
            next_progress.append([c[4] for c in chosen])
            still.append(goes_on)
        rows = torch.tensor(parents, device=self.device)
        self.tokens = torch.cat([self.tokens[rows], torch.tensor(next_tokens, device=self.device)[:, None]], dim=1)
        self.scores, self.progress = next_scores, next_progress
        self._leave(rows, still)

    def _candidates(self) -> tuple[tuple[list, list], dict[int, list[tuple[int, float]]]]:
        """This step's log-probabilities as each row's 2*beam best (tokens, log-probs), and per row the
        tokens that would advance its constraints with their log-probs. EOS is open only to rows that
        met every constraint, and forced at the length limit."""
        beam, active, constraints = self.beam, self.active, self.constraints
        logprobs = step_logprobs(self.model, self.tokens, self.memory, self.src_mask, self.cache)  # no PAD, BOS
        self.eos = logprobs[:, EOS_ID].clone()  # before the constraints close it: a fallback's end (`_fall_back`)
        unmet = [
            s * beam + b
            for s, sentence in enumerate(active)
            for b in range(beam)
            if not self.progress[s][b].all_met(constraints[sentence])
        ]
        if unmet:
            logprobs[unmet, EOS_ID] = -torch.inf
        at_limit = torch.tensor([self.step_count >= self.limits[sentence] for sentence in active], device=self.device)
        force_eos(logprobs, at_limit.repeat_interleave(beam))
        top_lp, top_tok = (t.tolist() for t in row_topk(logprobs, min(2 * beam, logprobs.size(1))))
        wanted = [
            (s * beam + b, token)
            for s, sentence in enumerate(active)
            for b in range(beam)
            if self.scores[s][b] > -float("inf")
            for token in self.progress[s][b].next_tokens(constraints[sentence])
        ]
        wanted_lp = logprobs[[r for r, _ in wanted], [t for _, t in wanted]].tolist() if wanted else []
        extra: dict[int, list[tuple[int, float]]] = {}
        for (row, token), lp in zip(wanted, wanted_lp):
            extra.setdefault(row, []).append((token, lp))
        return (top_tok, top_lp), extra

    def _advance(self, s: int, top: tuple[list, list], extra: dict) -> tuple[list[tuple], bool]:
        """Active sentence s's next `beam` beams (score, bank, parent beam, token, progress), its finished
        hypotheses recorded, and whether it searches on."""
        sentence, beam, step = self.active[s], self.beam, self.step_count
        cs, total, limit = self.constraints[sentence], self.totals[sentence], self.limits[sentence]
        live, ends = [], []
        for score, b, token in self._expanded(s, top, extra):
            if token == EOS_ID:  # open only to hypotheses that met every constraint: the top bank
                ends.append((score, total, b, token, self.progress[s][b]))
                continue
            after = self.progress[s][b].advance(token, cs)
            met = after.tokens_met(cs)
            # Its missing tokens and EOS no longer fit: dropped. Constraints longer than the limit never
            # fit: then as many of their tokens as it holds must, so that the search keeps to them and
            # `_fall_back` gives the one that met the most (was: every candidate dropped, an empty output).
            if step + (min(total, limit - 1) - met) + 1 > limit:
                continue
            live.append((score, met, b, token, after))
        # Which end: the EOS candidates chosen when all compete for the beam, bank by bank (with no
        # constraints, those among the `beam` best, as beam_search); then the next beams from the rest.
        divisor = float(length_penalty(float(step), self.alpha, self.penalty))
        for score, _, b, token, _ in allocate(sorted(live + ends, key=lambda c: -c[0]), beam, total + 1):
            if token == EOS_ID:
                self.finished[sentence].append(
                    Hypothesis(self.tokens[s * beam + b, 1:].tolist(), score / divisor, score)
                )
        chosen = allocate(live, beam, total + 1)
        chosen += [(-float("inf"), 0, 0, EOS_ID, Progress())] * (beam - len(chosen))
        goes_on = _goes_on(
            self.finished[sentence],
            [c[0] for c in chosen],
            step,
            limit,
            beam,
            self.nbest,
            self.alpha,
            self.penalty,
            self.stop,
        )
        if not goes_on and not self.finished[sentence]:
            self._fall_back(s, divisor)
        return chosen, goes_on

    def _expanded(self, s: int, top: tuple[list, list], extra: dict) -> list[tuple[float, int, int]]:
        """Active sentence s's candidates (score, beam, token), best first: each live beam's 2*beam best
        tokens and those that would advance its constraints, each (beam, token) once."""
        top_tok, top_lp = top
        candidates, seen = [], set()
        for b in range(self.beam):
            base = self.scores[s][b]
            if base == -float("inf"):
                continue
            row = s * self.beam + b
            for token, lp in list(zip(top_tok[row], top_lp[row])) + extra.get(row, []):
                if (b, token) in seen or lp == -float("inf"):
                    continue
                seen.add((b, token))
                candidates.append((base + lp, b, token))
        return sorted(candidates, key=lambda c: -c[0])

    def _fall_back(self, s: int, divisor: float) -> None:
        """Nothing met every constraint in time: keep the hypothesis that met most, then scores best, its
        score with its EOS (the model's log-probability of ending there) as a finished one's has."""
        sentence, cs = self.active[s], self.constraints[self.active[s]]
        b = max(
            (b for b in range(self.beam) if self.scores[s][b] > -float("inf")),
            key=lambda b: (self.progress[s][b].tokens_met(cs), self.scores[s][b]),
        )
        score = self.scores[s][b] + float(self.eos[s * self.beam + b])
        self.fallback[sentence] = Hypothesis(self.tokens[s * self.beam + b, 1:].tolist(), score / divisor, score)

    def _leave(self, rows: torch.Tensor, still: list[bool]) -> None:
        """Sentences that stopped leave the batch; the cache follows each beam's parent row."""
        source_rows = None
        if not all(still):
            beam = self.beam
            keep = [s for s, go in enumerate(still) if go]
            source_rows = torch.tensor(
                [s * beam + b for s in keep for b in range(beam)], device=self.device, dtype=torch.long
            )
            rows = rows.view(len(self.active), beam)[keep].view(-1) if keep else rows[:0]
            self.tokens = self.tokens[source_rows]
            self.memory, self.src_mask = select_rows(self.memory, source_rows), select_rows(self.src_mask, source_rows)
            self.active = [self.active[s] for s in keep]
            self.scores = [self.scores[s] for s in keep]
            self.progress = [self.progress[s] for s in keep]
        self.model.reorder_cache(self.cache, rows, source_rows)

    def results(self) -> list[ConstrainedResult]:
        results = []
        for sentence, finished in enumerate(self.finished):
            hyps = sorted(finished, key=lambda h: -h.score)[: self.nbest]
            results.append(
                ConstrainedResult(hyps, True) if hyps else ConstrainedResult([self.fallback[sentence]], False)
            )
        return results


def _goes_on(
    finished: list[Hypothesis],
    live_scores: list[float],
    step: int,
    limit: int,
    beam: int,
    nbest: int,
    alpha: float,
    penalty: LengthPenalty,
    stop: StopRule,
) -> bool:
    """mt.search's stopping test for one sentence; the live scores are only those that can still finish."""
    if step >= limit:
        return False
    if stop == "early" and len(finished) >= beam:
        return False
    best_live = max(live_scores) / float(length_penalty(float(limit), alpha, penalty))
    if best_live == -float("inf"):
        return False  # nothing alive can finish
    if len(finished) >= nbest:
        kth = sorted((h.score for h in finished), reverse=True)[nbest - 1]
        return best_live > kth
    return True
