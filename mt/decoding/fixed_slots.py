"""Beam and greedy search in fixed slots: the results of search.py's beam_search and greedy_search, with
every tensor keeping its shape and storage from the first step to the last and no step reading anything
back to the host.

search.py keeps its books on the host and drops finished sentences from the batch: the right form
where the host is fast beside the device (a CPU). Here instead:
- the decoder caches are allocated for the longest output up front (StaticDecoderState), each step
  writing at a position held on the device;
- a finished sentence keeps its rows, masked rather than removed;
- the finished hypotheses of each sentence are its best `nbest` so far, merged on the device each step;
- beam search's caches live in two stores, each step gathering the reordered rows from one into the other;
- whether every sentence is done is read only every few steps.

So one step is a fixed sequence of kernels over fixed buffers: what a CUDA graph captures once (for each
window, and for each of the two stores) and replays (`run`, with mt.fastpath.cuda_graphs.Replays). Only the
Transformer has a static state; the other models, prefixes and sampling take search.py.
"""

from __future__ import annotations

import torch

from mt import fastpath
from mt.data.buckets import ROW_MULTIPLE, full_rows, rounded_up
from mt.data.tokenizer import BOS, EOS
from mt.decoding.search import Hypothesis, expand, length_penalty, max_output_lengths, until_eos

NEG_INF = float("-inf")
WINDOW = 16  # a step attends over the target slots up to the next multiple of this past its position


def slot_shape(rows: int, cols: int, budget: int) -> tuple[int, int]:
    """The padded (sentences, source positions) a batch of rows x cols runs in. Each padded length has one
    full shape; a smaller batch takes the next power of two of sentences (at least 8) below it. So the
    batches of a long input fall into a few shapes, each one search allocated and one step captured, and a
    single line does not pay for a full batch of filler rows."""
    cols = rounded_up(cols)
    full = full_rows(cols, budget)
    if rows >= full:  # a batch formed elsewhere, as large as the bucket's or larger
        return rounded_up(rows), cols
    return min(full, max(ROW_MULTIPLE, 1 << (rows - 1).bit_length())), cols


def slot_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Indices of `lengths` (source positions with EOS) in batches, shortest first, each as many sentences as
    fit the full shape of its padded length: most batches fill their shape exactly, and there are as few as
    the budget allows (each batch is a run of steps one after the other)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = [[]]
    for i in order:
        if len(batches[-1]) + 1 > full_rows(rounded_up(lengths[i]), budget):
            batches.append([])
        batches[-1].append(i)
    return [batch for batch in batches if batch]


class FixedSlotSearch:
    """What the two searches share: the static state, the step counter and the loop that runs them.
    Searching records nothing for autograd (as search.py's searches)."""

    @torch.no_grad()
    def __init__(self, model, src: torch.Tensor, copies: int, max_len_a: float, max_len_b: int, length: int | None):
        """length: the most target positions any batch loaded later may need (default: this batch's)."""
        self.model = model
        self.limits = max_output_lengths(src, max_len_a, max_len_b)  # (B,) on the device
        self.length = length or int(self.limits.max())
        self._check_limits()
        self.state = model.start_static_state(src, copies, self.length)
        self.t = self.state.position  # () long, advanced in place by model.step

    def _check_limits(self) -> None:
        longest = int(self.limits.max())  # the one wait for the device before the loop
        if longest > self.length:
            raise ValueError(f"a sentence may need {longest} target positions; this search holds {self.length}")

    @torch.no_grad()
    def load(self, src: torch.Tensor, max_len_a: float, max_len_b: int) -> None:
        """Start over on another batch of the same shape, in the same storage (a captured step stays valid)."""
        self.model.restart_static_state(self.state, src)
        self.limits.copy_(max_output_lengths(src, max_len_a, max_len_b))
        self._check_limits()

    def step(self) -> None:
        raise NotImplementedError

    def end_step(self) -> None:
        """The host's part of a step, after it: nothing here. Never inside a captured step."""

    def window(self, t: int) -> int:
        """The target slots step t attends over: its own and those before it, rounded up to WINDOW."""
        return min(self.length, rounded_up(t + 1, WINDOW))

    def nbytes(self) -> int:
        """Memory its buffers hold, the decoder's caches most of it."""
        state = self.state
        caches = [t for cache in state.caches for part in (cache.past, cache.source) for t in part.values()]
        mine = [t for t in vars(self).values() if torch.is_tensor(t)]
        spare = [] if state.spare is None else [state.spare]
        return sum(t.numel() * t.element_size() for t in [state.memory, state.src_mask, *caches, *spare, *mine])

    def finished(self) -> torch.Tensor:
        """() bool on the device: whether every sentence is done."""
        raise NotImplementedError


class FixedSlotGreedy(FixedSlotSearch):
    """greedy_search's results: each row takes its most likely next token until EOS or its length limit."""

    def __init__(
        self, model, src: torch.Tensor, max_len_a: float = 1.2, max_len_b: int = 10, length: int | None = None
    ):
        super().__init__(model, src, 1, max_len_a, max_len_b, length)
        rows, device = src.size(0), src.device
        self.tokens = torch.full((rows,), BOS, dtype=torch.long, device=device)
        self.output = torch.full((rows, self.length), EOS, dtype=torch.long, device=device)
        self.scores = torch.zeros(rows, device=device)
        self.running = torch.ones(rows, dtype=torch.bool, device=device)

    def load(self, src: torch.Tensor, max_len_a: float = 1.2, max_len_b: int = 10) -> None:
        super().load(src, max_len_a, max_len_b)
        self.tokens.fill_(BOS)
        self.output.fill_(EOS)
        self.scores.zero_()
        self.running.fill_(True)

    @torch.no_grad()
    def step(self) -> None:
        t = self.t.clone()  # model.step advances the position
        logits, _ = self.model.step(self.tokens, self.state)
        best_lp, token = (x.squeeze(1) for x in fastpath.top_log_probs(logits, 1))
        self.output.index_copy_(1, t.view(1), token.where(self.running, EOS)[:, None])
        self.scores.add_(best_lp.where(self.running, 0.0))
        self.running.logical_and_((token != EOS) & (t + 1 < self.limits))
        self.tokens.copy_(token)

    def finished(self) -> torch.Tensor:
        return ~self.running.any()

    def results(self) -> list[Hypothesis]:
        hyps = []
        for seq, score in zip(self.output.tolist(), self.scores.tolist()):
            hyps.append(Hypothesis(until_eos(seq), score))
        return hyps


class FixedSlotBeam(FixedSlotSearch):
    """beam_search's results: `beam` hypotheses per sentence in fixed rows, the best `nbest` finished ones
    kept on the device, a sentence done when no live hypothesis can beat them (or at its length limit)."""

    def __init__(
        self,
        model,
        src: torch.Tensor,
        beam: int = 5,
        alpha: float = 0.6,
        max_len_a: float = 1.2,
        max_len_b: int = 10,
        nbest: int = 1,
        length: int | None = None,
    ):
        super().__init__(model, src, beam, max_len_a, max_len_b, length)
        batch, device = src.size(0), src.device
        self.beam, self.alpha, self.nbest = beam, alpha, nbest
        # The length penalties, computed on the host one by one as search.py computes them: the same scores.
        penalties = [float(length_penalty(torch.tensor(t + 1), alpha)) for t in range(self.length)]
        self.step_penalty = torch.tensor(penalties, dtype=torch.float64, device=device)
        self.limit_penalty = torch.empty(batch, device=device)
        self.first_row = torch.arange(batch, device=device)[:, None] * beam
        self.tokens = torch.empty(batch * beam, dtype=torch.long, device=device)
        self.cum_lp = torch.empty(batch, beam, device=device)
        self.history = torch.empty(batch, beam, self.length, dtype=torch.long, device=device)
        self.done = torch.empty(batch, dtype=torch.bool, device=device)
        # The finished hypotheses: scores best first (float64, as search.py's Python floats), tokens up to EOS.
        self.kept_score = torch.empty(batch, nbest, dtype=torch.float64, device=device)
        self.kept_tokens = torch.empty(batch, nbest, self.length, dtype=torch.long, device=device)
        self.state.keep_spare()  # each step's reorder gathers the caches into it (StaticDecoderState)
        self._reset()

    def load(self, src: torch.Tensor, max_len_a: float = 1.2, max_len_b: int = 10) -> None:
        super().load(src, max_len_a, max_len_b)
        self._reset()

    def _reset(self) -> None:
        self.limit_penalty.copy_(length_penalty(self.limits.cpu(), self.alpha))
        self.tokens.fill_(BOS)
        self.cum_lp.fill_(NEG_INF)
        self.cum_lp[:, 0] = 0.0  # only the first copy is live at step 0: the beam does not fill with duplicates
        self.history.fill_(EOS)  # past the current step every row holds EOS
        self.done.fill_(False)
        self.kept_score.fill_(NEG_INF)
        self.kept_tokens.fill_(EOS)

    @torch.no_grad()
    def step(self) -> None:
        beam, length, t = self.beam, self.length, self.t.clone()
        logits, _ = self.model.step(self.tokens, self.state)
        step = expand(logits, self.cum_lp, at_limit=t + 1 >= self.limits)

        # Candidates among the best `beam` that end here join the kept ones; the best nbest stay, ties in
        # the order search.py meets them (kept first, then by rank): a stable sort.
        top_lp, origin, next_tok = step.top_lp[:, :beam], step.origin[:, :beam], step.next_tok[:, :beam]
        ended = step.ends[:, :beam] & (top_lp > NEG_INF) & ~self.done[:, None]
        score = (top_lp.double() / self.step_penalty.index_select(0, t.view(1))).where(ended, NEG_INF)
        tokens = self.history.gather(1, origin[:, :, None].expand(-1, -1, length))
        tokens.index_copy_(2, t.view(1), next_tok[:, :, None])  # EOS, or the last token at the length limit
        scores = torch.cat([self.kept_score, score], dim=1)
        order = scores.sort(dim=1, descending=True, stable=True).indices[:, : self.nbest]
        self.kept_score.copy_(scores.gather(1, order))
        both = torch.cat([self.kept_tokens, tokens], dim=1)
        self.kept_tokens.copy_(both.gather(1, order[:, :, None].expand(-1, -1, length)))

        # Done: at the length limit, or nbest kept that the best live hypothesis, even with the most
        # favourable length penalty to come, cannot beat.
        best_possible = (step.keep_lp[:, 0] / self.limit_penalty).double()
        beaten = (self.kept_score[:, -1] > NEG_INF) & (best_possible <= self.kept_score[:, -1])
        self.done.logical_or_((t + 1 >= self.limits) | beaten)

        # The live hypotheses continue in place: history, caches, scores and next tokens follow their origin.
        self.history.copy_(self.history.gather(1, step.keep_origin[:, :, None].expand(-1, -1, length)))
        self.history.index_copy_(2, t.view(1), step.keep_tok[:, :, None])
        self.state.reorder_into_spare((self.first_row + step.keep_origin).view(-1))  # end_step swaps
        self.cum_lp.copy_(step.keep_lp)
        self.tokens.copy_(step.keep_tok.view(-1))

    def end_step(self) -> None:
        """The caches' reorder completed: the store the step gathered into becomes the one the next reads."""
        self.state.swap_stores()

    def finished(self) -> torch.Tensor:
        return self.done.all()

    def results(self) -> list[list[Hypothesis]]:
        found = []
        for scores, rows in zip(self.kept_score.tolist(), self.kept_tokens.tolist()):
            hyps = []
            for score, seq in zip(scores, rows):
                if score > NEG_INF:
                    hyps.append(Hypothesis(until_eos(seq), score))
            found.append(hyps)
        return found


def run(search: FixedSlotSearch, step=None, check_every: int = 8) -> None:
    """Step the search until every sentence is done or the longest limit is reached, reading `finished`
    every check_every steps. step(form): what runs one step, form = (window, parity): over that many target
    slots, on the caches' store of that parity (default search.step; the step captured for that form,
    replayed as a CUDA graph). The host's part of each step (search.end_step) runs after it, outside."""
    step = step or (lambda form: search.step())
    window = None
    for t in range(search.length):
        if search.window(t) != window:  # every WINDOW steps
            window = search.window(t)
            search.state.set_window(window)
        step((window, search.state.parity))
        search.end_step()
        if (t + 1) % check_every == 0 and bool(search.finished()):
            break
