"""Sampling: each next token drawn at random from the model's distribution, the most used way to make
synthetic sources for back-translation (Edunov et al. 2018: sampled back-translations teach more than
beam search's). The distribution can be reshaped first:

  temperature T   p ~ exp(logit / T): below 1 sharper (T -> 0: greedy), above 1 flatter
  top-k           only the k most likely tokens can be drawn (Fan et al. 2018)
  top-p           only the smallest set of most likely tokens whose probability reaches p (nucleus
                  sampling, Holtzman et al. 2020)
  epsilon         no token below this probability can be drawn, the most likely one always can
                  (Hewitt et al. 2022); the candidates minimum Bayes risk chooses among best
                  (Freitag et al. 2023: epsilon 0.02)

Reproducible per line: the uniform numbers that pick a line's tokens come from a generator seeded by
that line's own seed and the sample's number, drawn before decoding, so a line's samples do not depend
on which other lines share its batch, nor on their order. The score of a sample is the model's own
log-probability of it (unshaped), comparable with greedy's.
"""

from __future__ import annotations

import numpy as np
import torch

from mt.decoding.search import most_likely


def uniforms(line_seeds: list[int], samples: int, steps: int) -> torch.Tensor:
    """(lines * samples, steps) uniform numbers in [0, 1): row (line, k) from generator [seed, k]."""
    rows = [np.random.default_rng([s, k]).random(steps, dtype=np.float32) for s in line_seeds for k in range(samples)]
    return torch.from_numpy(np.stack(rows)) if rows else torch.empty(0, steps)


class Sampler:
    """Chooses each row's next token by inverse-CDF sampling with its own uniform number for the step."""

    def __init__(
        self, draws: torch.Tensor, temperature: float = 1.0, topk: int = 0, topp: float = 1.0, epsilon: float = 0.0
    ):
        self.draws = draws  # (rows, steps) on the search's device
        self.temperature, self.topk, self.topp, self.epsilon = temperature, topk, topp, epsilon

    def __call__(self, logits: torch.Tensor, rows: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(model log-probability, token) of each row's draw at step t: logits (live, V), rows the
        original row of each live one."""
        if self.temperature == 0:  # the limit T -> 0: the most likely token, as greedy picks it
            return most_likely(logits, rows, t)
        log_probs = logits.log_softmax(dim=-1, dtype=torch.float32)
        token = self.draw(logits.float() / self.temperature, self.draws[rows, t])
        return log_probs.gather(1, token[:, None]).squeeze(1), token

    def draw(self, scaled: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Token ids drawn from softmax(scaled), cut to top-k, epsilon and top-p, by the uniform numbers u."""
        candidates = None  # token ids of the columns of `scaled`, when cut or sorted
        if 0 < self.topk < scaled.size(1):
            scaled, candidates = scaled.topk(self.topk, dim=-1)  # sorted, best first
        if self.topp < 1.0 and candidates is None:
            scaled, candidates = scaled.sort(dim=-1, descending=True)
        probs = scaled.softmax(dim=-1)
        if self.epsilon > 0:
            probs = probs.masked_fill((probs < self.epsilon) & (probs < probs.amax(-1, keepdim=True)), 0.0)
        if self.topp < 1.0:
            before = probs.cumsum(-1) - probs  # mass of the more likely tokens
            probs = probs.masked_fill(before >= self.topp, 0.0)  # the first token always stays
        cdf = probs.cumsum(-1)
        pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)  # first column whose cdf > u
        last = (cdf < cdf[:, -1:]).sum(-1, keepdim=True)  # the last column with probability: u * total may round up
        pick = torch.minimum(pick, last)
        return pick.squeeze(1) if candidates is None else candidates.gather(1, pick).squeeze(1)
