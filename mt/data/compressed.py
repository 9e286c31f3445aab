"""Compressed training files (gzip, xz, bzip2; zstd where Python can read it) used as the text they hold.

Training reads its corpus by seeking to its shards, which a compressed stream cannot do, so a compressed
training file is decompressed once into the cache (data.cache_dir/decompressed/), keyed by the file's path,
size and modification time, and read from there like any text file. The text is checked on the way: a byte
that is not UTF-8 is an error naming the compressed file and its line. Files read once, front to back
(valid and test splits, what translate reads), stream instead (lines.Decompressing).
"""

from __future__ import annotations

import logging
import lzma
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from mt.data.derived import derived_path, written_aside
from mt.data.lines import (
    COMPRESSED,
    compression,
    decompressing,
    decompressor,
    not_utf8,
    unreadable_compression,
)
from mt.errors import MTError

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 22


def compressed_form(path: Path) -> Path | None:
    """path where it is a file, else its compressed form beside it (path.gz, .xz, .bz2, .zst); None if neither."""
    if path.is_file():
        return path
    for _, suffix, _ in COMPRESSED.values():
        packed = Path(f"{path}{suffix}")
        if packed.is_file():
            return packed
    return None


def plain_texts(paths: list[Path], cache_dir: str | None) -> list[Path]:
    """Each path itself where it is not compressed, else the text it holds, decompressed once into cache_dir;
    files not decompressed before are decompressed together, a thread each (zlib, lzma and bz2 let go of
    the GIL: the two sides of a corpus take the time of the larger, not the sum)."""
    found = [_cached_copy(path, cache_dir) for path in paths]
    todo = [(path, *copy) for path, copy in zip(paths, found) if copy is not None and not copy[0].is_file()]
    if todo:
        bar = tqdm(
            total=sum(path.stat().st_size for path, *_ in todo),
            unit="B",
            unit_scale=True,
            desc=f"decompressing {', '.join(path.name for path, *_ in todo)}",
            leave=False,
            disable=None,
        )
        with bar, ThreadPoolExecutor(len(todo)) as pool:
            list(pool.map(lambda job: _decompress_into(*job, bar), todo))
    return [path if copy is None else copy[0] for path, copy in zip(paths, found)]


def _cached_copy(path: Path, cache_dir: str | None):
    """Where the text of path, if it is compressed, is kept in cache_dir, and how to read the compressed file;
    None for a file that is not compressed (or not there: reading it says so)."""
    kind = compression(path)
    if kind is None:
        return None
    undo = f"or decompress it first ({decompressing(path, kind)})"
    opener = decompressor(kind)
    if opener is None:
        raise unreadable_compression(path, kind)
    if not cache_dir:
        raise MTError(f"{path}: {kind}-compressed: reading it needs data.cache_dir to decompress it into, {undo}")
    name = path.name.removesuffix(next(s for k, s, _ in COMPRESSED.values() if k == kind))
    return derived_path(path, cache_dir, "decompressed", name or "text"), opener, undo


def _decompress_into(path: Path, out: Path, opener, undo: str, bar: tqdm) -> None:
    """The text of path, checked, written to out atomically (a temporary file beside it, renamed)."""
    start = time.perf_counter()
    with written_aside(out, True, f"{path}: cannot decompress it", f", {undo}") as sink:
        lines = _decompress(path, opener, sink, bar)
    seconds, size = time.perf_counter() - start, out.stat().st_size / 1e6
    log.info("data: %s decompressed into %s (%s lines, %.1f MB, %.1f s)", path, out, f"{lines:,}", size, seconds)


def _decompress(path: Path, opener, sink, bar: tqdm) -> int:
    """Copy path's text into sink, checking it is UTF-8 line by line (bar counts the compressed bytes read);
    its line count."""
    lines, carry, done = 0, b"", 0
    with path.open("rb") as raw, opener(raw) as stream:
        try:
            while block := stream.read(BLOCK_BYTES):
                block = carry + block
                cut = block.rfind(b"\n") + 1  # complete lines are checked now, the rest with the next block
                carry = block[cut:]
                _check_utf8(block[:cut], path, lines)
                lines += block.count(b"\n", 0, cut)
                sink.write(block[:cut])
                bar.update(raw.tell() - done)
                done = raw.tell()
        except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as err:
            raise MTError(f"{path}: cannot decompress it after line {lines:,} ({err})") from None
    _check_utf8(carry, path, lines)
    sink.write(carry)
    return lines + bool(carry)


def _check_utf8(block: bytes, path: Path, lines_before: int) -> None:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as err:
        line = lines_before + block.count(b"\n", 0, err.start) + 1
        raise not_utf8(str(path), line, block, err.start) from None
