"""Greedy and beam search over any model with the incremental decoding interface:

    state = model.start_state(src)          # encode once
    logits, state = model.step(tokens, state)  # one token per hypothesis -> next-token logits
    state = state.select(index)              # reorder / drop hypotheses (batch dim 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.tokenizer import BOS, EOS, PAD


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


def top_log_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k most likely next tokens of each row (rows, V) and their fp32 log-probabilities.

    In reduced precision, pick on the raw logits and normalise only the winners: log p = z - max
    - log sum exp(z - max), the sum accumulated in fp32 (a bf16 beam step spent more time turning
    (1650, 8000) logits into fp32 log-probabilities than choosing from them). Blocks of rows keep
    the exp/sum pass in cache right after topk has read the block.
    """
    if logits.dtype == torch.float32:
        return logits.log_softmax(dim=-1).topk(k, dim=-1)
    values, indices = [], []
    for block in logits.split(128):
        top, ids = block.topk(k, dim=-1)
        best = top[:, :1]
        log_normaliser = (block - best).exp_().sum(-1, keepdim=True, dtype=torch.float32).log_()
        values.append(top.float() - best.float() - log_normaliser)
        indices.append(ids)
    return torch.cat(values), torch.cat(indices)


def worth_dropping(finished: torch.Tensor) -> bool:
    """Drop finished rows from the decoder batch once they are an eighth of it.

    Every change of batch size costs a reorder of all caches, and on CPU a new bf16 matmul kernel
    setup (~0.35 ms per projection); carrying a few finished rows costs less until then.
    """
    return int(finished.sum()) * 8 >= finished.numel()


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
        best_lp, tokens = (x.squeeze(1) for x in top_log_probs(logits, 1))
        rows = alive[running]
        output[rows, t] = tokens[running]
        scores[rows] += best_lp[running]
        running &= (tokens != EOS) & (t + 1 < limits[alive])
        if not running.any():
            break
        if worth_dropping(~running):
            keep = running.nonzero().squeeze(1)
            alive, tokens, running, state = alive[keep], tokens[keep], running[keep], state.select(keep)
    hyps = []
    for row, seq in enumerate(output.tolist()):
        length = seq.index(EOS) if EOS in seq else len(seq)
        hyps.append(Hypothesis(seq[:length], float(scores[row])))
    return hyps


@torch.no_grad()
def beam_search(model, src: torch.Tensor, beam: int = 5, alpha: float = 0.6, max_len_a: float = 1.2,
                max_len_b: int = 10, nbest: int = 1) -> list[list[Hypothesis]]:
    """Batched beam search: every sentence x beam in one tensor batch, scored with the GNMT
    length penalty. A sentence is done once its best finished hypothesis cannot be beaten
    by any live one (or at its length limit); done sentences leave the batch (a few at a time).
    Returns nbest hypotheses per sentence, best first.
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
    history = torch.empty((batch, beam, 0), dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    running = torch.ones(batch, dtype=torch.bool, device=device)  # False: done, not yet dropped

    for t in range(int(limits.max())):
        live = sentence.numel()
        logits, state = model.step(tokens, state)
        # 2 * beam candidates: enough that `beam` survive even if up to `beam` of them end in EOS.
        # The best 2 * beam of a sentence are among the best 2 * beam of each of its hypotheses.
        row_lp, row_tok = top_log_probs(logits, 2 * beam)  # (live * beam, 2 * beam)
        candidates = (cum_lp[:, :, None] + row_lp.view(live, beam, -1)).view(live, -1)  # (live, beam * 2beam)
        top_lp, top_idx = candidates.topk(2 * beam, dim=-1)
        origin, next_tok = top_idx // (2 * beam), row_tok.view(live, -1).gather(1, top_idx)
        at_limit = t + 1 >= limits[sentence]
        is_eos = (next_tok == EOS) | at_limit[:, None]

        # Record finished hypotheses: EOS among the top `beam`, or every top candidate at the limit.
        ended = is_eos[:, :beam] & (top_lp[:, :beam] > float("-inf")) & running[:, None]
        if ended.any():
            penalty_now = float(length_penalty(torch.tensor(t + 1), alpha))
            for i, rank in ended.nonzero().tolist():
                toks = history[i, origin[i, rank]].tolist()
                if next_tok[i, rank] != EOS:
                    toks.append(int(next_tok[i, rank]))
                finished[int(sentence[i])].append(Hypothesis(toks, float(top_lp[i, rank]) / penalty_now))

        # Continue the best `beam` candidates that did not end.
        keep_lp = top_lp.masked_fill(is_eos, float("-inf"))
        keep_lp, keep_rank = keep_lp.topk(beam, dim=-1)
        keep_origin = origin.gather(1, keep_rank)
        keep_tok = next_tok.gather(1, keep_rank)

        # A sentence is done when it hit its limit, or when it has enough finished hypotheses and the
        # best live score, even with the most favourable future penalty, cannot beat the worst kept.
        done = at_limit | ~running
        best_possible = (keep_lp[:, 0] / length_penalty(limits[sentence], alpha)).tolist()
        for i, row in enumerate(sentence.tolist()):
            hyps = finished[row]
            if len(hyps) >= nbest and not done[i]:
                worst_kept = sorted((h.score for h in hyps), reverse=True)[nbest - 1]
                done[i] = best_possible[i] <= worst_kept
        if done.all():
            break
        running = ~done  # done sentences ride along, ignored, until they are worth dropping
        history = torch.cat([history.gather(1, keep_origin[:, :, None].expand(-1, -1, history.size(2))),
                             keep_tok[:, :, None]], dim=2)
        rows = (torch.arange(live, device=device)[:, None] * beam + keep_origin).view(-1)
        if worth_dropping(done):
            still = running.nonzero().squeeze(1)
            rows = rows.view(live, beam)[still].view(-1)
            sentence, keep_lp, keep_tok, history = sentence[still], keep_lp[still], keep_tok[still], history[still]
            running = running[still]
            state = state.select(rows)
        else:  # beams moved within their sentences only
            state = state.reorder_same_source(rows)
        cum_lp, tokens = keep_lp, keep_tok.reshape(-1)

    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]
