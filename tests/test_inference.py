"""Loading a trained model to translate with, from Python and from the console scripts alike."""

import os
from pathlib import Path

import pytest
import torch

import mt
from mt import inference
from mt.cli import commands
from mt.inference import load_for_inference
from mt.training.run import choose_checkpoint

from conftest import run_cli, tiny_trainer


def test_a_checkpoint_is_a_string_a_path_or_a_list(trained_run):
    best = trained_run / "checkpoints" / "best.pt"
    reference = load_for_inference([str(best)])[0].state_dict()
    for form in (str(best), best, [best]):
        model = load_for_inference(form)[0]
        assert all(torch.equal(model.state_dict()[k], reference[k]) for k in reference)
    with pytest.raises(mt.MTError, match="nope.pt: no such checkpoint"):
        load_for_inference(str(trained_run / "nope.pt"))  # one path, not four one-letter ones


@pytest.fixture(scope="module")
def rnn_checkpoint(tiny_corpus, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("rnn")
    trainer = tiny_trainer(tiny_corpus, run, "model=rnn_attention", "model.d_model=32", "train.max_steps=20")
    trainer.fit()
    return run / "checkpoints" / "last.pt"


@pytest.mark.parametrize("form", ["str", "path", "rnn", "average", "ensemble"])
def test_the_python_api_translates_as_the_translate_command(form, trained_run, rnn_checkpoint, tiny_corpus):
    ckpt = trained_run / "checkpoints"
    given, flags = {
        "str": (str(ckpt / "final.pt"), []),
        "path": (ckpt / "final.pt", []),
        "rnn": (rnn_checkpoint, []),
        "average": ([ckpt / "best.pt", ckpt / "last.pt"], []),
        "ensemble": ([str(ckpt / "final.pt"), str(ckpt / "last.pt")], ["--ensemble"]),
    }[form]
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:12] + ["", "Hund"]
    translator = mt.load_translator(given, device="cpu", ensemble=form == "ensemble", beam=2)
    ours = translator.translate(lines)
    paths = [str(p) for p in (given if isinstance(given, list) else [given])]
    out = run_cli("translate", "-c", *paths, *flags, "--beam", "2", "-q", input_text="".join(x + "\n" for x in lines))
    assert ours == out.stdout.splitlines() and len(ours) == len(lines) and ours[-2] == ""
    assert translator.translate(lines[0]) == ours[0]  # one string in, one out (not one per character)
    detailed = mt.load_translator(given, ensemble=form == "ensemble", nbest=2).translate_nbest(lines[:3])
    assert [len(found) for found in detailed] == [2, 2, 2] and detailed[0][0].score >= detailed[0][1].score
    if form == "ensemble":  # attention maps are one model's
        with pytest.raises(mt.MTError, match="^attention maps show one model's attention: not an ensemble's$"):
            translator.translate_nbest(lines[:1], attention_layer=-1)
    elif form == "rnn":
        assert translator.translate_nbest(lines[:1], attention_layer=0)[0][0].attention is not None
        with pytest.raises(mt.MTError, match=r"^attention layer 1: the model has one attention \(layer 0\)$"):
            translator.translate_nbest(lines[:1], attention_layer=1)


def test_decoding_settings_given_to_one_call_apply_to_that_call_alone(trained_run, tiny_corpus):
    final = trained_run / "checkpoints" / "final.pt"
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:8]
    translator = mt.load_translator(final, device="cpu", beam=1)
    greedy = translator.translate(lines)
    assert translator.translate(lines, beam=3) == mt.load_translator(final, device="cpu", beam=3).translate(lines)
    found = translator.translate_nbest(lines, nbest=3)  # nbest alone: a beam that holds three
    assert [len(hyps) for hyps in found] == [3] * len(lines)
    assert [h.score for h in found[0]] == sorted((h.score for h in found[0]), reverse=True)
    samples = translator.translate_nbest(lines[0], strategy="sample", nbest=2, seed=1)  # one line in: its list
    assert [s.text for s in samples] == [
        s.text for s in translator.translate_nbest([lines[0]], strategy="sample", nbest=2, seed=1)[0]
    ]
    assert translator.settings.beam == 1 and translator.translate(lines) == greedy  # its own settings unchanged
    assert repr(translator) == "Translator(de-en, greedy, fp32, cpu)"
    assert repr(translator.for_call(beam=4, alpha=1.0)) == "Translator(de-en, beam 4, alpha 1, fp32, cpu)"
    for call, message in [
        (lambda: translator.translate(lines, bream=3), "bream: not a decoding setting"),
        (lambda: translator.translate_nbest(lines, prefix=["A"] * 8), "prefix: neither a decoding setting"),
        (lambda: translator.translate(lines, beam=0), "beam=0: must be >= 1"),
        (lambda: translator.translate(lines, precision="bf16"), 'load it with precision="bf16"'),
        (lambda: translator.translate(["Hund", None]), r"lines\[1\]: a str is expected, not NoneType"),
        (lambda: translator.translate(None), r"lines: a list of str \(or one str\) is expected, not NoneType"),
        (lambda: translator.score(["Hund"], 3), r"targets: a list of str \(or one str\) is expected, not int"),
        (lambda: translator.translate_nbest(["Hund"], prefixes=[3]), r"prefixes\[0\]: a str is expected, not int"),
        (lambda: translator.score(["Hund"], [b"dog"]), r"targets\[0\]: a str is expected, not bytes"),
    ]:
        with pytest.raises(mt.MTError, match=message):
            call()


def test_a_keyword_load_translator_does_not_know_is_one_line_before_the_model_loads(tmp_path):
    missing = tmp_path / "none.pt"  # checked first: the keyword's error, not the missing file's
    with pytest.raises(
        mt.MTError, match=r"^dtype: not a decoding setting \(--dtype's setting is precision; one of alpha, "
    ):
        mt.load_translator(missing, dtype="bf16")
    with pytest.raises(mt.MTError, match=r"^bream: not a decoding setting \(one of alpha, batch_tokens, beam, "):
        mt.load_translator(missing, bream=3)
    with pytest.raises(mt.MTError, match=r"^bream: not a decoding setting"):
        mt.DecodeSettings.from_config({"beam": 2}, bream=3)


def test_an_export_directory_translates_through_the_same_api(trained_run, tiny_corpus, tmp_path):
    pytest.importorskip("ctranslate2")
    final = trained_run / "checkpoints" / "final.pt"
    exported = tmp_path / "ct2"
    run_cli("mt-export", "-c", str(final), "-o", str(exported))
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:12] + [""]
    translator = mt.load_translator(exported, device="cpu")
    assert type(translator).__name__ == "CTranslate2Translator"
    assert repr(translator).startswith("CTranslate2Translator(de-en, greedy, ")
    assert translator.translate(lines) == mt.load_translator(final, device="cpu").translate(lines)  # greedy: same
    assert translator.translate(lines, beam=2) == mt.load_translator(exported, device="cpu", beam=2).translate(lines)
    with pytest.raises(mt.MTError, match="an export directory is one model"):
        mt.load_translator([exported, final])


def test_translate_and_evaluate_set_up_the_process_alike(trained_run, tiny_corpus, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(inference, "tune_process", lambda device, training: calls.append((device.type, training)))
    best = str(trained_run / "checkpoints" / "best.pt")
    commands.translate(["-c", best, "-i", str(tiny_corpus / "test.de"), "-o", str(tmp_path / "hyp"), "-q"])
    commands.evaluate(["-c", best, "--split", "test", "--device", "cpu"])
    assert calls == [("cpu", False), ("cpu", False)]


class Recorded(Exception):
    """Raised where the Translator takes its precision: what it was is known, nothing needs decoding."""


def test_a_model_decodes_in_the_precision_its_run_scored_in(trained_run, tiny_corpus, tmp_path, monkeypatch):
    """bf16 for a model trained in bf16 on a CPU that multiplies bf16 natively, as its run's test score
    decoded (translate, mt-evaluate, mt-score and the Python API alike); fp32 without native bf16, or asked."""
    from mt.decoding import translator as translator_module
    from mt.fastpath import cpu_process

    state = torch.load(trained_run / "checkpoints" / "best.pt", weights_only=True)
    state["config"]["train"]["precision"] = "bf16"
    bf16 = str(tmp_path / "bf16.pt")
    torch.save(state, bf16)
    seen = []

    def record(model, precision):
        seen.append(precision)
        raise Recorded

    monkeypatch.setattr(translator_module, "low_precision_copy", record)
    test_de, test_en = str(tiny_corpus / "test.de"), str(tiny_corpus / "test.en")
    calls = [
        lambda *dtype: commands.translate(["-c", bf16, "-i", test_de, "-o", str(tmp_path / "hyp"), "-q", *dtype]),
        lambda *dtype: commands.evaluate(["-c", bf16, "--split", "test", "--device", "cpu", *dtype]),
        lambda *dtype: commands.score(["-c", bf16, "--src", test_de, "--tgt", test_en, "--device", "cpu", *dtype]),
        lambda *dtype: mt.load_translator(bf16, device="cpu", precision=dtype[1] if dtype else None),
    ]
    for native, dtype in ((True, []), (False, []), (True, ["--dtype", "fp32"])):
        monkeypatch.setattr(cpu_process, "native_bf16", lambda native=native: native)
        for call in calls:
            with pytest.raises(Recorded):
                call(*dtype)
    assert seen == ["bf16"] * 4 + ["fp32"] * 8


def test_choosing_the_final_checkpoint_leaves_the_trainers_weights_alone(tiny_corpus, tmp_path):
    trainer = tiny_trainer(
        tiny_corpus, tmp_path, "train.max_steps=30", "train.save_every=10", "train.valid_every=10",
        "train.keep_last=3", "train.average_last=3",
    )  # fmt: skip
    trainer.fit()
    trained = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    chosen = choose_checkpoint(trainer.cfg, trainer, tmp_path / "checkpoints")
    assert chosen.name in ("best.pt", "averaged.pt") and (tmp_path / "checkpoints" / "averaged.pt").is_file()
    averaged = load_for_inference(tmp_path / "checkpoints" / "averaged.pt")[0].state_dict()
    assert any(not torch.equal(averaged[k], trained[k]) for k in trained)  # averaging changed the weights
    assert all(torch.equal(trainer.model.state_dict()[k], trained[k]) for k in trained)


def test_the_cpu_count_needs_no_linux_call(monkeypatch):
    from mt import host
    from mt.host import cpu_cores

    assert cpu_cores() >= 1
    monkeypatch.setattr(host, "cpu_quota", lambda: None)  # no container's limit, whatever this machine's
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # as on macOS and Windows
    assert cpu_cores() == (os.cpu_count() or 1)


def test_the_package_exports_its_api_lazily():
    import subprocess
    import sys

    code = "import sys, mt; assert 'torch' not in sys.modules; mt.load_translator; assert 'torch' in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent)
    assert result.returncode == 0, result.stderr
