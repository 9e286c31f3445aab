"""What the machine gives this process, asked without importing torch (the CTranslate2 engine and
tokenizer training run without it)."""

from __future__ import annotations

import ctypes
import os
import signal


def cpu_cores() -> int:
    """The CPU cores this process may use: its affinity mask on Linux, every core elsewhere (macOS and
    Windows have no os.sched_getaffinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def die_with_parent(parent: int) -> None:
    """In a child process (Linux): be sent SIGTERM when the parent dies, even by a signal it cannot catch;
    otherwise a worker would wait on its queue, or encode, forever."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)
