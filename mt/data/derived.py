"""Files the cache derives from a corpus file (a compressed file's text, a TMX file's pairs): named after the
file's path, size, modification time and inode, so that a changed file is derived again, and written aside
then renamed, so that no reader ever meets half of one."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from mt.errors import MTError


def derived_path(source: Path, cache_dir: str, kind: str, name: str, *more) -> Path:
    """Where in cache_dir/kind/ the file `name` derived from source goes; more: what else it depends on."""
    stat = source.stat()
    key = repr((str(source.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino, *more))
    return Path(cache_dir) / kind / hashlib.sha256(key.encode()).hexdigest()[:24] / name


@contextlib.contextmanager
def written_aside(out: Path, binary: bool, cannot: str, hint: str = ""):
    """A file to write out's content into (bytes, or UTF-8 text with \\n line ends), renamed to out once the
    block ends without an error, removed otherwise. A folder that cannot be written is one line: cannot
    (what failed, e.g. "x.gz: cannot decompress it"), where, why, then hint."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-")
    except OSError as err:
        raise MTError(f"{cannot} into {out.parent} ({err.strerror}){hint}") from None
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n") as sink:
            yield sink
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
