"""What a training run reports as it goes: averaged training stats per log line (console, TensorBoard,
train.jsonl), the duration estimate, and peak memory."""

from __future__ import annotations

import json
import logging
import math
import resource

import torch
from tqdm import tqdm

from mt.training.budget import Progress, updates_left

log = logging.getLogger(__name__)


class TrainWindow:
    """Averages of the training stats since the last log line."""

    def __init__(self, peak_flops: float | None = None):
        self.peak = peak_flops
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
            "step": step,
            "epoch": epoch + 1,
            "loss": round(self.loss / self.tokens, 4),
            "nll": round(nll, 4),
            "ppl": round(math.exp(min(nll, 50)), 3),
            "lr": self.lr,
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


def log_train_record(record: dict, writer, train_log, bar: tqdm, device: torch.device) -> None:
    """One log line's stats to TensorBoard, train.jsonl, the progress bar and the console."""
    record["peak_mem_mib"] = peak_memory_mib(device)
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
        record["step"],
        record["epoch"],
        record["loss"],
        record["ppl"],
        record["lr"],
        record["grad_norm"],
        record["tgt_tokens_per_s"],
        speed,
        100 * record["padding"],
        record["peak_mem_mib"] / 1024,
    )


def log_validation(record: dict, p: Progress, improved: bool, seconds: float) -> None:
    log.info(
        "valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f | best %.2f @ %d%s (%.1fs)",
        p.step, record["valid_loss"], record["valid_ppl"], record["valid_bleu"], record["valid_chrf"],
        p.best_bleu, p.best_step, " *" if improved else "", seconds,
    )  # fmt: skip


def announce_duration(p: Progress, tc, seconds_per_update: float, bar: tqdm, device: torch.device) -> None:
    """Once, early: how long the rest of the run will take at the speed measured so far."""
    left = updates_left(p, tc, seconds_per_update)
    bar.total = p.step + left  # the bar's ETA then follows the budget that ends the run
    bar.refresh()
    seconds = left * seconds_per_update
    hours = seconds / 3600
    log.info(
        "at %.2f s per update, the %d updates left will take about %s%s",
        seconds_per_update,
        left,
        f"{hours:.1f} h" if hours >= 1 else f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s",
        " (or less, with train.patience)" if tc.patience else "",
    )
    if device.type == "cpu" and hours > 2:
        log.warning(
            "this configuration is meant for a GPU; on a CPU, experiment=multi30k_cpu (60 minutes) "
            "or experiment=smoke (8 minutes) train a smaller model on the same data"
        )


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory so far: the GPU's allocated tensors on CUDA, the process's resident set on CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
