"""Text files read as lines (a compressed one, gzip, xz, bzip2 or zstd, as the text it holds), and written
compressed where their name asks for it (open_for_writing), with a one-line error for every way a file can
be wrong: missing (or there only compressed, under another name), a folder, unreadable, a corrupt or
truncated compressed stream, binary, or not UTF-8 (naming the line).

A line is what ends in "\\n": carriage returns, Unicode line separators and other characters inside a line
stay part of it, so two line-aligned files can never shift against each other.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

from mt.errors import MTError


def split_lines(text: str) -> list[str]:
    """Split on "\\n" only (str.splitlines would also split on \\r, \\x0c, \\u2028, ...)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return lines


# The byte-order marks of UTF-16, which Windows tools write, and what a file that starts with one is told.
UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
UTF16_TEXT = "UTF-16 text, expected UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)"


def decode_utf8(raw: bytes, origin: str) -> str:
    """Strict UTF-8 decoding; the error names the line that holds the bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise not_utf8(origin, raw.count(b"\n", 0, err.start) + 1, raw, err.start) from None


def not_utf8(origin: str, line: int, raw: bytes, start: int) -> MTError:
    """The one line for a byte that is not UTF-8 (at start of raw, which holds line `line`): UTF-16 text
    where the first line starts with its byte-order mark."""
    if line == 1 and start == 0 and raw.startswith(UTF16_MARKS):
        return MTError(f"{origin}: {UTF16_TEXT}")
    return MTError(f"{origin}:{line}: invalid UTF-8 (byte 0x{raw[start]:02x})")


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a UTF-8 text file as a list of lines, with a clear error for every way it can be wrong."""
    path = Path(path)
    with open_text_file(path) as f:
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
    with open_text_file(path) as f:
        yield from _chunks(f, str(path), size, bom=True)


def count_lines(path: str | os.PathLike) -> int:
    """The number of lines read_lines gives for path, counted in blocks without decoding: a cheap first pass,
    so that files which must be line-aligned are refused before any work on them."""
    lines, last = 0, b"\n"
    with open_text_file(Path(path)) as f:
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
        for _, suffix, _ in COMPRESSED.values():
            packed = Path(f"{wanted}{suffix}")
            if packed.is_file():
                return f"{wanted}: no such file, but {packed.name} is: give its name (it is read as it is)"
    return f"{path}: no such file" + (f" (nor {', '.join(map(str, others))})" if others else "")


def open_text_file(path: Path):
    """path opened for reading bytes (a compressed file as the text it holds: Decompressing), or a one-line
    error: missing, a directory, unreadable or binary."""
    if not path.exists():
        raise MTError(missing_file(path))
    if path.is_dir():
        raise MTError(f"{path}: is a directory, expected a text file")
    try:
        f = path.open("rb")
        head = f.peek(8192)[:8192]  # the bytes a read would give first, without taking them: a pipe works too
    except OSError as err:
        raise MTError(f"{path}: cannot read ({err.strerror or err})") from None
    kind = _compression(head)
    if kind is not None:
        return Decompressing(f, path, kind)
    if b"\x00" in head and not _looks_like_text(head):
        f.close()
        if head.startswith(UTF16_MARKS):
            raise MTError(f"{path}: {UTF16_TEXT}")
        raise MTError(f"{path}: looks like a binary file, expected UTF-8 text")
    return f


def unreadable_compression(path: Path, kind: str) -> MTError:
    """The one line for a compressed file whose kind this Python has no reader for (zstd before 3.14)."""
    return MTError(f"{path}: {kind}-compressed, which this Python cannot read: decompress it first "
                   f"({decompressing(path, kind)})")  # fmt: skip


class Decompressing:
    """A compressed file read as the text it holds, streamed (read, readline, lines; seek as the stream
    allows): a corrupt or truncated stream is one line naming the file, never a traceback."""

    def __init__(self, raw, path: Path, kind: str):
        opener = decompressor(kind)
        if opener is None:
            raw.close()
            raise unreadable_compression(path, kind)
        self.raw, self.path, self.stream = raw, path, opener(raw)

    def _guarded(self, method, *args):
        try:
            return method(*args)
        except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as err:
            raise MTError(f"{self.path}: cannot decompress it ({err})") from None

    def read(self, size: int = -1) -> bytes:
        return self._guarded(self.stream.read, size)

    def readline(self) -> bytes:
        return self._guarded(self.stream.readline)

    def seek(self, offset: int) -> int:
        return self._guarded(self.stream.seek, offset)

    def tell(self) -> int:
        return self.stream.tell()

    def __iter__(self):
        while line := self.readline():
            yield line

    def close(self) -> None:
        self.stream.close()
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def decompressor(kind: str):
    """How to read a stream of this kind (a function of the open compressed file), or None where Python
    lacks it (zstd: in the standard library from Python 3.14, or the zstandard package)."""
    if kind == "zstd":
        try:
            from compression import zstd  # Python >= 3.14

            return zstd.ZstdFile
        except ImportError:
            pass
        try:
            import zstandard

            return lambda raw: zstandard.ZstdDecompressor().stream_reader(raw)
        except ImportError:
            return None
    return {"gzip": lambda raw: gzip.GzipFile(fileobj=raw), "xz": lzma.LZMAFile, "bzip2": bz2.BZ2File}[kind]


def open_for_writing(path: str | os.PathLike):
    """path opened to write UTF-8 text, compressed where its name ends in .gz, .xz or .bz2 (.zst where this
    Python has zstd): what a command writes, every command reads back. Lines end in "\n" alone."""
    suffix = Path(path).suffix
    if suffix == ".zst":
        try:
            from compression import zstd  # Python >= 3.14

            return zstd.open(path, "wt", encoding="utf-8", newline="\n")
        except ImportError:
            pass
        try:
            import zstandard
        except ImportError:
            raise MTError(
                f"{path}: writing zstd needs Python 3.14 or the zstandard package; name a .gz, .xz or .bz2 file, "
                "or a plain one"
            ) from None
        return zstandard.open(path, "wt", encoding="utf-8", newline="\n")
    opener = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}.get(suffix, open)
    return opener(path, "wt", encoding="utf-8", newline="\n")


def decompressing(path: Path, kind: str) -> str:
    """The command that decompresses the file at path (of that kind of compression) beside itself."""
    return next(f"{command} {path}" for name, _, command in COMPRESSED.values() if name == kind)


def compression(path: Path) -> str | None:
    """The kind of compression of the file at path (gzip, xz, bzip2, zstd), None for any other file."""
    try:
        with path.open("rb") as f:
            return _compression(f.read(8192))
    except OSError:
        return None  # reading it says what is wrong


def _compression(head: bytes) -> str | None:
    for magic, (kind, _, _) in COMPRESSED.items():
        if head.startswith(magic) and _undecodable(head):
            return kind
    return None


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
            raise not_utf8(origin, number, raw, err.start) from None
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


def write_document(path: str | None, text: str, out=None) -> None:
    """A document made whole (XLIFF, PO), to path (write_document_bytes) or, path None, to out."""
    if path is None:
        out.write(text)
        return
    write_document_bytes(path, text.encode("utf-8"))


def write_document_bytes(path: str, data: bytes) -> None:
    """A document made whole (an Office file, a book; a text as UTF-8), to path: written aside, then renamed
    (a whole document or none, with the permissions any new file gets)."""
    aside = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    try:
        with open(aside, "xb") as f:
            f.write(data)
        os.replace(aside, path)
    except OSError as err:
        raise MTError(f"{path}: writing failed ({err.strerror or err})") from None
    finally:
        aside.unlink(missing_ok=True)


def document_bytes(path: str | os.PathLike, data: bytes | None = None) -> bytes:
    """A document's bytes: data where given (a request's body, named path), else the file's; a one-line
    MTError where it cannot be read."""
    try:
        return Path(path).read_bytes() if data is None else data
    except OSError as err:
        raise MTError(f"{path}: cannot be read ({err.strerror or err})") from None


def document_lines(path: str, raw: bytes) -> tuple[list[str], str, bool]:
    """A UTF-8 document's lines, the line ending it uses (CRLF or LF), and whether it began with a byte-order
    mark (not in its first line): what it takes to write it back as it was."""
    text = decode_utf8(raw.removeprefix(b"\xef\xbb\xbf"), path)
    newline = "\r\n" if "\r\n" in text else "\n"
    return text.split(newline), newline, raw.startswith(b"\xef\xbb\xbf")
