"""Training under faults: signals, non-finite losses, unwritable run directories; what TensorBoard gets."""

import errno
import json
import shutil
import signal
import subprocess
import time

import pytest
import torch

from mt.checkpoint import load_checkpoint
from mt.errors import MTError
from mt.training.trainer import check_writable

from conftest import REPO, TINY_TRAIN, cli_path, sigterm_after, tiny_trainer, train_tiny


def test_non_finite_updates_are_skipped_then_stop(tiny_corpus, tmp_path):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.max_bad_steps=3")
    trainer.train_step()
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    real_loss = trainer.batch_loss
    trainer.batch_loss = lambda batch, net=None: tuple(x * float("nan") for x in real_loss(batch, net))
    stats = trainer.train_step()
    assert not stats["finite"] and trainer.progress.step == 1 and trainer.progress.skipped_steps == 1
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    trainer.batch_loss = real_loss  # a good update resets the run of bad ones
    assert trainer.train_step()["finite"] and trainer.progress.step == 2
    trainer.batch_loss = lambda batch, net=None: tuple(x * float("inf") for x in real_loss(batch, net))
    trainer.train_step()
    trainer.train_step()
    with pytest.raises(MTError, match="3 updates in a row had a non-finite loss"):
        trainer.train_step()


def test_unwritable_run_directory_fails_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(MTError, match="cannot write checkpoints there"):
        check_writable(blocker / "checkpoints")


def test_too_little_disk_space_fails_before_training(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(2**40, 2**40 - 2**19, 2**19))
    with pytest.raises(MTError, match=r"checkpoints: 0 MiB free, but the checkpoints of this run need about \d+ MiB"):
        tiny_trainer(tiny_corpus, tmp_path)


def test_disk_full_mid_run_is_a_clear_error_and_keeps_the_last_checkpoint(tiny_corpus, tmp_path, monkeypatch):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.save_every=5", "train.max_steps=20")
    real_save, saves = torch.save, []

    def fill_the_disk_after_one_save(obj, f, *args, **kwargs):
        saves.append(f)
        if len(saves) > 1:
            f.write(b"the start of a checkpoint")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", fill_the_disk_after_one_save)
    with pytest.raises(
        MTError, match="last.pt: writing the checkpoint failed .No space left on device.; the previous one is kept"
    ):
        trainer.fit()
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["trainer"]["progress"]["step"] == 5
    assert not list((tmp_path / "checkpoints").glob(".*.tmp"))


def test_sigterm_saves_and_resume_ends_with_the_same_weights(tiny_corpus, tmp_path):
    common = [
        "train.max_steps=60",
        "train.log_every=1",
        "train.save_every=1000",
        "train.valid_every=1000",
        "data.test_split=null",
        "train.cooldown=0.5",
    ]  # the rate's cool-down resumes exactly too
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    train_tiny(tiny_corpus, straight, *common)
    command = [
        cli_path("mt-train"),
        "data=files",
        f"data.dir={tiny_corpus}",
        f"hydra.run.dir={stopped}",
        *TINY_TRAIN,
        *common,
    ]
    output = sigterm_after(command, stopped / "train.jsonl")
    assert "interrupted by SIGTERM" in output and "run the same command again to resume" in output
    stopped_at = load_checkpoint(stopped / "checkpoints" / "last.pt")["trainer"]["progress"]["step"]
    assert 15 <= stopped_at < 60
    train_tiny(tiny_corpus, stopped, *common)
    a = load_checkpoint(straight / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(stopped / "checkpoints" / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_tensorboard_has_curves_samples_and_attention_images(trained_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(trained_run / "tb"), size_guidance={"images": 0, "tensors": 0}).Reload()
    tags = events.Tags()
    for scalar in (
        "train/loss",
        "train/ppl",
        "train/lr",
        "train/grad_norm",
        "train/tgt_tokens_per_s",
        "valid/loss",
        "valid/ppl",
        "valid/bleu",
        "valid/chrf",
    ):
        assert scalar in tags["scalars"], scalar
    assert "valid/samples/text_summary" in tags["tensors"]
    assert {"valid/attention_0", "valid/attention_1"} <= set(tags["images"])
    assert [e.step for e in events.Scalars("valid/bleu")] == [100, 200, 300]
    results = json.loads((trained_run / "results.json").read_text())
    for name in ("bleu", "chrf"):  # the test score, at the last step
        assert [(e.step, round(e.value, 2)) for e in events.Scalars(f"test/{name}")] == [(300, results[name])]
    train_log = [json.loads(line) for line in (trained_run / "train.jsonl").read_text().splitlines()]
    assert train_log[-1]["tflops"] > 0


def test_kill_9_then_rerun_continues_from_the_last_checkpoint(tiny_corpus, tmp_path):
    """No chance to save: the rerun resumes from the last periodic last.pt, forgets the log lines
    after it, and logs exactly what an uninterrupted run logs."""
    common = [
        "train.max_steps=40",
        "train.log_every=1",
        "train.save_every=10",
        "train.valid_every=1000",
        "data.test_split=null",
    ]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    train_tiny(tiny_corpus, straight, *common)
    command = [
        cli_path("mt-train"),
        "data=files",
        f"data.dir={tiny_corpus}",
        f"hydra.run.dir={killed}",
        *TINY_TRAIN,
        *common,
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = killed / "train.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 25):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    steps_before = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert 25 <= max(steps_before) < 40
    train_tiny(tiny_corpus, killed, *common)

    def records(run):
        return [(r["step"], r["loss"]) for r in map(json.loads, (run / "train.jsonl").read_text().splitlines())]

    assert records(killed) == records(straight)


def test_patience_stops_after_validations_without_improvement(tiny_corpus, tmp_path):
    """lr ~ 0: the weights never change, so BLEU never beats the first validation."""
    trainer = tiny_trainer(
        tiny_corpus,
        tmp_path,
        "train.lr=1e-12",
        "train.warmup=1",
        "train.valid_every=2",
        "train.patience=2",
        "train.max_steps=50",
    )
    progress = trainer.fit()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [2, 4, 6]  # best at 2, then two validations without a better BLEU
    assert progress.step == 6 and progress.best_step == 2 and progress.bad_validations == 2
