"""Label-smoothed cross-entropy (Szegedy et al. 2016; Vaswani et al. 2017, Sec. 5.4).

The smoothed target puts 1 - e on the reference token and spreads e uniformly over the
vocabulary V:  loss = (1 - e) * (-log p_y) + e * mean_v(-log p_v).
Its gradient with respect to the logits has a closed form, softmax - (1 - e) * onehot(y) - e / V,
which the backward pass below computes in place: over a (tokens x vocabulary) matrix this is
several times cheaper than autograd's chain of log_softmax, gather and mean.
"""

from __future__ import annotations

import torch


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float):
        log_probs = logits.float().log_softmax(dim=-1)  # fp32 even under bf16 autocast
        nll = -log_probs.gather(-1, target[:, None]).squeeze(-1)
        uniform = -log_probs.mean(dim=-1)
        loss = ((1.0 - smoothing) * nll + smoothing * uniform).sum()
        ctx.save_for_backward(log_probs, target)
        ctx.smoothing, ctx.logits_dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll.sum()

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_nll: torch.Tensor):
        log_probs, target = ctx.saved_tensors
        e, vocab = ctx.smoothing, log_probs.size(-1)
        grad = log_probs.exp_()  # softmax, in the saved buffer
        grad.sub_(e / vocab)
        grad.scatter_add_(-1, target[:, None], grad.new_full((target.numel(), 1), -(1.0 - e)))
        grad.mul_(grad_loss)
        return grad.to(ctx.logits_dtype), None, None


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float,
                        pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed over target tokens. logits (..., V), target (...). Positions equal to pad_id are left out.

    Returns (loss, nll): nll is the unsmoothed negative log-likelihood, what perplexity is made of.
    """
    logits, target = logits.reshape(-1, logits.size(-1)), target.reshape(-1)
    if pad_id is not None:
        real = target != pad_id
        logits, target = logits[real], target[real]
    return _SmoothedCrossEntropy.apply(logits, target, smoothing)
