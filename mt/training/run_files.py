"""A training run's checkpoints: what they hold, which files are kept (last.pt for exact resume,
best.pt and best_stepN.pt, stepN.pt for averaging), resuming from last.pt, and the disk checks
made before training starts."""

from __future__ import annotations

import json
import logging
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.config.model import changed_model_options
from mt.config.schema import to_dict
from mt.errors import MTError
from mt.training.budget import Progress

log = logging.getLogger(__name__)


def training_state(cfg, model, tokenizer, progress: Progress, optimizer=None, scaler=None, weights=None) -> dict:
    """A checkpoint: config, weights (the model's, or the state dict given) and tokenizer; with the
    optimizer, also all that exact resume needs."""
    trainer = {"progress": asdict(progress), "rng_torch": torch.get_rng_state(), "rng_python": random.getstate()}
    if torch.cuda.is_available():
        trainer["rng_cuda"] = torch.cuda.get_rng_state_all()
    if optimizer is not None:
        trainer["optimizer"] = optimizer.state_dict()
        trainer["grad_scaler"] = scaler.state_dict()
    return {
        "config": to_dict(cfg),
        "model": model.state_dict() if weights is None else weights,
        "tokenizer": tokenizer.state_dict(),
        "trainer": trainer,
    }


def resume_state(path: Path, cfg, tokenizer) -> dict | None:
    """The checkpoint at path if there is one; refused if it comes from another model or tokenizer."""
    if not path.exists():
        return None
    state = load_checkpoint(path)
    changed = changed_model_options(state["config"].get("model", {}), to_dict(cfg)["model"])
    if changed:
        raise MTError(
            f"{path}: was trained with a different model config ({', '.join(f'model.{k}' for k in changed)}); "
            "use a new run directory (hydra.run.dir=...) or the same settings"
        )
    if state["tokenizer"] != tokenizer.state_dict():
        raise MTError(f"{path}: its tokenizer differs from this run's; use a new run directory")
    return state


def restore(state: dict, model, optimizer, scaler) -> Progress:
    """Weights, optimizer, loss scaler and random generators as saved; the saved progress."""
    model.load_state_dict(state["model"])
    trainer = state["trainer"]
    optimizer.load_state_dict(trainer["optimizer"])
    if trainer.get("grad_scaler"):
        scaler.load_state_dict(trainer["grad_scaler"])
    torch.set_rng_state(trainer["rng_torch"])
    random.setstate(trainer["rng_python"])
    if "rng_cuda" in trainer and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(trainer["rng_cuda"])
    return Progress.from_saved(trainer["progress"])


class CheckpointKeeper:
    """Writes a run's checkpoint files and deletes the ones no longer kept. Only rank 0 writes."""

    def __init__(self, folder: Path, tc, state, is_main: bool = True):
        """state(with_optimizer) -> the checkpoint dict to write."""
        self.folder, self.tc, self.state, self.is_main = folder, tc, state, is_main

    def save(self, name: str, with_optimizer: bool = True) -> None:
        if self.is_main:
            save_checkpoint(self.state(with_optimizer), self.folder / name)

    def keep_best(self, p: Progress, score: float) -> None:
        """best.pt is the best so far on train.best_metric (score: higher better); with keep_best > 1,
        best_stepN.pt holds each of the N best."""
        n = self.tc.keep_best
        ranked = sorted(p.best_kept + [[score, p.step]], key=lambda entry: (-entry[0], entry[1]))
        p.best_kept, dropped = ranked[:n], ranked[n:]
        if ranked[0][1] == p.step:
            self.save("best.pt", with_optimizer=False)
        if n > 1 and [score, p.step] in p.best_kept:
            self.save(f"best_step{p.step}.pt", with_optimizer=False)
        for _, step in dropped:
            (self.folder / f"best_step{step}.pt").unlink(missing_ok=True)

    def save_periodic(self, p: Progress) -> None:
        """last.pt, and stepN.pt for the keep_last latest saves (weights only: for averaging)."""
        if self.is_main and self.tc.keep_last and not (p.last_kept and p.last_kept[-1] == p.step):
            self.save(f"step{p.step}.pt", with_optimizer=False)
            p.last_kept.append(p.step)
            while len(p.last_kept) > self.tc.keep_last:
                (self.folder / f"step{p.last_kept.pop(0)}.pt").unlink(missing_ok=True)
        self.save("last.pt")


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
        raise MTError(
            f"{folder}: {free / 2**20:.0f} MiB free, but the checkpoints of this run need about "
            f"{need_bytes / 2**20:.0f} MiB (train.keep_best / train.keep_last set how many are kept)"
        )


def checkpoint_bytes(model: torch.nn.Module, tc) -> int:
    """Disk the run's checkpoints need at their peak: last.pt with Adam's two moments and its
    temporary copy while it is rewritten, plus the weights-only best/last/averaged/final files."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return 2 * 3 * weights + (tc.keep_best + tc.keep_last + 2) * weights
