"""What the machine gives this process, asked without importing torch (the CTranslate2 engine and
tokenizer training run without it)."""

from __future__ import annotations

import ctypes
import math
import os
import signal
from pathlib import Path


def cpu_cores() -> int:
    """How many CPU cores this process may use: those of its affinity mask (usable_cores), or fewer where its
    control group caps its CPU time (cpu_quota: a container's --cpus, a Kubernetes CPU limit). Threads beyond
    the quota gain nothing: together they spend it early in each period, then all wait for the next one."""
    cores = len(usable_cores())
    quota = cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cpu_quota(cgroups: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs' worth of time per period this process's control group, or one above it, may use (the
    smallest such quota), or None where there is none or it cannot be read. cgroup v2 writes it as cpu.max
    ("200000 100000": 2 CPUs; "max 100000": no limit), v1 as cpu.cfs_quota_us over cpu.cfs_period_us (-1: no
    limit). Inside a container the group's path as /proc/self/cgroup names it may not exist under the mount,
    whose root is then the container's own group: each level of the path is looked for, the root included."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # the unified (v2) hierarchy
            mounts, read = [cgroups, cgroups / "unified"], _v2_quota
        elif "cpu" in controllers.split(","):
            mounts, read = [cgroups / controllers, cgroups / "cpu", cgroups / "cpu,cpuacct"], _v1_quota
        else:
            continue
        levels = [Path(*Path(path).parts[1:i]) for i in range(len(Path(path).parts), 0, -1)]
        for mount in dict.fromkeys(mounts):
            quotas += [q for level in levels if (q := read(mount / level)) is not None]
    return min(quotas, default=None)


def _v2_quota(group: Path) -> float | None:
    try:
        quota, period = (group / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_quota(group: Path) -> float | None:
    try:
        quota = int((group / "cpu.cfs_quota_us").read_text())
        period = int((group / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


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
