"""Greedy and beam search over any model with the incremental decoding interface:

    state = model.start_state(src)          # encode once
    logits, state = model.step(tokens, state)  # one token per hypothesis -> next-token logits
    state = state.select(index)              # reorder / drop hypotheses (batch dim 0)

(mt/model/state.py holds the state; the Transformer and the RNN both implement the interface.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt import fastpath
from mt.data.tokenizer import BOS, EOS, PAD


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    score: float  # length-normalised log-probability (beam) or plain log-probability (greedy)


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


@torch.no_grad()
def greedy_search(model, src: torch.Tensor, max_len_a: float = 1.2, max_len_b: int = 10) -> list[Hypothesis]:
    """Pick the most likely token each step. Finished sentences leave the batch (a few at a time)."""
    batch, device = src.size(0), src.device
    limits = max_output_lengths(src, max_len_a, max_len_b)
    max_len = int(limits.max())
    state = model.start_state(src)
    alive = torch.arange(batch, device=device)  # original row of each decoder row
    running = torch.ones(batch, dtype=torch.bool, device=device)  # False: finished, not yet dropped
    tokens = torch.full((batch,), BOS, dtype=torch.long, device=device)
    output = torch.full((batch, max_len), EOS, dtype=torch.long, device=device)
    scores = torch.zeros(batch, device=device)
    for t in range(max_len):
        logits, state = model.step(tokens, state)
        best_lp, tokens = (x.squeeze(1) for x in fastpath.top_log_probs(logits, 1))
        output[alive, t] = tokens.where(running, EOS)  # a finished row's output already ends in EOS
        scores.index_add_(0, alive, best_lp.where(running, 0.0))
        running &= (tokens != EOS) & (t + 1 < limits[alive])
        still = int(running.sum())  # the step's one wait for the device
        if not still:
            break
        if fastpath.worth_dropping(running.numel() - still, running.numel(), device):
            keep = running.nonzero().squeeze(1)
            alive, tokens, running, state = alive[keep], tokens[keep], running[keep], state.select(keep)
    hyps = []
    for row, seq in enumerate(output.tolist()):
        length = seq.index(EOS) if EOS in seq else len(seq)
        hyps.append(Hypothesis(seq[:length], float(scores[row])))
    return hyps


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    beam: int = 5,
    alpha: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    nbest: int = 1,
) -> list[list[Hypothesis]]:
    """Batched beam search: every sentence x beam in one tensor batch, scored with the GNMT
    length penalty. A sentence is done once its best finished hypothesis cannot be beaten
    by any live one (or at its length limit); done sentences leave the batch (a few at a time).
    Returns nbest hypotheses per sentence, best first.

    Scores and choices stay on the model's device; the bookkeeping (finished hypotheses, which
    sentences are done, the token history) runs on the CPU, from one transfer per step.
    """
    batch, device = src.size(0), src.device
    limits = max_output_lengths(src, max_len_a, max_len_b)
    state = model.start_state(src)
    # Every row of the decoder batch is (sentence, beam): start with `beam` copies of each sentence.
    state = state.select(torch.arange(batch, device=device).repeat_interleave(beam))
    sentence = torch.arange(batch, device=device)  # original index of each live sentence
    tokens = torch.full((batch * beam,), BOS, dtype=torch.long, device=device)
    # Only the first copy is live at step 0, so the beam does not fill with duplicates.
    cum_lp = torch.full((batch, beam), float("-inf"), device=device)
    cum_lp[:, 0] = 0.0
    # On the host: the tokens of each live hypothesis, the sentences' limits, finished hypotheses.
    history = torch.empty((batch, beam, 0), dtype=torch.long)
    sentence_host, live_limits = list(range(batch)), limits.cpu()
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    running = torch.ones(batch, dtype=torch.bool)  # False: done, not yet dropped

    for t in range(int(live_limits.max())):
        live = len(sentence_host)
        logits, state = model.step(tokens, state)
        # 2 * beam candidates: enough that `beam` survive even if up to `beam` of them end in EOS.
        # The best 2 * beam of a sentence are among the best 2 * beam of each of its hypotheses.
        row_lp, row_tok = fastpath.top_log_probs(logits, 2 * beam)  # (live * beam, 2 * beam)
        candidates = (cum_lp[:, :, None] + row_lp.view(live, beam, -1)).view(live, -1)  # (live, beam * 2beam)
        top_lp, top_idx = candidates.topk(2 * beam, dim=-1)
        origin, next_tok = top_idx // (2 * beam), row_tok.view(live, -1).gather(1, top_idx)
        at_limit = t + 1 >= limits[sentence]
        is_eos = (next_tok == EOS) | at_limit[:, None]

        # Continue the best `beam` candidates that did not end.
        keep_lp, keep_rank = top_lp.masked_fill(is_eos, float("-inf")).topk(beam, dim=-1)
        keep_origin, keep_tok = origin.gather(1, keep_rank), next_tok.gather(1, keep_rank)

        top_lp_h, origin_h, next_tok_h, is_eos_h, keep_origin_h, keep_tok_h, best_live = on_host(
            top_lp[:, :beam],
            origin[:, :beam],
            next_tok[:, :beam],
            is_eos[:, :beam],
            keep_origin,
            keep_tok,
            keep_lp[:, 0],
        )

        # Record finished hypotheses: EOS among the top `beam`, or every top candidate at the limit.
        ended = is_eos_h & (top_lp_h > float("-inf")) & running[:, None]
        if ended.any():
            penalty_now = float(length_penalty(torch.tensor(t + 1), alpha))
            for i, rank in ended.nonzero().tolist():
                toks = history[i, origin_h[i, rank]].tolist()
                if next_tok_h[i, rank] != EOS:
                    toks.append(int(next_tok_h[i, rank]))
                finished[sentence_host[i]].append(Hypothesis(toks, float(top_lp_h[i, rank]) / penalty_now))

        # A sentence is done when it hit its limit, or when it has enough finished hypotheses and the
        # best live score, even with the most favourable future penalty, cannot beat the worst kept.
        done = (t + 1 >= live_limits) | ~running
        best_possible = (best_live / length_penalty(live_limits, alpha)).tolist()
        for i, row in enumerate(sentence_host):
            hyps = finished[row]
            if len(hyps) >= nbest and not done[i]:
                worst_kept = sorted((h.score for h in hyps), reverse=True)[nbest - 1]
                done[i] = best_possible[i] <= worst_kept
        if done.all():
            break
        running = ~done  # done sentences ride along, ignored, until they are worth dropping
        history = torch.cat(
            [history.gather(1, keep_origin_h[:, :, None].expand(-1, -1, history.size(2))), keep_tok_h[:, :, None]],
            dim=2,
        )
        rows = (torch.arange(live, device=device)[:, None] * beam + keep_origin).view(-1)
        if fastpath.worth_dropping(int(done.sum()), live, device):
            still_h = running.nonzero().squeeze(1)
            still = still_h.to(device)
            rows = rows.view(live, beam)[still].view(-1)
            sentence, keep_lp, keep_tok = sentence[still], keep_lp[still], keep_tok[still]
            sentence_host = [sentence_host[i] for i in still_h.tolist()]
            history, running, live_limits = history[still_h], running[still_h], live_limits[still_h]
            state = state.select(rows)
        else:  # beams moved within their sentences only
            state = state.reorder_same_source(rows)
        cum_lp, tokens = keep_lp, keep_tok.reshape(-1)

    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]
