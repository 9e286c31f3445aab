"""Models named on the Hugging Face Hub (hf:OWNER/NAME): found in the Hub's cache as its client lays it out,
offline, and decoded exactly as the checkpoint they hold; a name that cannot be had is one line."""

import json
import shutil

import pytest
from huggingface_hub import constants

import mt
from mt import hub
from mt.checkpoint import load_checkpoint, load_parent
from mt.errors import MTError

from conftest import run_cli

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cached(cache, repo: str, files: dict, ref: str = "main"):
    """A repository's snapshot in the Hub's cache layout (models--OWNER--NAME/refs, snapshots/COMMIT)."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / ref).write_text(COMMIT)
    for name, source in files.items():
        (folder / "snapshots" / COMMIT / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, folder / "snapshots" / COMMIT / name)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An offline Hub cache of its own, for this process and the commands it starts."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read once, where the client was imported before
    return cache


def test_a_hub_model_decodes_as_the_checkpoint_it_holds(trained_run, tiny_corpus, hub_cache, tmp_path):
    final = trained_run / "checkpoints" / "final.pt"
    cached(hub_cache, "someone/tiny", {"final.pt": final}, ref="v1")
    cached(hub_cache, "someone/whole-run", {"checkpoints/final.pt": final})
    source = str(tiny_corpus / "test.de")
    local = run_cli("translate", "-c", str(trained_run), "-i", source, "-q").stdout
    for name in ("hf:someone/tiny@v1", "hf:someone/whole-run"):
        assert run_cli("translate", "-c", name, "-i", source, "-q").stdout == local, name
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    assert mt.load_translator("hf:someone/whole-run", device="cpu").translate(lines) == local.splitlines()
    info = run_cli("mt-info", "hf:someone/tiny@v1").stdout
    assert "translates    de -> en" in info
    assert info.startswith(f"hf:someone/tiny@v1  ({hub_cache / 'models--someone--tiny' / 'snapshots' / COMMIT}")
    assert json.loads(run_cli("mt-info", "hf:someone/tiny@v1", "--json").stdout)["hub"] == "hf:someone/tiny@v1"
    assert load_parent("hf:someone/tiny@v1")["model"].keys() == load_checkpoint(final)["model"].keys()  # to fine-tune
    with pytest.raises(MTError, match=r"^train.init_from: hf:someone/absent: not in the Hub's local cache"):
        load_parent("hf:someone/absent")

    offline = "not in the Hub's local cache, and the Hub cannot be reached from here (offline?)"
    for name, message in [
        ("hf:someone/tiny", offline),  # its v1 is cached, not its main branch
        ("hf:someone/absent", offline),
        ("hf:someone", "a Hub model is named hf:OWNER/NAME or hf:OWNER/NAME@REVISION"),
    ]:
        refused = run_cli("translate", "-c", name, "-q", input_text="x\n", check=False)
        assert refused.returncode == 2 and refused.stderr.strip() == f"error: {name}: {message}", refused.stderr
    (tmp_path / "notes.md").write_text("no model here\n")
    cached(hub_cache, "someone/notes", {"README.md": tmp_path / "notes.md"})
    with pytest.raises(MTError, match=r"^hf:someone/notes: the repository holds neither final.pt nor an mt-export"):
        hub.local_model("hf:someone/notes")
    assert hub.local_model("runs/x") == "runs/x"  # any other name as it is


def test_a_hub_model_may_hold_an_export_for_ctranslate2(trained_run, tiny_corpus, hub_cache, tmp_path):
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "export"
    run_cli("mt-export", "-c", str(trained_run), "-o", str(exported))
    cached(hub_cache, "someone/ct2", {p.name: p for p in exported.iterdir()})
    source = ["--engine", "ctranslate2", "-i", str(tiny_corpus / "test.de"), "-q"]
    local = run_cli("translate", "-c", str(exported), *source).stdout
    assert run_cli("translate", "-c", "hf:someone/ct2", *source).stdout == local and local.strip()


def test_a_model_card_tags_the_languages_and_names_the_model_by_its_hub_name(trained_run, tiny_corpus):
    card = run_cli("mt-info", str(trained_run), "--card", "someone/tiny").stdout
    header = card.split("\n---\n")[0].splitlines()
    assert header == ["---", "language:", "- de", "- en", "tags:", "- translation", "pipeline_tag: translation"]
    assert "# de → en translation" in card and "| translates | de -> en |" in card
    results = json.loads((trained_run / "results.json").read_text())
    assert f"| test score | {results['split']}: BLEU {results['bleu']}, chrF {results['chrf']} |" in card
    assert "translate -c hf:someone/tiny < input.txt" in card and "data.src_lang=de data.tgt_lang=en" in card
    assert f"| data | {tiny_corpus.name} (files)" in card and str(tiny_corpus.parent) not in card  # no local path
    for flags, message in [
        ([str(trained_run), str(trained_run), "--card", "someone/tiny"], "--card describes one model"),
        ([str(trained_run), "--card", "someone"], "--card someone: name the Hub repository the card is for"),
        ([str(trained_run), "--card", "someone/tiny", "--json"], "--card prints the card as Markdown: not with --json"),
    ]:
        refused = run_cli("mt-info", *flags, check=False)
        assert refused.returncode == 2 and refused.stderr.startswith(f"error: {message}"), refused.stderr
