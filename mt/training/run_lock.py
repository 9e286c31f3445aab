"""One process per run directory. Two mt-train processes on one directory would both write its
checkpoints and logs (a run started twice, or a scheduler restarting a job whose old process still
lives): the second is refused at once, naming the first.

The lock is an flock on `.lock` inside the directory, held for the life of the process: the kernel
drops it when the process ends, however it ends, so a lock file left by a dead process does not block.
(flock does not reach across machines on some network file systems.)
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from mt.errors import MTError


class RunDirLock:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / ".lock"
        self._file = None

    def acquire(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise MTError(
                f"{self.run_dir}: in use by {holder}; wait for it to end or stop it, "
                "or give this run another directory (hydra.run.dir=...)"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
