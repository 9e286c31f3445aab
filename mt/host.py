"""What the machine gives this process, asked without importing torch (the CTranslate2 engine and
tokenizer training run without it)."""

from __future__ import annotations

import ctypes
import os
import signal


def cpu_cores() -> int:
    """How many CPU cores this process may use (usable_cores)."""
    return len(usable_cores())


def usable_cores() -> list[int]:
    """The CPU cores this process may use: its affinity mask on Linux, every core elsewhere (macOS and
    Windows have no os.sched_getaffinity)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def die_with_parent(parent: int) -> None:
    """In a child process (Linux): be sent SIGTERM when the parent dies, even by a signal it cannot catch;
    otherwise a worker would wait on its queue, or encode, forever."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


# Helper processes that work ahead of training (encoding shards, sampling segmentations) run at this lower
# priority: on a machine with few cores, training threads that share them with a helper wait on each other
# (one 2-core update took 14 s beside the encoder instead of 0.3 s); the helper takes what is idle.
BACKGROUND_NICE = 15


def start_background_worker(parent: int) -> None:
    """In a helper process: die with the parent, and yield the CPU to it."""
    die_with_parent(parent)
    os.nice(BACKGROUND_NICE)
