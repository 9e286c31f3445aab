"""mt-train -m: a sweep trains one run per combination of values, each in a directory named after its values,
resumes as a run does, and ends with the runs side by side, best validation first."""

import json
import signal
import subprocess
import time

import pytest

import mt
from mt.checkpoint import run_model
from mt.cli.sweep import Sweep, describe_sweep, over_seeds, summary, write_summary
from mt.config.schema import register_configs, run_dir_of
from mt.errors import MTError

from conftest import REPO, cli_path, run_cli, tiny_sweep


def test_a_sweep_is_every_combination_of_its_values_in_command_line_order():
    sweep = Sweep.parse(["data=files", "train.lr=1e-3,2e-3", "model.dropout=range(1,3)", "~experiment"])
    assert sweep.shared == ("data=files", "~experiment")
    assert sweep.jobs() == [
        ["data=files", "~experiment", "train.lr=0.001", "model.dropout=1"],
        ["data=files", "~experiment", "train.lr=0.001", "model.dropout=2"],
        ["data=files", "~experiment", "train.lr=0.002", "model.dropout=1"],
        ["data=files", "~experiment", "train.lr=0.002", "model.dropout=2"],
    ]
    assert sweep.run_name(sweep.jobs()[1]) == "model.dropout=2,train.lr=0.001"  # Hydra's override_dirname
    assert sweep.naming_override() == "hydra.job.config.override_dirname.exclude_keys=[data,experiment]"
    both = Sweep.parse(["train.lr=1e-3", "train.lr=2e-3,3e-3", "train.seed=1"])  # the swept value wins
    assert both.naming_override().endswith("exclude_keys=[train.seed]")
    assert both.run_name(both.jobs()[0]) == "train.lr=0.002"
    paths = Sweep.parse(["train.init_from=runs/a/final.pt,runs/b/final.pt"])
    assert [paths.run_name(job) for job in paths.jobs()] == [
        "train.init_from=runs_a_final.pt",
        "train.init_from=runs_b_final.pt",
    ]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["train.lr=1e-3"], "nothing to sweep"),
        (["train.lr=interval(0.1,0.2)"], "not intervals"),
        (["hydra.run.dir=a,b", "train.lr=1,2"], "cannot vary Hydra's own settings"),
        (["train.lr=1,,2"], "train.lr=1,,2"),
    ],
)
def test_what_a_sweep_cannot_do_is_one_line(argv, said):
    with pytest.raises(MTError, match=said) as error:
        Sweep.parse(argv)
    assert "\n" not in str(error.value)


def test_a_sweep_lives_beside_its_presets_runs():
    register_configs()
    shared = ["experiment=smoke", "data=files", "data.dir=data/fr_en", "data.src_lang=fr", "data.tgt_lang=en"]
    assert run_dir_of(shared, sweep=True) == "runs/fr_en.fr-en/smoke-sweep"
    assert run_dir_of(shared) == "runs/fr_en.fr-en/smoke"


def fake_run(folder, overrides, validations, results=None, ended=True):
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(v) + "\n" for v in validations))
    if results:
        (folder / "results.json").write_text(json.dumps(results))
    if ended:
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "final.pt").write_bytes(b"")


def test_the_summary_ranks_runs_by_their_best_validation_and_keeps_the_unvalidated_last(tmp_path):
    scores = {"bleu": 19.5, "chrf": 50.1}
    fake_run(tmp_path / "lr=1", ["lr=1"], [{"step": 10, "valid_bleu": 20.0, "valid_ppl": 9.0}], scores)
    fake_run(
        tmp_path / "lr=2",
        ["lr=2"],
        [{"step": 10, "valid_bleu": 25.0, "valid_ppl": 8.0}, {"step": 20, "valid_bleu": 24.0, "valid_ppl": 7.0}],
        ended=False,
    )
    fake_run(tmp_path / "lr=3", ["lr=3"], [])
    (tmp_path / "not_a_run").mkdir()
    assert [(r["run"], r["valid_bleu"], r["step"]) for r in summary(tmp_path, "bleu")] == [
        ("lr=2", 25.0, 10),
        ("lr=1", 20.0, 10),
        ("lr=3", None, None),
    ]
    assert [(r["run"], r["valid_ppl"], r["step"]) for r in summary(tmp_path, "ppl")][:2] == [
        ("lr=2", 7.0, 20),  # perplexity: lower is better
        ("lr=1", 9.0, 10),
    ]
    assert over_seeds(summary(tmp_path, "bleu"), "bleu") == []  # no two runs alike but for their seed
    lines = write_summary(tmp_path, "bleu")
    assert lines[1].split() == ["valid", "BLEU", "at", "update", "test", "BLEU", "test", "chrF", "run"]
    assert lines[2].split() == ["25.00", "10", "-", "-", "lr=2", "(not", "ended)"]
    assert lines[3].split() == ["20.00", "10", "19.50", "50.10", "lr=1"]
    tsv = (tmp_path / "sweep.tsv").read_text().splitlines()
    assert tsv[0] == "run\tvalid_bleu\tstep\ttest_bleu\ttest_chrf\tended"
    assert tsv[2] == "lr=1\t20.00\t10\t19.50\t50.10\tyes"
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["metric"] == "bleu" and saved["runs"][1]["overrides"] == ["lr=1"] and saved["runs"][1]["ended"]
    with pytest.raises(
        MTError, match=f"a sweep's folder, which holds several runs; its best on valid: {tmp_path}/lr=2 "
    ):
        run_model(tmp_path)  # what translate -c, mt-evaluate and the rest say of the folder

    fake_run(tmp_path / "lr=4", ["lr=4"], [{"step": 10, "valid_bleu": 30.0, "valid_ppl": 6.0}], scores)
    (tmp_path / "sweep.tsv").unlink()
    described, table = describe_sweep(tmp_path)  # mt-info: the folder as it stands now, nothing written
    assert not (tmp_path / "sweep.tsv").exists() and json.loads((tmp_path / "sweep.json").read_text()) == saved
    assert [r["run"] for r in described["runs"]] == ["lr=4", "lr=2", "lr=1", "lr=3"] and described["metric"] == "bleu"
    assert table[1:] != lines[1:] and table == write_summary(tmp_path, "bleu")  # what the next report prints
    shown = run_cli("mt-info", str(tmp_path)).stdout.splitlines()
    assert shown == table
    assert json.loads(run_cli("mt-info", str(tmp_path), "--json").stdout)["runs"] == described["runs"]


def sweep_args(corpus, folder, *more):
    steps = ["train.max_steps=40", "train.valid_every=20", "train.log_every=1"]
    return tiny_sweep(corpus, folder, *steps, *more, "train.lr=3e-3,1e-3", "train.seed=1,2")


def test_a_sweep_stopped_resumes_and_a_sweep_run_again_redoes_nothing(tiny_corpus, tmp_path):
    folder = tmp_path / "sweep"
    first = folder / "train.lr=0.003,train.seed=1"
    process = subprocess.Popen(
        [cli_path("mt-train"), *sweep_args(tiny_corpus, folder)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = first / "train.jsonl"
    while process.poll() is None and (not log.is_file() or len(log.read_text().splitlines()) < 5):
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert not (folder / "sweep.tsv").exists() and not (folder / "train.lr=0.001,train.seed=1").exists()

    again = run_cli("mt-train", *sweep_args(tiny_corpus, folder))
    assert f"resumed from {first}/checkpoints/last.pt" in again.stdout + again.stderr
    names = ["train.lr=0.001,train.seed=1", "train.lr=0.001,train.seed=2", "train.lr=0.003,train.seed=1"]
    names.append("train.lr=0.003,train.seed=2")
    rows = json.loads((folder / "sweep.json").read_text())["runs"]
    assert sorted(r["run"] for r in rows) == names and all(r["ended"] for r in rows)
    assert [r["valid_bleu"] for r in rows] == sorted((r["valid_bleu"] for r in rows), reverse=True)
    for row in rows:
        run = mt.Run(folder / row["run"])
        assert row["test_bleu"] == run.results["bleu"] and row["step"] in [v["step"] for v in run.validations]
    printed = again.stdout.split(f"sweep {folder}: 4 runs, best valid BLEU first")[1].splitlines()
    assert [line.split()[-1] for line in printed[2:6]] == [r["run"] for r in rows]  # printed as saved, best first
    seeds = json.loads((folder / "sweep.json").read_text())["over_seeds"]
    assert sorted(g["setting"] for g in seeds) == ["train.lr=0.001", "train.lr=0.003"]
    for group in seeds:
        members = [r["valid_bleu"] for r in rows if r["run"].startswith(group["setting"] + ",")]
        assert group["runs"] == 2 and group["valid_bleu"]["mean"] == round(sum(members) / 2, 2)
        assert any(line.endswith(f"  2  {group['setting']}") for line in printed[7:])
    assert printed[6].startswith("over seeds (runs alike but for train.seed), mean ± sd")

    logs = {name: (folder / name / "train.jsonl").read_text() for name in names}
    third = run_cli("mt-train", *sweep_args(tiny_corpus, folder))
    assert (third.stdout + third.stderr).count("this run has ended as configured") == 4
    assert logs == {name: (folder / name / "train.jsonl").read_text() for name in names}

    other = run_cli("mt-train", *sweep_args(tiny_corpus, folder, "model.d_model=32"), check=False)
    assert other.returncode == 2 and "holds another run" in other.stderr and "model.d_model" in other.stderr
    assert logs == {name: (folder / name / "train.jsonl").read_text() for name in names}


def test_a_bad_value_in_any_run_of_a_sweep_is_one_line_before_any_run_starts(tiny_corpus, tmp_path):
    folder = tmp_path / "sweep"
    result = run_cli("mt-train", *sweep_args(tiny_corpus, folder, "train.precision=fp32,fp8"), check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: config train.precision: must be fp32, bf16 or fp16"
    assert not folder.exists()


def test_runs_alike_but_for_their_seed_are_summed_up_as_mean_and_spread(tmp_path):
    for lr, seed, bleu, test in [(1, 1, 20.0, 19.0), (1, 2, 22.0, 21.0), (1, 3, 24.0, 23.0), (2, 1, 30.0, 29.0)]:
        name = f"lr={lr},train.seed={seed}"
        fake_run(tmp_path / name, [f"lr={lr}", f"train.seed={seed}"], [{"step": 5, "valid_bleu": bleu}], {"bleu": test})
    fake_run(tmp_path / "lr=2,train.seed=2", ["lr=2", "train.seed=2"], [{"step": 5, "valid_bleu": 1.0}], ended=False)
    assert over_seeds(summary(tmp_path, "bleu"), "bleu") == [  # an unended run counts for nothing yet
        {"setting": "lr=1", "runs": 3, "valid_bleu": {"mean": 22.0, "sd": 2.0}, "test_bleu": {"mean": 21.0, "sd": 2.0}}
    ]
    assert write_summary(tmp_path, "bleu")[-1] == "  22.00 ± 2.00  21.00 ± 2.00  3  lr=1"
