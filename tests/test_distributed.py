"""Data-parallel training (2 processes, gloo on CPU) equals one process on the same global batches."""

import gc
import json
import subprocess
import sys
import weakref

import pytest
import torch

import mt
from mt.checkpoint import load_checkpoint
from mt.errors import MTError
from mt.training.distributed import Dist, shutdown

from conftest import REPO, TINY_TRAIN, train_tiny

STEPS = [
    "train.max_steps=12",
    "train.log_every=1",
    "train.save_every=1000",
    "train.valid_every=1000",
    "data.test_split=null",
    "model.dropout=0.0",
]


def what_failed(result: subprocess.CompletedProcess) -> str:
    """A failed torchrun's output less the training's log lines, whose many steps would hide a rank's own
    last words (a C++ abort says only "terminate called ...")."""
    lines = (result.stdout + result.stderr).splitlines()
    return "\n".join(line for line in lines if "][INFO]" not in line and "][WARNING]" not in line)


def test_a_sweeps_run_frees_its_objects_before_the_next_run_on_every_process():
    """The trainer sits in a reference cycle (its validator holds its batch_loss); left to the collector,
    its DistributedDataParallel went at some moment of the next run, on each process at another."""

    class Held:
        pass

    gc.disable()
    try:
        held = Held()
        held.itself = held
        alive = weakref.ref(held)
        del held
        shutdown(Dist(), finished=True, keep=True)
        assert alive() is None
    finally:
        gc.enable()


def test_two_processes_match_one_process_accumulating_their_batches(tiny_corpus, tmp_path):
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    train_tiny(tiny_corpus, single, *STEPS, "train.update_freq=2")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "mt.cli.train",
            "data=files",
            f"data.dir={tiny_corpus}",
            f"hydra.run.dir={ddp}",
            *TINY_TRAIN,
            *STEPS,
            "train.update_freq=1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, what_failed(result)
    assert "Warning" not in result.stderr, result.stderr  # e.g. a DDP option torch has deprecated
    a = load_checkpoint(single / "checkpoints" / "last.pt")
    b = load_checkpoint(ddp / "checkpoints" / "last.pt")
    assert a["trainer"]["progress"]["step"] == b["trainer"]["progress"]["step"] == 12
    for key, value in a["model"].items():
        torch.testing.assert_close(b["model"][key], value, atol=2e-5, rtol=1e-4)

    def losses(run):
        return [json.loads(line)["loss"] for line in (run / "train.jsonl").read_text().splitlines()]

    assert len(losses(ddp)) == 12
    for x, y in zip(losses(single), losses(ddp)):
        assert abs(x - y) < 1e-3


def test_a_sweep_under_torchrun_trains_each_run_in_every_process_and_reports_once(tiny_corpus, tmp_path):
    folder = tmp_path / "sweep"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "mt.cli.train"]
        + ["-m", "data=files", f"data.dir={tiny_corpus}", f"hydra.sweep.dir={folder}", *TINY_TRAIN, *STEPS]
        + ["train.lr=3e-3,1e-3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, what_failed(result)
    assert result.stdout.count(f"sweep {folder}: 2 runs") == 1  # rank 0's table only
    for name in ("train.lr=0.001", "train.lr=0.003"):
        assert load_checkpoint(folder / name / "checkpoints" / "last.pt")["trainer"]["progress"]["step"] == 12
    assert len((folder / "sweep.tsv").read_text().splitlines()) == 3


def test_mt_train_from_python_trains_on_several_processes_as_torchrun_does(tiny_corpus, tmp_path):
    args = ["data=files", f"data.dir={tiny_corpus}", f"hydra.run.dir={tmp_path / 'run'}", *TINY_TRAIN, *STEPS]
    run = mt.train(*args, processes=2, quiet=True)
    assert run.dir == tmp_path / "run" and ", 2 processes" in (run.dir / "train.log").read_text()
    assert load_checkpoint(run.dir / "checkpoints" / "last.pt")["trainer"]["progress"]["step"] == 12
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "train.de").write_text("Hallo\nWelt\n")
    (tmp_path / "corpus" / "train.en").write_text("Hello\n")
    with pytest.raises(MTError) as error:  # a rank's one line, not torchrun's report
        mt.train("data=files", f"data.dir={tmp_path / 'corpus'}", f"hydra.run.dir={tmp_path / 'x'}", processes=2)
    assert "\n" not in str(error.value) and "train.en" in str(error.value) and "lines" in str(error.value)
    with pytest.raises(MTError, match="processes=0, a number of processes, 1 or more"):
        mt.train(*args, processes=0)
    with pytest.raises(MTError, match="jobs .* or processes .*, not both"):
        mt.sweep(*args, "train.seed=1,2", jobs=2, processes=2)
