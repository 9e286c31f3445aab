"""The Trainer's updates on the CUDA-graph path (mt/fastpath/cuda_graphs.py): batches padded to the run's
few bucket shapes, each update launched as graph replays, its figures read back later without waiting.
The eager update is in eager_steps.py, the loop and everything else in trainer.py; the Trainer inherits
these methods.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from mt.data.batching import Batch, EncodedCorpus, collate
from mt.fastpath.cuda_graphs import GraphedTraining
from mt.training.flops import training_flops

log = logging.getLogger(__name__)


def target_tokens(update: list[tuple[EncodedCorpus, np.ndarray]]) -> int:
    """Target tokens of an update's batches, EOS included: what its loss is normalised by."""
    return int(sum(pairs.tgt_lens[idx].sum() + len(idx) for pairs, idx in update))


class GraphedSteps:
    """graphed_train_step, and reading back what its updates did (collect, settle). Needs the Trainer's model,
    optimizer, ema, weights_dtype, per_shape, batch_loss, data_order, progress, scheduled_lr and _count_bad_update."""

    def graphed_train_step(self) -> dict:
        """train_step as CUDA graph replays: the same update, with the host never waiting for the device.

        Its figures are read back later (`collect`): the step is counted when launched, and uncounted if
        the device skipped it (a non-finite loss or gradient). `settle` reads them all back, before
        anything that needs the exact state (validation, checkpoints, log lines, the end).
        """
        if self.graphed is None:
            self.graphed = GraphedTraining(
                self.model,
                self.optimizer,
                self._loss_of_tensors,
                self.tc.clip_norm,
                capture=self.device.type == "cuda",  # elsewhere (tests) the same calls run eagerly
                weights_dtype=self.weights_dtype,
            )
            shapes = ", ".join(f"{rows}x{length}" for rows, length in self.data_order.buckets.shapes())
            log.info("training replays CUDA graphs; batch shapes (sentences x padded length): %s", shapes)
            if self.per_shape is not None:
                log.info("train.compile: the model is compiled for each batch shape at its first batch (slow once)")
            if self.weights_dtype is not None:
                log.info("forward and backward run a bf16 copy of the weights; Adam updates the fp32 ones")
        self.model.train()
        update = self.data_order.take(self.progress, self.tc.update_freq)
        total_tokens = target_tokens(update)
        batches = [collate(pairs, idx) for pairs, idx in update]
        padded = [self.data_order.buckets.pad(b) for b in batches]
        for batch in padded:
            self.graphed.accumulate(batch.src, batch.tgt_in, batch.tgt_out, 1.0 / total_tokens)
        lr = self.scheduled_lr()
        stats = {
            "finite": True,  # until read back
            "lr": lr,
            "tgt_tokens": total_tokens,
            "padded_tokens": sum(b.padded_tokens for b in padded),
            "real_tokens": sum(b.real_tokens for b in batches),
            "flops": sum(training_flops(self.param_counts, b.src.shape, b.tgt_in.shape) for b in padded),
        }
        self.pending.append((self.graphed.apply(lr), stats))
        self.progress.step += 1
        # the average moves after the device's update, in stream order (one the device skips leaves the weights)
        if self.ema is not None:
            self.ema.update(self.progress.step)
        self.collect(keep=2)  # the host runs at most two updates ahead of the device
        return stats

    def _loss_of_tensors(self, net, src, tgt_in, tgt_out) -> tuple[torch.Tensor, torch.Tensor]:
        """GraphedTraining's loss_fn: the model under the run's autocast, or its bf16 working copy as it is."""
        return self.batch_loss(Batch(src, tgt_in, tgt_out, 0), net=None if net is self.model else net)

    def collect(self, keep: int = 0) -> None:
        """Read back the launched updates' figures, waiting for all but the last `keep` (and taking any
        later ones already done). A skipped update is uncounted and counted as skipped."""
        while self.pending and (len(self.pending) > keep or self.pending[0][0].ready()):
            pending, stats = self.pending.pop(0)
            loss_sum, nll_sum, grad_norm, skipped = pending.values()
            stats.update(loss=loss_sum / stats["tgt_tokens"], nll=nll_sum / stats["tgt_tokens"], grad_norm=grad_norm)
            stats["finite"] = not skipped
            if not skipped:
                self.bad_in_a_row = 0
                continue
            self.progress.step -= 1
            self._count_bad_update(loss_sum, grad_norm)

    def settle(self) -> None:
        """Wait for every launched update's figures (the eager path has none pending)."""
        self.collect(keep=0)
