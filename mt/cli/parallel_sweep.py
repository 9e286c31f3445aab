"""mt-train -m --jobs N: a sweep's runs N at a time, each in a process of its own with its share of the machine.

One run of a small model leaves most of a machine with several GPUs idle, and a sweep of eight runs one after
another takes eight times as long. With --jobs, each run gets a GPU of its own (CUDA_VISIBLE_DEVICES), round
robin over the visible ones when there are more runs than GPUs (a launch-bound GPU has room for a second); on
a CPU each run gets cores of its own (its threads pinned there), since runs side by side that each take every
core oversubscribe them: on 2 cores, two runs of 2 threads each trained ~20x slower each than one alone.
Each run's output goes to output.log in its run directory; this process says when each starts and ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mt.errors import MTError, said_error
from mt.host import cpu_cores, die_with_parent, usable_cores

JOBS_FLAGS = ("-j", "--jobs")
# Set in each run's process to the line that says which preset was chosen for the machine (or ""): its
# start() runs it as one run of the parent's sweep, already checked, and logs that line.
SWEEP_RUN = "MT_SWEEP_RUN"
OUTPUT = "output.log"
POLL_SECONDS = 0.5
STATUS_SECONDS = 300  # how often the sweep says where each of its running runs is
HYDRA_FOOTERS = ("Set the environment variable HYDRA_FULL_ERROR", "See https://hydra.cc")


def take_jobs_flag(argv: list[str]) -> tuple[list[str], int]:
    """argv without --jobs N (--jobs=N, -j N), and N (1 when not given)."""
    rest, jobs, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        flag, given, value = arg.partition("=")
        if flag in JOBS_FLAGS:
            if not given:
                value = argv[i + 1] if i + 1 < len(argv) else ""
                i += 1
            if not value.isdigit() or int(value) < 1:
                raise MTError(f"{flag} {value}".strip() + ": the number of runs at once, 1 or more")
            jobs = int(value)
        else:
            rest.append(arg)
        i += 1
    return rest, jobs or 1


@dataclass(frozen=True)
class Share:
    """What one run of the sweep may use: a GPU (None: the CPU) and CPU cores."""

    gpu: str | None
    cores: tuple[int, ...]

    def env(self) -> dict[str, str]:
        env = {"OMP_NUM_THREADS": str(len(self.cores))}
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        return env

    def pin(self) -> None:
        """In the run's process before it starts: the CPU's runs keep to their cores (Linux)."""
        if self.gpu is None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.cores)

    def __str__(self) -> str:
        if self.gpu is not None:
            return f"GPU {self.gpu}"
        first, last = self.cores[0], self.cores[-1]
        return f"core {first}" if len(self.cores) == 1 else f"cores {first}-{last}"


def cores_to_share() -> list[int]:
    """The cores the sweep's runs are pinned to: this process's, as many as its CPU quota allows
    (mt.host.cpu_cores), so that runs with a core each do not together outrun a container's limit."""
    return usable_cores()[: cpu_cores()]


def shares(jobs: int, gpus: list[str] | None, cores: list[int]) -> list[Share]:
    """jobs shares of the machine: with GPUs (their CUDA_VISIBLE_DEVICES names), one each, taken in turn,
    and an equal part of the cores' threads; without, an equal part of the cores each (a core each, some
    shared, when there are more runs than cores)."""
    if len(cores) >= jobs:
        per = len(cores) // jobs
        parts = [tuple(cores[i * per : (i + 1) * per]) for i in range(jobs)]
    else:
        parts = [(cores[i % len(cores)],) for i in range(jobs)]
    if gpus:
        return [Share(gpus[i % len(gpus)], parts[i]) for i in range(jobs)]
    return [Share(None, part) for part in parts]


def visible_gpus() -> list[str]:
    """The GPUs a run here may use, as CUDA_VISIBLE_DEVICES names them."""
    import torch

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [name.strip() for name in listed.split(",") if name.strip()][: torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


@dataclass
class Started:
    name: str
    label: str  # [3/8] name
    share: Share
    process: subprocess.Popen
    output: Path
    since: float


def run_parallel(
    module: str, runs: list[tuple[str, list[str]]], sweep_dir: Path, jobs: int, gpus: list[str] | None, chosen: str
) -> list[str]:
    """Train runs (each a run directory name under sweep_dir and its overrides) jobs at a time with
    `python -m module`, each with a share of the machine (gpus: the GPUs to share out, None for the CPU).
    chosen: the line that says which preset was chosen for the machine, or "". Returns the names of the
    runs that failed. Ctrl-C or SIGTERM here stops them all (each saves last.pt, as one run does), then
    this exits with status 130."""
    jobs = min(jobs, len(runs))  # no share kept for a run that is not there
    cores = cores_to_share()
    free = shares(jobs, gpus, cores)
    if gpus is None and jobs > len(cores):
        print(f"--jobs {jobs}: more runs at once than the {len(cores)} cores here; some share a core")
    if gpus:
        where = "a GPU each" if jobs <= len(gpus) else f"the {len(gpus)} GPUs taken in turn"
    else:
        where = "cores of their own"
    if chosen:
        print(chosen)
    print(f"sweep {sweep_dir}: {len(runs)} runs, {jobs} at a time ({where}); each run's output in its {OUTPUT}")
    pending, running, failed, stops = list(enumerate(runs, 1)), [], [], []

    def stop(signum, _frame):  # each run saves its last.pt and stops; twice: at once
        stops.append(signum)
        for started in running:
            started.process.send_signal(signal.SIGINT)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    said = time.monotonic()
    try:
        while pending and not stops or running:
            while pending and free and not stops:
                number, (name, overrides) = pending.pop(0)
                running.append(_start(module, number, len(runs), name, overrides, sweep_dir, free.pop(0), chosen))
            time.sleep(POLL_SECONDS)
            if time.monotonic() - said >= STATUS_SECONDS:
                said = time.monotonic()
                for started in running:
                    print(f"{started.label}: {progress(started.output.parent)}")
            for started in [s for s in running if s.process.poll() is not None]:
                running.remove(started)
                free.append(started.share)
                if not _report_end(started):
                    failed.append(started.name)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for started in running:  # this process is leaving for another reason: do not leave them training
            started.process.terminate()
            started.process.wait()
    if stops:
        print("sweep stopped: each run saved its last.pt; run the same command again to resume", file=sys.stderr)
        raise SystemExit(130)
    return failed


def _start(module, number, total, name, overrides, sweep_dir: Path, share: Share, chosen: str) -> Started:
    """One run in a process of its own: a sweep of one run whose folder is the run's directory."""
    run_dir = sweep_dir / name
    run_dir.mkdir(parents=True, exist_ok=True)
    own = [o for o in overrides if not o.startswith(("hydra.sweep.dir=", "hydra.sweep.subdir="))]
    folder = str(run_dir).replace("\\", "\\\\").replace("'", "\\'")  # quoted: a run's name holds = and ,
    command = [sys.executable, "-m", module, "--multirun", *own, f"hydra.sweep.dir='{folder}'", "hydra.sweep.subdir=."]
    env = {**os.environ, **share.env(), SWEEP_RUN: chosen, "PYTHONUNBUFFERED": "1"}
    parent = os.getpid()

    def before_start() -> None:
        die_with_parent(parent)  # killed here, even by SIGKILL: the run is sent SIGTERM and saves last.pt
        share.pin()

    output = run_dir / OUTPUT
    with open(output, "ab") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True, preexec_fn=before_start
        )
    print(f"[{number}/{total}] {name}: started on {share}")
    return Started(name, f"[{number}/{total}] {name}", share, process, output, time.monotonic())


def _report_end(started: Started) -> bool:
    """Say how the run ended; whether it ended well (or stopped when asked)."""
    (started.output.parent / "multirun.yaml").unlink(missing_ok=True)  # Hydra's record of a sweep of one run
    minutes = (time.monotonic() - started.since) / 60
    status = started.process.returncode
    if status == 0:
        print(f"{started.label}: ended after {minutes:.1f} min")
        return True
    if status == 130:
        print(f"{started.label}: stopped after {minutes:.1f} min (it saved its last.pt)")
        return True
    lines = [line for line in _tail(started.output) if line.strip() and not line.startswith(HYDRA_FOOTERS)]
    why = said_error(lines) or (lines[-1] if lines else "no output")
    print(f"{started.label}: failed (exit status {status}) after {minutes:.1f} min: {why} (see {started.output})")
    return False


def progress(run_dir: Path) -> str:
    """Where a running run is: its last logged update and speed, and its best validation BLEU so far."""
    said = []
    trained = _records(run_dir / "train.jsonl")
    if trained:
        last = trained[-1]
        said.append(f"update {last['step']:,}, {last['tgt_tokens_per_s']:,.0f} target tok/s")
    scored = [r for r in _records(run_dir / "metrics.jsonl", whole=True) if "valid_bleu" in r]
    if scored:
        best = max(scored, key=lambda r: r["valid_bleu"])
        said.append(f"best valid BLEU {best['valid_bleu']:.2f} at update {best['step']:,}")
    return "; ".join(said) or "not training yet (its data, its tokenizer)"


def _records(path: Path, whole: bool = False) -> list[dict]:
    """The complete JSON lines of a file another process is writing: those of its last 8 KB (whole: of all
    of it, for a file of a line per validation)."""
    if not path.is_file():
        return []
    found = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if whole else _tail(path)
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # cut by the 8 KB window, or half-written
            continue
        if isinstance(record, dict) and "step" in record:
            found.append(record)
    return found


def _tail(path: Path, size: int = 8192) -> list[str]:
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - size))
        return f.read().decode("utf-8", errors="replace").replace("\r", "\n").splitlines()
