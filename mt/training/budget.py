"""Where training stands (everything besides weights and optimizer that exact resume needs), how
much of its budget it has used, and when it stops."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Progress:
    step: int = 0  # optimizer updates done
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    pool_batches: list = field(default_factory=list)  # batches in each of the epoch's pools, as far as known
    batching: str = "tokens"  # how the epoch's batches were made: "tokens" (eager) or "buckets" (CUDA graphs)
    elapsed: float = 0.0  # training wall-clock seconds, summed over resumed runs
    best_bleu: float = -1.0
    best_step: int = 0
    bad_validations: int = 0  # validations since the last improvement (early stopping)
    skipped_steps: int = 0  # updates skipped for a non-finite loss or gradient
    best_kept: list = field(default_factory=list)  # [[bleu, step], ...], best first
    last_kept: list = field(default_factory=list)  # steps of the kept stepN.pt, oldest first

    def record_validation(self, bleu: float) -> bool:
        """Note a validation's BLEU; whether it is the best so far."""
        if bleu > self.best_bleu:
            self.best_bleu, self.best_step, self.bad_validations = bleu, self.step, 0
            return True
        self.bad_validations += 1
        return False


def budget_used(p: Progress, tc, epoch_fraction: float) -> float:
    """The share of the training budget used so far: of train.max_steps, train.max_time (training
    seconds, summed over resumed runs) or train.max_epochs, whichever runs out first."""
    shares = [p.step / tc.max_steps]
    if tc.max_time:
        shares.append(p.elapsed / tc.max_time)
    if tc.max_epochs:
        shares.append((p.epoch + epoch_fraction) / tc.max_epochs)
    return min(1.0, max(shares))


def updates_left(p: Progress, tc, seconds_per_update: float) -> int:
    """Updates until max_steps or max_time ends the run, at the given speed."""
    left = tc.max_steps - p.step
    if tc.max_time:
        left = min(left, math.ceil((tc.max_time - p.elapsed) / seconds_per_update))
    return left


def stop_reason(p: Progress, tc, epoch_finished: bool, signal_name: str | None) -> str | None:
    """Why to stop now, or None."""
    if signal_name:
        return f"interrupted by {signal_name}"
    if p.step >= tc.max_steps:
        return f"reached train.max_steps={tc.max_steps}"
    epochs_done = p.epoch + epoch_finished
    if tc.max_epochs and epochs_done >= tc.max_epochs:
        return f"reached train.max_epochs={tc.max_epochs}"
    if tc.max_time and p.elapsed >= tc.max_time:
        return f"reached train.max_time={tc.max_time:g}s"
    if tc.patience and p.bad_validations >= tc.patience:
        return f"no BLEU improvement in {tc.patience} validations (train.patience)"
    return None
