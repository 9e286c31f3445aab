"""The Trainer's updates on the eager path (any device; on CUDA with train.cuda_graphs=false, fp16 or
several processes): the batches of an update as they come, forward, backward, clipping and the
optimizer op by op, the update's figures read at its end. With train.bf16_weights forward and backward
run a bf16 working copy (mt.precision.WorkingCopy). The CUDA-graph path is in graphed_steps.py, the
loop and everything else in trainer.py; the Trainer inherits these methods.
"""

from __future__ import annotations

import contextlib
import logging
import math

import torch

from mt import fastpath
from mt.data.batching import collate
from mt.errors import MTError
from mt.precision import WorkingCopy
from mt.training.distributed import sum_across
from mt.training.flops import training_flops
from mt.training.graphed_steps import target_tokens

log = logging.getLogger(__name__)


class EagerSteps:
    """eager_train_step, and applying or skipping an update. Needs the Trainer's model, net, device, optimizer,
    scaler, ema, weights_dtype, working, batch_loss, data_order, progress, dist, tc, param_counts, bad_in_a_row
    and scheduled_lr."""

    def eager_train_step(self) -> dict:
        """One optimizer update over update_freq batches; the loss is normalised by target tokens.

        An update whose loss or gradient is not finite is skipped (weights untouched) and counted;
        train.max_bad_steps of them in a row stop training with an error.
        """
        self.model.train()
        if self.weights_dtype is not None and self.working is None:  # made at the first update, after a resume
            self.working = WorkingCopy(self.model, self.weights_dtype)
            if self.tc.compile:  # what runs forward is compiled, as self.net is without a copy
                self.working.module = fastpath.compiled_for_training(self.working.module, dynamic=True)
            log.info("forward and backward run a bf16 copy of the weights; Adam updates the fp32 ones")
        net = None if self.working is None else self.working.module.train()
        world, rank = self.dist.world, self.dist.rank
        update = self.data_order.take(self.progress, self.tc.update_freq * world)  # the same on every rank
        total_tokens = target_tokens(update)
        batches = [collate(pairs, idx) for pairs, idx in update[rank::world]]
        sums = []  # (loss, nll) of each batch, read once at the end: one wait for the device per update
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            with contextlib.nullcontext() if last or not self.dist.enabled else self.net.no_sync():
                loss, nll = self.batch_loss(batch.to(self.device), net)
                self.scaler.scale(loss * world / total_tokens).backward()  # DDP averages over ranks: undo it
            sums.append(torch.stack([loss.detach().float(), nll.float()]))
        if self.working is not None:
            self.working.widen_gradients()
        loss_sum, nll_sum = torch.stack(sums).sum(0).tolist()
        loss_sum, nll_sum = sum_across([loss_sum, nll_sum], self.dist, self.device)
        self.scaler.unscale_(self.optimizer)
        grad_norm = float(
            torch.nn.utils.clip_grad_norm_(
                self.model.parameters(), self.tc.clip_norm if self.tc.clip_norm > 0 else float("inf")
            )
        )
        lr = self.scheduled_lr()
        finite = self._apply_update(loss_sum, grad_norm, lr)
        if self.working is not None:
            self.working.refresh()
        return {
            "finite": finite,
            "loss": loss_sum / total_tokens,
            "nll": nll_sum / total_tokens,
            "lr": lr,
            "grad_norm": grad_norm,
            "tgt_tokens": total_tokens,
            "padded_tokens": sum(b.padded_tokens for b in batches) * world,  # this rank's share, scaled
            "real_tokens": sum(b.real_tokens for b in batches) * world,
            "flops": sum(training_flops(self.param_counts, b.src.shape, b.tgt_in.shape) for b in batches) * world,
        }

    def _count_bad_update(self, loss_sum: float, grad_norm: float) -> None:
        self.progress.skipped_steps += 1
        self.bad_in_a_row += 1
        log.warning(
            "skipped an update: loss %s, grad norm %s (%d in a row, %d in all)",
            loss_sum,
            grad_norm,
            self.bad_in_a_row,
            self.progress.skipped_steps,
        )
        if self.bad_in_a_row >= self.tc.max_bad_steps:
            raise MTError(
                f"{self.bad_in_a_row} updates in a row had a non-finite loss or gradient "
                f"(train.max_bad_steps); lower train.lr or use train.precision=fp32"
            )

    def _apply_update(self, loss_sum: float, grad_norm: float, lr: float) -> bool:
        """Step the optimizer at lr if loss and gradient are finite; otherwise skip and count. Whether it stepped."""
        finite = math.isfinite(loss_sum) and math.isfinite(grad_norm)
        if finite:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.scaler.step(self.optimizer)
            self.progress.step += 1
            self.bad_in_a_row = 0
            if self.ema is not None:
                self.ema.update(self.progress.step)
        elif math.isfinite(loss_sum) and self.scaler.is_enabled():
            self.progress.skipped_steps += 1  # fp16 overflow: the scaler lowers its scale and we go on
        else:
            self._count_bad_update(loss_sum, grad_norm)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return finite
