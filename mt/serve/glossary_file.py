"""The server's glossary file, read again when it changes: terminology is edited while a server runs, and a
restart would drop the requests it is decoding. An edit that no longer reads (a line without a tab, say)
leaves the last good glossary in use, with the error logged and shown by /health, until it is mended."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from mt.decoding.glossary import Glossary, load_glossary
from mt.errors import MTError

log = logging.getLogger(__name__)


class GlossaryFile:
    def __init__(self, path: str | Path, languages: tuple, ignore_case: bool = False, every: float = 1.0):
        """The glossary of path, matched as the model's source language is written (load_glossary), looked
        at again at most every `every` seconds. A file that does not read at the start is the one-line error
        of Glossary.load."""
        self.path, self.languages, self.ignore_case, self.every = Path(path), languages, ignore_case, every
        self.stamp = self._stamp()
        self.glossary: Glossary = load_glossary(str(path), languages, ignore_case)
        self.error: str | None = None  # why the file as it is now is not the glossary in use
        self.checked = time.monotonic()
        self.lock = threading.Lock()

    def due(self) -> bool:
        """Whether current() looks at the file (and may read it again) rather than answer at once."""
        return time.monotonic() - self.checked >= self.every

    def current(self) -> Glossary:
        """The glossary in use: the file's, read again where its time or size changed since it was read."""
        if not self.due():
            return self.glossary
        with self.lock:
            self.checked = time.monotonic()
            stamp = self._stamp()
            if stamp != self.stamp:
                self.stamp = stamp
                self._read_again()
        return self.glossary

    def _read_again(self) -> None:
        try:
            self.glossary = load_glossary(str(self.path), self.languages, self.ignore_case)
        except (MTError, OSError) as err:
            self.error = str(err)
            log.warning("glossary not read again, the last good one stays in use: %s", err)
            return
        self.error = None
        count = len(self.glossary.entries)
        log.info("glossary %s read again: %d %s", self.path, count, "entry" if count == 1 else "entries")

    def _stamp(self) -> tuple[int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_mtime_ns, found.st_size
