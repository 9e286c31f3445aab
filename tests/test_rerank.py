"""Reranking a beam's candidates with a reverse model (target -> source): the combined score decides, the
weight 0 leaves the beam's choice, and a model that does not translate the other way is refused."""

import json

import pytest

import mt
from mt.cli.evaluate import decoded
from mt.decoding.rerank import check_reverse, reranked
from mt.decoding.sentences import split_sentences
from mt.decoding.settings import PairScore, Translation
from mt.errors import MTError

from conftest import run_cli


class Back:
    """A stand-in reverse model: log P(source | candidate) per piece is given by the candidate's text."""

    languages = ("en", "de")

    def __init__(self, per_piece: dict):
        self.per_piece, self.asked = per_piece, []

    def score(self, sources, targets):
        self.asked.append((list(sources), list(targets)))
        return [PairScore(["x", "</s>"], [self.per_piece[s]] * 2) for s in sources]


class Counting:
    """A reverse model that counts the calls to its score."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def score(self, sources, targets):
        self.calls += 1
        return self.model.score(sources, targets)


def candidate(text: str, score: float) -> Translation:
    return Translation(text=text, score=score, src_pieces=[], tgt_pieces=[])


def test_the_reverse_models_score_reorders_the_candidates_by_weight():
    found = [[candidate("fluent", -1.0), candidate("faithful", -1.3), candidate("same", -1.3)], [candidate("x", 0.0)]]
    back = Back({"fluent": -2.0, "faithful": -1.5, "same": -1.5, "x": -1.0})
    best = reranked(found, ["quelle", "y"], back, weight=1.0)
    assert [h.text for h in best[0]] == ["faithful", "same", "fluent"]  # -2.8, -2.8 (the beam's order), -3.0
    assert [h.score for h in best[0]] == pytest.approx([-2.8, -2.8, -3.0]) and best[1][0].score == -1.0
    assert back.asked == [(["fluent", "faithful", "same", "x"], ["quelle", "quelle", "quelle", "y"])]  # one call
    assert [h.text for h in reranked(found, ["quelle", "y"], back, weight=0.0)[0]] == ["fluent", "faithful", "same"]
    check_reverse(("de", "en"), back)
    check_reverse(("", "en"), back)  # languages not named: nothing to check
    with pytest.raises(MTError, match="the reverse model translates en-de: it must translate the other way, fr-en"):
        check_reverse(("en", "fr"), back)


def test_translate_and_mt_evaluate_keep_the_candidate_the_reverse_model_prefers(
    trained_run, reverse_run, tiny_corpus, tmp_path
):
    source = tiny_corpus / "test.de"
    lines = source.read_text(encoding="utf-8").splitlines()
    forward, back = mt.load_translator(trained_run, device="cpu"), mt.load_translator(reverse_run, device="cpu")
    found = forward.translate_nbest(lines, beam=4, nbest=4)
    pairs = back.score(
        [h.text for hyps in found for h in hyps], [line for line, hyps in zip(lines, found) for _ in hyps]
    )
    combined = iter(h.score + 0.5 * p.mean_log_prob for h, p in zip((h for hyps in found for h in hyps), pairs))
    expected = []
    for hyps in found:
        scores = [next(combined) for _ in hyps]
        expected.append(hyps[scores.index(max(scores))].text)
    flags = ["-c", str(trained_run), "-i", str(source), "--beam", "4", "-q"]
    got = run_cli("translate", *flags, "--reverse", str(reverse_run), "--reverse-weight", "0.5").stdout.splitlines()
    assert got == expected and got != [hyps[0].text for hyps in found], "the reverse model changed no line"
    unweighted = run_cli("translate", *flags, "--reverse", str(reverse_run), "--reverse-weight", "0").stdout
    assert unweighted.splitlines() == [hyps[0].text for hyps in found]  # weight 0: the beam's own choice
    assert forward.with_reverse(back, 0.5).translate(lines, beam=4) == expected  # from Python
    sentences = [lines[0] + ".", lines[1].capitalize() + "."]  # sentence by sentence: each one's candidates reranked
    paragraph = " ".join(sentences)
    assert split_sentences(paragraph).sentences == sentences
    reranking = ["--reverse", str(reverse_run), "--reverse-weight", "0.5", "--split-sentences"]
    by_sentence = run_cli("translate", *flags[:2], "--beam", "4", "-q", *reranking, input_text=paragraph + "\n").stdout
    each = forward.with_reverse(back, 0.5).translate(sentences, beam=4)
    assert by_sentence == " ".join(each) + "\n"
    counted = Counting(back)
    weighed = decoded(forward.with_settings(forward.settings.updated(beam=4)), lines, {}, counted, [0, 0.5])
    assert [[hyps[0].text for hyps in found] for found in weighed] == [[h[0].text for h in found], expected]
    assert counted.calls == 1  # a sweep over weights scores the candidates once

    scores_file, hyp = tmp_path / "scores.json", tmp_path / "hyp.en"
    run_cli("mt-evaluate", "-c", str(trained_run), "--split", "test", "--beam", "4", "--reverse", str(reverse_run),
            "--reverse-weight", "0.5", "-o", str(hyp), "--json", str(scores_file))  # fmt: skip
    assert hyp.read_text(encoding="utf-8").splitlines() == expected
    single = json.loads(scores_file.read_text())
    assert single["reverse_weight"] == 0.5
    swept = run_cli("mt-evaluate", "-c", str(trained_run), "--split", "test", "--beam", "4", "--reverse",
                    str(reverse_run), "--reverse-weight", "0", "0.5", "--json", str(scores_file))  # fmt: skip
    rows = json.loads(scores_file.read_text())
    assert [row["reverse_weight"] for row in rows] == [0, 0.5] and "reverse weight" in swept.stdout.splitlines()[-1]
    assert rows[1]["bleu"] == single["bleu"] and rows[1]["chrf"] == single["chrf"]  # decoded once, reranked twice
    for flags, message in [
        (["--reverse", str(trained_run)], "the reverse model translates de-en: it must translate the other way, en-de"),
        (["--reverse", str(reverse_run), "--beam", "1"], "--reverse reranks a beam's candidates: not"),
    ]:
        refused = run_cli("translate", "-c", str(trained_run), *flags, input_text="ein hund\n", check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    for command in ("mt-evaluate", "translate"):  # a weight without the model it weighs is not ignored
        weightless = run_cli(command, "-c", str(trained_run), "--reverse-weight", "0.5", input_text="", check=False)
        assert weightless.returncode == 2, (command, weightless.stderr)
        assert "--reverse-weight weighs the reverse model: give --reverse" in weightless.stderr


def test_a_server_with_a_reverse_model_reranks_every_request_and_refuses_other_searches(
    trained_run, reverse_run, tiny_corpus
):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from serving import RunningServer

    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:8]
    forward, back = mt.load_translator(trained_run, device="cpu", beam=4), mt.load_translator(reverse_run, "cpu")
    server = RunningServer(forward.with_reverse(back, 0.5))
    try:
        status, answer = server.translate({"lines": lines})
        assert status == 200 and answer["translations"] == forward.with_reverse(back, 0.5).translate(lines)
        assert answer["reverse_weight"] == 0.5 and server.request("GET", "/health")[1]["reverse_weight"] == 0.5
        for asked in ({"strategy": "greedy"}, {"strategy": "sample"}, {"beam": 1}, {"mbr": 3}):
            status, answer = server.translate({"lines": lines[:1], **asked})
            assert status == 422 and "this server reranks a beam's candidates" in answer["error"], asked
        assert server.translate({"lines": lines[:1], "strategy": "beam", "beam": 2})[0] == 200  # served after
        weighed = {}
        for weight in (0, 20):  # a request's own weight, as translate's --reverse-weight
            status, answer = server.translate({"lines": lines, "reverse_weight": weight})
            assert status == 200 and answer["reverse_weight"] == weight
            weighed[weight] = answer["translations"]
            assert weighed[weight] == forward.with_reverse(back, weight).translate(lines), weight
        assert weighed[0] != weighed[20], "the weight changed no line"
    finally:
        server.stop()
    plain = RunningServer(forward)
    try:
        status, answer = plain.translate({"lines": lines[:1], "reverse_weight": 1})
        assert status == 422 and answer["error"].startswith("reverse_weight: this server does not rerank")
    finally:
        plain.stop()
    for flags, said in (
        (["--reverse-weight", "0.5"], "--reverse-weight weighs the reverse model: give --reverse"),
        (["--reverse", str(reverse_run), "--beam", "1"], "--reverse reranks a beam's candidates: not --beam 1"),
    ):
        refused = run_cli("mt-serve", "-c", str(trained_run), *flags, check=False)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
