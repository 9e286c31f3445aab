"""Label-smoothed cross-entropy (Szegedy et al. 2016; Vaswani et al. 2017, Sec. 5.4).

The smoothed target puts 1 - e on the reference token and spreads e uniformly over the
vocabulary V:  loss = (1 - e) * (-log p_y) + e * mean_v(-log p_v).
"""

from __future__ import annotations

import torch

from mt import fastpath


def label_smoothed_loss(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed over target tokens. logits (..., V), target (...). Positions equal to pad_id are left out.

    Returns (loss, nll): nll is the unsmoothed negative log-likelihood, what perplexity is made of.
    Log-probabilities are taken in fp32 whatever the logits' dtype.
    """
    logits, target = logits.reshape(-1, logits.size(-1)), target.reshape(-1)
    return fastpath.label_smoothed_cross_entropy(logits, target, smoothing, ignore_index=pad_id)
