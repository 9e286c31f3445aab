"""Checkpoints: written atomically, loaded safely, self-contained (config, weights, tokenizer).

A checkpoint is a dict:
  format, version          -- identifies a file of ours
  config                   -- the resolved run config (plain dict)
  model                    -- the model's state_dict
  tokenizer                -- sentencepiece model bytes (Tokenizer.state_dict())
  trainer (optional)       -- optimizer, step, data position, RNG states: what exact resume needs
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import torch

from mt.errors import MTError
from mt.hub import local_model

FORMAT = "mt-checkpoint"
VERSION = 1

log = logging.getLogger(__name__)


def save_checkpoint(state: dict, path: str | os.PathLike) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over path.

    A crash at any moment leaves either the previous file or the new one, never half of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"format": FORMAT, "version": VERSION, **state}
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise MTError(f"{path}: cannot write a checkpoint there ({err.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:  # disk full, quota, I/O error: say so, keep the previous file
        Path(tmp).unlink(missing_ok=True)
        kept = "; the previous one is kept" if path.exists() else ""
        raise MTError(f"{path}: writing the checkpoint failed ({err.strerror or err}){kept}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def run_model(run_dir: Path) -> Path:
    """The model of a run directory (or of its checkpoints/ folder itself): checkpoints/final.pt, the model the
    run ended with (chosen on valid), else, while the run has not ended, its best so far (checkpoints/best.pt,
    said in a warning)."""
    folder = run_dir / "checkpoints" if (run_dir / "checkpoints").is_dir() else run_dir
    final, best = folder / "final.pt", folder / "best.pt"
    if final.is_file():
        return final
    if best.is_file():
        log.warning("%s: the run has not ended (no checkpoints/final.pt); its best so far: %s", run_dir, best)
        return best
    if (run_dir / "sweep.json").is_file():  # mt-train -m's folder: name its best run
        runs = json.loads((run_dir / "sweep.json").read_text(encoding="utf-8")).get("runs") or [{"run": "..."}]
        raise MTError(
            f"{run_dir}: a sweep's folder, which holds several runs; its best on valid: {run_dir / runs[0]['run']} "
            "(sweep.tsv lists them all)"
        )
    found = sorted({p.relative_to(run_dir) for p in [*run_dir.glob("*.pt"), *run_dir.glob("checkpoints/*.pt")]})
    if found:  # a run without validation yet, or its checkpoints/ folder: name a file
        shown = ", ".join(str(p) for p in found[:4]) + (", ..." if len(found) > 4 else "")
        raise MTError(f"{run_dir}: no checkpoints/final.pt or best.pt; name one of its checkpoint files ({shown})")
    raise MTError(f"{run_dir}: is a directory, expected a checkpoint file or a run directory with checkpoints/final.pt")


def load_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict:
    """Load with weights_only=True (no code runs from the file); refuse anything not ours. mmap: tensors
    are read from the file only when touched (for a look at the config of a large checkpoint).
    A run directory stands for its model (run_model)."""
    path = Path(path)
    if not path.exists():
        raise MTError(f"{path}: no such checkpoint")
    if path.is_dir():
        path = run_model(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError, ValueError, OSError) as err:
        raise MTError(f"{path}: not a readable checkpoint ({why_unreadable(path, err)})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise MTError(f"{path}: not a checkpoint of this toolkit")
    if state.get("version") != VERSION:
        raise MTError(f"{path}: checkpoint version {state.get('version')} is not supported (expected {VERSION})")
    for key in ("config", "model", "tokenizer"):
        if key not in state:
            raise MTError(f"{path}: checkpoint lacks {key!r}")
    return state


def why_unreadable(path: Path, err: Exception) -> str:
    """What torch.load's failure on path means, in words a user can act on (torch's own first line
    otherwise): a checkpoint is a zip archive, which a file cut short lacks the end of."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as read_error:
        return read_error.strerror or type(read_error).__name__
    if not head:
        return "the file is empty"
    if head != b"PK\x03\x04":
        return "not a file torch.save wrote"
    if isinstance(err, pickle.UnpicklingError):
        return "it holds Python objects other than tensors and plain data, which are never loaded"
    text = str(err).strip()
    cut_short = isinstance(err, (zipfile.BadZipFile, EOFError, OSError))
    if cut_short or "central directory" in text or "failed reading" in text:
        return "truncated or damaged: copy or save it again"
    return text.splitlines()[0][:200] if text else type(err).__name__


def load_parent(path: str | os.PathLike, mmap: bool = True) -> dict:
    """The checkpoint a fine-tune starts from (train.init_from: a file, a run directory or a Hub model,
    mt/hub.py); an error names the key it came from."""
    try:
        return load_checkpoint(local_model(path), mmap=mmap)
    except MTError as err:
        raise MTError(f"train.init_from: {err}") from None


def average_states(states: list[dict]) -> dict:
    """Element-wise mean of model state_dicts (checkpoint averaging)."""
    first = states[0]
    for other in states[1:]:
        if other.keys() != first.keys() or any(other[k].shape != first[k].shape for k in first):
            raise MTError("cannot average checkpoints of different model shapes")
    return {
        k: (sum(s[k].double() for s in states) / len(states)).to(v.dtype) if v.is_floating_point() else v
        for k, v in first.items()
    }


def load_with_one_tokenizer(paths: list, purpose: str) -> list[dict]:
    """The checkpoints at paths, refusing any whose tokenizer is not the first's (for purpose)."""
    states = [load_checkpoint(p) for p in paths]
    for path, state in zip(paths[1:], states[1:]):
        if state["tokenizer"] != states[0]["tokenizer"]:
            raise MTError(f"{path}: its tokenizer differs from {paths[0]}'s; {purpose}")
    return states


def load_averaged(paths: list) -> tuple[list[dict], dict]:
    """The checkpoints at paths (one tokenizer required) and their averaged weights."""
    states = load_with_one_tokenizer(paths, "cannot average them")
    weights = average_states([s["model"] for s in states]) if len(states) > 1 else states[0]["model"]
    return states, weights


def average_checkpoint_files(paths: list, output) -> None:
    """Average the weights of several checkpoints of one run into a self-contained checkpoint
    (config and tokenizer of the first) that translate loads like any other."""
    states, averaged = load_averaged(paths)
    summaries = [s for s in map(training_summary, states) if s and "step" in s]
    save_checkpoint(
        {
            "config": states[0]["config"],
            "model": averaged,
            "tokenizer": states[0]["tokenizer"],
            "averaged_from": [str(p) for p in paths],
            **({"trained": max(summaries, key=lambda s: s["step"])} if summaries else {}),  # the latest
        },
        output,
    )


def training_summary(state: dict) -> dict | None:
    """How far training had come at a checkpoint (updates, epochs, seconds, best validation): from its
    trainer state, or kept from it in a final or averaged checkpoint (key "trained"); None if neither."""
    if "trained" in state:
        trained = dict(state["trained"])
        if "best_bleu" in trained:  # written before train.best_metric: BLEU, -1 for none
            bleu = trained.pop("best_bleu")
            trained |= {"best_metric": "bleu", "best_value": bleu if bleu >= 0 else None}
        return trained
    progress = state.get("trainer", {}).get("progress")
    if not progress:
        return None
    p = progress
    if "best_score" in p:  # higher better: perplexity negated
        metric, score, unset = p["best_metric"], p["best_score"], -math.inf
    else:  # written before train.best_metric: BLEU, -1 for none yet
        metric, score, unset = "bleu", p["best_bleu"], -1.0
    best = None if score == unset else -score if metric == "ppl" else score
    return {"step": p["step"], "epoch": p["epoch"], "elapsed_s": p["elapsed"], "best_metric": metric,
            "best_value": best, "best_step": p["best_step"]}  # fmt: skip


def save_final(source: str | os.PathLike, output: str | os.PathLike, alpha: float | None = None) -> None:
    """The checkpoint a run ends with: source's config, weights and tokenizer (no optimizer state), with
    decode.alpha set to the length penalty chosen on valid (None: source's own), written atomically."""
    state = load_checkpoint(source)
    summary = training_summary(state)
    state.pop("trainer", None)
    if summary:
        state["trained"] = summary  # for mt-info: the optimizer state goes, how it was trained stays
    if alpha is not None:
        state["config"]["decode"]["alpha"] = alpha
    state["final_from"] = Path(source).name
    save_checkpoint(state, output)
