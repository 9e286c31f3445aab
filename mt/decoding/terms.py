"""Required terms (lexically constrained decoding): phrases each translation must contain, such as a
glossary's rendering of a name or a term of art ("Vertrag" -> "contract", not "treaty").

Beam search with dynamic beam allocation (Post & Vilar 2018, "Fast Lexically Constrained Decoding with
Dynamic Beam Allocation for Neural Machine Translation"). Each hypothesis keeps its Progress: the phrases
it has written, and how far it is into the one it is writing. Each step it may continue with its own best
pieces, as in plain beam search, or with the next piece of a phrase (of the one it is in, or the first of
any it has not written). The candidates fall into banks by how many phrase pieces they hold, and the beam
is shared out among the banks round-robin, the fullest bank first: hypotheses that place a phrase at once
do not crowd out those that will place it later, where it fits. A hypothesis ends (EOS among its best
pieces) only once it holds every phrase. A line where none does by the length limit keeps the best
translation that ended without them (`missing` tells such lines). A sentence with a forced target prefix
carries it as its one hypothesis first (a phrase the prefix writes counts as met), then searches as above.

Phrases are piece sequences as the target side's tokenizer writes them standalone, so a phrase matches at
a word's start, as it would follow a space.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import torch

from mt import fastpath
from mt.data.tokenizer import BOS, EOS
from mt.decoding.constraints import Constraints
from mt.decoding.prefix import Prefixes, limits_with_prefix
from mt.decoding.search import Hypothesis, length_penalty, max_output_lengths, on_host

Phrases = list[list[int]]  # one sentence's required phrases, each a list of target piece ids
SCORE = operator.itemgetter(0)  # a candidate's (score, hypothesis, token, progress) score


@dataclass(frozen=True)
class Need:
    """One sentence's phrases, and the pieces that continue a word (no word boundary before them): a phrase
    counts once the piece after it, if any, starts a new word ("dog" is not met inside "dogs")."""

    phrases: Phrases
    joins: frozenset[int] = frozenset()

    @functools.cached_property
    def firsts(self) -> frozenset[int]:
        """The pieces that start a phrase: any other, written outside a phrase, leaves a progress as it is."""
        return frozenset(pieces[0] for pieces in self.phrases)


@dataclass(frozen=True)
class Progress:
    """Which phrases a hypothesis has written, and (phrase, pieces written) while it is inside one; a phrase
    written whole waits there, inside, until the next piece shows that its word ends."""

    met: frozenset[int] = frozenset()
    inside: tuple[int, int] | None = None

    def after(self, token: int, need: Need) -> Progress:
        """The progress once `token` is written: one piece further into the phrase it is in (the phrase met
        where it was whole and the token starts a word), or, where the token breaks off that phrase or is
        written outside one, at the first piece of a phrase not yet met that starts with it (a phrase counts
        however the hypothesis comes to write it)."""
        if self.inside is None and token not in need.firsts:  # most pieces: nothing changes
            return self
        met = self.met
        if self.inside is not None:
            phrase, done = self.inside
            pieces = need.phrases[phrase]
            if done < len(pieces) and pieces[done] == token:
                return Progress(met, (phrase, done + 1))
            if done == len(pieces) and token not in need.joins:
                met = met | {phrase}
        for phrase, pieces in enumerate(need.phrases):
            if phrase not in met and pieces[0] == token:
                return Progress(met, (phrase, 1))
        return Progress(met)

    def wanted(self, need: Need) -> list[int]:
        """The pieces that take it further: the next of the phrase it is in, else each unmet phrase's first."""
        if self.inside is not None and self.inside[1] < len(need.phrases[self.inside[0]]):
            phrase, done = self.inside
            return [need.phrases[phrase][done]]
        waiting = {self.inside[0]} if self.inside is not None else set()
        return sorted({p[0] for i, p in enumerate(need.phrases) if i not in self.met and i not in waiting})

    def pieces(self, need: Need) -> int:
        """Phrase pieces written so far: its bank."""
        return sum(len(need.phrases[p]) for p in self.met) + (self.inside[1] if self.inside is not None else 0)

    def complete(self, need: Need) -> bool:
        """Whether every phrase is met, should the output end here (an end is a word boundary)."""
        met = self.met
        if self.inside is not None and self.inside[1] == len(need.phrases[self.inside[0]]):
            met = met | {self.inside[0]}
        return len(met) == len(need.phrases)


@dataclass(frozen=True)
class Live:
    """A hypothesis in the beam: its pieces, their log-probability and its progress through the phrases."""

    tokens: tuple[int, ...]
    lp: float
    progress: Progress


def holds(tokens: list[int], phrase: list[int], joins: frozenset[int] = frozenset()) -> bool:
    """Whether the phrase's pieces occur in tokens, in a row, and no piece that continues a word follows."""
    n = len(phrase)
    ends = [i + n for i in range(len(tokens) - n + 1) if tokens[i : i + n] == phrase]
    return any(end == len(tokens) or tokens[end] not in joins for end in ends)


def missing(tokens: list[int], phrases: Phrases, joins: frozenset[int] = frozenset()) -> int:
    """How many of the phrases the tokens lack."""
    return sum(not holds(tokens, phrase, joins) for phrase in phrases)


def allocate(candidates: list[tuple[float, int, int, Progress]], need: Need, beam: int) -> list:
    """The `beam` candidates (score, hypothesis, token, progress) kept: the banks (by phrase pieces written)
    take turns, fullest first, each giving its best remaining candidate, until the beam is full."""
    ranked = sorted(candidates, key=SCORE, reverse=True)  # stable: ties keep their order
    banks: dict[int, list] = {}
    pieces: dict[int, int] = {}  # by id(progress): most candidates share their hypothesis's progress
    for candidate in ranked:
        progress = candidate[3]
        bank = pieces.get(id(progress))
        if bank is None:
            bank = pieces[id(progress)] = progress.pieces(need)
        banks.setdefault(bank, []).append(candidate)
    if len(banks) == 1:  # one bank (often: every hypothesis has placed as much): plain beam search
        return ranked[:beam]
    queues = [banks[bank] for bank in sorted(banks, reverse=True)]
    kept = []
    for turn in range(beam):  # the turn-th best of each bank, fullest bank first
        kept += [queue[turn] for queue in queues if turn < len(queue)]
    return sorted(kept[:beam], key=SCORE, reverse=True)


@torch.no_grad()
def terms_beam_search(
    model,
    src: torch.Tensor,
    phrases: list[Phrases],
    beam: int = 5,
    alpha: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    nbest: int = 1,
    constraints: Constraints | None = None,
    joins: frozenset[int] = frozenset(),
    prefixes: Prefixes | None = None,
) -> list[list[Hypothesis]]:
    """Beam search in which every translation of sentence i holds each of phrases[i] (where the search
    finds one that does by the length limit; else the best that ended without). The model steps on the
    device for every live hypothesis at once; the choice is made on the host, a sentence at a time.
    joins: the target pieces that continue a word, so that a phrase counts only as whole words. prefixes:
    one per sentence, forced first, its log-probability part of the score (as in beam_search). Returns
    nbest hypotheses per sentence, best first, scored with the GNMT length penalty."""
    needs = [Need(p, joins) for p in phrases]
    batch, device = src.size(0), src.device
    limits = limits_with_prefix(max_output_lengths(src, max_len_a, max_len_b), prefixes, max_len_b).tolist()
    forced = prefixes.lists() if prefixes is not None else [[] for _ in range(batch)]
    state = model.start_state(src, copies=beam)
    tokens = torch.full((batch * beam,), BOS, dtype=torch.long, device=device)
    live = list(range(batch))  # the sentences still searching, in batch order
    beams = [[Live((), 0.0, Progress())] for _ in range(batch)]  # each sentence's hypotheses (up to `beam`)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]  # ended holding every phrase
    stand_ins: list[list[Hypothesis]] = [[] for _ in range(batch)]  # ended without them

    for t in range(max(limits, default=0)):
        logits, state = model.step(tokens, state)
        inside = [t < len(forced[s]) for s in live]  # the sentences still writing their prefix
        if constraints is not None:
            history, free = None, None
            if constraints.needs_history:
                history = torch.tensor([h.tokens for s in live for h in padded(beams[s], beam)], device=device)
            if any(inside):  # a prefix is taken as given
                free = torch.tensor(inside, device=device).logical_not().repeat_interleave(beam)
            constraints.apply(logits, t, None if history is None else history.view(len(live) * beam, t), free)
        wanted = [
            [forced[s][t]] if forced_now else h.progress.wanted(needs[s])
            for s, forced_now in zip(live, inside)
            for h in padded(beams[s], beam)
        ]
        width = max(1, max(map(len, wanted)))
        index = torch.tensor([w + [EOS] * (width - len(w)) for w in wanted], device=device)
        top_lp, top_tok = fastpath.top_log_probs(logits, beam)
        # log P = logit - log(sum of exp(logits)), that sum read off the best token (its logit and log P)
        normaliser = logits.gather(1, top_tok[:, :1]).float() - top_lp[:, :1]
        wanted_lp = logits.gather(1, index).float() - normaliser
        top_lp, top_tok, wanted_lp = on_host(top_lp, top_tok, wanted_lp)
        top_lp, top_tok, wanted_lp = top_lp.tolist(), top_tok.tolist(), wanted_lp.tolist()
        penalty = float(length_penalty(torch.tensor(t + 1), alpha))
        rows, next_live = [], []
        for i, s in enumerate(live):
            last = t + 1 >= limits[s]
            candidates = {}
            for k, hyp in enumerate(beams[s]):
                row = i * beam + k
                done = hyp.progress.complete(needs[s])
                choice = [] if inside[i] else list(zip(top_tok[row], top_lp[row]))  # in a prefix: its token alone
                for token, lp in [*choice, *zip(wanted[row], wanted_lp[row])]:
                    if lp == float("-inf"):  # ruled out (a minimum length, a repeated n-gram)
                        continue
                    if token == EOS:
                        ended = Hypothesis(list(hyp.tokens), (hyp.lp + lp) / penalty)
                        (finished if done else stand_ins)[s].append(ended)
                    elif (k, token) not in candidates:
                        candidates[k, token] = (hyp.lp + lp, k, token, hyp.progress.after(token, needs[s]))
            if last:  # every candidate ends at the length limit
                for lp, k, token, progress in candidates.values():
                    ended = Hypothesis([*beams[s][k].tokens, token], lp / penalty)
                    (finished if progress.complete(needs[s]) else stand_ins)[s].append(ended)
                continue
            kept = allocate(list(candidates.values()), needs[s], beam)
            if not kept or search_over(finished[s], kept[0][0], limits[s], alpha, nbest):
                continue
            beams[s] = [Live((*beams[s][k].tokens, token), lp, progress) for lp, k, token, progress in kept]
            rows += [i * beam + k for _, k, _, _ in padded(kept, beam)]
            next_live.append(s)
        if not next_live:
            break
        index = torch.tensor(rows, device=device)
        state = state.select(index)
        tokens = torch.tensor([h.tokens[-1] for s in next_live for h in padded(beams[s], beam)], device=device)
        live = next_live

    return [best(finished[s], stand_ins[s], nbest) for s in range(batch)]


def padded(items: list, size: int) -> list:
    """items with its first repeated up to `size`: every sentence fills `beam` decoder rows, the extra
    ones copies that are never chosen from (a sentence's first step has one hypothesis)."""
    return items + [items[0]] * (size - len(items))


def search_over(finished: list[Hypothesis], best_lp: float, limit: int, alpha: float, nbest: int) -> bool:
    """Whether nbest finished hypotheses are kept that the best live one (best_lp), even with the most
    favourable length penalty it could reach, cannot beat."""
    if len(finished) < nbest:
        return False
    worst_kept = sorted((h.score for h in finished), reverse=True)[nbest - 1]
    return best_lp / float(length_penalty(torch.tensor(limit), alpha)) <= worst_kept


def best(finished: list[Hypothesis], stand_ins: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    """The nbest translations holding every phrase, best first, topped up with the best of those without."""
    ranked = sorted(finished, key=lambda h: -h.score) + sorted(stand_ins, key=lambda h: -h.score)
    return ranked[:nbest] or [Hypothesis([], float("-inf"))]
