"""What the machine gives this process, asked without importing torch (the CTranslate2 engine and
tokenizer training run without it)."""

from __future__ import annotations

import os


def cpu_cores() -> int:
    """The CPU cores this process may use: its affinity mask on Linux, every core elsewhere (macOS and
    Windows have no os.sched_getaffinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
