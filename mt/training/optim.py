"""Adam and the paper's learning-rate schedule (Sec. 5.3)."""

from __future__ import annotations

import torch


def inverse_sqrt_lr(step: int, warmup: int, peak: float) -> float:
    """Eq. 3 rescaled to its peak: linear warm-up to `peak` at step `warmup`, then ~ 1/sqrt(step).

    With peak = d_model^-0.5 * warmup^-0.5 this is exactly
    lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
    """
    step = max(step, 1)
    return peak * min((warmup / step) ** 0.5, step / warmup)


def cooldown_factor(progress: float, cooldown: float) -> float:
    """1 until the last `cooldown` share of the training budget, then linearly down to 0 at its end.

    progress is the share of the budget used (0..1). Under inverse square root the rate is still
    high when a budget runs out, and the last checkpoints differ a lot; cooling down first lets the
    run end in a minimum (as warmup-stable-decay schedules do).
    """
    if cooldown <= 0 or progress <= 1 - cooldown:
        return 1.0
    return max(0.0, (1.0 - progress) / cooldown)


def peak_lr(train_cfg, d_model: int) -> float:
    """The configured peak, or the paper's d_model^-0.5 * warmup^-0.5."""
    if train_cfg.lr is not None:
        return float(train_cfg.lr)
    return d_model**-0.5 * train_cfg.warmup**-0.5


def build_optimizer(model: torch.nn.Module, train_cfg) -> torch.optim.Optimizer:
    """Adam with the fused kernel (one pass over all parameters; on CPU torch defaults to a
    per-tensor loop)."""
    return torch.optim.Adam(
        model.parameters(),
        lr=0.0,  # set every step from the schedule
        betas=tuple(train_cfg.betas),
        eps=train_cfg.eps,
        weight_decay=train_cfg.weight_decay,
        fused=True,
    )
