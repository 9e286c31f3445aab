"""Parallel text as one tab-separated file per split (`train.tsv`, as WMT, ParaCrawl and Tatoeba publish
corpora): each line the same pair in several languages, one column each.

Fields are raw text split on tabs, with no quoting: a `"` is a character, as it is in a sentence (the CSV
reader of Hugging Face datasets would take quotes for quoting and drop them). The columns are named by,
in this order: the file's first line where it names both languages read (`de<TAB>en`; then a header, not
a pair), data.columns (`[en,de,note]`: every file's), or the pair in the file's name (`train.de-en.tsv`:
de, then en). Every line must have a field per column, so a stray tab cannot shift one sentence into
another's place; columns of other names (a licence note, say) are left out.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mt.data.compressed import compressed_form
from mt.data.corpus import SHARD_LINES, ParallelCorpus, read_shards
from mt.data.lines import not_utf8, open_text_file, read_lines
from mt.data.text_files import BOM, ScannedSide, scan_file, scan_record_path, write_atomically
from mt.errors import MTError

log = logging.getLogger(__name__)


def tsv_path(folder: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, tuple[str, str] | None] | None:
    """The tab-separated file of one split and direction in folder, and the languages its name gives in
    order: {split}.{src}-{tgt}.tsv or {split}.{tgt}-{src}.tsv (a folder of several language pairs), else
    {split}.tsv (no languages named); each also as its compressed form (.gz, ...); None if there is none."""
    for first, second in ((src_lang, tgt_lang), (tgt_lang, src_lang)):
        path = compressed_form(folder / f"{split}.{first}-{second}.tsv")
        if path is not None:
            return path, (first, second)
    path = compressed_form(folder / f"{split}.tsv")
    return (path, None) if path is not None else None


@dataclass(frozen=True)
class TsvLayout:
    """Where one direction's two sides are in a file: its columns' names, the two read, and where the pairs
    start (after a header line, if it has one)."""

    path: Path
    columns: tuple[str, ...]
    src: int  # the source's column
    tgt: int
    start: int  # the byte where the pairs start
    header: bool
    shown: Path  # how messages name the file: path, or the compressed file it was decompressed from

    @property
    def origin(self) -> str:
        return f"{self.shown}[{self.columns[self.src]},{self.columns[self.tgt]}]"

    def check(self, block: bytes, ends: np.ndarray, first_line: int) -> None:
        """A block of whole lines has a field per column on every line; else one line naming the first
        line that has not (tabs are counted per line without splitting the text)."""
        tabs = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 9)
        per_line = np.bincount(np.searchsorted(ends, tabs), minlength=len(ends))
        wrong = np.flatnonzero(per_line != len(self.columns) - 1)
        if len(wrong):
            self.refuse(first_line + int(wrong[0]), int(per_line[wrong[0]]) + 1)

    def refuse(self, line: int, fields: int) -> None:
        raise MTError(
            f"{self.shown}:{line}: {fields} tab-separated field{'s' * (fields != 1)}, expected "
            f"{len(self.columns)} ({', '.join(self.columns)})"
        )

    def pair(self, line: str) -> tuple[str, str]:
        fields = line.split("\t")
        return fields[self.src], fields[self.tgt]


def tsv_layout(
    path: Path, named: tuple[str, str] | None, src_lang: str, tgt_lang: str, columns=None, shown: Path | None = None
) -> TsvLayout:
    """How to read direction src_lang -> tgt_lang from the file at path (the module's docstring has the
    rules); named: the languages of the file's name (tsv_path), columns: data.columns, shown: the file
    messages name (the compressed file path was decompressed from)."""
    shown = shown or path
    with open_text_file(path) as f:
        first = f.readline()
    text = first.removeprefix(BOM).removesuffix(b"\n")
    try:
        fields = text.decode("utf-8").removesuffix("\r").split("\t")
    except UnicodeDecodeError as err:
        raise not_utf8(str(shown), 1, text, err.start) from None
    given = tuple(columns) if columns else None
    header = src_lang in fields and tgt_lang in fields
    if header:
        if given is not None and tuple(fields) != given:
            raise MTError(f"{shown}:1: the header names {', '.join(fields)} but data.columns=[{','.join(given)}]")
        if len(set(fields)) < len(fields):
            raise MTError(f"{shown}:1: the header names a column twice: {', '.join(fields)}")
        names = tuple(fields)
    elif given is not None or named is not None:
        names = given or named
    else:
        raise MTError(
            f"{shown}: no header naming its columns: begin it with a line '{src_lang}<TAB>{tgt_lang}' (in the "
            f"columns' order), or give data.columns=[{src_lang},{tgt_lang}] (the language of each column)"
        )
    for lang in (src_lang, tgt_lang):
        if lang not in names:
            raise MTError(f"{shown}: no column {lang!r} (columns: {', '.join(names)})")
    start = len(first) if header else 0
    return TsvLayout(path, names, names.index(src_lang), names.index(tgt_lang), start, header, shown)


def load_tsv(layout: TsvLayout) -> ParallelCorpus:
    """One direction of a tab-separated file, in memory (a valid or test split), checked line by line."""
    lines = read_lines(layout.path)[layout.header :]
    src, tgt = [], []
    for number, line in enumerate(lines, start=1 + layout.header):
        if line.count("\t") != len(layout.columns) - 1:
            layout.refuse(number, line.count("\t") + 1)
        s, t = layout.pair(line)
        src.append(s)
        tgt.append(t)
    if not src:
        raise MTError(f"{layout.shown}: empty corpus")
    return ParallelCorpus(src, tgt, layout.origin)


class TsvFile:
    """A training split as one tab-separated file, never held in memory: scanned once as AlignedTextFiles
    scans two files (UTF-8, a field per column on every line, where each shard starts, a sample for the
    tokenizer), its shards read back by seeking. The scan is kept in cache_dir as AlignedTextFiles keeps its."""

    def __init__(
        self,
        layout: TsvLayout,
        sample_size: int,
        shard_lines: int = SHARD_LINES,
        seed: int = 1,
        cache_dir: str | None = None,
    ):
        self.layout, self.origin, self.shard_lines = layout, layout.origin, shard_lines
        self._sample_size, self._seed = sample_size, seed
        how = ("tsv", layout.columns, layout.src, layout.tgt, layout.start, shard_lines)
        self._saved = scan_record_path((layout.path,), how, cache_dir)
        if self._saved is None or not self._load_scan():
            self._scan()

    def _scan(self) -> None:
        layout = self.layout
        text = hashlib.sha256(f"tsv {layout.columns} {layout.src} {layout.tgt}".encode())
        self.file = scan_file(
            layout.path,
            self.shard_lines,
            self._sample_size,
            self._seed,
            text,
            start=layout.start,
            lines_before=int(layout.header),
            check=layout.check,
        )
        self._digest = text.hexdigest()
        if not self.file.lines:
            raise MTError(f"{layout.shown}: empty corpus")
        if self._saved is not None:
            starts = self.file.shard_starts.tolist()
            record = {"digest": self._digest, "lines": self.file.lines, "end": self.file.end, "shard_starts": starts}
            write_atomically(self._saved, json.dumps(record))

    def _load_scan(self) -> bool:
        try:
            record = json.loads(self._saved.read_text())
        except (OSError, ValueError):
            return False
        starts = np.array(record["shard_starts"], dtype=np.int64)
        self.file = ScannedSide(self.layout.path, record["lines"], starts, record["end"], None)
        self._digest = record["digest"]
        log.info("data: %s as scanned before (unchanged since)", self.origin)
        return True

    def __len__(self) -> int:
        return self.file.lines

    def digest(self) -> str:
        return self._digest

    @property
    def shards(self) -> int:
        return len(self.file.shard_starts)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Shard index's pairs (lines index * shard_lines onwards), as two lists. Every line has a field
        per column (the scan saw to it), so the fields of all lines are split in one call, twice as fast
        as line by line; a count that does not add up means the file changed since."""
        text = self.file.read_text(index)
        lines = text.count("\n") + (not text.endswith("\n"))
        fields = text.removesuffix("\n").replace("\t", "\n").split("\n")
        width = len(self.layout.columns)
        if len(fields) != width * lines:
            raise MTError(f"{self.layout.shown}: changed while in use (shard {index} is not {width} fields a line)")
        return fields[self.layout.src :: width], fields[self.layout.tgt :: width]

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """Every pair's two sides (src then tgt, or one side) while they fit the sample size; else those of a
        uniform sample of that many lines."""
        if self.file.sample is None:  # the scan was read from the cache: scan again for the sample
            self._scan()
        pairs = [self.layout.pair(line.decode("utf-8")) for line in self.file.sample]
        src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
        return src + tgt if side is None else {"src": src, "tgt": tgt}[side]

    def forget_sample(self) -> None:
        self.file.sample = []

    def in_memory(self) -> ParallelCorpus:
        src, tgt = read_shards(self, range(self.shards))
        return ParallelCorpus(src, tgt, self.origin, self._digest, self.shard_lines)
