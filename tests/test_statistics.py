"""What mt-tokenizer says a corpus holds: lengths as the tokenizer cuts them, what the training filters would
drop (counted as training counts them), duplicate pairs and copies over every pair."""

import json
from types import SimpleNamespace

import numpy as np

from mt.config.schema import DataConfig
from mt.data.batching import encode_corpus
from mt.data.concatenation import Concatenation, Repeated
from mt.data.corpus import ParallelCorpus
from mt.data.statistics import corpus_statistics, lengths, repeats

from conftest import TINY_TRAIN, make_pairs, run_cli


class Words:
    """A tokenizer whose pieces are words: lengths anyone can count."""

    def encode_src(self, lines):
        return [[1] * len(line.split()) for line in lines]

    encode_tgt = encode_src


def test_lengths_filters_and_repeats_are_counted_as_training_counts_them():
    pairs = [("a b c", "x y z"), ("a", "x y z w v"), ("", "x"), ("same text", "same text"), ("a b c", "x y z")]
    pairs += [(" ".join("a" * 12), "x"), ("   ", "   ")]  # too long; a blank copy is no copy
    src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
    cfg = DataConfig(max_len=10, max_len_ratio=3.0)
    found = lengths(Words(), src, tgt, cfg)
    s = np.array([len(x.split()) for x in src])
    assert found["src_pieces"] == {
        "mean": round(s.mean(), 1),
        **{f"p{q}": round(np.percentile(s, q), 1) for q in (50, 95, 99)},
        "max": 12,
    }
    assert found["tgt_pieces"]["max"] == 5 and found["length_ratio"]["max"] == 12.0
    _, report = encode_corpus(Words(), ParallelCorpus(src, tgt, "x"), cfg.max_len, cfg.max_len_ratio)
    assert (found["empty_side"], found["over_max_len"], found["over_max_len_ratio"]) == (2, 1, 1)
    assert (report.empty, report.too_long, report.bad_ratio) == (2, 1, 1)
    corpus = ParallelCorpus(src * 3, tgt * 3, "x", shard_lines=4)  # repeats across shards count too
    assert repeats(corpus) == {"duplicates": 3 * len(pairs) - len(set(pairs)), "copies": 3}
    # parts of a concatenation: a tagged source can be a copy; the same pair under two tags is two pairs
    part = ParallelCorpus(["Paris", "Paris", "eins"], ["Paris", "Paris", "one"], "p", shard_lines=2)
    both = Concatenation([part, part], sample_size=10, tags=["<2en>", "<2fr>"])
    assert repeats(both) == {"duplicates": 2, "copies": 4}
    upsampled = Concatenation([part, Repeated(part, 7)], sample_size=10, tags=["<2en>", "<2fr>"])
    assert repeats(upsampled) == repeats(both)  # a part's rounds (direction_temperature) are no duplicates


def test_a_big_training_split_is_measured_on_evenly_spread_shards():
    pairs = make_pairs(100, seed=3)
    train = ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "train", shard_lines=10)
    valid = ParallelCorpus(["a b"], ["x"], "valid")
    prepared = SimpleNamespace(train=train, valid=valid, tests={"de-en": valid}, tokenizer=Words())
    found = corpus_statistics(prepared, DataConfig(test_split="test2016"), measured_pairs=30)
    assert list(found) == ["train", "valid", "test2016"] and found["train"]["pairs"] == 100
    measured = [pairs[i] for start in (0, 40, 90) for i in range(start, start + 10)]  # shards 0, 4 and 9
    expected = lengths(Words(), [s for s, _ in measured], [t for _, t in measured], DataConfig())
    assert {k: found["train"][k] for k in expected} == expected and found["train"]["measured"] == 30
    assert "duplicates" not in found["valid"] and found["valid"]["tgt_pieces"]["max"] == 1


def test_mt_tokenizer_prints_and_writes_the_statistics(tiny_corpus, tmp_path):
    run = tmp_path / "run"
    result = run_cli("mt-tokenizer", "data=files", f"data.dir={tiny_corpus}", f"hydra.run.dir={run}", *TINY_TRAIN)
    found = json.loads((run / "data_statistics.json").read_text())
    assert list(found) == ["train", "valid", "test"] and found["train"]["pairs"] == 600
    pairs = list(zip(*((tiny_corpus / f"train.{lang}").read_text().splitlines() for lang in ("de", "en"))))
    assert found["train"]["duplicates"] == len(pairs) - len(set(pairs)) and found["train"]["copies"] == 0
    log = result.stdout + result.stderr
    row = next(line for line in log.splitlines() if line.startswith("train "))
    assert row.split()[1] == "600" and "data_statistics.json" in log
    assert f"{found['train']['duplicates']} training pairs repeat an earlier pair: data.drop_duplicates=true" in log
    assert "data.drop_copies" not in log  # no copies to leave out
    assert (run / "tokenizer" / "spm.model").is_file()
