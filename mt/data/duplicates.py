"""Training pairs that repeat an earlier pair exactly, and copies (both sides the same text): counted
(statistics.py) and, with data.drop_duplicates and data.drop_copies, left out of training, the first of each
repeated pair kept (a filter of the encoding, as max_len is).

Crawled corpora repeat many pairs, and a pair seen many times an epoch weighs that much more in training.
They also hold untranslated sentences, the source copied as the target: of the kinds of noise Khayrallah and
Koehn (2018) added to a corpus, these hurt the most, as the model learns to copy its input.
A pair is found again by an 8-byte BLAKE2 hash of its text (both sides and the tags its source gets), the
same in every process and every run, so that a resumed or multi-process run leaves out the same lines. The
parts of a concatenation are hashed untagged with their tag beside them (a tagged source can still be a
copy); a part read more than once (data.direction_temperature) is read once, and its rounds take its first
round's verdicts: they repeat it by design. The verdicts are cached (data.cache_dir/duplicates/, keyed by the
corpus's digest and what is left out).
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from pathlib import Path

import numpy as np

from mt.data.concatenation import Repeated
from mt.data.text_files import write_atomically

log = logging.getLogger(__name__)


def base_parts(corpus) -> list[tuple[object, str, int]]:
    """The corpus as (part read once, its tag, the lines it is read to): a concatenation's parts, unrounded."""
    parts, tags = (corpus.parts, corpus.tags) if hasattr(corpus, "parts") else ([corpus], [""])
    return [(p.part if isinstance(p, Repeated) else p, tag, len(p)) for p, tag in zip(parts, tags)]


def pair_hashes(src: list[str], tgt: list[str], tag: str = "") -> np.ndarray:
    """One int64 a pair: BLAKE2b of its text, stable across processes (Python's hash() is salted per process)."""
    blake = hashlib.blake2b
    return np.frombuffer(
        b"".join(
            blake(f"{tag}\x00{s}\x00{t}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
            for s, t in zip(src, tgt)
        ),
        dtype=np.int64,
    )


KEEP, REPEAT, COPY = 0, 1, 2  # a training pair's verdict: trained on, left out as a repeat, as a copy


def is_copy(src: str, tgt: str) -> bool:
    """Both sides the same text, and not blank: an untranslated sentence."""
    return src == tgt and bool(src.strip())


def pair_verdicts(corpus, cache_dir: str | None = None, repeats: bool = True, copies: bool = False) -> np.ndarray:
    """A verdict a line of the corpus as it is read (uint8: KEEP, REPEAT, COPY): REPEAT where the pair repeats
    an earlier one (with repeats), COPY where it is a copy (with copies; each of its repeats too)."""
    what = "-".join(name for name, wanted in (("repeats", repeats), ("copies", copies)) if wanted)
    path = Path(cache_dir) / "duplicates" / f"{corpus.digest()[:24]}.{what}.npy" if cache_dir else None
    if path is not None and path.is_file():
        try:
            found = np.load(path)
            if len(found) == len(corpus) and found.dtype == np.uint8:
                return found
        except (OSError, ValueError):
            pass  # found again below
    start = time.perf_counter()
    parts = base_parts(corpus)
    hashes, copied = zip(*(hashes_and_copies(part, tag, repeats, copies) for part, tag, _ in parts))
    every_copied = np.concatenate(copied)
    verdicts = np.where(every_copied, COPY, KEEP).astype(np.uint8)
    if repeats:
        repeated = np.ones(len(every_copied), dtype=bool)
        repeated[np.unique(np.concatenate(hashes), return_index=True)[1]] = False  # the first of each kept
        verdicts[repeated & ~every_copied] = REPEAT
    rounds, start_line = [], 0
    for (_, _, size), c in zip(parts, copied):
        rounds.append(np.resize(verdicts[start_line : start_line + len(c)], size))  # rounds: the first's
        start_line += len(c)
    found = np.concatenate(rounds)
    if path is not None:
        _save(path, found)
    pairs = f"{len(verdicts):,}"
    counted = [f"{int(np.sum(verdicts == REPEAT)):,} of {pairs} pairs repeat an earlier pair"] if repeats else []
    counted += [f"{int(np.sum(verdicts == COPY)):,} of {pairs} pairs are copies of their source"] * copies
    log.info("train: %s (found in %.1fs)", "; ".join(counted), time.perf_counter() - start)
    return found


def hashes_and_copies(part, tag: str, repeats: bool = True, copies: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A part's pair hashes (none without repeats) and which of its pairs are copies (none without copies)."""
    hashes, copied = [np.zeros(0, np.int64)], [np.zeros(0, bool)]
    for index in range(part.shards):
        src, tgt = part.shard(index)
        if repeats:
            hashes.append(pair_hashes(src, tgt, tag))
        if copies:
            copied.append(np.fromiter((is_copy(s, t) for s, t in zip(src, tgt)), bool, len(src)))
        else:
            copied.append(np.zeros(len(src), bool))
    return np.concatenate(hashes), np.concatenate(copied)


def without(verdicts: np.ndarray) -> str:
    """What a cache key of encoded pairs adds for the pairs verdicts leave out, and why: their digest."""
    return " without " + hashlib.blake2b(verdicts.tobytes(), digest_size=12).hexdigest()


def lines_of(verdicts: np.ndarray | None, start: int, count: int) -> np.ndarray | None:
    """The verdicts of lines start..start+count (0-based), or None without any."""
    return None if verdicts is None else verdicts[start : start + count]


def _save(path: Path, found: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, found)
    write_atomically(path, buffer.getvalue())
