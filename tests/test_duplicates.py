"""Training pairs that repeat an earlier pair, and copies (the source as the target): found the same in every
process and run, and left out of training with data.drop_duplicates (the first of each kept) and
data.drop_copies, whichever way the corpus is encoded."""

import subprocess
import sys

import pytest

from mt.data import duplicates
from mt.data.concatenation import Concatenation, Repeated
from mt.data.corpus import ParallelCorpus
from mt.data.duplicates import COPY, KEEP, REPEAT, pair_hashes, pair_verdicts

from conftest import REPO, training_lines, write_corpus


def corpus(pairs, shard_lines=2):
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "p", shard_lines=shard_lines)


def test_each_repeat_after_the_first_and_each_copy_is_found_across_shards_parts_and_rounds(tmp_path, monkeypatch):
    first = corpus([("a", "x"), ("b", "y"), ("a", "x"), ("c", "z"), ("b", "y"), ("q", "q"), (" ", " "), ("q", "q")])
    second = corpus([("a", "x"), ("d", "w"), ("d", "w")])
    both = Concatenation([first, Repeated(second, 7)], sample_size=10, tags=["", "<bt>"])  # <bt> a: a new pair
    found = pair_verdicts(both, str(tmp_path))
    K, R, C = KEEP, REPEAT, COPY
    assert found.tolist() == [K, K, R, K, R, K, K, R] + [K, K, R] * 2 + [K]  # " " is blank: no copy
    assert pair_verdicts(both, copies=True).tolist() == [K, K, R, K, R, C, K, C] + [K, K, R] * 2 + [K]
    assert pair_verdicts(both, repeats=False, copies=True).tolist() == [K] * 5 + [C, K, C] + [K] * 7
    untagged = Concatenation([first, second], sample_size=10)
    assert pair_verdicts(untagged).tolist()[8:] == [R, K, R]  # a x was in the first part
    monkeypatch.setattr(duplicates, "pair_hashes", lambda *a: pytest.fail("the verdicts are cached"))
    assert pair_verdicts(both, str(tmp_path)).tolist() == found.tolist()


def test_a_pairs_hash_is_the_same_in_another_process():
    """Python's hash() of a str changes with each process: the verdicts must not, or a resumed run would
    leave out other lines than the run it resumes."""
    pairs = (["ein hund", "zwei katzen", ""], ["a dog", "two cats", ""])
    here = pair_hashes(*pairs, "<2en>").tolist()
    code = f"from mt.data.duplicates import pair_hashes; print(pair_hashes(*{pairs!r}, '<2en>').tolist())"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert there.stdout.strip() == str(here) and len(set(here)) == 3
    assert pair_hashes(["a"], ["b"], "").tolist() != pair_hashes(["a"], ["b"], "<bt>").tolist()
    assert pair_hashes(["a b"], ["c"]).tolist() != pair_hashes(["a"], ["b c"]).tolist()


@pytest.mark.parametrize("sampling, pools", [("0", 1), ("0.2", 1), ("0.2", 3)])
def test_drop_duplicates_and_copies_leave_them_out_of_training(tmp_path, sampling, pools, caplog):
    """Every third training pair repeated later on, and every tenth pair's source made its target:
    data.drop_duplicates=true and data.drop_copies=true train on the rest and on the first of each repeated
    pair (encoded shards, or segmentations sampled anew: of the whole, or pool by pool), counted in the report."""
    folder = write_corpus(tmp_path / "c", {"train": 150, "valid": 10, "test": 10})
    sides = {lang: (folder / f"train.{lang}").read_text().splitlines() for lang in ("de", "en")}
    sides["en"] = [de if i % 10 == 4 else en for i, (de, en) in enumerate(zip(sides["de"], sides["en"]))]
    for lang, lines in sides.items():
        sides[lang] = lines + lines[::3]  # 50 pairs again, after all the others
        (folder / f"train.{lang}").write_text("".join(line + "\n" for line in sides[lang]))
    pairs = list(zip(sides["de"], sides["en"]))
    copies = {i + 1 for i, (de, en) in enumerate(pairs) if de == en}
    repeats = {i + 1 for i, pair in enumerate(pairs) if pair in pairs[:i]} - copies
    assert len(copies) == 15 + 5 and set(range(151, 201)) <= repeats | copies  # a copy's repeat is a copy too
    kept = {}
    for drop in ("false", "true"):
        with caplog.at_level("INFO"):
            kept[drop], reports, count = training_lines(folder, tmp_path / f"run{drop}", f"data.drop_duplicates={drop}",
                f"data.drop_copies={drop}", f"data.cache_dir={tmp_path / 'cache'}", "data.shard_lines=70",
                f"train.subword_sampling={sampling}", f"data.pool_pairs={70 if pools > 1 else 400_000}")  # fmt: skip
        assert count == pools
        if pools > 1:  # each pool's report counts its own
            assert sum(report.duplicates for report in reports) == (len(repeats) if drop == "true" else 0)
            assert sum(report.copies for report in reports) == (len(copies) if drop == "true" else 0)
    assert kept["false"] == set(range(1, 201))
    assert kept["true"] == set(range(1, 201)) - repeats - copies
    if sampling == "0":  # the encoded shards of one cache, leaving out the repeats alone, are others
        only_repeats, _, _ = training_lines(folder, tmp_path / "run-repeats", "data.drop_duplicates=true",
            f"data.cache_dir={tmp_path / 'cache'}", "data.shard_lines=70")  # fmt: skip
        assert only_repeats == set(range(1, 201)) - repeats - {n for n in copies if pairs[n - 1] in pairs[: n - 1]}
    assert (
        f"train: {len(repeats)} of 200 pairs repeat an earlier pair; {len(copies)} of 200 pairs are copies"
        in caplog.text
    )
    if pools == 1:  # the filter's report
        assert f"{len(repeats)} that repeat an earlier pair, {len(copies)} that are copies" in caplog.text
