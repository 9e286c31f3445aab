"""Scores as sacreBLEU gives them, and the paired significance test that says whether two systems differ."""

import random

import pytest

from mt.metrics import paired_test, score

from conftest import make_pairs


@pytest.fixture(scope="module")
def systems():
    """References and four systems: the references with every 7th line garbled, with every 2nd, the first
    again under another name, and the first with one line other."""
    references = [t for _, t in make_pairs(200, seed=5)]
    rng = random.Random(0)

    def garbled(every):
        shuffled = [" ".join(rng.sample(r.split(), len(r.split()))) for r in references]
        return [s if i % every == 0 else r for i, (r, s) in enumerate(zip(references, shuffled))]

    good, worse = garbled(7), garbled(2)
    near = [*good[:3], references[3] + " here", *good[4:]]  # one line other than good's
    return references, [("good", good), ("worse", worse), ("good again", list(good)), ("near", near)]


def test_a_paired_test_tells_a_real_difference_from_none(systems):
    references, named = systems
    rows, signatures, samples = paired_test(named, references, samples=200)
    assert samples == 200 and "bs:200" in signatures[0] and "bs:200" in signatures[1]
    for row, (name, hypotheses) in zip(rows, named):  # the scores are the ones mt-evaluate prints
        plain = score(hypotheses, references)
        assert (row["hyp"], row["bleu"], row["chrf"]) == (name, plain.bleu, plain.chrf)
    base, worse, same, near = rows
    assert "bleu_p" not in base and worse["bleu"] < base["bleu"]
    assert worse["bleu_p"] < 0.05 and worse["chrf_p"] < 0.05  # every 2nd line garbled: not chance
    assert same["bleu_p"] == same["chrf_p"] == 1.0  # no difference at all
    assert near["bleu"] != base["bleu"] and near["bleu_p"] > 0.05 and near["chrf_p"] > 0.05  # a line: chance
    assert all(r["bleu_ci"] > 0 and r["chrf_ci"] > 0 for r in rows)
    assert paired_test(named, references, samples=200)[0] == rows  # seeded: the same every time
