"""Sides of a corpus that slipped apart (a line missing from one file, or one too many) are found from the
lengths of their lines and named in a warning; the shipped Multi30k, whose sides pair line by line, passes."""

from pathlib import Path

import pytest

from mt.data.corpus import ParallelCorpus
from mt.data.misalignment import find_slip, slipped_parts

from conftest import REPO, TINY_TRAIN, run_cli, write_corpus

MULTI30K = Path(REPO) / "data" / "multi30k"


def sides(split: str) -> tuple[list[str], list[str]]:
    return tuple((MULTI30K / f"{split}.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))


def test_sides_that_pair_line_by_line_pass():
    for split in ("train", "valid", "test2016"):
        assert find_slip(*sides(split)) is None, split


@pytest.mark.parametrize("missing_from, at, shift", [("target", 500, -1), ("source", 1500, 1), ("target", 0, -1)])
def test_a_line_missing_from_one_side_is_found_near_where_it_went(missing_from, at, shift):
    src, tgt = sides("train")
    src, tgt = src[:3000], tgt[:3000]
    if missing_from == "target":
        tgt = tgt[:at] + tgt[at + 1 :] + ["one more line at the end, so that the counts agree"]
    else:
        src = src[:at] + src[at + 1 :] + ["eine Zeile mehr am Ende, damit die Zahlen stimmen"]
    found = find_slip(src, tgt, first_line=1)
    assert found.shift == shift and abs(found.line - (at + 1)) <= 3 and found.fit > 0.8 > found.given + 0.3
    said = found.said("corpus/train.{de,en}")
    assert said.startswith(f"data: corpus/train.{{de,en}}: from about line {found.line:,} on, source line N pairs")
    assert f"a line missing from the {missing_from} file" in said


def test_a_slip_after_the_last_whole_window_is_read_by_a_window_ending_with_the_file():
    """valid holds 1,014 lines: windows of 100 from line 1 end at line 1,000, and one more ends at 1,014."""
    src, tgt = sides("valid")
    found = find_slip(src, tgt[:920] + tgt[921:] + ["one more line at the end"])
    assert found.shift == -1 and abs(found.line - 921) <= 3


def test_two_lines_missing_and_line_numbers_of_a_later_shard():
    src, tgt = sides("valid")
    found = find_slip(src, tgt[:400] + tgt[402:] + ["x", "y"], first_line=50_001)
    assert found.shift == -2 and abs(found.line - 50_401) <= 3 and "2 lines missing" in found.said("v")


def test_a_slip_anywhere_in_a_training_part_shows_in_its_last_shard():
    src, tgt = sides("train")
    early = ParallelCorpus(src[:1000], tgt[:100] + tgt[101:1001], "early", shard_lines=250)
    (origin, found), *others = slipped_parts(early)  # in shard 0, which is read: where it is
    assert origin == "early" and others == [] and abs(found.line - 102) <= 3 and not found.earlier
    middle = ParallelCorpus(src[:1000], tgt[:300] + tgt[301:1001], "middle", shard_lines=250)
    [(_, found)] = slipped_parts(middle)  # in shard 1, not read: the last shard (from line 751) shows it
    assert found.earlier and found.line == 751 and found.shift == -1
    assert found.said("middle").startswith("data: middle: by line 751, source line N pairs with target line N-1")
    assert "missing from the target file somewhere before there" in found.said("middle")
    assert slipped_parts(ParallelCorpus(src[:1000], tgt[:1000], "fine", shard_lines=250)) == []


def test_a_run_warns_of_slipped_files_before_training(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    english = (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    (corpus / "train.en").write_text("".join(line + "\n" for line in english[:300] + english[301:] + ["a dog"]))
    result = run_cli(
        "mt-tokenizer", "data=files", f"data.dir={corpus}", f"hydra.run.dir={tmp_path / 'run'}", *TINY_TRAIN
    )
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "source line N pairs" in line]
    assert len(warnings) == 1 and f"{corpus}/train.{{de,en}}: from about line 3" in warnings[0], warnings
