"""Held-out pairs that are training pairs too are counted and said: their scores measure memory."""

import json
import time

import pytest

from mt.data import overlap
from mt.data.corpus import ParallelCorpus
from mt.data.overlap import Overlap, check_held_out, count_overlap, fingerprint

from conftest import make_pairs


def corpus(pairs, shard_lines=8):
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "train", shard_lines=shard_lines)


@pytest.fixture
def splits():
    train = [(f"quelle {i}", f"source {i}") for i in range(40)] + [("", "")]
    valid = [("quelle 3", "source 3"), ("quelle 3", "source 3"), ("quelle 5", "another"), ("neu", "new"), ("", "")]
    test = [("quelle 39", "source 39"), ("neu", "new")]
    return corpus(train), {"valid": corpus(valid), "test": corpus(test)}


def test_pairs_in_training_are_counted_line_by_line_across_shards(splits):
    train, held_out = splits
    found = count_overlap(train, held_out)
    # valid: the duplicated pair twice, a source with another translation apart, an empty pair not at all
    assert found == {"valid": Overlap(5, 2, 1), "test": Overlap(2, 1, 0)}  # quelle 39 is in train's last shard
    assert str(found["valid"]) == "2 of 5 pairs (40.0%) in training, 1 more source (translated otherwise)"
    clean = count_overlap(train, {"test2016": corpus([("neu", "new"), ("quelle 5", "other")])})
    assert str(clean["test2016"]) == "none of its 2 pairs in training (1 of its sources, translated otherwise)"


def test_pairs_that_differ_in_case_spacing_or_punctuation_are_one_pair():
    """The held-out comparison sees letters and digits, case folded; a pair with none in its source never counts."""
    train = corpus([("Ein Hund rennt.", "A dog runs."), ("Zwei  Männer", "Two men"), ("…", "…"), ("Straße", "Street")])
    held = corpus(
        [("ein hund rennt", "a dog runs!"), ("zwei Männer.", "two women"), ("...", "..."), ("STRASSE", "street")]
    )
    assert count_overlap(train, {"test": held}) == {"test": Overlap(4, 2, 1)}
    mask = overlap.held_out_mask(train.src, train.tgt, overlap.held_out_pairs({"test": held}))
    assert mask.tolist() == [True, False, False, True]


def test_an_overlap_is_a_warning_and_counted_once_per_text(splits, tmp_path, monkeypatch, caplog):
    train, held_out = splits
    with caplog.at_level("INFO"):
        counted = check_held_out(train, held_out, str(tmp_path), pool_pairs=1000)
    assert counted == count_overlap(train, held_out) == overlap.recorded(train, held_out, str(tmp_path))
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "held out: valid 2 of 5 pairs (40.0%) in training" in caplog.text
    assert (
        "test 1 of 2 pairs" in caplog.text
        and "data.drop_held_out=true leaves those pairs out of training" in caplog.text
    )
    caplog.clear()
    monkeypatch.setattr(overlap, "count_overlap", lambda *a: pytest.fail("counted again"))
    with caplog.at_level("INFO"):
        check_held_out(train, held_out, str(tmp_path), pool_pairs=1000)  # from the cache, said again
    assert "held out: valid 2 of 5 pairs" in caplog.text
    monkeypatch.undo()
    caplog.clear()
    with caplog.at_level("INFO"):
        check_held_out(train, {"new": corpus([("neu", "new")])}, str(tmp_path), pool_pairs=1000)
    assert "held out: new none of its 1 pairs in training" in caplog.text  # another held-out set: counted anew
    assert [r.levelname for r in caplog.records] == ["INFO"]


def test_a_corpus_bigger_than_a_pool_is_compared_in_the_background(tmp_path, caplog):
    pairs = make_pairs(3000, seed=1)
    train, held_out = corpus(pairs, shard_lines=500), {"test": corpus(pairs[:10] + make_pairs(10, seed=9))}
    with caplog.at_level("INFO"):
        assert check_held_out(train, held_out, str(tmp_path), pool_pairs=1000) is None  # not yet known
    assert "compared with the training split in the background" in caplog.text
    records = tmp_path / "overlap"
    deadline = time.time() + 60
    while not (records.is_dir() and list(records.glob("*.json"))) and time.time() < deadline:
        time.sleep(0.05)
    (record,) = records.glob("*.json")
    assert json.loads(record.read_text()) == {"test": vars(count_overlap(train, held_out)["test"])}
    assert json.loads(record.read_text())["test"]["in_training"] >= 10


@pytest.mark.parametrize("sampling, pools", [("0", 1), ("0.2", 1), ("0.2", 3)])
def test_drop_held_out_leaves_the_valid_and_test_pairs_out_of_training(tmp_path, sampling, pools, caplog):
    """A corpus whose test pairs are training pairs too: data.drop_held_out=true trains without them
    (encoded shards, or segmentations sampled anew: of the whole, or pool by pool), counted in the filter's
    report."""
    from conftest import training_lines, write_corpus

    folder = write_corpus(tmp_path / "c", {"train": 200, "valid": 10, "test": 10})
    sides = {}
    for lang in ("de", "en"):  # the test pairs, and a valid pair, in the training split too
        lines = [(folder / f"{split}.{lang}").read_text().splitlines() for split in ("train", "test", "valid")]
        sides[lang] = lines[0] + lines[1] + lines[2][:1]
        (folder / f"train.{lang}").write_text("".join(line + "\n" for line in sides[lang]))
    held = {(fingerprint(s), fingerprint(t)) for split in ("valid", "test") for s, t in zip(*(
        (folder / f"{split}.{lang}").read_text().splitlines() for lang in ("de", "en")))}  # fmt: skip
    expected = {
        i + 1 for i, (s, t) in enumerate(zip(sides["de"], sides["en"])) if (fingerprint(s), fingerprint(t)) in held
    }
    assert set(range(201, 212)) <= expected  # the lines added, and any training pair equal to a held-out one
    kept = {}
    for drop in ("false", "true"):
        with caplog.at_level("INFO"):
            kept[drop], _, count = training_lines(folder, tmp_path / f"run{drop}", f"data.drop_held_out={drop}",
                f"data.cache_dir={tmp_path / 'cache'}", f"train.subword_sampling={sampling}", "data.shard_lines=75",
                f"data.pool_pairs={75 if pools > 1 else 400_000}")  # fmt: skip
        assert count == pools
    assert kept["false"] == set(range(1, 212))
    assert kept["true"] == set(range(1, 212)) - expected
    assert f"{len(expected)} that are valid or test pairs" in caplog.text
