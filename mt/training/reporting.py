"""What a training run reports as it goes: averaged training stats per log line (console, TensorBoard,
train.jsonl), the duration estimate, and peak memory."""

from __future__ import annotations

import json
import logging
import math
import resource

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from mt.fastpath.cpu_process import native_bf16
from mt.training.budget import METRIC_NAMES, Progress, shown, updates_left

log = logging.getLogger(__name__)


class TrainWindow:
    """Averages of the training stats since the last log line."""

    def __init__(self, peak_flops: float | None = None):
        self.peak = peak_flops
        self.reset()

    def reset(self) -> None:
        self.entries: list[tuple[dict, float]] = []

    @property
    def steps(self) -> int:
        """Updates applied (not skipped) in the window."""
        return sum(stats["finite"] for stats, _ in self.entries)

    def add(self, stats: dict, seconds: float) -> None:
        """One update's stats; its loss figures may be filled in later (read back from the device), and
        an update found skipped by then (stats["finite"] False) is left out, its time kept."""
        self.entries.append((stats, seconds))

    def flush(self, step: int, epoch: int) -> dict:
        done = [stats for stats, _ in self.entries if stats["finite"]]
        tokens = sum(st["tgt_tokens"] for st in done)
        seconds = sum(sec for _, sec in self.entries)
        nll = sum(st["nll"] * st["tgt_tokens"] for st in done) / tokens
        flops = sum(st["flops"] for st in done)
        record = {
            "step": step,
            "epoch": epoch + 1,
            "loss": round(sum(st["loss"] * st["tgt_tokens"] for st in done) / tokens, 4),
            "nll": round(nll, 4),
            "ppl": round(math.exp(min(nll, 50)), 3),
            "lr": done[-1]["lr"],
            "grad_norm": round(sum(st["grad_norm"] for st in done) / len(done), 4),
            "tgt_tokens_per_s": round(tokens / seconds, 1),
            "padding": round(1 - sum(st["real_tokens"] for st in done) / sum(st["padded_tokens"] for st in done), 4),
        }
        if flops:  # counted for the Transformer
            record["tflops"] = round(flops / seconds / 1e12, 3)
        if flops and self.peak:
            record["mfu"] = round(flops / seconds / self.peak, 4)
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
    metric = "" if p.best_metric == "bleu" else f"{METRIC_NAMES[p.best_metric]} "  # what "best" is, if not BLEU
    log.info(
        "valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f | best %s%.2f @ %d%s (%.1fs)",
        p.step, record["valid_loss"], record["valid_ppl"], record["valid_bleu"], record["valid_chrf"],
        metric, shown(p.best_score, p.best_metric), p.best_step,
        " *" if improved else "", seconds,
    )  # fmt: skip
    if "valid_bleu_by_direction" in record:
        log.info(
            "valid BLEU by direction: %s",
            ", ".join(f"{d} {b:.2f}" for d, b in record["valid_bleu_by_direction"].items()),
        )


VALIDATION_SHARE = 0.25  # of the time between two validations, above which a run says how to spend less


def validation_share_note(seconds: float, trained: float, sentences: int) -> str | None:
    """Where a validation took over VALIDATION_SHARE of the time since the one before (a big validation
    set, a wide validation beam): how to spend less on it; None otherwise."""
    share = seconds / (seconds + trained) if trained > 0 else 0.0
    if share <= VALIDATION_SHARE or seconds < 10:
        return None
    return (
        f"validation took {seconds:.0f} s, {share:.0%} of the time since the last one ({sentences:,} sentences "
        "decoded): data.valid_max_sentences=N decodes the first N only, train.valid_every validates less often"
    )


def announce_duration(p: Progress, tc, seconds_per_update: float, bar: tqdm, device: torch.device) -> None:
    """Once, early: how long the rest of the run will take at the speed measured so far."""
    left = updates_left(p, tc, seconds_per_update)
    bar.total = p.step + left  # the bar's ETA then follows the budget that ends the run
    bar.refresh()
    seconds = left * seconds_per_update
    hours = seconds / 3600
    log.info(
        "at %.2f s per update, the %s updates left will take about %s%s",
        seconds_per_update,
        f"{left:,}",
        f"{hours:.1f} h" if hours >= 1 else f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s",
        " (or less, with train.patience)" if tc.patience else "",
    )
    if device.type == "cpu" and hours > 2:
        preset = "multi30k_cpu" if native_bf16() else "multi30k_cpu_fp32"  # what mt-train picks for this CPU
        log.warning(
            f"this configuration is meant for a GPU; on a CPU, experiment={preset} (60 minutes) "
            "or experiment=smoke (8 minutes) train a smaller model on the same data"
        )


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory so far: the GPU's allocated tensors on CUDA, the process's resident set on CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


# The settings every run shows in TensorBoard's HParams tab, beside those its command line set.
MAIN_SETTINGS = (
    "model.arch",
    "model.d_model",
    "model.encoder_layers",
    "model.decoder_layers",
    "model.dropout",
    "tokenizer.vocab_size",
    "train.lr",
    "train.max_tokens",
    "train.update_freq",
    "train.precision",
    "train.seed",
)
# The scalars the HParams tab puts beside them (each one's last value), after the best validation so far.
SCORES = ("valid/bleu", "valid/chrf", "valid/loss", "test/bleu", "test/chrf")


def best_score_tag(metric: str) -> str:
    """The scalar of the best validation so far on train.best_metric (valid/best_bleu, ...)."""
    return f"valid/best_{metric}"


def write_settings(writer, cfg, run_dir) -> None:
    """The run's settings for TensorBoard's HParams tab: `make tensorboard` then lists every run under runs/
    (a sweep's too) as a row of a table, its main settings and every one its command line set, with its
    validation and test scores, to sort and filter."""
    from torch.utils.tensorboard.summary import hparams

    values = {key: OmegaConf.select(cfg, key) for key in MAIN_SETTINGS}
    for key, given in command_line_settings(run_dir):
        chosen = OmegaConf.select(cfg, key)
        values[key] = chosen if isinstance(chosen, (bool, int, float, str)) else given
    shown_values = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in values.items()}
    scores = (best_score_tag(cfg.train.best_metric), *SCORES)
    for summary in hparams(shown_values, dict.fromkeys(scores, 0.0)):
        writer.file_writer.add_summary(summary)


def command_line_settings(run_dir) -> list[tuple[str, str]]:
    """The key=value overrides the run was started with (Hydra's .hydra/overrides.yaml; none elsewhere),
    groups too (experiment=smoke); deletions (~key) left out."""
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return []
    found = []
    for override in OmegaConf.to_container(OmegaConf.load(path)):
        key, sign, value = str(override).partition("=")
        if sign and not key.startswith("~") and not key.startswith("hydra."):
            found.append((key.lstrip("+"), value))
    return found
