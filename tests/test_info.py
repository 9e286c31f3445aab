"""mt-info: what a checkpoint says of itself agrees with the model it loads into and the run that made it."""

import json

import pytest

import mt
from mt.checkpoint import load_checkpoint

from conftest import run_cli


def test_a_final_checkpoint_describes_its_model_training_and_test_score(trained_run):
    info = json.loads(run_cli("mt-info", str(trained_run), "--json").stdout)  # a run directory: its final.pt
    final = trained_run / "checkpoints" / "final.pt"
    assert info["path"] == str(final) and info["languages"] == {"src": ["de"], "tgt": ["en"]}
    translator = mt.load_translator(final, device="cpu")
    assert info["model"]["parameters"] == sum(p.numel() for p in translator.model.parameters())
    assert (info["tokenizer"]["vocab_src"], info["tokenizer"]["vocab_tgt"]) == (
        translator.tokenizer.src_vocab_size,
        translator.tokenizer.tgt_vocab_size,
    )
    source = load_checkpoint(final)["final_from"]  # best.pt or averaged.pt: the weights final.pt holds
    assert info["origin"] == {"kind": "final", "from": source}
    validations = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    best = max(validations, key=lambda row: row["valid_bleu"])  # the first of equals, as the trainer keeps it
    assert info["training"]["best_value"] == best["valid_bleu"] and info["training"]["best_step"] == best["step"]
    assert info["training"]["best_metric"] == "bleu"
    # how far training had come at those weights: best.pt's update, or the last one averaged (max_steps=300)
    assert info["training"]["step"] == (best["step"] if source == "best.pt" else 300)
    results = json.loads((trained_run / "results.json").read_text())
    assert info["test"]["bleu"] == results["bleu"] and info["test"]["split"] == results["split"]
    assert info["decode"]["alpha"] == translator.settings.alpha and info["decode"]["beam"] == translator.settings.beam
    text = run_cli("mt-info", str(final)).stdout
    assert "  translates    de -> en\n" in text and f"{info['model']['parameters']:,} parameters" in text
    assert f"test score    {results['split']}: BLEU {results['bleu']}, chrF" in text  # words split as usual: 13a
    assert info["tokenizer"]["normalization"] == "nmt_nfkc" and "normalization" not in text  # the default: unsaid


def test_a_training_checkpoint_and_a_bad_file(trained_run, tmp_path):
    last = trained_run / "checkpoints" / "last.pt"
    both = json.loads(run_cli("mt-info", str(last), str(trained_run), "--json").stdout)
    assert [info["path"] for info in both] == [str(last), str(trained_run / "checkpoints" / "final.pt")]
    assert both[0]["origin"] == {"kind": "training", "resumable": True} and both[0]["test"] is None
    assert both[0]["training"]["step"] == 300
    best = json.loads(run_cli("mt-info", str(trained_run / "checkpoints" / "best.pt"), "--json").stdout)
    assert best["origin"] == {"kind": "training", "resumable": False}  # weights only: nothing to resume from
    (tmp_path / "notes.txt").write_text("not a model\n")
    result = run_cli("mt-info", str(tmp_path / "notes.txt"), check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a readable checkpoint" in result.stderr


def test_the_data_line_names_hub_datasets_several_splits_and_drawn_pairs(trained_run):
    from mt.cli.info import as_text, describe

    info = describe(trained_run)
    info["data"] = {"source": "hub", "name": "wmt/wmt14", "subset": "de-en", "train_split": ["train", "crawl"]}
    info["data"] |= {"valid_split": "validation", "test_split": None}
    assert (
        "  data          wmt/wmt14 de-en (hub): train + crawl to train on, validation to validate, none to test\n"
        in (as_text(info))
    )
    info["data"] = {"source": "files", "dir": "corpus", "train_split": "train", "valid_from_train": 2000}
    info["data"] |= {"test_from_train": 1500, "valid_split": "valid", "test_split": "test"}
    assert "corpus (files): train to train on, 2,000 of its pairs to validate, 1,500 more to test" in as_text(info)


def test_an_export_directory_is_described_from_its_own_files(trained_run, tmp_path):
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    run_cli("mt-export", "-c", str(trained_run), "-o", str(exported), "-q", "int8")
    info = json.loads(run_cli("mt-info", str(exported), "--json").stdout)
    model = json.loads(run_cli("mt-info", str(trained_run), "--json").stdout)
    assert info["export"] == {"quantization": "int8", "arch": "transformer", "from": [str(trained_run)]}
    assert (info["languages"], info["decode"]) == (model["languages"], model["decode"])
    assert {k: info["tokenizer"][k] for k in ("vocab_src", "vocab_tgt")} == {
        k: model["tokenizer"][k] for k in ("vocab_src", "vocab_tgt")
    }
    assert "a CTranslate2 export (transformer, weights int8)" in run_cli("mt-info", str(exported)).stdout


def test_a_model_of_several_languages_names_them_and_its_mean_test_score(trained_run):
    from mt.cli.info import as_text, describe

    info = describe(trained_run) | {"languages": {"src": ["de", "fr"], "tgt": ["en"]}}
    info["test"] = {"split": "test", "bleu": 30.1, "chrf": 55.0, "mean_of": ["de-en", "fr-en"]}
    text = as_text(info)
    assert "  translates    de, fr -> en\n" in text
    assert text.endswith("  test score    test: BLEU 30.1, chrF 55.0 (the mean of 2 directions)")


def test_system_describes_this_machine_as_a_run_here_uses_it():
    import torch

    from mt.cli.hydra_task import choose_experiment
    from mt.fastpath.cpu_process import native_bf16
    from mt.host import cpu_cores

    report = json.loads(run_cli("mt-info", "--system", "--json").stdout)
    assert report["mt"] == mt.__version__ and report["packages"]["torch"] == torch.__version__
    assert report["cpu"]["cores_used"] == cpu_cores() and report["cpu"]["native_bf16"] == native_bf16()
    assert len(report["gpus"]) == torch.cuda.device_count()
    preset = choose_experiment([], torch.cuda.is_available(), native_bf16())[0][0].split("=", 1)[1]
    assert report["make_train"]["preset"] == preset
    text = run_cli("mt-info", "--system").stdout
    assert f"make train  experiment={preset} (" in text and f"torch {torch.__version__}" in text


def test_system_says_a_containers_cpu_limit_and_the_threads_it_leaves(monkeypatch):
    from mt.cli import system_report

    monkeypatch.setattr(system_report, "cpu_quota", lambda: 1.5)
    monkeypatch.setattr(system_report, "cpu_cores", lambda: 2)
    text = system_report.as_text(system_report.system_report())
    assert "its CPU time capped at 1.5 CPUs; runs use " in text
    monkeypatch.setattr(system_report, "cpu_cores", lambda: 1)
    assert "; runs use 1 thread;" in system_report.as_text(system_report.system_report())


@pytest.mark.parametrize("args, said", [([], "give a checkpoint"), (["--system", "x.pt"], "not both")])
def test_system_or_checkpoints_one_or_the_other(args, said):
    result = run_cli("mt-info", *args, check=False)
    assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1
