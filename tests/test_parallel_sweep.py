"""mt-train -m --jobs N: a sweep's runs N at a time, each with its share of the machine, giving the runs and
the table the same sweep gives one run at a time."""

import json
import os

import pytest
import torch

import mt
from mt.cli import parallel_sweep
from mt.cli.hydra_task import refuse_jobs
from mt.cli.parallel_sweep import Share, cores_to_share, progress, shares, take_jobs_flag
from mt.errors import MTError

from conftest import run_cli, tiny_sweep


def test_the_jobs_flag_is_taken_from_the_command_line_in_any_of_its_forms():
    assert take_jobs_flag(["a=1", "--jobs", "3", "b=2,3"]) == (["a=1", "b=2,3"], 3)
    assert take_jobs_flag(["--jobs=4", "a=1,2"]) == (["a=1,2"], 4)
    assert take_jobs_flag(["-j", "2", "a=1,2"]) == (["a=1,2"], 2)
    assert take_jobs_flag(["a=1,2"]) == (["a=1,2"], 1)
    for bad in (["--jobs", "0"], ["-j", "two"], ["a=1", "--jobs"], ["--jobs=-1"]):
        with pytest.raises(MTError, match="the number of runs at once, 1 or more"):
            take_jobs_flag(bad)


def test_jobs_need_a_sweep_of_mt_train_outside_torchrun(monkeypatch):
    with pytest.raises(MTError, match="give -m"):
        refuse_jobs(sweeping=False, module="mt.cli.train")
    with pytest.raises(MTError, match="only mt-train's sweeps"):
        refuse_jobs(sweeping=True, module=None)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(MTError, match="not under torchrun"):
        refuse_jobs(sweeping=True, module="mt.cli.train")
    monkeypatch.setenv("WORLD_SIZE", "1")
    refuse_jobs(sweeping=True, module="mt.cli.train")


def test_each_run_gets_cores_of_its_own_or_a_gpu_taken_in_turn():
    assert shares(2, None, [0, 1]) == [Share(None, (0,)), Share(None, (1,))]
    assert shares(3, None, list(range(16))) == [
        Share(None, tuple(range(0, 5))),
        Share(None, tuple(range(5, 10))),
        Share(None, tuple(range(10, 15))),
    ]
    assert [s.cores for s in shares(3, None, [4, 7])] == [(4,), (7,), (4,)]  # more runs than cores: shared
    on_gpus = shares(3, ["2", "5"], list(range(8)))
    assert [s.gpu for s in on_gpus] == ["2", "5", "2"] and [len(s.cores) for s in on_gpus] == [2, 2, 2]
    assert on_gpus[1].env() == {"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "5"}
    assert shares(2, None, [0, 1, 2, 3])[1].env() == {"OMP_NUM_THREADS": "2"}
    assert str(on_gpus[0]) == "GPU 2" and str(Share(None, (3,))) == "core 3" and str(Share(None, (2, 3))) == "cores 2-3"


def test_the_cores_shared_out_are_no_more_than_the_cpu_quota_allows(monkeypatch):
    monkeypatch.setattr(parallel_sweep, "usable_cores", lambda: [2, 3, 5, 8])
    monkeypatch.setattr(parallel_sweep, "cpu_cores", lambda: 4)  # no quota below the affinity
    assert cores_to_share() == [2, 3, 5, 8]
    monkeypatch.setattr(parallel_sweep, "cpu_cores", lambda: 2)  # a container allowed two CPUs' time
    assert cores_to_share() == [2, 3]
    assert [s.cores for s in shares(2, None, cores_to_share())] == [(2,), (3,)]


def test_a_running_runs_progress_is_its_last_update_and_best_validation_so_far(tmp_path):
    assert progress(tmp_path) == "not training yet (its data, its tokenizer)"
    train = [{"step": s, "loss": 3.0, "tgt_tokens_per_s": 2490.4 + s} for s in (50, 100)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train) + '{"step": 150, "lo')
    assert progress(tmp_path) == "update 100, 2,590 target tok/s"  # the half-written line skipped
    scores = [{"step": 100, "valid_bleu": 21.5, "note": "x" * 9000}, {"step": 200, "valid_bleu": 20.25}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    assert progress(tmp_path) == "update 100, 2,590 target tok/s; best valid BLEU 21.50 at update 100"  # 9 KB back


def sweep_args(corpus, folder, *more):
    return tiny_sweep(corpus, folder, "train.max_steps=30", "train.valid_every=15", *more)


def test_runs_side_by_side_train_what_the_same_sweep_trains_one_at_a_time(tiny_corpus, tmp_path):
    together = run_cli(
        "mt-train", *sweep_args(tiny_corpus, tmp_path / "together", "--jobs", "2", "train.threads=0"), "train.seed=1,2"
    )
    run_cli("mt-train", *sweep_args(tiny_corpus, tmp_path / "alone"), "train.threads=1", "train.seed=1,2")
    assert "2 runs, 2 at a time (cores of their own)" in together.stdout
    assert together.stdout.count("started on core") == 2 and together.stdout.count(": ended after") == 2
    tables = [(tmp_path / name / "sweep.tsv").read_text().splitlines() for name in ("together", "alone")]
    assert [row.split("\t")[:5] for row in tables[0]] == [row.split("\t")[:5] for row in tables[1]]
    assert len(tables[0]) == 3 and all(row.endswith("\tyes") for row in tables[0][1:])
    share = max(1, len(os.sched_getaffinity(0)) // 2)  # train.threads=0: the run's share of the cores
    for seed in (1, 2):
        run = tmp_path / "together" / f"train.seed={seed}"
        assert f"fp32 on cpu ({share} thread{'s' * (share != 1)})" in (run / "train.log").read_text()
        assert "fp32 on cpu (1 thread)" in (tmp_path / "alone" / f"train.seed={seed}" / "train.log").read_text()
        assert "loss" in (run / "output.log").read_text()  # its console output, kept in its directory
        assert not (run / "multirun.yaml").exists()  # as in a run of the sweep made one at a time

    runs = mt.sweep(
        *sweep_args(tiny_corpus, tmp_path / "together", "train.threads=0")[1:], "train.seed=1,2", jobs=2, quiet=True
    )  # the same sweep from Python: nothing left to do
    assert [run.dir for run in runs] == [tmp_path / "together" / f"train.seed={s}" for s in (1, 2)]
    assert all("ended as configured" in (run.dir / "output.log").read_text() for run in runs)
    assert [run.results["bleu"] for run in runs] == [float(row.split("\t")[3]) for row in sorted(tables[0][1:])]
    with pytest.raises(MTError, match="jobs=0, a number of jobs, 1 or more"):
        mt.sweep("train.seed=1,2", jobs=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a run on train.device=cuda must fail here")
def test_a_run_that_fails_leaves_the_others_training_and_the_sweep_says_which(tiny_corpus, tmp_path):
    folder = tmp_path / "sweep"
    result = run_cli("mt-train", *sweep_args(tiny_corpus, folder, "-j", "3"), "train.device=cpu,cuda", check=False)
    assert result.returncode == 2
    assert "2 runs, 2 at a time" in result.stdout  # no share kept for a third run that is not there
    assert "[2/2] train.device=cuda: failed (exit status 2)" in result.stdout
    assert "train.device=cuda but no CUDA device is available" in result.stdout
    assert "[1/2] train.device=cpu: ended after" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        "error: 1 of the sweep's 2 runs failed: train.device=cuda (see above)"
    )
    rows = (folder / "sweep.tsv").read_text().splitlines()[1:]
    assert [row.split("\t")[0] for row in rows if row.endswith("\tyes")] == ["train.device=cpu"]


def test_jobs_without_a_sweep_is_one_line(tiny_corpus, tmp_path):
    result = run_cli("mt-train", *sweep_args(tiny_corpus, tmp_path)[1:], "--jobs", "2", check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --jobs N trains a sweep's runs N at a time: give -m (a sweep) too"
