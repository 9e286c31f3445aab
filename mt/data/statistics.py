"""What a run's corpora hold, as the model will read them: a look before a long run (`mt-tokenizer` prints
it and writes RUN/data_statistics.json), as Sockeye's prepare-data and fairseq's preprocess report theirs.

Per split: its pairs, the sentencepiece pieces of each side (mean, median, 95th and 99th percentile,
longest), the longer side's length over the shorter's (99th percentile, largest), and the pairs the
training filters would drop (an empty side, over data.max_len, over data.max_len_ratio). For the training
split also, over every pair: exact duplicates (a pair that repeats an earlier one; crawled corpora hold many)
and copies (both sides the same text: an untranslated sentence, which teaches the model to copy).
Lengths of a big training split are measured on evenly spread shards of it (`measured` says how many pairs).
"""

from __future__ import annotations

import logging

import numpy as np

from mt.config.validation import training_splits
from mt.data.batching import Ragged, filter_pairs
from mt.data.corpus import read_shards
from mt.data.duplicates import base_parts, hashes_and_copies

log = logging.getLogger(__name__)

MEASURED_PAIRS = 200_000  # the training pairs whose lengths are measured, at most (whole shards)


def corpus_statistics(prepared, data_cfg, measured_pairs: int = MEASURED_PAIRS) -> dict[str, dict]:
    """The statistics of each split of a prepared run (mt.data.prepare.Prepared), by split name."""
    train = prepared.train
    wanted = min(train.shards, max(1, measured_pairs // train.shard_lines))
    src, tgt = read_shards(train, np.unique(np.linspace(0, train.shards - 1, wanted).round().astype(int)).tolist())
    measured = lengths(prepared.tokenizer, src, tgt, data_cfg)
    found = {"+".join(training_splits(data_cfg)): {"pairs": len(train), **measured, **repeats(train)}}
    held_out = {data_cfg.valid_split: prepared.valid}
    for direction, corpus in prepared.tests.items():
        held_out[data_cfg.test_split if len(prepared.tests) == 1 else f"{data_cfg.test_split} {direction}"] = corpus
    for name, corpus in held_out.items():
        found[name] = {"pairs": len(corpus), **lengths(prepared.tokenizer, corpus.src, corpus.tgt, data_cfg)}
    return found


def lengths(tokenizer, src: list[str], tgt: list[str], data_cfg) -> dict:
    """Pieces per side, length ratios and what the training filters would drop, over these pairs (each
    dropped pair counted once, under the first filter it meets, as training counts them)."""
    s, t = Ragged.from_lists(tokenizer.encode_src(src)), Ragged.from_lists(tokenizer.encode_tgt(tgt))
    _, report = filter_pairs(s, t, data_cfg.max_len, data_cfg.max_len_ratio)
    s, t = s.lengths, t.lengths
    both = (s > 0) & (t > 0)
    ratio = np.maximum(s, t)[both] / np.minimum(s, t)[both]
    return {
        "measured": len(s),
        "src_pieces": _spread(s),
        "tgt_pieces": _spread(t),
        "length_ratio": {"p99": _round(np.percentile(ratio, 99)), "max": _round(ratio.max())} if len(ratio) else {},
        "empty_side": report.empty,
        "over_max_len": report.too_long,
        "over_max_len_ratio": report.bad_ratio,
    }


def repeats(corpus) -> dict:
    """Exact duplicate pairs (each after its first: what data.drop_duplicates leaves out) and copies (both
    sides the same, not blank: what data.drop_copies leaves out), over every pair of the corpus, a shard at
    a time; the parts of a concatenation read untagged, so that a tagged source can still be a copy."""
    hashes, copied = zip(*(hashes_and_copies(part, tag) for part, tag, _ in base_parts(corpus)))
    every = np.concatenate(hashes)
    return {"duplicates": int(len(every) - len(np.unique(every))), "copies": int(np.concatenate(copied).sum())}


def advice(found: dict[str, dict], data_cfg) -> list[str]:
    """What to switch on for the repeats and copies the training split holds, where they stay in training."""
    train = found["+".join(training_splits(data_cfg))]
    said = []
    if train["duplicates"] and not data_cfg.drop_duplicates:
        said.append(
            f"{train['duplicates']:,} training pairs repeat an earlier pair: data.drop_duplicates=true leaves them out"
        )
    if train["copies"] and not data_cfg.drop_copies:
        said.append(
            f"{train['copies']:,} training pairs are copies of their source: data.drop_copies=true leaves them out"
        )
    return said


def table(found: dict[str, dict]) -> str:
    """The statistics as a text table, a split a row."""
    head = ["split", "pairs", "src pieces mean/p95/max", "tgt pieces mean/p95/max", "ratio p99", "caught by filters"]
    head += ["duplicates", "copies"]
    rows = [head]
    for name, row in found.items():
        dropped = row["empty_side"] + row["over_max_len"] + row["over_max_len_ratio"]
        measured = "" if row["measured"] == row["pairs"] else f" ({row['measured']:,} measured)"
        rows.append([
            name,
            f"{row['pairs']:,}{measured}",
            *(f"{row[s]['mean']} / {row[s]['p95']} / {row[s]['max']}" for s in ("src_pieces", "tgt_pieces")),
            str(row["length_ratio"].get("p99", "-")),
            f"{dropped:,}",
            *(f"{row[key]:,}" if key in row else "-" for key in ("duplicates", "copies")),
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _spread(lengths: np.ndarray) -> dict:
    if not len(lengths):
        return {"mean": 0, "p50": 0, "p95": 0, "p99": 0, "max": 0}
    p50, p95, p99 = np.percentile(lengths, [50, 95, 99])
    spread = {"mean": lengths.mean(), "p50": p50, "p95": p95, "p99": p99}
    return {**{key: _round(value) for key, value in spread.items()}, "max": int(lengths.max())}


def _round(value) -> float:
    return round(float(value), 1)
