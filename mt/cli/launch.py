"""mt.train: mt-train from Python (a notebook, a script of experiments): `mt.train(*overrides)` runs the whole
pipeline exactly as `mt-train` does with the same overrides, and returns the run it made.

    import mt
    run = mt.train("experiment=smoke", "data=files", "data.dir=data/fr_en", "data.src_lang=fr", "data.tgt_lang=en")
    print(run.results["bleu"])
    print(run.translator().translate(["Bonjour !"]))

The run trains in a child process, its log shown here as it comes: the caller keeps a clean process (no
Hydra state, no training threads or GPU memory left behind), and a run interrupted here (Ctrl-C, a notebook's
stop button) saves its last.pt before it stops, as mt-train does; the same call resumes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from mt.cli.run_directory import Run
from mt.errors import Interrupted, MTError, said_error

TAIL = 40  # lines of the child's log kept, to tell what went wrong (and the last error line it said)


def train(*overrides: str, processes: int = 1, quiet: bool = False) -> Run:
    """Train as `mt-train *overrides` does (the same preset chosen for the machine when none is named, the same
    run directory, resumed when it holds this run) and return the run. Its log is written to sys.stdout as it
    comes (quiet=True: not at all). A problem mt-train states in one line (a bad override, bad data) is an
    MTError with that line; an interrupted run raises Interrupted after its last.pt is saved.
    processes=N: N processes train each update together, as `make train NPROC=N` does (torchrun; a GPU
    each where there are GPUs)."""
    from mt.config.schema import check_overrides, run_dir_of

    _count("mt.train", "processes", processes)
    chosen = _chosen("mt.train", overrides)
    check_overrides(chosen)  # a bad override: one line here, before a process starts
    directory = run_dir_of(chosen)
    if directory is None:
        raise MTError("mt.train: the run directory cannot be told from these overrides; give hydra.run.dir=PATH")
    _mt_train("mt.train", list(overrides), quiet, processes)
    return Run(Path(directory).absolute())  # the child ran here too: the same directory


def sweep(*overrides: str, jobs: int = 1, processes: int = 1, quiet: bool = False) -> list[Run]:
    """Train a sweep as `mt-train -m *overrides` does (`mt.sweep("train.lr=5e-4,1e-3", "model.dropout=0.1,0.3")`:
    one run per combination, mt/cli/sweep.py) and return its runs, in Hydra's order; as mt.train otherwise.
    jobs=N: N runs at a time, each with a GPU or cores of its own (`mt-train -m --jobs N`,
    mt/cli/parallel_sweep.py); processes=N: each run on N processes, one run after another (as mt.train).
    The runs side by side: sweep.json in the folder of the first's (`runs[0].dir.parent`)."""
    from mt.cli.sweep import Sweep
    from mt.config.schema import check_overrides, run_dir_of

    plan = Sweep.parse(_chosen("mt.sweep", overrides))
    folder = run_dir_of(list(plan.shared), sweep=True)
    if folder is None:
        raise MTError("mt.sweep: the sweep's folder cannot be told from these overrides; give hydra.sweep.dir=PATH")
    for job in plan.jobs():
        check_overrides(job)
    _count("mt.sweep", "jobs", jobs)
    _count("mt.sweep", "processes", processes)
    if jobs > 1 and processes > 1:
        raise MTError("mt.sweep: jobs (runs side by side) or processes (each run on several), not both")
    _mt_train("mt.sweep", ["-m", "--jobs", str(jobs), *overrides], quiet, processes)
    return [Run(Path(folder).absolute() / plan.run_name(job)) for job in plan.jobs()]


def _chosen(caller: str, overrides: tuple) -> list[str]:
    """The overrides with the preset mt-train would choose for this machine; a non-override refused."""
    from mt.cli.hydra_task import choose_experiment
    from mt.config.schema import register_configs

    bad = [o for o in overrides if not isinstance(o, str) or o.startswith("-") or "=" not in o and o[:1] != "~"]
    if bad:
        raise MTError(f"{caller} takes overrides as mt-train does, 'key=value' strings; got {bad[0]!r}")
    import torch

    from mt.fastpath.cpu_process import native_bf16

    register_configs()
    return choose_experiment(list(overrides), torch.cuda.is_available(), native_bf16())[0]


def _count(caller: str, name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise MTError(f"{caller}: {name}={value!r}, a number of {name}, 1 or more")


def _mt_train(caller: str, args: list[str], quiet: bool, processes: int = 1) -> None:
    """Run `python -m mt.cli.train args` here (under torchrun with several processes), its output shown; its
    failure as mt.train's exceptions."""
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)] * (processes > 1)
    status, tail = _run_showing_output([sys.executable, *torchrun, "-m", "mt.cli.train", *args], quiet)
    if status == 0:
        return
    stopped = next((line for line in reversed(tail) if "run the same command again" in line), None)
    if status == 130 or stopped:  # torchrun, stopped, exits with a status of its own
        stopped = stopped or "interrupted"
        raise Interrupted(stopped.split(" - ", 1)[-1].replace("run the same command", f"call {caller} the same way"))
    said = said_error(tail)
    if said and (status == 2 or processes > 1):
        raise MTError(said)
    raise MTError(f"mt-train stopped with exit status {status}; its last lines:\n" + "\n".join(tail[-10:]))


def _run_showing_output(command: list[str], quiet: bool) -> tuple[int, list[str]]:
    """Run command with its output (stdout and stderr, progress bars too) copied to sys.stdout, Ctrl-C here
    passed on to it (it finishes its update, saves last.pt and exits; twice: it stops at once). Returns its
    exit status and its last lines."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # its own session: a terminal's Ctrl-C reaches this process only, which passes it on once
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    in_main_thread = threading.current_thread() is threading.main_thread()  # where signal handlers can be set
    previous = signal.signal(signal.SIGINT, lambda *_: process.send_signal(signal.SIGINT)) if in_main_thread else None
    tail, pending = [], b""
    try:
        while chunk := os.read(process.stdout.fileno(), 65536):
            if not quiet:
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
            lines = (pending + chunk).replace(b"\r", b"\n").split(b"\n")
            pending = lines.pop()
            tail = _kept(tail, [line.decode("utf-8", errors="replace") for line in lines if line.strip()])
        return process.wait(), tail + [pending.decode("utf-8", errors="replace")] * bool(pending.strip())
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
        process.stdout.close()
        if process.poll() is None:  # this process is leaving for another reason: do not leave it training
            process.terminate()
            process.wait()


def _kept(tail: list[str], lines: list[str]) -> list[str]:
    """The last TAIL lines, and before them the last error line, which torchrun's report of a failed process
    (scores of lines) pushes out of the tail."""
    errors = [line for line in tail + lines if said_error([line])]
    kept = (tail + lines)[-TAIL:]
    return kept if not errors or errors[-1] in kept else [errors[-1], *kept]
