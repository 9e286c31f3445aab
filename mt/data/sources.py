"""Parallel corpora from plain text files or Hugging Face datasets, checked on the way in.

A line is what ends in "\\n": carriage returns, Unicode line separators and other characters
inside a line stay part of it, so the two sides can never shift against each other.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mt.data.languages import direction_name, directions, pair_subset, source_tag, tagged
from mt.errors import MTError

log = logging.getLogger(__name__)

# Training pairs are encoded, cached and batched in shards of this many lines (data.shard_lines): memory for
# preparation is bounded by a shard, and training starts once the first pool of shards is encoded.
SHARD_LINES = 50_000


@dataclass
class ParallelCorpus:
    src: list[str]
    tgt: list[str]
    origin: str  # where it came from, for messages
    _digest: str | None = field(default=None, repr=False, compare=False)
    shard_lines: int = field(default=SHARD_LINES, repr=False, compare=False)
    # several directions' pairs one after another (joined): each direction's (start, stop) lines
    sections: dict[str, tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def shards(self) -> int:
        return -(-len(self) // self.shard_lines)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Shard index's lines of both sides (lines index * shard_lines onwards), as AlignedTextFiles gives them."""
        start = index * self.shard_lines
        return self.src[start : start + self.shard_lines], self.tgt[start : start + self.shard_lines]

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """The lines a tokenizer is trained on: both sides (src then tgt) or one; sentencepiece samples them."""
        return self.src + self.tgt if side is None else getattr(self, side)

    def forget_sample(self) -> None:
        """Nothing to let go: the sample is the corpus."""

    def in_memory(self) -> ParallelCorpus:
        return self

    def digest(self) -> str:
        """Identifies the text: what cached tokenizers and encodings were made from (computed once)."""
        if self._digest is None:
            h = hashlib.sha256()
            for side in (self.src, self.tgt):
                h.update(b"\x00side\x00")
                for line in side:
                    h.update(line.encode("utf-8", "surrogatepass") + b"\n")
            self._digest = h.hexdigest()
        return self._digest


def read_shards(corpus, shards) -> tuple[list[str], list[str]]:
    """The lines of both sides of these shards of a corpus, in order."""
    src, tgt = [], []
    for index in shards:
        s, t = corpus.shard(index)
        src += s
        tgt += t
    return src, tgt


def split_lines(text: str) -> list[str]:
    """Split on "\\n" only (str.splitlines would also split on \\r, \\x0c, \\u2028, ...)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return lines


def decode_utf8(raw: bytes, origin: str) -> str:
    """Strict UTF-8 decoding; the error names the line that holds the bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise MTError(f"{origin}:{line}: invalid UTF-8 (byte 0x{raw[err.start]:02x})") from None


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a UTF-8 text file as a list of lines, with a clear error for every way it can be wrong."""
    path = Path(path)
    with _open_text_file(path) as f:
        raw = f.read()
    text = decode_utf8(raw, str(path))
    return split_lines(text.removeprefix("\ufeff"))


def read_line_chunks(path: str | os.PathLike | None, size: int) -> Iterator[list[str]]:
    """The lines of a UTF-8 text file (or stdin, for None) in lists of up to size lines, read as they are
    needed: memory stays flat with the input's length. Lines and errors as read_lines gives them (split on
    "\n" only; a bad byte names its line), but an error after the first chunk comes after earlier chunks."""
    if path is None:
        yield from _chunks(sys.stdin.buffer, "<stdin>", size)
        return
    path = Path(path)
    with _open_text_file(path) as f:
        yield from _chunks(f, str(path), size, bom=True)


def count_lines(path: str | os.PathLike) -> int:
    """The number of lines read_lines gives for path, counted in blocks without decoding: a cheap first pass,
    so that files which must be line-aligned are refused before any work on them."""
    lines, last = 0, b"\n"
    with _open_text_file(Path(path)) as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


# Compressed files, by their first bytes and by name, and the command that decompresses one beside itself.
COMPRESSED = {b"\x1f\x8b": ("gzip", ".gz", "gunzip -k"), b"\xfd7zXZ\x00": ("xz", ".xz", "unxz -k"),
              b"BZh": ("bzip2", ".bz2", "bunzip2 -k"), b"\x28\xb5\x2f\xfd": ("zstd", ".zst", "unzstd")}  # fmt: skip


def missing_file(path: Path, *others: Path, partners: tuple[Path, ...] = ()) -> str:
    """The one line for a file that is not there, nor any of others (files that would do instead), naming a
    compressed form of one of them or of its partners (the files that go with it) where there is one."""
    for wanted in (path, *partners, *others):
        for _, suffix, command in COMPRESSED.values():
            packed = Path(f"{wanted}{suffix}")
            if packed.is_file():
                return f"{wanted}: no such file, but {packed.name} is: decompress it first ({command} {packed})"
    return f"{path}: no such file" + (f" (nor {', '.join(map(str, others))})" if others else "")


def _open_text_file(path: Path):
    """path opened for reading bytes, or a one-line error: missing, a directory, unreadable, compressed or
    binary."""
    if not path.exists():
        raise MTError(missing_file(path))
    if path.is_dir():
        raise MTError(f"{path}: is a directory, expected a text file")
    try:
        f = path.open("rb")
        head = f.read(8192)
        f.seek(0)
    except OSError as err:
        raise MTError(f"{path}: cannot read ({err.strerror})") from None
    for magic, (kind, _, command) in COMPRESSED.items():
        if head.startswith(magic) and _undecodable(head):
            f.close()
            raise MTError(f"{path}: {kind}-compressed, expected UTF-8 text: decompress it first ({command} {path})")
    if b"\x00" in head and not _looks_like_text(head):
        f.close()
        raise MTError(f"{path}: looks like a binary file, expected UTF-8 text")
    return f


def _undecodable(head: bytes) -> bool:
    """Not UTF-8 (a text may begin "BZh"; a compressed stream soon holds a byte UTF-8 cannot start)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.end < len(head) or len(head) < 4  # a truncated last character is no proof
    return False


def _chunks(stream, origin: str, size: int, bom: bool = False) -> Iterator[list[str]]:
    chunk: list[str] = []
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise MTError(f"{origin}:{number}: invalid UTF-8 (byte 0x{raw[err.start]:02x})") from None
        if bom and number == 1:
            line = line.removeprefix("\ufeff")
        chunk.append(line.removesuffix("\n"))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _looks_like_text(head: bytes) -> bool:
    """NUL bytes are legal UTF-8 and may sit inside a line; only a file of many (>10%) is binary."""
    return head.count(b"\x00") * 10 <= len(head)


def pair_files(folder: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path, str]:
    """The files of one split and direction in folder, and their name for messages: {split}.{src_lang} and
    {split}.{tgt_lang}, or where a folder holds corpora of several language pairs, {split}.{src}-{tgt}.{lang}
    (fairseq's naming; the pair in either order), which win when both exist."""
    for pair in (f"{src_lang}-{tgt_lang}", f"{tgt_lang}-{src_lang}"):
        stem = folder / f"{split}.{pair}"
        src, tgt = Path(f"{stem}.{src_lang}"), Path(f"{stem}.{tgt_lang}")
        if src.is_file() and tgt.is_file():
            return src, tgt, f"{stem}.{{{src_lang},{tgt_lang}}}"
    stem = folder / split
    return Path(f"{stem}.{src_lang}"), Path(f"{stem}.{tgt_lang}"), f"{stem}.{{{src_lang},{tgt_lang}}}"


def split_files(folder: Path, split: str, src_lang: str, tgt_lang: str, columns=None):
    """Where one split and direction is in folder: a file per language (pair_files: src, tgt and their name)
    where either is there; else one tab-separated file's layout (mt/data/tsv_files.py); neither is an error
    that names both."""
    src, tgt, origin = pair_files(folder, split, src_lang, tgt_lang)
    if src.exists() or tgt.exists():
        return src, tgt, origin
    from mt.data.tsv_files import tsv_layout, tsv_path  # here: tsv_files builds on this module

    found = tsv_path(folder, split, src_lang, tgt_lang)
    if found is None:
        raise MTError(missing_file(src, folder / f"{split}.tsv", partners=(tgt,)))
    return tsv_layout(*found, src_lang, tgt_lang, columns)


def load_files(folder: str, split: str, src_lang: str, tgt_lang: str, columns=None) -> ParallelCorpus:
    """One split and direction of the text files in folder, line-aligned: a file per language (pair_files),
    or one tab-separated file of the split where there are none (mt/data/tsv_files.py; columns:
    data.columns)."""
    folder_path = Path(folder)
    if not folder_path.is_dir():
        raise MTError(f"data.dir={folder}: no such directory")
    found = split_files(folder_path, split, src_lang, tgt_lang, columns)
    if not isinstance(found, tuple):
        from mt.data.tsv_files import load_tsv  # here: tsv_files builds on this module

        return load_tsv(found)
    src_path, tgt_path, origin = found
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise MTError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the files must be line-aligned")
    if not src:
        raise MTError(f"{src_path}: empty corpus")
    return ParallelCorpus(src, tgt, origin)


def _hub_reachable(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _offline_hint(name: str) -> str:
    return (
        f"cannot load dataset {name!r} from the Hugging Face hub (offline?). "
        "Use local files instead: data=multi30k (the copy shipped in data/multi30k), or "
        "data=files data.dir=DIR data.src_lang=de data.tgt_lang=en"
    )


def _load_hub_dataset(name: str, subset: str | None):
    """A dataset from a local folder (saved, or raw data files) or from the hub.

    Without a connection the hub client would retry for minutes: go offline at once instead,
    so a cached copy still loads and a missing one fails fast with a hint.
    """
    local = Path(name)
    offline = not local.is_dir() and not _hub_reachable()
    if offline:
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets

    if local.is_dir() and any(local.glob("*.tsv")):
        log.warning(
            "data: %s: datasets reads .tsv files as CSV: a '\"' in a sentence is taken for quoting and dropped; "
            "for raw tab-separated text, data=files data.dir=%s (docs/data.md#one-tab-separated-file-per-split)",
            name,
            name,
        )
    try:
        if (local / "dataset_dict.json").exists():
            return datasets.load_from_disk(str(local))
        return datasets.load_dataset(str(local) if local.is_dir() else name, subset)
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds; all mean "not loadable"
        if offline:
            raise MTError(_offline_hint(name)) from None
        raise MTError(f"cannot load dataset {name!r}: {err}") from None


_hub_cache: dict = {}


def hub_table(name: str, subset: str | None, split: str, src_lang: str, tgt_lang: str):
    """One split of a Hugging Face dataset (Arrow: memory-mapped where it was saved or cached), checked for
    a column per language or a 'translation' dict; and its name for messages."""
    if (name, subset) not in _hub_cache:
        _hub_cache[name, subset] = _load_hub_dataset(name, subset)
    dataset = _hub_cache[name, subset]
    if split not in dataset:
        raise MTError(f"dataset {name!r} has no split {split!r} (it has: {', '.join(dataset)})")
    table, origin = dataset[split], f"{name}[{split}]"
    if "translation" not in table.column_names:
        for lang in (src_lang, tgt_lang):
            if lang not in table.column_names:
                raise MTError(f"{origin}: no column {lang!r} (columns: {', '.join(table.column_names)})")
    if not len(table):
        raise MTError(f"{origin}: empty corpus")
    return table, origin


def hub_lines(table, start: int, stop: int, lang: str) -> list[str]:
    """Rows start..stop of one language, a missing value as an empty line."""
    rows = table[start:stop]
    values = [pair[lang] for pair in rows["translation"]] if "translation" in rows else rows[lang]
    return [value or "" for value in values]


def load_hub(name: str, subset: str | None, split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """One split of a Hugging Face dataset with a column per language or a 'translation' dict, in memory."""
    table, origin = hub_table(name, subset, split, src_lang, tgt_lang)
    return ParallelCorpus(hub_lines(table, 0, len(table), src_lang), hub_lines(table, 0, len(table), tgt_lang), origin)


def load_split(data_cfg, split: str, src_lang: str | None = None, tgt_lang: str | None = None) -> ParallelCorpus:
    """Load one split as configured (data.source = files | hub), in the config's direction or the one given."""
    src_lang, tgt_lang = src_lang or data_cfg.src_lang, tgt_lang or data_cfg.tgt_lang
    if data_cfg.source == "files":
        return load_files(data_cfg.dir, split, src_lang, tgt_lang, getattr(data_cfg, "columns", None))
    return load_hub(data_cfg.name, pair_subset(data_cfg.subset, src_lang, tgt_lang), split, src_lang, tgt_lang)


def load_directions(data_cfg, split: str) -> dict[str, ParallelCorpus]:
    """One split in each direction of the config ("de-en": its pairs), each direction's sources tagged with
    its target language where the model has several (mt/data/languages.py)."""
    found = {}
    for src_lang, tgt_lang in directions(data_cfg):
        corpus = load_split(data_cfg, split, src_lang, tgt_lang)
        corpus.src = tagged(corpus.src, source_tag(data_cfg, tgt_lang))
        found[direction_name(src_lang, tgt_lang)] = corpus
    return found


def joined(corpora: dict[str, ParallelCorpus]) -> ParallelCorpus:
    """Several directions' pairs as one corpus (a multilingual run's validation set); one as itself."""
    if len(corpora) == 1:
        return next(iter(corpora.values()))
    parts, sections, start = list(corpora.values()), {}, 0
    for direction, corpus in corpora.items():
        sections[direction], start = (start, start + len(corpus)), start + len(corpus)
    return ParallelCorpus(
        [line for c in parts for line in c.src],
        [line for c in parts for line in c.tgt],
        " + ".join(c.origin for c in parts),
        sections=sections,
    )
