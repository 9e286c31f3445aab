"""Held-out pairs that are training pairs too: a valid or test score on them measures what the model
remembers, not how it translates. Corpora cut from one crawl, or test sets built from the same source as the
training data, share pairs more often than one expects; the run counts them and says so.

A pair counts when both its sides are a training pair's, as the model reads them (tags included), once case,
spacing and punctuation are set aside (fingerprint): "A dog runs." and "a dog runs" are one sentence to a
score. A held-out source that is also a training source, with another translation, is counted apart. The
count is made once per training text and held-out set (cached, keyed by their digests); for a corpus bigger
than one pool it is made by a background process, which logs it when done, so training does not wait for
it. data.drop_held_out leaves those pairs out of training (held_out_pairs, held_out_mask: a filter of the
encoding, as max_len is).
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mt.data.text_files import write_atomically
from mt.errors import MTError, counted
from mt.host import start_background_worker

log = logging.getLogger(__name__)

_NOT_LETTER_OR_DIGIT = re.compile(r"[\W_]+")
COMPARED = "letters and digits compared, case, spacing and punctuation aside"  # in the cache key: another
# comparison, other counts


def fingerprint(text: str) -> str:
    """A sentence as the held-out comparison sees it: its letters and digits, case folded (any script)."""
    return _NOT_LETTER_OR_DIGIT.sub("", text.casefold())


@dataclass
class Overlap:
    """One held-out set against the training split."""

    pairs: int  # in the held-out set
    in_training: int  # pairs also in the training split
    source_only: int  # pairs whose source is a training source, with another translation there

    def __str__(self) -> str:
        if not self.in_training:
            said = f"none of its {self.pairs:,} pairs in training"
            return said + (f" ({self.source_only:,} of its sources, translated otherwise)" if self.source_only else "")
        said = f"{self.in_training:,} of {self.pairs:,} pairs ({100 * self.in_training / self.pairs:.1f}%) in training"
        more = counted(self.source_only, "more source")
        return said + (f", {more} (translated otherwise)" if self.source_only else "")


def count_overlap(train, held_out: dict) -> dict[str, Overlap]:
    """Each held-out set's (name: ParallelCorpus) pairs found in train (any corpus offering shards), in one
    pass over train's shards: held-out pairs and sources are sets of fingerprints, each training line a lookup."""
    prints = {name: [(fingerprint(s), fingerprint(t)) for s, t in zip(c.src, c.tgt)] for name, c in held_out.items()}
    sources = {s for pairs in prints.values() for s, _ in pairs if s}  # a source without letters says nothing
    found_pairs, found_sources = set(), set()
    for index in range(train.shards):
        src, tgt = train.shard(index)
        for s, t in zip(src, tgt):
            s = fingerprint(s)
            if s in sources:
                found_sources.add(s)
                found_pairs.add((s, fingerprint(t)))
    overlaps = {}
    for name, pairs in prints.items():
        both = sum(pair in found_pairs for pair in pairs)
        source = sum(s in found_sources for s, _ in pairs) - both
        overlaps[name] = Overlap(len(pairs), both, source)
    return overlaps


def held_out_pairs(held_out: dict) -> frozenset[tuple[str, str]]:
    """The fingerprints of every pair of the held-out sets whose source has letters or digits: the pairs
    data.drop_held_out leaves out of training."""
    pairs = ((fingerprint(s), fingerprint(t)) for corpus in held_out.values() for s, t in zip(corpus.src, corpus.tgt))
    return frozenset(pair for pair in pairs if pair[0])


def held_out_mask(src: list[str], tgt: list[str], pairs: frozenset | None):
    """Which of these lines are held-out pairs (held_out_pairs; a bool array), or None where none could be."""
    if not pairs:
        return None
    sources = {s for s, _ in pairs}  # a target is looked at only where its source is a held-out one
    mask = np.zeros(len(src), dtype=bool)
    for i, s in enumerate(map(fingerprint, src)):
        mask[i] = s in sources and (s, fingerprint(tgt[i])) in pairs
    return mask


def pairs_digest(pairs: frozenset) -> str:
    """Identifies a set of pairs, whatever the order they came in (part of the encoded cache's key)."""
    text = hashlib.sha256()
    for s, t in sorted(pairs):
        text.update(f"{s}\t{t}\n".encode("utf-8", "surrogatepass"))
    return text.hexdigest()


def report(overlaps: dict[str, Overlap], dropped: bool = False) -> None:
    """One line: a warning where a held-out set shares pairs with training (unless they are dropped from it:
    data.drop_held_out), else what was checked."""
    shared = "; ".join(f"{name} {o}" for name, o in overlaps.items() if o.in_training)
    if shared and dropped:
        log.info("held out: %s; those pairs are left out of training", shared)
    elif shared:
        log.warning(
            "held out: %s; their scores are partly the model's memory: data.drop_held_out=true leaves those "
            "pairs out of training",
            shared,
        )
    else:
        log.info("held out: %s", "; ".join(f"{name} {o}" for name, o in overlaps.items()))


def check_held_out(
    train, held_out: dict, cache_dir: str | None, pool_pairs: int, dropped: bool = False
) -> dict[str, Overlap] | None:
    """Count and report what the held-out sets share with the training split: from the cache if counted
    before, else now (a corpus of up to pool_pairs lines) or in a background process (a bigger one). Returns
    the counts, or None while the background process makes them (recorded() reads them once it is done)."""
    found = recorded(train, held_out, cache_dir)
    if found is not None:
        report(found, dropped)
        return found
    record = _record_path(train, held_out, cache_dir)
    if len(train) <= pool_pairs or sys.platform != "linux":
        return _count_and_report(train, held_out, record, dropped)
    process = multiprocessing.get_context("fork").Process(
        target=_in_background, args=(train, held_out, record, dropped, os.getpid()), daemon=True
    )
    process.start()
    log.info("held out: compared with the training split in the background (said when done)")
    return None


def recorded(train, held_out: dict, cache_dir: str | None) -> dict[str, Overlap] | None:
    """The counts made before for this training text and these held-out sets, if the cache holds them."""
    record = _record_path(train, held_out, cache_dir)
    try:
        return {name: Overlap(**o) for name, o in json.loads(record.read_text()).items()} if record else None
    except (OSError, ValueError, TypeError):
        return None  # not made yet, or unreadable: counted again


def _count_and_report(train, held_out: dict, record: Path | None, dropped: bool) -> dict[str, Overlap]:
    overlaps = count_overlap(train, held_out)
    report(overlaps, dropped)
    if record is not None:
        write_atomically(record, json.dumps({name: asdict(o) for name, o in overlaps.items()}))
    return overlaps


def _in_background(train, held_out: dict, record: Path | None, dropped: bool, parent: int) -> None:
    start_background_worker(parent)
    try:
        _count_and_report(train, held_out, record, dropped)
    except MTError as err:  # the training text changed under the run: the trainer's reading says so too
        log.warning("held out: not compared (%s)", err)
    os._exit(0)  # not the parent's exit handlers


def _record_path(train, held_out: dict, cache_dir: str | None) -> Path | None:
    if not cache_dir:
        return None
    key = repr((train.digest(), sorted((name, corpus.digest()) for name, corpus in held_out.items()), COMPARED))
    return Path(cache_dir) / "overlap" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
