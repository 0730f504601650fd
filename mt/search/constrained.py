"""Lexically constrained beam search: target phrases that must appear in the translation (terminology).

`mt translate --constraints` reads SOURCE<TAB>PHRASE<TAB>PHRASE... per line, as fairseq's
--constraints does; each phrase is tokenized with the target tokenizer as it would be inside a
sentence. The search is dynamic beam allocation (Post & Vilar, 2018): every hypothesis knows how many
constraint tokens it has produced, the candidates of each step are each beam's best tokens plus the
tokens that would advance its constraints, and the beam is shared out among "banks" of hypotheses
with 0, 1, ... C constraint tokens met, so that hypotheses on their way through a constraint are not
pushed out by unconstrained ones that score better for now. Constraints are unordered, and every
phrase whose beginning the output ends with is followed at once.

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
from mt.search.steps import Hypothesis, length_penalty, max_lengths, select_rows
from mt.search.steps import check_stopping as check_stopping
from mt.search.steps import force_eos as force_eos
from mt.search.steps import step_logprobs as step_logprobs
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
        started = [(index, 1) for index, phrase in enumerate(constraints) if index not in self.met and phrase[0] == token]
        for index, done in grown + started:
            if index in met:
                continue
            if done == len(constraints[index]):
                met.add(index)
            else:
                partial.add((index, done))
        return Progress(frozenset(met), frozenset(p for p in partial if p[0] not in met))

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


@torch.no_grad()
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
    device = src_ids.device
    batch = src_ids.size(0)
    nbest = min(nbest, beam)
    memory, src_mask = model.encode(src_ids)
    extra = torch.tensor([sum(len(c) for c in cs) for cs in constraints], device=device)
    limit = (max_lengths(src_ids, max_len_a, max_len_b, model.max_positions - 1) + extra).clamp(max=model.max_positions - 1)
    limits = limit.tolist()
    totals = extra.tolist()
    beam_rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory, src_mask = select_rows(memory, beam_rows), select_rows(src_mask, beam_rows)
    cache = model.new_cache()
    tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
    scores = [[0.0] + [-float("inf")] * (beam - 1) for _ in range(batch)]  # per active sentence, per beam
    progress = [[Progress() for _ in range(beam)] for _ in range(batch)]
    active = list(range(batch))
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    fallback: list[Hypothesis | None] = [None] * batch

    step = 0
    while active:
        step += 1
        logprobs = step_logprobs(model, tokens, memory, src_mask, cache)  # PAD and BOS ruled out
        rows_unmet = [s * beam + b for s, sentence in enumerate(active) for b in range(beam)
                      if not progress[s][b].all_met(constraints[sentence])]
        if rows_unmet:
            logprobs[rows_unmet, EOS_ID] = -torch.inf  # only a hypothesis with all its constraints can end
        at_limit = torch.tensor([step >= limits[sentence] for sentence in active], device=device).repeat_interleave(beam)
        force_eos(logprobs, at_limit)
        k = min(2 * beam, logprobs.size(1))
        top_lp, top_tok = (t.tolist() for t in logprobs.topk(k, dim=1))
        wanted = [(s * beam + b, token) for s, sentence in enumerate(active) for b in range(beam)
                  if scores[s][b] > -float("inf") for token in progress[s][b].next_tokens(constraints[sentence])]
        wanted_lp = logprobs[[r for r, _ in wanted], [t for _, t in wanted]].tolist() if wanted else []
        extra_by_row: dict[int, list[tuple[int, float]]] = {}
        for (row, token), lp in zip(wanted, wanted_lp):
            extra_by_row.setdefault(row, []).append((token, lp))

        parents, next_tokens, next_scores, next_progress, still = [], [], [], [], []
        for s, sentence in enumerate(active):
            cs, total = constraints[sentence], totals[sentence]
            candidates, seen = [], set()
            for b in range(beam):
                base = scores[s][b]
                if base == -float("inf"):
                    continue
                row = s * beam + b
                for token, lp in list(zip(top_tok[row], top_lp[row])) + extra_by_row.get(row, []):
                    if (b, token) in seen or lp == -float("inf"):
                        continue
                    seen.add((b, token))
                    candidates.append((base + lp, b, token))
            candidates.sort(key=lambda c: -c[0])
            live, ends = [], []
            for score, b, token in candidates:
                if token == EOS_ID:  # open only to hypotheses that met every constraint: the top bank
                    ends.append((score, total, b, token, progress[s][b]))
                    continue
                after = progress[s][b].advance(token, cs)
                met = after.tokens_met(cs)
                if step + (total - met) + 1 > limits[sentence]:  # its missing tokens and EOS no longer fit
                    continue
                live.append((score, met, b, token, after))
            # Which end: the EOS candidates chosen when all compete for the beam, bank by bank (with no
            # constraints, those among the `beam` best, as beam_search); then the next beams from the rest.
            divisor = float(length_penalty(float(step), alpha, penalty))
            for score, _, b, token, _ in allocate(sorted(live + ends, key=lambda c: -c[0]), beam, total + 1):
                if token == EOS_ID:
                    finished[sentence].append(Hypothesis(tokens[s * beam + b, 1:].tolist(), score / divisor, score))
            chosen = allocate(live, beam, total + 1)
            chosen += [(-float("inf"), 0, 0, EOS_ID, Progress())] * (beam - len(chosen))
            parents += [s * beam + c[2] for c in chosen]
            next_tokens += [c[3] for c in chosen]
            next_scores.append([c[0] for c in chosen])
            next_progress.append([c[4] for c in chosen])
            goes_on = _goes_on(finished[sentence], next_scores[-1], step, limits[sentence], beam, nbest, alpha, penalty, stop)
            if not goes_on and not finished[sentence]:
                # Nothing met every constraint in time: the hypothesis that met most, then scores best.
                b = max((b for b in range(beam) if scores[s][b] > -float("inf")),
                        key=lambda b: (progress[s][b].tokens_met(cs), scores[s][b]))
                lp = float(length_penalty(float(step), alpha, penalty))
                fallback[sentence] = Hypothesis(tokens[s * beam + b, 1:].tolist(), scores[s][b] / lp, scores[s][b])
            still.append(goes_on)

        rows = torch.tensor(parents, device=device)
        tokens = torch.cat([tokens[rows], torch.tensor(next_tokens, device=device)[:, None]], dim=1)
        source_rows = None
        if not all(still):
            keep = [s for s, go in enumerate(still) if go]
            source_rows = torch.tensor([s * beam + b for s in keep for b in range(beam)], device=device, dtype=torch.long)
            rows = rows.view(len(active), beam)[keep].view(-1) if keep else rows[:0]
            tokens = tokens[source_rows]
            memory, src_mask = select_rows(memory, source_rows), select_rows(src_mask, source_rows)
            active = [active[s] for s in keep]
            next_scores = [next_scores[s] for s in keep]
            next_progress = [next_progress[s] for s in keep]
        scores, progress = next_scores, next_progress
        model.reorder_cache(cache, rows, source_rows)

    results = []
    for sentence in range(batch):
        hyps = sorted(finished[sentence], key=lambda h: -h.score)[:nbest]
        results.append(ConstrainedResult(hyps, True) if hyps else ConstrainedResult([fallback[sentence]], False))
    return results


def _goes_on(finished: list[Hypothesis], live_scores: list[float], step: int, limit: int, beam: int, nbest: int,
             alpha: float, penalty: LengthPenalty, stop: StopRule) -> bool:
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
