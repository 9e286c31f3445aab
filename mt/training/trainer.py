"""The training loop: token batches -> label-smoothed loss -> Adam, with periodic validation and
checkpoints. Validation lives in validation.py, checkpoint files and resume in run_files.py,
the budget and stopping rules in budget.py, what the run logs in reporting.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from mt import fastpath
from mt.config.model import model_options
from mt.data.batching import EncodedCorpus
from mt.data.corpus import ParallelCorpus
from mt.data.order import DataOrder, ShardPools
from mt.data.subword_sampling import SampledSegmentations
from mt.data.tokenizer import PAD
from mt.errors import Interrupted
from mt.fastpath.cuda_graphs import CompiledPerShape, GraphedTraining, PendingStats, capturable_adam
from mt.precision import WorkingCopy, autocast
from mt.training.budget import Progress, budget_used, ranking_score, shown, stop_reason
from mt.training.distributed import Dist, broadcast_from_main, data_parallel, sum_across
from mt.training.eager_steps import EagerSteps
from mt.training.flops import parameter_counts, peak_flops
from mt.training.graphed_steps import GraphedSteps
from mt.training.interrupt import StopRequest
from mt.training.loss import label_smoothed_loss
from mt.training.optim import build_optimizer, cooldown_factor, inverse_sqrt_lr, peak_lr
from mt.training.reporting import (
    TrainWindow,
    announce_duration,
    best_score_tag,
    log_train_record,
    log_validation,
    validation_share_note,
    write_settings,
)
from mt.training.run_files import (
    CheckpointKeeper,
    check_writable,
    checkpoint_bytes,
    drop_records_after,
    restore,
    resume_state,
    training_state,
)
from mt.training.validation import Validator
from mt.training.weight_average import WeightAverage

log = logging.getLogger(__name__)

ANNOUNCE_AFTER = 10  # updates timed before the run's duration is estimated


class Trainer(EagerSteps, GraphedSteps):
    def __init__(
        self,
        cfg,
        model,
        tokenizer,
        train_data: ShardPools | EncodedCorpus | SampledSegmentations,
        valid_data: EncodedCorpus,
        valid_text: ParallelCorpus,
        run_dir: Path,
        device: torch.device,
        dist: Dist | None = None,
    ):
        self.cfg, self.tc, self.dist = cfg, cfg.train, dist or Dist()
        self.model = model.to(device)
        # What training calls: the model itself, or its DistributedDataParallel wrapper.
        self.net = data_parallel(self.model) if self.dist.enabled else self.model
        self.tokenizer = tokenizer
        self.run_dir, self.device = run_dir, device
        self.ckpt_dir = run_dir / "checkpoints"
        # On CUDA a training update replays CUDA graphs over batches in a few fixed shapes (fastpath).
        tc = self.tc
        self.graphs_off = fastpath.cuda_graphs_off_because(device, tc.cuda_graphs, tc.precision, self.dist.world)
        # train.compile: eager shapes change with every batch, so compile for dynamic shapes once; the graph
        # path's modules are compiled for each of its fixed shapes instead (in training mode; see batch_loss).
        self.per_shape = CompiledPerShape() if tc.compile and self.graphs_off is None else None
        if tc.compile and self.graphs_off is not None:
            self.net = fastpath.compiled_for_training(self.net, dynamic=True)
        if self.graphs_off is None:
            self.optimizer = capturable_adam(model.parameters(), tc.betas, tc.eps, tc.weight_decay, device)
        else:
            self.optimizer = build_optimizer(model, tc)
        self.graphed: GraphedTraining | None = None  # built at the first update, after a resume
        self.ema = WeightAverage(self.model, self.tc.ema_decay) if self.tc.ema_decay else None
        # bf16 weights: forward and backward run a bf16 copy, Adam updates the fp32 model (one process).
        bf16_weights = self.tc.precision == "bf16" and self.tc.bf16_weights and not self.dist.enabled
        self.weights_dtype = torch.bfloat16 if bf16_weights else None
        self.working: WorkingCopy | None = None  # the eager path's copy, made at its first update
        if self.tc.bf16_weights and not bf16_weights:
            log.warning("train.bf16_weights applies to training in one process (off)")
        self.pending: list[tuple[PendingStats, dict]] = []  # updates launched, their figures not read yet
        # fp16 needs loss scaling against gradient underflow; bf16 and fp32 do not (a no-op then).
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.tc.precision == "fp16")
        self.peak_lr = peak_lr(self.tc, model_options(cfg.model, strict=False).d_model)
        batching = "buckets" if self.graphs_off is None else "tokens"
        self.progress = Progress(batching=batching, best_metric=self.tc.best_metric)
        self.data_order = DataOrder(train_data, self.tc.max_tokens, self.tc.seed, bucketed=self.graphs_off is None)
        self.peak = peak_flops(device, self.tc.peak_tflops)
        self.param_counts = parameter_counts(model)
        self.bad_in_a_row = 0
        self.stop_request = StopRequest()
        self.validator = Validator.for_training(
            cfg, self.model, tokenizer, valid_data, valid_text, device, self.batch_loss
        )
        self.keeper = CheckpointKeeper(self.ckpt_dir, self.tc, self.checkpoint_state, self.dist.is_main)
        self._validated_at, self._noted_share = 0.0, False  # training seconds at the last validation (fit: resumed)
        if self.dist.is_main:
            check_writable(self.ckpt_dir, checkpoint_bytes(model, self.tc))

    # ---- one update -------------------------------------------------------------------------

    def batch_loss(self, batch, net=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed (label-smoothed loss, nll) over the batch's real target tokens, of self.net under the run's
        autocast, or of net (a low-precision working copy of the model) as it is."""
        keep = fastpath.rows_to_score(batch.tgt_out != PAD)  # None: every position, padding ignored by the loss
        module = self.net if net is None else net
        if self.per_shape is not None and module.training:  # the graph path's updates (not validation)
            module = self.per_shape(module)
        with autocast(self.device, self.tc.precision) if net is None else contextlib.nullcontext():
            logits = module(batch.src, batch.tgt_in, keep=keep)  # (N, V) or (B, T, V)
        target = batch.tgt_out if keep is None else batch.tgt_out[keep]
        return label_smoothed_loss(logits, target, self.tc.label_smoothing, pad_id=PAD)

    def train_step(self) -> dict:
        """One optimizer update over update_freq batches, the loss normalised by target tokens: eagerly
        (eager_steps.py), or on CUDA as replayed graphs (graphed_steps.py)."""
        return self.eager_train_step() if self.graphs_off is not None else self.graphed_train_step()

    def scheduled_lr(self) -> float:
        """The next update's learning rate: warm-up and inverse square root, then the cool-down."""
        lr = inverse_sqrt_lr(self.progress.step + 1, self.tc.warmup, self.peak_lr)
        return lr * cooldown_factor(self.budget_used(), self.tc.cooldown)

    # ---- checkpoints, budget, validation ----------------------------------------------------

    def checkpoint_state(self, with_optimizer: bool = True) -> dict:
        """last.pt (with the optimizer): the trained weights, and their average for resume; the weights-only
        files (best.pt, stepN.pt): the weights validated, the average where train.ema_decay keeps one."""
        if with_optimizer:
            state = training_state(self.cfg, self.model, self.tokenizer, self.progress, self.optimizer, self.scaler)
            if self.ema is not None:
                state["trainer"]["weight_average"] = self.ema.state_dict()
            return state
        weights = None if self.ema is None else self.ema.model_state(self.model)
        return training_state(self.cfg, self.model, self.tokenizer, self.progress, weights=weights)

    def resume(self) -> bool:
        """Continue from checkpoints/last.pt if there is one; refuse one from another setup."""
        path = self.ckpt_dir / "last.pt"
        state = resume_state(path, self.cfg, self.tokenizer)
        if state is None:
            return False
        self.progress = restore(state, self.model, self.optimizer, self.scaler)
        if said := self.progress.rank_by(self.tc.best_metric):
            log.warning("%s", said)
        if self.ema is not None:
            self.ema.load_state_dict(state["trainer"].get("weight_average"), str(path))
        batching = "buckets" if self.data_order.bucketed else "tokens"
        if self.progress.batching != batching:  # saved on the other path: its epoch has other batches
            log.warning(
                "this run was saved with %s batches and resumes with %s ones (CUDA graphs %s): "
                "epoch %d restarts from its first batch",
                self.progress.batching,
                batching,
                "on" if batching == "buckets" else "off",
                self.progress.epoch + 1,
            )
            self.progress.batching, self.progress.batch_in_epoch, self.progress.pool_batches = batching, 0, []
        if self.dist.is_main:
            for name in ("train.jsonl", "metrics.jsonl"):
                drop_records_after(self.run_dir / name, self.progress.step)
        log.info("resumed from %s at step %d (epoch %d)", path, self.progress.step, self.progress.epoch + 1)
        return True

    def budget_used(self) -> float:
        p = self.progress
        return budget_used(p, self.tc, self.data_order.epoch_fraction(p))

    def should_stop(self) -> str | None:
        """Why to stop now, or None. With several ranks, all stop when any would (signals and
        wall-clock time can differ between processes)."""
        p = self.progress
        reason = stop_reason(p, self.tc, self.data_order.epoch_finished(p), self.stop_request.signal_name)
        if self.dist.enabled and sum_across([float(reason is not None)], self.dist, self.device)[0] > 0:
            reason = reason or "another rank stopped"
        return reason

    def validate(self, writer: SummaryWriter | None = None) -> dict:
        """The validation record of the model now (its weight average, where the run keeps one); with a
        writer, also reported (TensorBoard, files)."""
        p = self.progress
        with contextlib.nullcontext() if self.ema is None else self.ema.applied():
            return self.validator.run(p.step, p.epoch, p.elapsed, writer, self.run_dir)

    def validate_and_keep_best(self, writer: SummaryWriter | None) -> None:
        """Rank 0 validates and keeps checkpoints; the others then take its bookkeeping."""
        if self.dist.is_main:
            start = time.perf_counter()
            record = self.validate(writer)
            p = self.progress
            score = ranking_score(record, self.tc.best_metric)
            improved = p.record_validation(score)
            self.keeper.keep_best(p, score)
            seconds = time.perf_counter() - start
            log_validation(record, p, improved, seconds)
            self._note_validation_share(seconds)
            if writer is not None:  # the HParams tab shows a scalar's last value: this one's is the best
                writer.add_scalar(best_score_tag(p.best_metric), shown(p.best_score, p.best_metric), p.step)
        self.progress = broadcast_from_main(self.progress, self.dist)

    def _note_validation_share(self, seconds: float) -> None:
        """Once a run, where validating takes much of its time: how to take less (reporting.py)."""
        trained, self._validated_at = self.progress.elapsed - self._validated_at, self.progress.elapsed
        note = None if self._noted_share else validation_share_note(seconds, trained, len(self.validator.sources))
        if note:
            log.warning("%s", note)
            self._noted_share = True

    # ---- the loop ---------------------------------------------------------------------------

    def fit(self) -> Progress:
        resumed = self.resume()
        main = self.dist.is_main
        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=self.progress.step + 1) if main else None
        train_log = open(self.run_dir / "train.jsonl", "a", encoding="utf-8") if main else None
        window = TrainWindow(self.peak)
        bar = tqdm(
            total=self.tc.max_steps,
            initial=self.progress.step,
            unit="step",
            dynamic_ncols=True,
            disable=None if main else True,
        )
        self._log_start()
        if writer is not None:
            write_settings(writer, self.cfg, self.run_dir)
        first_step, first_elapsed = self.progress.step, self.progress.elapsed
        self._validated_at, self._noted_share = first_elapsed, False  # training seconds at the last validation
        try:
            with logging_redirect_tqdm(), self.stop_request:
                if self.tc.init_from and not resumed:
                    log.info("the parent model on this run's validation set, before fine-tuning:")
                    self.validate_and_keep_best(writer)  # best.pt at step 0: a fine-tune never ends worse
                while (reason := self.should_stop()) is None:
                    start = time.perf_counter()
                    stats = self.train_step()
                    self.progress.elapsed += time.perf_counter() - start
                    if not stats["finite"]:
                        continue
                    window.add(stats, time.perf_counter() - start)
                    bar.update(1)
                    step = self.progress.step
                    if step - first_step == ANNOUNCE_AFTER and main:
                        per_update = (self.progress.elapsed - first_elapsed) / ANNOUNCE_AFTER
                        announce_duration(self.progress, self.tc, per_update, bar, self.device)
                    due = [step % every == 0 for every in (self.tc.log_every, self.tc.valid_every, self.tc.save_every)]
                    if any(due):
                        self.settle()  # every launched update's figures read back; step is exact again
                        step = self.progress.step
                    if due[0] and window.steps:
                        record = window.flush(step, self.progress.epoch)
                        if main:
                            log_train_record(record, writer, train_log, bar, self.device)
                    if due[1]:
                        self.validate_and_keep_best(writer)
                    if due[2]:
                        self.keeper.save_periodic(self.progress)
                self._finish(reason, writer)
        finally:
            bar.close()
            if main:
                train_log.close()
                writer.close()
        return self.progress

    def _log_start(self) -> None:
        pools = self.data_order.pools
        if pools.pool_count == 1:
            pairs, batches = self.data_order.pool_batches(self.progress.epoch, 0)
            sampling = f" (segmentation sampled per epoch, subword_sampling {self.tc.subword_sampling:g})" * bool(
                self.tc.subword_sampling
            )
            data = f"{len(pairs):,} pairs{sampling}, {len(batches):,} batches/epoch"
        else:
            data = f"{len(pools.corpus):,} lines dealt into {pools.pool_count} pools an epoch"
        average = f"; validated and kept: the weights' moving average (decay {self.tc.ema_decay:g})" * bool(self.ema)
        threads = torch.get_num_threads()
        where = f"{self.device}" + f" ({threads} thread{'s' * (threads != 1)})" * (self.device.type == "cpu")
        log.info(f"training: {data}, peak lr {self.peak_lr:.2e}, {self.tc.precision} on {where}{average}")
        parameters = sum(p.numel() for p in self.model.parameters())
        if self.device.type == "cpu" and parameters > 20e6:
            log.info(
                f"a {parameters / 1e6:.0f}M-parameter model on a CPU: expect a long run "
                f"(an estimate follows after {ANNOUNCE_AFTER} updates)"
            )

    def _finish(self, reason: str, writer: SummaryWriter | None) -> None:
        """After the last update: on a signal, save last.pt and stop; otherwise validate and save the end."""
        self.settle()
        log.info("stopping: %s", reason)
        if self.stop_request.signal_name:
            self.keeper.save("last.pt")
            raise Interrupted(
                f"{reason}: saved {self.ckpt_dir / 'last.pt'} at step {self.progress.step}; "
                "run the same command again to resume"
            )
        if self.progress.step % self.tc.valid_every:
            self.validate_and_keep_best(writer)
        self.keeper.save_periodic(self.progress)
