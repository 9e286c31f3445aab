"""A line-aligned pair of text files of any size, never held in memory: one pass checks them (UTF-8,
alignment), identifies their text, notes where every shard of lines starts and draws the tokenizer's
sample; shards are then read back one at a time, by seeking.

Lines are what read_lines gives: split on "\\n" only, a leading byte-order mark dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from mt.data.corpus import SHARD_LINES, ParallelCorpus, read_shards
from mt.data.lines import not_utf8, open_text_file, split_lines
from mt.errors import MTError, counted

log = logging.getLogger(__name__)

BLOCK_BYTES = 16 << 20  # read this much at a time: memory for the scan does not grow with the file
BOM = "\ufeff".encode()


class ScannedSide:
    """One file's scan: its line count, the byte offset of every shard's first line, and its sample."""

    def __init__(self, path: Path, lines: int, shard_starts: np.ndarray, end: int, sample: list[bytes] | None):
        self.path, self.lines, self.shard_starts, self.end = path, lines, shard_starts, end
        self.sample = sample

    def read(self, shard: int) -> list[str]:
        """The lines of one shard (decoded; an error names the file and line)."""
        return split_lines(self.read_text(shard))

    def read_text(self, shard: int) -> str:
        """The text of one shard's lines, each ending in "\n" (but perhaps the file's last)."""
        start = int(self.shard_starts[shard])
        stop = int(self.shard_starts[shard + 1]) if shard + 1 < len(self.shard_starts) else self.end
        with open(self.path, "rb") as f:
            f.seek(start)
            raw = f.read(stop - start)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:  # the file changed since it was scanned
            line = 1 + raw.count(b"\n", 0, err.start)
            raise MTError(f"{self.path}: changed while in use (invalid UTF-8 in shard {shard}, line {line})") from None


def scan_file(
    path: Path,
    shard_lines: int,
    sample_size: int,
    seed: int,
    digest,
    block_bytes: int = BLOCK_BYTES,
    start: int = 0,
    lines_before: int = 0,
    check=None,
):
    """Read path once, in blocks: check every byte is UTF-8 (the error names the line), count lines, note
    where each shard of shard_lines lines starts, add the text to digest (a hashlib object, updated as
    ParallelCorpus.digest updates it for one side) and keep a uniform sample of up to sample_size lines.
    From byte start on (after lines_before lines, a header, say), each block of whole lines also passing
    check(block, ends, first_line) where one is given (ends: each line's "\n"; first_line: the file's line
    number of the block's first line)."""
    digest.update(b"\x00side\x00")
    scan = _Scan(path, shard_lines, sample_size, seed, lines_before, check)
    carry = b""
    with open_text_file(path) as f:
        f.seek(start)
        block = f.read(block_bytes)
        scan.position = start
        if start == 0 and block.startswith(BOM):
            block, scan.position = block[len(BOM) :], len(BOM)
        while block:
            block = carry + block
            cut = block.rfind(b"\n") + 1  # the block's complete lines; the rest waits for the next read
            carry, block = block[cut:], block[:cut]
            scan.add(block)
            digest.update(block)
            block = f.read(block_bytes)
    end = scan.position + len(carry)
    if carry:  # a last line without its newline
        scan.add(carry + b"\n")
        digest.update(carry + b"\n")
    return ScannedSide(path, scan.lines, np.array(scan.starts, dtype=np.int64), end, scan.reservoir.items)


class _Scan:
    """What scan_file has found so far."""

    def __init__(self, path: Path, shard_lines: int, sample_size: int, seed: int, lines_before: int = 0, check=None):
        self.path, self.shard_lines, self.lines_before, self.check = path, shard_lines, lines_before, check
        self.reservoir = Reservoir(sample_size, seed)
        self.lines = 0  # complete lines before the next block
        self.position = 0  # the file offset of the next block's first byte
        self.starts: list[int] = []  # each shard's first byte

    def add(self, block: bytes) -> None:
        """A block of whole lines: checked, shard starts noted, sampled."""
        if not block:
            return
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as err:
            line = self.lines_before + self.lines + 1 + block.count(b"\n", 0, err.start)
            raise not_utf8(str(self.path), line, block, err.start) from None
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)  # each line's "\n"
        if self.check is not None:
            self.check(block, ends, self.lines_before + self.lines + 1)
        begins = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
        first_start = -self.lines % self.shard_lines  # a shard starts at every line number divisible by shard_lines
        self.starts.extend((self.position + begins[first_start :: self.shard_lines]).tolist())
        self.reservoir.add(len(ends), lambda i: block[begins[i] : ends[i]])
        self.lines += len(ends)
        self.position += len(block)


class Reservoir:
    """Algorithm R, a batch of items at a time: after each batch, `items` is a uniform draw of `size` from
    all items seen (all of them while there are fewer), the same for the same seed however they were batched."""

    def __init__(self, size: int, seed: int):
        self.size, self.rng, self.seen = size, np.random.default_rng(seed), 0
        self.items: list = []

    def add(self, count: int, item) -> None:
        """The next count items, item(i) giving the i-th of them (only those drawn are made)."""
        fill = min(max(self.size - len(self.items), 0), count)
        self.items.extend(item(i) for i in range(fill))
        if fill < count:
            index = np.arange(fill, count)
            slots = self.rng.integers(0, self.seen + index + 1)  # item seen+i takes slot j if j < size
            taken = slots < self.size
            for i, slot in zip(index[taken].tolist(), slots[taken].tolist()):
                self.items[slot] = item(i)
        self.seen += count


class AlignedTextFiles:
    """The training split as two line-aligned files, scanned once: what a ParallelCorpus offers for
    preparation (length, origin, digest, the tokenizer's sample, lines by shard) without holding the text.

    With a cache_dir the scan's findings are kept there, keyed by the files' paths, sizes and modification
    times: a later run on the same unchanged files skips the scan (26 s for 5.5 GB on 2 cores), and scans
    again only if it needs the tokenizer's sample."""

    def __init__(
        self,
        src_path: Path,
        tgt_path: Path,
        origin: str,
        sample_size: int,
        shard_lines: int = SHARD_LINES,
        seed: int = 1,
        cache_dir: str | None = None,
    ):
        self.origin, self.shard_lines = origin, shard_lines
        self._scan_args = (src_path, tgt_path, sample_size, seed)
        self._saved = scan_record_path((src_path, tgt_path), (shard_lines,), cache_dir)
        if self._saved is None or not self._load_scan():
            self._scan()

    def _scan(self) -> None:
        src_path, tgt_path, sample_size, seed = self._scan_args
        text = hashlib.sha256()  # both sides, one after the other, as ParallelCorpus.digest hashes them
        self.src_file = scan_file(src_path, self.shard_lines, sample_size, seed, text)
        self.tgt_file = scan_file(tgt_path, self.shard_lines, sample_size, seed + 1, text)
        self._digest = text.hexdigest()
        if self.src_file.lines != self.tgt_file.lines:
            raise MTError(
                f"{src_path} has {counted(self.src_file.lines, 'line')} but {tgt_path} has "
                f"{self.tgt_file.lines:,}: the files must be line-aligned"
            )
        if not self.src_file.lines:
            raise MTError(f"{src_path}: empty corpus")
        if self._saved is not None:
            record = {"digest": self._digest}
            for name, side in (("src", self.src_file), ("tgt", self.tgt_file)):
                record[name] = {"lines": side.lines, "end": side.end, "shard_starts": side.shard_starts.tolist()}
            write_atomically(self._saved, json.dumps(record))

    def _load_scan(self) -> bool:
        try:
            record = json.loads(self._saved.read_text())
        except (OSError, ValueError):
            return False
        src_path, tgt_path = self._scan_args[:2]
        self._digest = record["digest"]
        for name, path in (("src", src_path), ("tgt", tgt_path)):
            side = record[name]
            starts = np.array(side["shard_starts"], dtype=np.int64)
            setattr(self, f"{name}_file", ScannedSide(path, side["lines"], starts, side["end"], None))
        log.info("data: %s as scanned before (unchanged since)", self.origin)
        return True

    def __len__(self) -> int:
        return self.src_file.lines

    def digest(self) -> str:
        return self._digest

    @property
    def shards(self) -> int:
        return len(self.src_file.shard_starts)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Shard index's lines of both sides (lines index * shard_lines onwards)."""
        return self.src_file.read(index), self.tgt_file.read(index)

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """The lines a tokenizer is trained on: every line of both sides (src then tgt, or of one side) while
        they fit the sample size; else a uniform sample of that size from each side."""
        if self.src_file.sample is None:  # the scan was read from the cache: scan again for the sample
            self._scan()
        sides = [self.src_file, self.tgt_file] if side is None else [getattr(self, f"{side}_file")]
        return [line.decode("utf-8") for s in sides for line in s.sample]

    def forget_sample(self) -> None:
        """Let the tokenizer's sample go once the tokenizer is made (hundreds of MB on a big corpus)."""
        self.src_file.sample, self.tgt_file.sample = [], []

    def in_memory(self) -> ParallelCorpus:
        """Every line, held as Python strings (what subword sampling's n-best tables are made from)."""
        src, tgt = read_shards(self, range(self.shards))
        return ParallelCorpus(src, tgt, self.origin, self._digest, self.shard_lines)


def scan_record_path(files: tuple[Path, ...], how: tuple, cache_dir: str | None) -> Path | None:
    """Where a scan of these files, as they are now, read as `how` says (shard lines, ...), is kept (None
    without a cache or a file to stat)."""
    if not cache_dir:
        return None
    try:
        stats = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino) for p in files]
    except OSError:
        return None  # the scan says what is wrong
    key = hashlib.sha256(repr((stats, *how)).encode()).hexdigest()[:24]
    return Path(cache_dir) / "scans" / f"{key}.json"


def write_atomically(path: Path, content: str | bytes) -> None:
    """Written aside, then renamed: never read half-written. A record that cannot be written (a cache, a
    report) costs a warning, and the next run the work again, nothing more."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
        os.replace(tmp, path)
    except OSError as err:
        log.warning("data: %s not written (%s)", path, err.strerror or err)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
