"""A corpus without valid or test files: data.valid_from_train / data.test_from_train draw those sets from the
training split, the same pairs every time, and leave them out of training."""

import json

import pytest

import mt
from mt.data.concatenation import Concatenation
from mt.data.corpus import ParallelCorpus
from mt.data.held_out_from_train import draw
from mt.data.overlap import fingerprint

from conftest import run_cli, train_tiny, training_lines, write_corpus


def corpus(n: int, shard_lines: int) -> ParallelCorpus:
    return ParallelCorpus(
        [f"quelle {i}" for i in range(n)], [f"source {i}" for i in range(n)], "t", shard_lines=shard_lines
    )


def test_the_draw_is_disjoint_aligned_and_the_same_however_the_corpus_is_sharded():
    valid, test = draw(corpus(500, 64), 40, 25)
    assert (len(valid), len(test)) == (40, 25)
    numbers = [int(s.split()[1]) for s in valid.src + test.src]
    assert len(set(numbers)) == 65 and numbers != sorted(numbers)  # 65 different pairs, in drawn (random) order
    assert all(t == s.replace("quelle", "source") for s, t in zip(valid.src + test.src, valid.tgt + test.tgt))
    again, _ = draw(corpus(500, 7), 40, 25)  # other shards, the same text: the same pairs
    assert again.src == valid.src and again.tgt == valid.tgt
    only_valid, no_test = draw(corpus(500, 64), 40, 0)
    assert only_valid.src == valid.src and no_test is None
    assert draw(corpus(501, 64), 40, 25)[0].src != valid.src  # another corpus, another draw
    with pytest.raises(mt.MTError, match="more than half of the 500 training pairs"):
        draw(corpus(500, 64), 200, 51)
    whole = corpus(500, 64)  # several training splits read as one: drawn as that one corpus
    halves = [ParallelCorpus(whole.src[a:b], whole.tgt[a:b], "t", shard_lines=30) for a, b in ((0, 170), (170, 500))]
    assert draw(Concatenation(halves, 100, ["", ""]), 40, 25)[0].src == valid.src


def test_drawn_pairs_are_left_out_of_training_with_their_duplicates(tmp_path, caplog):
    folder = write_corpus(tmp_path / "c", {"train": 300})  # no valid or test files
    with pytest.raises(mt.MTError, match="valid.de: no such file .*data.valid_from_train=2000 holds 2,000"):
        training_lines(folder, tmp_path / "run0")
    lines = {lang: (folder / f"train.{lang}").read_text().splitlines() for lang in ("de", "en")}
    drawn = draw(ParallelCorpus(lines["de"], lines["en"], "t"), 20, 10)
    held = {(fingerprint(s), fingerprint(t)) for c in drawn for s, t in zip(c.src, c.tgt)}
    left_out = {i + 1 for i, pair in enumerate(zip(lines["de"], lines["en"])) if tuple(map(fingerprint, pair)) in held}
    assert len(left_out) >= 30  # the drawn lines, and any training pair equal to one of them
    with caplog.at_level("INFO"):
        kept, _, _ = training_lines(
            folder, tmp_path / "run", "data.valid_from_train=20", "data.test_from_train=10", "data.test_split=test"
        )
    assert kept == set(range(1, 301)) - left_out
    assert f"{len(left_out)} that are valid or test pairs" in caplog.text


def test_a_run_scores_the_drawn_test_set_and_evaluate_finds_the_same_pairs(tmp_path):
    folder = write_corpus(tmp_path / "c", {"train": 400})
    run = tmp_path / "run"
    options = ["data.valid_from_train=30", "data.test_from_train=30", "train.max_steps=40"]
    out = train_tiny(folder, run, *options)
    said = out.stderr + out.stdout
    assert "held out of training: valid 30 random pairs, test 30 random pairs" in said
    assert "in training" not in said  # drawn sets are not compared with the split they were drawn from
    results = json.loads((run / "results.json").read_text())
    assert results["split"] == "test" and results["drawn_from_train"] == {"valid": 30, "test": 30}
    assert "held_out_in_training" not in results
    final = str(run / "checkpoints" / "final.pt")
    evaluated = tmp_path / "eval.json"
    run_cli("mt-evaluate", "-c", final, "--json", str(evaluated))  # the run's test split: drawn again, the same
    assert json.loads(evaluated.read_text())["bleu"] == results["bleu"]
    refused = run_cli("mt-evaluate", "-c", final, "--output", str(folder / "train.en"), check=False)
    assert refused.returncode != 0 and "train.en: is the --split test file too" in refused.stderr


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["data.valid_from_train=-1"], "data.valid_from_train: must be >= 0"),
        (["data.src_lang=[de,fr]", "data.valid_from_train=10"], "takes one direction"),
        (["data.test_from_train=10", "data.test_split=null"], "needs data.test_split to name"),
    ],
)
def test_what_cannot_be_drawn_is_one_line(tmp_path, overrides, message):
    folder = write_corpus(tmp_path / "c", {"train": 100, "valid": 10})
    out = train_tiny(folder, tmp_path / "run", *overrides, check=False)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr
