"""Where training stands (everything besides weights and optimizer that exact resume needs), how
much of its budget it has used, and when it stops."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# train.best_metric: the validation figure that ranks checkpoints, its name in logs, and its record key
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "ppl": "perplexity"}
METRIC_KEYS = {"bleu": "valid_bleu", "chrf": "valid_chrf", "ppl": "valid_ppl"}


def ranking_score(record: dict, metric: str) -> float:
    """A validation record's score on metric, higher better: BLEU or chrF, or perplexity negated."""
    value = record[METRIC_KEYS[metric]]
    return -value if metric == "ppl" else value


def shown(score: float, metric: str) -> float:
    """A ranking score as the metric's own value (perplexity positive again)."""
    return -score if metric == "ppl" else score


@dataclass
class Progress:
    step: int = 0  # optimizer updates done
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    pool_batches: list = field(default_factory=list)  # batches in each of the epoch's pools, as far as known
    batching: str = "tokens"  # how the epoch's batches were made: "tokens" (eager) or "buckets" (CUDA graphs)
    elapsed: float = 0.0  # training wall-clock seconds, summed over resumed runs
    best_metric: str = "bleu"  # train.best_metric when best_score was recorded
    best_score: float = -math.inf  # the best validation so far on best_metric, higher better (ppl negated)
    best_step: int = 0
    bad_validations: int = 0  # validations since the last improvement (early stopping)
    skipped_steps: int = 0  # updates skipped for a non-finite loss or gradient
    best_kept: list = field(default_factory=list)  # [[score, step], ...], best first
    last_kept: list = field(default_factory=list)  # steps of the kept stepN.pt, oldest first

    @classmethod
    def from_saved(cls, saved: dict) -> Progress:
        """The progress a checkpoint saved; one written before train.best_metric ranked by BLEU."""
        saved = dict(saved)
        if "best_bleu" in saved:
            saved["best_score"] = saved.pop("best_bleu")
            saved["best_metric"] = "bleu"
        return cls(**saved)

    def record_validation(self, score: float) -> bool:
        """Note a validation's score (higher better); whether it is the best so far."""
        if score > self.best_score:
            self.best_score, self.best_step, self.bad_validations = score, self.step, 0
            return True
        self.bad_validations += 1
        return False

    def rank_by(self, metric: str) -> str | None:
        """Rank validations by metric from now on; where the run ranked by another until now, forget its
        best (the next validation is the best so far) and say so."""
        if metric == self.best_metric:
            return None
        before, self.best_metric = self.best_metric, metric
        if self.best_step == 0 and self.best_score == -math.inf:
            return None
        self.best_score, self.best_kept, self.bad_validations = -math.inf, [], 0
        return f"train.best_metric is {metric}, was {before}: the next validation starts the ranking anew"


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
        return f"no better valid {METRIC_NAMES[tc.best_metric]} in {tc.patience} validations (train.patience)"
    return None
