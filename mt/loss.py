"""Label-smoothed cross-entropy (Szegedy et al. 2016; Vaswani et al. 2017, Sec. 5.4)."""

from __future__ import annotations

import torch


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int):
    """Summed over real (non-pad) target tokens. Returns (loss, nll): nll is the unsmoothed
    negative log-likelihood, the number perplexity is made of.

    The smoothed target puts 1 - smoothing on the reference token and spreads smoothing
    uniformly over the vocabulary: loss = (1 - e) * nll + e * mean_v(-log p_v).
    """
    log_probs = logits.float().log_softmax(dim=-1)  # fp32 even under bf16 autocast
    real = target != pad_id
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs.mean(dim=-1)
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss[real].sum(), nll[real].sum()
