"""mt.train: mt-train from Python, returning the run it made; its errors as mt-train states them."""

import json
import os
import signal
import threading
import time

import pytest

import mt
from mt.errors import MTError

from conftest import TINY_TRAIN


def test_a_run_started_from_python_is_the_run_mt_train_makes(tiny_corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the default run directory is relative to where the caller is
    steps = ["train.max_steps=30", "train.valid_every=15", "train.save_every=15", "train.log_every=5"]
    run = mt.train("data=files", f"data.dir={tiny_corpus}", *TINY_TRAIN, "data.cache_dir=null", *steps)
    assert run.dir == tmp_path / "runs" / f"{tiny_corpus.name}.de-en" / "base"
    shown = capsys.readouterr().out  # its log, here as it came
    assert "training:" in shown and "final checkpoint:" in shown and f"BLEU {run.results['bleu']:.2f}" in shown
    assert run.results == json.loads((run.dir / "results.json").read_text())
    assert [record["step"] for record in run.validations] == [15, 30]
    assert run.model == run.dir / "checkpoints" / "final.pt"
    lines = (tiny_corpus / "test.de").read_text().splitlines()[:3]
    assert len(run.translator(device="cpu").translate(lines)) == 3
    again = mt.train("data=files", f"data.dir={tiny_corpus}", *TINY_TRAIN, "data.cache_dir=null", *steps, quiet=True)
    assert again == run and capsys.readouterr().out == ""  # the same call: the run, resumed (here: done)


def test_a_bad_override_is_one_line_before_any_process_starts(tiny_corpus):
    with pytest.raises(MTError, match=r"^config train.precision: must be fp32, bf16 or fp16$"):
        mt.train("data=files", f"data.dir={tiny_corpus}", "train.precision=fp8")
    with pytest.raises(MTError, match="takes overrides as mt-train does, 'key=value' strings; got '--debug'"):
        mt.train("--debug")


def test_an_error_inside_the_run_is_mt_trains_line(tiny_corpus, tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "train.de").write_text("Hallo\nWelt\n")
    (tmp_path / "corpus" / "train.en").write_text("Hello\n")
    with pytest.raises(MTError) as error:
        mt.train("data=files", f"data.dir={tmp_path / 'corpus'}", f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert "\n" not in str(error.value) and "train.en" in str(error.value) and "lines" in str(error.value)


def test_ctrl_c_here_saves_the_run_and_the_same_call_resumes_it(tiny_corpus, tmp_path):
    run_dir = tmp_path / "run"
    args = ["data=files", f"data.dir={tiny_corpus}", f"hydra.run.dir={run_dir}", *TINY_TRAIN]
    args += ["train.max_steps=100000", "train.log_every=1", "data.test_split=null", "train.valid_every=100000"]

    def interrupt_once_training():
        log = run_dir / "train.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 10):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C (or a notebook's stop button) sends this process

    threading.Thread(target=interrupt_once_training, daemon=True).start()
    with pytest.raises(
        mt.Interrupted, match="interrupted by SIGINT: saved .*last.pt at step \\d+; call mt.train the same"
    ):
        mt.train(*args, quiet=True)
    assert (run_dir / "checkpoints" / "last.pt").is_file()
