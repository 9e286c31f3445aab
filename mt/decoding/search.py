"""Greedy search, sampling and beam search over any model with the incremental decoding interface:

    state = model.start_state(src, copies)     # encode once; `copies` hypotheses (rows) per sentence
    logits, state = model.step(tokens, state)  # one token per hypothesis -> next-token logits
    state = state.select(index)                # reorder / drop hypotheses (batch dim 0)

(mt/model/state.py holds the state; the Transformer and the RNN both implement the interface.)

Two loops: `path_search` follows one path per decoder row, and greedy search and sampling differ only
in the step that chooses the next token (`most_likely`, sampling.Sampler); `beam_search` keeps `beam`
hypotheses per sentence (`expand` chooses on the device, `BeamBooks` keeps the books on the host).
Both force a target prefix first when a sentence has one (mt/decoding/prefix.py), and rule tokens out
before choosing where asked to (mt/decoding/constraints.py: a minimum length, no repeated n-grams).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt import fastpath
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.constraints import Constraints
from mt.decoding.prefix import Prefixes, force, limits_with_prefix


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    score: float  # length-normalised log-probability (beam) or plain log-probability (greedy)


def until_eos(tokens: list[int]) -> list[int]:
    """The tokens before the first EOS (all of them where there is none: the output hit its length limit)."""
    return tokens[: tokens.index(EOS)] if EOS in tokens else tokens


def max_output_lengths(src: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """a * |x| + b for each source sentence (|x| counts real tokens, EOS included)."""
    return ((src != PAD).sum(1).float() * a).long() + b


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT (Wu et al. 2016): ((5 + |y|) / 6)^alpha."""
    return ((5.0 + length.float()) / 6.0) ** alpha


def on_host(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors (each with the batch on dim 0) on the CPU, copied from a GPU in one transfer:
    each copy waits for the device, so the search reads what its bookkeeping needs once a step."""
    if all(t.device.type == "cpu" for t in tensors):
        return tensors
    return packed_copy(tensors, torch.device("cpu"))


def packed_copy(tensors, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The tensors copied to device as one float64 tensor (exact for fp32 values and integer ids)."""
    packed = torch.cat([t.reshape(t.size(0), -1).double() for t in tensors], dim=1).to(device)
    parts = packed.split([t[0].numel() for t in tensors], dim=1)
    return tuple(part.reshape(t.shape).to(t.dtype) for part, t in zip(parts, tensors))


def most_likely(logits: torch.Tensor, rows: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy's choice: each row's most likely next token and its log-probability."""
    best_lp, token = fastpath.top_log_probs(logits, 1)
    return best_lp.squeeze(1), token.squeeze(1)


@torch.no_grad()
def greedy_search(
    model,
    src: torch.Tensor,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    prefixes: Prefixes | None = None,
    constraints: Constraints | None = None,
) -> list[Hypothesis]:
    """Pick the most likely token each step (after the sentence's prefix, if it has one)."""
    return path_search(model, src, most_likely, max_len_a, max_len_b, prefixes=prefixes, constraints=constraints)


@torch.no_grad()
def sample_search(
    model,
    src: torch.Tensor,
    sampler,
    samples: int = 1,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    prefixes: Prefixes | None = None,
    constraints: Constraints | None = None,
) -> list[list[Hypothesis]]:
    """`samples` outputs per sentence, each token drawn by the sampler (mt/decoding/sampling.py)."""
    found = path_search(model, src, sampler, max_len_a, max_len_b, samples, prefixes, constraints)
    return [found[i : i + samples] for i in range(0, len(found), samples)]


def path_search(
    model,
    src: torch.Tensor,
    choose,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    copies: int = 1,
    prefixes: Prefixes | None = None,
    constraints: Constraints | None = None,
) -> list[Hypothesis]:
    """The loop of every search that follows one path per decoder row (greedy, sampling): each step the
    model scores the next token, `choose(logits, rows, t)` picks one per live row (rows: the original
    row of each), a row inside its prefix takes the prefix's token instead, and finished rows leave the
    batch (a few at a time). Each sentence decodes as `copies` rows (sentence i: rows i*copies...);
    prefixes holds one per sentence; constraints, if given, rule tokens out before `choose`. Returns one
    Hypothesis per row, its score the sum of the model's log-probabilities."""
    batch, device = src.size(0), src.device
    rows = batch * copies
    limits = max_output_lengths(src, max_len_a, max_len_b).repeat_interleave(copies)
    if prefixes is not None:
        prefixes = prefixes.repeat(copies)
        limits = limits_with_prefix(limits, prefixes, max_len_b)
    max_len = int(limits.max())
    state = model.start_state(src)
    if copies > 1:
        state = state.select(torch.arange(batch, device=device).repeat_interleave(copies))
    alive = torch.arange(rows, device=device)  # original row of each decoder row
    running = torch.ones(rows, dtype=torch.bool, device=device)  # False: finished, not yet dropped
    tokens = torch.full((rows,), BOS, dtype=torch.long, device=device)
    output = torch.full((rows, max_len), EOS, dtype=torch.long, device=device)
    scores = torch.zeros(rows, device=device)
    for t in range(max_len):
        logits, state = model.step(tokens, state)
        inside = prefixes.at(t) if prefixes is not None and t < prefixes.longest else None
        if constraints is not None:
            history = output[alive, :t] if constraints.needs_history else None
            constraints.apply(logits, t, history, free=None if inside is None else ~inside[0])
        best_lp, tokens = choose(logits, alive, t)
        if inside is not None:
            forced, token = inside
            best_lp, tokens = (x.squeeze(1) for x in force(best_lp[:, None], tokens[:, None], logits, forced, token))
        output[alive, t] = tokens.where(running, EOS)  # a finished row's output already ends in EOS
        scores.index_add_(0, alive, best_lp.where(running, 0.0))
        running &= (tokens != EOS) & (t + 1 < limits[alive])
        still = int(running.sum())  # the step's one wait for the device
        if not still:
            break
        if fastpath.worth_dropping(running.numel() - still, running.numel(), device):
            keep = fastpath.rows_to_keep(running, device)
            alive, tokens, running, state = alive[keep], tokens[keep], running[keep], state.select(keep)
            prefixes = prefixes.select(keep) if prefixes is not None else None
    return [Hypothesis(until_eos(seq), score) for seq, score in zip(output.tolist(), scores.tolist())]


@dataclass
class Expansion:
    """One beam-search step's choice, on the model's device, per live sentence (rows): its best 2 * beam
    continuations (cumulative log-probability, the hypothesis each extends, its token, whether it ends
    there: EOS or the length limit), and the best `beam` of those that do not end, to continue."""

    top_lp: torch.Tensor  # (live, 2 * beam), best first
    origin: torch.Tensor  # (live, 2 * beam): the hypothesis (0..beam-1) each continuation extends
    next_tok: torch.Tensor  # (live, 2 * beam)
    ends: torch.Tensor  # (live, 2 * beam), bool
    keep_lp: torch.Tensor  # (live, beam), best first
    keep_origin: torch.Tensor  # (live, beam)
    keep_tok: torch.Tensor  # (live, beam)


def expand(logits: torch.Tensor, cum_lp: torch.Tensor, at_limit: torch.Tensor, forced=None) -> Expansion:
    """Extend every hypothesis by every token and choose: logits (live * beam, V) of the next token,
    cum_lp (live, beam) the hypotheses' log-probabilities, at_limit (live,) whether this step is the
    sentence's last; forced, if given, (which sentences are inside their prefix, its token there)."""
    live, beam = cum_lp.shape
    # 2 * beam candidates: enough that `beam` survive even if up to `beam` of them end in EOS.
    # The best 2 * beam of a sentence are among the best 2 * beam of each of its hypotheses.
    row_lp, row_tok = fastpath.top_log_probs(logits, 2 * beam)  # (live * beam, 2 * beam)
    if forced is not None:  # every hypothesis of a sentence inside its prefix continues it
        inside, token = (x.repeat_interleave(beam) for x in forced)
        row_lp, row_tok = force(row_lp, row_tok, logits, inside, token)
    candidates = (cum_lp[:, :, None] + row_lp.view(live, beam, -1)).view(live, -1)  # (live, beam * 2beam)
    top_lp, top_idx = candidates.topk(2 * beam, dim=-1)
    origin, next_tok = top_idx // (2 * beam), row_tok.view(live, -1).gather(1, top_idx)
    ends = (next_tok == EOS) | at_limit[:, None]
    keep_lp, keep_rank = top_lp.masked_fill(ends, float("-inf")).topk(beam, dim=-1)
    return Expansion(
        top_lp, origin, next_tok, ends, keep_lp, origin.gather(1, keep_rank), next_tok.gather(1, keep_rank)
    )


class BeamBooks:
    """The host side of a batched beam search: for each live sentence its original index, its length
    limit, the tokens of its live hypotheses and whether it still runs; for every sentence its finished
    hypotheses. Read from one transfer a step; the device holds only scores, tokens and the model state."""

    def __init__(self, limits: torch.Tensor, beam: int, alpha: float, nbest: int):
        batch = limits.size(0)
        self.alpha, self.nbest = alpha, nbest
        self.sentence = list(range(batch))  # original index of each live sentence
        self.limits = limits  # (live,) on the host
        self.limit_penalty = length_penalty(limits, alpha)  # the most favourable penalty each sentence may reach
        self.history = torch.empty((batch, beam, 0), dtype=torch.long)  # (live, beam, t)
        self.running = torch.ones(batch, dtype=torch.bool)  # False: done, not yet dropped
        self.finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        # (live,) the score a hypothesis must beat to enter the nbest finished ones: the nbest-th best
        # finished score (float64, the scores' own Python floats), -inf while there are fewer
        self.to_beat = torch.full((batch,), float("-inf"), dtype=torch.float64)

    def record_finished(self, t: int, top_lp, origin, next_tok, ends) -> None:
        """Keep the hypotheses that end at step t among the top `beam` candidates (host tensors).
        The tensors are read as lists once: indexing them element by element costs a tensor op each."""
        ended = ends & (top_lp > float("-inf")) & self.running[:, None]
        at = ended.nonzero()
        if at.size(0) == 0:
            return
        penalty_now = float(length_penalty(torch.tensor(t + 1), self.alpha))
        rows, ranks = at[:, 0], at[:, 1]
        live_rows, histories = rows.tolist(), self.history[rows, origin[rows, ranks]].tolist()
        for i, toks, token, lp in zip(
            live_rows, histories, next_tok[rows, ranks].tolist(), top_lp[rows, ranks].tolist()
        ):
            if token != EOS:  # ended at its length limit: the token counts
                toks.append(token)
            self.finished[self.sentence[i]].append(Hypothesis(toks, lp / penalty_now))
        full = [i for i in set(live_rows) if len(self.finished[self.sentence[i]]) >= self.nbest]
        if full:
            scores = [sorted((h.score for h in self.finished[self.sentence[i]]), reverse=True) for i in full]
            self.to_beat[full] = torch.tensor([kept[self.nbest - 1] for kept in scores], dtype=torch.float64)

    def done(self, t: int, best_live: torch.Tensor) -> torch.Tensor:
        """Which live sentences are done after step t: at their limit, or with nbest finished hypotheses
        that the best live one (best_live, its log-probability), even with the most favourable future
        length penalty, cannot beat."""
        best_possible = (best_live / self.limit_penalty).double()
        beaten = (self.to_beat > float("-inf")) & (best_possible <= self.to_beat)
        return (t + 1 >= self.limits) | ~self.running | beaten

    def advance(self, keep_origin: torch.Tensor, keep_tok: torch.Tensor, done: torch.Tensor) -> None:
        """The continued hypotheses' tokens; done sentences ride along, ignored, until they are dropped."""
        self.running = ~done
        extended = self.history.gather(1, keep_origin[:, :, None].expand(-1, -1, self.history.size(2)))
        self.history = torch.cat([extended, keep_tok[:, :, None]], dim=2)

    def keep(self, still: torch.Tensor) -> None:
        """Drop every live sentence but those at the indices still."""
        self.sentence = [self.sentence[i] for i in still.tolist()]
        self.history, self.running, self.limits = self.history[still], self.running[still], self.limits[still]
        self.limit_penalty, self.to_beat = self.limit_penalty[still], self.to_beat[still]

    def results(self) -> list[list[Hypothesis]]:
        return [sorted(hyps, key=lambda h: -h.score)[: self.nbest] for hyps in self.finished]


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    beam: int = 5,
    alpha: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    nbest: int = 1,
    prefixes: Prefixes | None = None,
    constraints: Constraints | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search: every sentence x beam in one tensor batch, scored with the GNMT
    length penalty. A sentence is done once its best finished hypothesis cannot be beaten
    by any live one (or at its length limit); done sentences leave the batch (a few at a time).
    Returns nbest hypotheses per sentence, best first. A sentence with a prefix carries it as its one
    hypothesis until the prefix ends, then searches freely. Constraints, if given, rule tokens out first.

    The loop: the model scores the next token (model.step), `expand` chooses on the device, the
    books (BeamBooks) record finished hypotheses and decide which sentences are done on the host,
    and the model state follows the chosen hypotheses.
    """
    batch, device = src.size(0), src.device
    limits = limits_with_prefix(max_output_lengths(src, max_len_a, max_len_b), prefixes, max_len_b)
    # Every row of the decoder batch is (sentence, beam): `beam` consecutive rows for each sentence.
    state = model.start_state(src, copies=beam)
    sentence = torch.arange(batch, device=device)  # original index of each live sentence
    tokens = torch.full((batch * beam,), BOS, dtype=torch.long, device=device)
    # Only the first copy is live at step 0, so the beam does not fill with duplicates.
    cum_lp = torch.full((batch, beam), float("-inf"), device=device)
    cum_lp[:, 0] = 0.0
    books = BeamBooks(limits.cpu(), beam, alpha, nbest)
    # Each row's tokens so far on the model's device, where a constraint reads them (the books' are on the host).
    history = tokens.new_empty(batch * beam, 0) if constraints is not None and constraints.needs_history else None

    for t in range(int(books.limits.max())):
        live = len(books.sentence)
        logits, state = model.step(tokens, state)
        forced = prefixes.at(t) if prefixes is not None and t < prefixes.longest else None
        if constraints is not None:
            free = None if forced is None else ~forced[0].repeat_interleave(beam)
            constraints.apply(logits, t, history, free)
        step = expand(logits, cum_lp, at_limit=t + 1 >= limits[sentence], forced=forced)
        top_lp, origin, next_tok, ends, keep_origin, keep_tok, best_live = on_host(
            step.top_lp[:, :beam],
            step.origin[:, :beam],
            step.next_tok[:, :beam],
            step.ends[:, :beam],
            step.keep_origin,
            step.keep_tok,
            step.keep_lp[:, 0],
        )
        books.record_finished(t, top_lp, origin, next_tok, ends)
        done = books.done(t, best_live)
        if done.all():
            break
        books.advance(keep_origin, keep_tok, done)
        rows = (torch.arange(live, device=device)[:, None] * beam + step.keep_origin).view(-1)
        cum_lp, tokens = step.keep_lp, step.keep_tok
        if fastpath.worth_dropping(int(done.sum()), live, device):
            still_h = books.running.nonzero().squeeze(1)
            books.keep(still_h)
            still = still_h.to(device)
            rows = rows.view(live, beam)[still].view(-1)
            sentence, cum_lp, tokens = sentence[still], cum_lp[still], tokens[still]
            prefixes = prefixes.select(still) if prefixes is not None else None
            state = state.select(rows)
        else:  # beams moved within their sentences only
            state = state.reorder_same_source(rows)
        tokens = tokens.reshape(-1)
        if history is not None:
            history = torch.cat([history[rows], tokens[:, None]], dim=1)

    return books.results()
