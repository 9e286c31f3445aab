"""Training pairs that repeat an earlier pair exactly: counted (statistics.py) and, with data.drop_duplicates,
left out of training, the first of each kept (a filter of the encoding, as max_len is).

Crawled corpora repeat many pairs, and a pair seen many times an epoch weighs that much more in training.
A pair is found again by an 8-byte BLAKE2 hash of its text (both sides and the tags its source gets), the
same in every process and every run, so that a resumed or multi-process run leaves out the same lines. The
parts of a concatenation are hashed untagged with their tag beside them; a part read more than once
(data.direction_temperature) is hashed once, and its rounds take its first round's verdicts: they repeat
it by design. The verdicts are cached (data.cache_dir/duplicates/, keyed by the corpus's digest).
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


def repeated_lines(corpus, cache_dir: str | None = None) -> np.ndarray:
    """A bool a line of the corpus as it is read: True where the pair repeats an earlier one."""
    path = Path(cache_dir) / "duplicates" / f"{corpus.digest()[:24]}.npy" if cache_dir else None
    if path is not None and path.is_file():
        try:
            found = np.load(path)
            if len(found) == len(corpus):
                return found
        except (OSError, ValueError):
            pass  # found again below
    start = time.perf_counter()
    parts = base_parts(corpus)
    hashes = [
        np.concatenate([pair_hashes(*part.shard(i), tag) for i in range(part.shards)] or [np.zeros(0, np.int64)])
        for part, tag, _ in parts
    ]
    every = np.concatenate(hashes)
    repeated = np.ones(len(every), dtype=bool)
    repeated[np.unique(every, return_index=True)[1]] = False  # the first of each kept
    verdicts, start_line = [], 0
    for (_, _, size), h in zip(parts, hashes):
        verdicts.append(np.resize(repeated[start_line : start_line + len(h)], size))  # rounds: the first's
        start_line += len(h)
    found = np.concatenate(verdicts)
    if path is not None:
        _save(path, found)
    log.info(
        "train: %s of %s pairs repeat an earlier pair (found in %.1fs)",
        f"{int(repeated.sum()):,}",
        f"{len(every):,}",
        time.perf_counter() - start,
    )
    return found


def lines_of(repeated: np.ndarray | None, start: int, count: int) -> np.ndarray | None:
    """The verdicts of lines start..start+count (0-based), or None without any."""
    return None if repeated is None else repeated[start : start + count]


def _save(path: Path, found: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, found)
    write_atomically(path, buffer.getvalue())
