"""The training loop: token batches -> label-smoothed loss -> Adam, with periodic validation,
checkpoints that resume exactly, TensorBoard curves and JSON logs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import resource
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from mt import fastpath
from mt.batching import EncodedCorpus, collate, token_batches
from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.config import ModelConfig, to_dict
from mt.data import ParallelCorpus
from mt.distributed import Dist, broadcast_from_main, sum_across
from mt.errors import Interrupted, MTError
from mt.flops import parameter_counts, peak_flops, training_flops
from mt.interrupt import StopRequest
from mt.loss import label_smoothed_loss
from mt.metrics import score
from mt.optim import build_optimizer, cooldown_factor, inverse_sqrt_lr, peak_lr
from mt.tokenizer import PAD
from mt.translator import Translator, autocast

log = logging.getLogger(__name__)

ANNOUNCE_AFTER = 10  # updates timed before the run's duration is estimated


@dataclass
class Progress:
    """Where training stands: everything besides weights and optimizer that exact resume needs."""

    step: int = 0  # optimizer updates done
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    elapsed: float = 0.0  # training wall-clock seconds, summed over resumed runs
    best_bleu: float = -1.0
    best_step: int = 0
    bad_validations: int = 0  # validations since the last improvement (early stopping)
    skipped_steps: int = 0  # updates skipped for a non-finite loss or gradient
    best_kept: list = field(default_factory=list)  # [[bleu, step], ...], best first
    last_kept: list = field(default_factory=list)  # steps of the kept stepN.pt, oldest first


class Trainer:
    def __init__(self, cfg, model, tokenizer, train_data: EncodedCorpus, valid_data: EncodedCorpus,
                 valid_text: ParallelCorpus, run_dir: Path, device: torch.device, dist: Dist | None = None):
        self.cfg, self.tc, self.dist = cfg, cfg.train, dist or Dist()
        self.model = model.to(device)
        # What training calls: the model itself, or its DistributedDataParallel wrapper. The only
        # buffers are sinusoid tables each rank grows to its own batches' lengths: not broadcast.
        self.net = DistributedDataParallel(self.model, broadcast_buffers=False) if self.dist.enabled else self.model
        if self.tc.compile:  # shapes change with every batch: compile for dynamic shapes once
            self.net = torch.compile(self.net, dynamic=True)
        self.tokenizer = tokenizer
        self.train_data, self.valid_data, self.valid_text = train_data, valid_data, valid_text
        self.run_dir, self.device = run_dir, device
        self.ckpt_dir = run_dir / "checkpoints"
        self.optimizer = build_optimizer(model, self.tc)
        # fp16 needs loss scaling against gradient underflow; bf16 and fp32 do not (a no-op then).
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.tc.precision == "fp16")
        self.peak_lr = peak_lr(self.tc, cfg.model.d_model)
        self.progress = Progress()
        self.src_lens, self.tgt_lens = train_data.src_lens, train_data.tgt_lens
        self.peak = peak_flops(device, self.tc.peak_tflops)
        self.param_counts = parameter_counts(model)
        self.bad_in_a_row = 0
        self.stop_request = StopRequest()
        if self.dist.is_main:
            check_writable(self.ckpt_dir, checkpoint_bytes(model, self.tc))
        self._epoch_batches: tuple[int, list[np.ndarray]] | None = None

    # ---- data order -------------------------------------------------------------------------

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The batches of an epoch: a pure function of (seed, epoch), so a resumed run sees the same."""
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            rng = np.random.default_rng([self.tc.seed, epoch])
            self._epoch_batches = (epoch, token_batches(self.src_lens, self.tgt_lens, self.tc.max_tokens, rng))
        return self._epoch_batches[1]

    def next_batches(self, count: int) -> list[np.ndarray]:
        """The next `count` batches (one update's worth), advancing the data position."""
        out = []
        while len(out) < count:
            batches = self.epoch_batches(self.progress.epoch)
            if self.progress.batch_in_epoch >= len(batches):
                self.progress.epoch += 1
                self.progress.batch_in_epoch = 0
                continue
            out.append(batches[self.progress.batch_in_epoch])
            self.progress.batch_in_epoch += 1
        return out

    # ---- one update -------------------------------------------------------------------------

    def batch_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed (label-smoothed loss, nll) over the batch's real target tokens."""
        keep = fastpath.rows_to_score(batch.tgt_out != PAD)  # None: every position, padding ignored by the loss
        with autocast(self.device, self.tc.precision):
            logits = self.net(batch.src, batch.tgt_in, keep=keep)  # (N, V) or (B, T, V)
        target = batch.tgt_out if keep is None else batch.tgt_out[keep]
        return label_smoothed_loss(logits, target, self.tc.label_smoothing, pad_id=PAD)

    def train_step(self) -> dict:
        """One optimizer update over update_freq batches; the loss is normalised by target tokens.

        An update whose loss or gradient is not finite is skipped (weights untouched) and counted;
        train.max_bad_steps of them in a row stop training with an error.
        """
        self.model.train()
        world, rank = self.dist.world, self.dist.rank
        update = self.next_batches(self.tc.update_freq * world)  # the same on every rank
        total_tokens = int(sum(self.tgt_lens[idx].sum() + len(idx) for idx in update))  # EOS included
        batches = [collate(self.train_data, idx) for idx in update[rank::world]]
        sums = []  # (loss, nll) of each batch, read once at the end: one wait for the device per update
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            with contextlib.nullcontext() if last or not self.dist.enabled else self.net.no_sync():
                loss, nll = self.batch_loss(batch.to(self.device))
                self.scaler.scale(loss * world / total_tokens).backward()  # DDP averages over ranks: undo it
            sums.append(torch.stack([loss.detach(), nll]))
        loss_sum, nll_sum = torch.stack(sums).sum(0).tolist()
        loss_sum, nll_sum = sum_across([loss_sum, nll_sum], self.dist, self.device)
        self.scaler.unscale_(self.optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tc.clip_norm if self.tc.clip_norm > 0 else float("inf")
        ))
        lr = inverse_sqrt_lr(self.progress.step + 1, self.tc.warmup, self.peak_lr)
        lr *= cooldown_factor(self.budget_used(), self.tc.cooldown)
        finite = math.isfinite(loss_sum) and math.isfinite(grad_norm)
        if finite:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.scaler.step(self.optimizer)
            self.progress.step += 1
            self.bad_in_a_row = 0
        elif math.isfinite(loss_sum) and self.scaler.is_enabled():
            self.progress.skipped_steps += 1  # fp16 overflow: the scaler lowers its scale and we go on
        else:
            self.progress.skipped_steps += 1
            self.bad_in_a_row += 1
            log.warning("skipped an update: loss %s, grad norm %s (%d in a row, %d in all)",
                        loss_sum, grad_norm, self.bad_in_a_row, self.progress.skipped_steps)
            if self.bad_in_a_row >= self.tc.max_bad_steps:
                raise MTError(f"{self.bad_in_a_row} updates in a row had a non-finite loss or gradient "
                              f"(train.max_bad_steps); lower train.lr or use train.precision=fp32")
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
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

    # ---- validation -------------------------------------------------------------------------

    @torch.no_grad()
    def valid_loss(self) -> tuple[float, float]:
        """Teacher-forced (label-smoothed loss, nll) per target token on the validation set."""
        self.model.eval()
        loss_sum = nll_sum = tokens = 0.0
        v = self.valid_data
        for idx in token_batches(v.src_lens, v.tgt_lens, self.tc.max_tokens):
            batch = collate(v, idx).to(self.device)
            loss, nll = self.batch_loss(batch)
            loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + batch.num_tgt_tokens
        return loss_sum / tokens, nll_sum / tokens

    def validate(self, writer: SummaryWriter | None) -> dict:
        loss, nll = self.valid_loss()
        limit = self.cfg.data.valid_max_sentences or len(self.valid_text)
        sources, references = self.valid_text.src[:limit], self.valid_text.tgt[:limit]
        dc = self.cfg.decode
        translator = Translator(self.model, self.tokenizer, self.device, self.tc.precision, dc.batch_tokens)
        results = translator.translate(sources, beam=dc.valid_beam, alpha=dc.alpha,
                                       max_len_a=dc.max_len_a, max_len_b=dc.max_len_b)
        hypotheses = [r[0].text for r in results]
        scores = score(hypotheses, references)
        step = self.progress.step
        record = {
            "step": step, "epoch": self.progress.epoch, "valid_loss": round(loss, 4), "valid_nll": round(nll, 4),
            "valid_ppl": round(math.exp(min(nll, 50)), 3), "valid_bleu": scores.bleu, "valid_chrf": scores.chrf,
            "bleu_signature": scores.bleu_signature, "elapsed": round(self.progress.elapsed, 1),
        }
        if writer is None:  # a side evaluation (e.g. of averaged weights): nothing logged
            return record
        for key in ("loss", "ppl", "bleu", "chrf"):
            writer.add_scalar(f"valid/{key}", record[f"valid_{key}"], step)
        samples = "\n\n".join(
            f"**src:** {s}  \n**ref:** {r}  \n**hyp:** {h}"
            for s, r, h in list(zip(sources, references, hypotheses))[:3]
        )
        writer.add_text("valid/samples", samples, step)
        for i, shown in enumerate(translator.translate(sources[:2], attention_layer=-1)):
            if shown[0].attention is not None:
                # cross-attention of the last decoder layer (target rows x source columns), 8x8 pixels a cell
                image = shown[0].attention.repeat_interleave(8, 0).repeat_interleave(8, 1)
                writer.add_image(f"valid/attention_{i}", image[None].clamp(0, 1), step)
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        (self.run_dir / "valid.hyp").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        return record

    # ---- checkpoints ------------------------------------------------------------------------

    def checkpoint_state(self, with_optimizer: bool) -> dict:
        trainer = {
            "progress": asdict(self.progress),
            "rng_torch": torch.get_rng_state(),
            "rng_python": random.getstate(),
        }
        if torch.cuda.is_available():
            trainer["rng_cuda"] = torch.cuda.get_rng_state_all()
        if with_optimizer:
            trainer["optimizer"] = self.optimizer.state_dict()
            trainer["grad_scaler"] = self.scaler.state_dict()
        return {
            "config": to_dict(self.cfg),
            "model": self.model.state_dict(),
            "tokenizer": self.tokenizer.state_dict(),
            "trainer": trainer,
        }

    def save(self, name: str, with_optimizer: bool = True) -> None:
        if self.dist.is_main:
            save_checkpoint(self.checkpoint_state(with_optimizer), self.ckpt_dir / name)

    def resume(self) -> bool:
        """Continue from checkpoints/last.pt if there is one; refuse one from another setup."""
        path = self.ckpt_dir / "last.pt"
        if not path.exists():
            return False
        state = load_checkpoint(path)
        saved_model = state["config"].get("model", {})
        current = to_dict(self.cfg)["model"]
        defaults = asdict(ModelConfig())  # keys added since the checkpoint was written had their defaults
        changed = [k for k in current if saved_model.get(k, defaults.get(k)) != current[k]]
        if changed:
            raise MTError(
                f"{path}: was trained with a different model config ({', '.join(f'model.{k}' for k in changed)}); "
                "use a new run directory (hydra.run.dir=...) or the same settings"
            )
        if state["tokenizer"] != self.tokenizer.state_dict():
            raise MTError(f"{path}: its tokenizer differs from this run's; use a new run directory")
        self.model.load_state_dict(state["model"])
        trainer = state["trainer"]
        self.optimizer.load_state_dict(trainer["optimizer"])
        if trainer.get("grad_scaler"):
            self.scaler.load_state_dict(trainer["grad_scaler"])
        self.progress = Progress(**trainer["progress"])
        torch.set_rng_state(trainer["rng_torch"])
        random.setstate(trainer["rng_python"])
        if "rng_cuda" in trainer and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(trainer["rng_cuda"])
        if self.dist.is_main:
            for name in ("train.jsonl", "metrics.jsonl"):
                drop_records_after(self.run_dir / name, self.progress.step)
        log.info("resumed from %s at step %d (epoch %d)", path, self.progress.step, self.progress.epoch + 1)
        return True

    # ---- the loop ---------------------------------------------------------------------------

    def budget_used(self) -> float:
        """The share of the training budget used so far: of train.max_steps, train.max_time (training
        seconds, summed over resumed runs) or train.max_epochs, whichever runs out first."""
        p, tc = self.progress, self.tc
        shares = [p.step / tc.max_steps]
        if tc.max_time:
            shares.append(p.elapsed / tc.max_time)
        if tc.max_epochs:
            shares.append((p.epoch + p.batch_in_epoch / len(self.epoch_batches(p.epoch))) / tc.max_epochs)
        return min(1.0, max(shares))

    def announce_duration(self, steps_done: int, seconds: float, bar: tqdm) -> None:
        """Once, early: how long the rest of the run will take at the speed measured so far."""
        per_step = seconds / steps_done
        p, tc = self.progress, self.tc
        left = tc.max_steps - p.step
        if tc.max_time:
            left = min(left, math.ceil((tc.max_time - p.elapsed) / per_step))
        bar.total = p.step + left  # the bar's ETA then follows the budget that ends the run
        bar.refresh()
        seconds = left * per_step
        hours = seconds / 3600
        log.info("at %.2f s per update, the %d updates left will take about %s%s", per_step, left,
                 f"{hours:.1f} h" if hours >= 1 else f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s",
                 " (or less, with train.patience)" if tc.patience else "")
        if self.device.type == "cpu" and hours > 2:
            log.warning("this configuration is meant for a GPU; on a CPU, experiment=multi30k_cpu (60 minutes) "
                        "or experiment=smoke (8 minutes) train a smaller model on the same data")

    def should_stop(self) -> str | None:
        """Why to stop now, or None. With several ranks, all stop when any would (signals and
        wall-clock time can differ between processes)."""
        reason = self._stop_reason()
        if self.dist.enabled and sum_across([float(reason is not None)], self.dist, self.device)[0] > 0:
            reason = reason or "another rank stopped"
        return reason

    def _stop_reason(self) -> str | None:
        p, tc = self.progress, self.tc
        if self.stop_request.signal_name:
            return f"interrupted by {self.stop_request.signal_name}"
        if p.step >= tc.max_steps:
            return f"reached train.max_steps={tc.max_steps}"
        epochs_done = p.epoch + (p.batch_in_epoch >= len(self.epoch_batches(p.epoch)))
        if tc.max_epochs and epochs_done >= tc.max_epochs:
            return f"reached train.max_epochs={tc.max_epochs}"
        if tc.max_time and p.elapsed >= tc.max_time:
            return f"reached train.max_time={tc.max_time:g}s"
        if tc.patience and p.bad_validations >= tc.patience:
            return f"no BLEU improvement in {tc.patience} validations (train.patience)"
        return None

    def fit(self) -> Progress:
        self.resume()
        main = self.dist.is_main
        writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=self.progress.step + 1) if main else None
        train_log = open(self.run_dir / "train.jsonl", "a", encoding="utf-8") if main else None
        window = _Window(self.peak)
        bar = tqdm(total=self.tc.max_steps, initial=self.progress.step, unit="step", dynamic_ncols=True,
                   disable=None if main else True)
        log.info("training: %d pairs, %d batches/epoch, peak lr %.2e, %s on %s",
                 len(self.train_data), len(self.epoch_batches(self.progress.epoch)), self.peak_lr,
                 self.tc.precision, self.device)
        parameters = sum(p.numel() for p in self.model.parameters())
        if self.device.type == "cpu" and parameters > 20e6:
            log.info("a %.0fM-parameter model on a CPU: expect a long run (an estimate follows after %d updates)",
                     parameters / 1e6, ANNOUNCE_AFTER)
        first_step, first_elapsed = self.progress.step, self.progress.elapsed
        try:
            with logging_redirect_tqdm(), self.stop_request:
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
                        self.announce_duration(ANNOUNCE_AFTER, self.progress.elapsed - first_elapsed, bar)
                    if step % self.tc.log_every == 0:
                        record = window.flush(step, self.progress.epoch)
                        if main:
                            self._log_train(record, writer, train_log, bar)
                    if step % self.tc.valid_every == 0:
                        self._validate_and_keep_best(writer)
                    if step % self.tc.save_every == 0:
                        self.save_periodic()
                log.info("stopping: %s", reason)
                if self.stop_request.signal_name:
                    self.save("last.pt")
                    raise Interrupted(f"{reason}: saved {self.ckpt_dir / 'last.pt'} at step {self.progress.step}; "
                                      "run the same command again to resume")
                if self.progress.step % self.tc.valid_every:
                    self._validate_and_keep_best(writer)
                self.save_periodic()
        finally:
            bar.close()
            if main:
                train_log.close()
                writer.close()
        return self.progress

    def _keep_best(self, bleu: float) -> None:
        """best.pt is the best so far; with keep_best > 1, best_stepN.pt holds each of the N best."""
        p, n = self.progress, self.tc.keep_best
        ranked = sorted(p.best_kept + [[bleu, p.step]], key=lambda entry: (-entry[0], entry[1]))
        p.best_kept, dropped = ranked[:n], ranked[n:]
        if ranked[0][1] == p.step:
            self.save("best.pt", with_optimizer=False)
        if n > 1 and [bleu, p.step] in p.best_kept:
            self.save(f"best_step{p.step}.pt", with_optimizer=False)
        for _, step in dropped:
            (self.ckpt_dir / f"best_step{step}.pt").unlink(missing_ok=True)

    def _keep_last(self) -> None:
        """stepN.pt for the keep_last latest saves (weights only: for averaging)."""
        p = self.progress
        if not self.dist.is_main:
            return
        if not self.tc.keep_last or (p.last_kept and p.last_kept[-1] == p.step):
            return
        self.save(f"step{p.step}.pt", with_optimizer=False)
        p.last_kept.append(p.step)
        while len(p.last_kept) > self.tc.keep_last:
            (self.ckpt_dir / f"step{p.last_kept.pop(0)}.pt").unlink(missing_ok=True)

    def save_periodic(self) -> None:
        self._keep_last()
        self.save("last.pt")

    def _validate_and_keep_best(self, writer: SummaryWriter | None) -> None:
        """Rank 0 validates and keeps checkpoints; the others then take its bookkeeping."""
        if self.dist.is_main:
            self._validate_on_main(writer)
        self.progress = broadcast_from_main(self.progress, self.dist)

    def _validate_on_main(self, writer: SummaryWriter) -> None:
        start = time.perf_counter()
        record = self.validate(writer)
        p = self.progress
        improved = record["valid_bleu"] > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.bad_validations = record["valid_bleu"], p.step, 0
        else:
            p.bad_validations += 1
        self._keep_best(record["valid_bleu"])
        log.info(
            "valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f | best %.2f @ %d%s (%.1fs)",
            p.step, record["valid_loss"], record["valid_ppl"], record["valid_bleu"], record["valid_chrf"],
            p.best_bleu, p.best_step, " *" if improved else "", time.perf_counter() - start,
        )

    def _log_train(self, record: dict, writer: SummaryWriter, train_log, bar) -> None:
        record["peak_mem_mib"] = peak_memory_mib(self.device)
        for key in ("loss", "ppl", "lr", "grad_norm", "tgt_tokens_per_s", "padding", "tflops", "mfu", "peak_mem_mib"):
            if key in record:
                writer.add_scalar(f"train/{key}", record[key], record["step"])
        train_log.write(json.dumps(record) + "\n")
        train_log.flush()
        bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tgt_tokens_per_s']:.0f}")
        speed = f" | {record['tflops']:.2f} TFLOP/s" if "tflops" in record else ""
        speed += f" | MFU {100 * record['mfu']:.1f}%" if "mfu" in record else ""
        log.info(
            "step %d | epoch %d | loss %.3f | ppl %.2f | lr %.2e | gnorm %.2f | %.0f tgt tok/s%s | pad %.0f%% | "
            "mem %.1f GB",
            record["step"], record["epoch"], record["loss"], record["ppl"], record["lr"], record["grad_norm"],
            record["tgt_tokens_per_s"], speed, 100 * record["padding"], record["peak_mem_mib"] / 1024,
        )


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory so far: the GPU's allocated tensors on CUDA, the process's resident set on CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def drop_records_after(path: Path, step: int) -> None:
    """Forget log lines of steps after the checkpoint a run resumes from (a kill -9 after the last
    save): the resumed run writes them again, once."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
    if len(kept) != len(lines):
        path.write_text("".join(kept), encoding="utf-8")


def check_writable(folder: Path, need_bytes: int = 0) -> None:
    """Fail before training, not at the first checkpoint, if the run directory cannot be written
    or has less free space than the checkpoints will take."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_bytes(b"ok")
        probe.unlink()
        free = shutil.disk_usage(folder).free
    except OSError as err:
        raise MTError(f"{folder}: cannot write checkpoints there ({err.strerror})") from None
    if free < need_bytes:
        raise MTError(f"{folder}: {free / 2**20:.0f} MiB free, but the checkpoints of this run need about "
                      f"{need_bytes / 2**20:.0f} MiB (train.keep_best / train.keep_last set how many are kept)")


def checkpoint_bytes(model: torch.nn.Module, tc) -> int:
    """Disk the run's checkpoints need at their peak: last.pt with Adam's two moments and its
    temporary copy while it is rewritten, plus the weights-only best/last/averaged files."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return 2 * 3 * weights + (tc.keep_best + tc.keep_last + 1) * weights


class _Window:
    """Averages of the training stats since the last log line."""

    def __init__(self, peak: float | None = None):
        self.peak = peak
        self.reset()

    def reset(self) -> None:
        self.loss = self.nll = self.tokens = self.padded = self.real = self.seconds = self.grad_norm = 0.0
        self.steps, self.lr, self.flops = 0, 0.0, 0.0

    def add(self, stats: dict, seconds: float) -> None:
        n = stats["tgt_tokens"]
        self.loss += stats["loss"] * n
        self.nll += stats["nll"] * n
        self.tokens += n
        self.padded += stats["padded_tokens"]
        self.real += stats["real_tokens"]
        self.grad_norm += stats["grad_norm"]
        self.seconds += seconds
        self.flops += stats["flops"]
        self.steps += 1
        self.lr = stats["lr"]

    def flush(self, step: int, epoch: int) -> dict:
        nll = self.nll / self.tokens
        record = {
            "step": step, "epoch": epoch + 1, "loss": round(self.loss / self.tokens, 4),
            "nll": round(nll, 4), "ppl": round(math.exp(min(nll, 50)), 3), "lr": self.lr,
            "grad_norm": round(self.grad_norm / self.steps, 4),
            "tgt_tokens_per_s": round(self.tokens / self.seconds, 1),
            "padding": round(1 - self.real / self.padded, 4),
        }
        if self.flops:  # counted for the Transformer
            record["tflops"] = round(self.flops / self.seconds / 1e12, 3)
        if self.flops and self.peak:
            record["mfu"] = round(self.flops / self.seconds / self.peak, 4)
        self.reset()
        return record
