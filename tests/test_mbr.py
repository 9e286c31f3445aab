"""Minimum Bayes risk decoding: the pairwise utilities against sacreBLEU's own sentence scores, the choice
against its definition, and the translators and commands that keep MBR's choice, one line a line."""

import json
import random

import pytest
from omegaconf import OmegaConf
from sacrebleu.metrics import BLEU, CHRF

import mt
from mt.config.schema import DecodeConfig
from mt.decoding.mbr import bleu_matrix, bleu_words, chrf_matrix, mbr_order
from mt.decoding.settings import DecodeSettings

from conftest import run_cli


def random_texts(count: int, seed: int) -> list[str]:
    """Short sentences sharing words, with the edge cases: empty, one character, spaces only, no words alike."""
    words = "a man dog runs the in snow . , two children play red ball A ein Hund läuft ! 狗 在 跑".split()
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 14))) for _ in range(count)]
    return texts + ["", "a", "   ", "xyz qrs", "a man ."]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_pairwise_utilities_equal_sacrebleus_sentence_scores(language):
    texts = random_texts(30, seed=len(language))
    chrf, bleu = CHRF(), BLEU(tokenize="zh" if language == "zh" else "13a", effective_order=True)
    chrf_scores, bleu_scores = chrf_matrix(texts), bleu_matrix(texts, bleu_words(language))
    for i, hyp in enumerate(texts):
        for j, ref in enumerate(texts):
            assert chrf_scores[i, j] == pytest.approx(chrf.sentence_score(hyp, [ref]).score, abs=1e-9)
            assert bleu_scores[i, j] == pytest.approx(bleu.sentence_score(hyp, [ref]).score, abs=1e-9)


def test_the_matches_are_the_same_computed_in_pieces(monkeypatch):
    """A long line's many candidates: the counts' minimum is taken a few rows at a time, with equal results."""
    import mt.decoding.mbr as mbr

    texts = random_texts(40, seed=5)
    whole = chrf_matrix(texts)
    monkeypatch.setattr(mbr, "CELLS", 64)
    assert (chrf_matrix(texts) == whole).all()


@pytest.mark.parametrize("utility", ["chrf", "bleu"])
def test_mbr_keeps_the_candidate_with_the_highest_expected_utility(utility):
    """The definition, computed the slow way: each candidate's mean sacreBLEU score against every candidate
    (itself included, duplicates counted as often as drawn); ties keep the search's order."""
    metric = CHRF() if utility == "chrf" else BLEU(effective_order=True)
    for seed in range(6):
        texts = random_texts(9, seed)[:9]
        texts += [texts[2], texts[2]]  # a candidate drawn three times weighs three times
        order = mbr_order(texts, utility, bleu_words("en"))
        expected = [sum(metric.sentence_score(h, [r]).score for r in texts) / len(texts) for h in texts]
        assert sorted(order) == list(range(len(texts)))
        assert [expected[i] for i in order] == pytest.approx(sorted(expected, reverse=True), abs=1e-9)
        best = max(expected)
        assert order[0] == min(i for i, e in enumerate(expected) if e > best - 1e-9)  # the first of equals
    consensus = ["the cat sat", "a dog ran in the park", "a dog ran in a park", "a dog runs in the park"]
    assert consensus[mbr_order(consensus, utility)[0]] == "a dog ran in the park"
    assert mbr_order(["a b", "c d"], utility) == [0, 1]  # nothing in common: the search's first


def test_the_settings_refuse_what_mbr_cannot_do():
    for bad, field in (
        (dict(mbr=1), "mbr"),
        (dict(mbr=-2), "mbr"),
        (dict(beam=4, nbest=2, mbr=4), "mbr"),
        (dict(mbr=4, mbr_utility="comet"), "mbr_utility"),
        (dict(strategy="sample", epsilon=1.0), "epsilon"),
        (dict(strategy="sample", epsilon=-0.1), "epsilon"),
    ):
        with pytest.raises(mt.MTError, match=f"^decode setting {field}="):
            DecodeSettings(**bad)
    beam = DecodeSettings(beam=5, mbr=12, split_sentences=True).for_candidates()
    assert (beam.beam, beam.nbest, beam.mbr, beam.split_sentences) == (12, 12, 0, False)
    samples = DecodeSettings(strategy="sample", mbr=16).for_candidates()
    assert (samples.nbest, samples.rows_per_line) == (16, 16)


def test_validation_and_the_test_score_search_without_mbr():
    """A run whose checkpoints translate by sampling and MBR still validates and scores its test set searching."""
    decode = OmegaConf.structured(DecodeConfig(strategy="sample", mbr=16, epsilon=0.02, beam=4))
    settings = DecodeSettings.for_scoring(decode, beam=1)
    assert (settings.strategy, settings.mbr, settings.beam) == ("search", 0, 1)
    assert DecodeSettings.from_config(decode).mbr == 16  # translate's, mt-serve's and the API's


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


@pytest.fixture(scope="module")
def lines(tiny_corpus):
    return (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:12] + ["", "Hund"]


@pytest.mark.parametrize(
    "strategy", [dict(), dict(mbr_utility="bleu"), dict(strategy="sample", epsilon=0.05, seed=2, temperature=1.5)]
)
def test_the_translator_keeps_mbrs_choice_among_its_candidates(translator, lines, strategy):
    """translate(mbr=6) gives, of each line's 6 candidates (the 6 best of a beam of 6, or 6 samples), the
    one mbr_order puts first; an empty line stays empty."""
    utility = strategy.get("mbr_utility", "chrf")
    candidates = translator.translate_nbest(lines, **{k: v for k, v in strategy.items() if k != "mbr_utility"}, nbest=6)
    chosen = translator.translate(lines, mbr=6, **strategy)
    assert chosen == [c[mbr_order([t.text for t in c], utility, bleu_words("en"))[0]].text for c in candidates]
    assert chosen[-2] == "" and len(chosen) == len(lines)
    if not strategy:
        assert chosen != [c[0].text for c in candidates]  # MBR chose otherwise than the search somewhere
        assert translator.translate(lines, mbr=6, split_sentences=True) == chosen  # one sentence a line here


def test_a_checkpoint_set_to_mbr_translates_so_unless_told_otherwise(trained_run, tiny_corpus, tmp_path, lines):
    """decode.mbr in a checkpoint's config is translate's default; --mbr 0 turns it off; mt-evaluate uses it
    and says so; the refusals are one line."""
    from mt.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(trained_run / "checkpoints" / "final.pt")
    state["config"]["decode"].update(mbr=5, beam=1)
    ckpt = str(tmp_path / "mbr.pt")
    save_checkpoint(state, ckpt)
    text = "".join(x + "\n" for x in lines)
    api = mt.load_translator(ckpt, device="cpu")
    assert api.settings.mbr == 5
    out = run_cli("translate", "-c", ckpt, input_text=text)
    assert out.stdout.splitlines() == api.translate(lines) == api.translate(lines, beam=5, mbr=5)
    assert "(beam 5, MBR over 5 candidates by chrf)" in out.stderr
    assert "minimum Bayes risk by chrf over 5 candidates (the best of a beam of 5)" in run_cli("mt-info", ckpt).stdout
    off = run_cli("translate", "-c", ckpt, "-q", "--mbr", "0", input_text=text)
    assert off.stdout.splitlines() == api.translate(lines, mbr=0, beam=1)
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text(text, encoding="utf-8")
    ref.write_text(text.replace("Hund", "dog"), encoding="utf-8")
    scores = tmp_path / "scores.json"
    flags = ["--src", str(src), "--ref", str(ref), "--mbr-utility", "bleu", "--json", str(scores)]
    assert "mbr 5, mbr_utility bleu)" in run_cli("mt-evaluate", "-c", ckpt, *flags).stdout
    row = json.loads(scores.read_text())
    assert (row["mbr"], row["mbr_utility"], row["beam"]) == (5, "bleu", 1)
    for flags, said in (
        (["--mbr", "1"], "--mbr must be 0 (off) or >= 2 candidates a line"),
        (["--mbr", "4", "--nbest", "2", "--beam", "4"], "--mbr writes one translation a line"),
        (["--mbr", "4", "--strategy", "greedy"], "--mbr chooses among several candidates"),
        (["--epsilon", "0.02"], "--epsilon is a sampling setting: add --strategy sample"),
        (["--strategy", "sample", "--epsilon", "1"], "--epsilon must be in [0, 1)"),
    ):
        refused = run_cli("translate", "-c", ckpt, *flags, input_text=text, check=False)
        assert refused.returncode == 2 and refused.stderr.strip().startswith(f"error: {said}"), refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
