"""mt-info --system: what this machine gives a run, for choosing settings or reporting a problem: the
versions of the packages that decide results and speed, the devices, the cores and threads a run uses,
the precision it trains and decodes in, and the preset `make train` picks here, with why."""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata

import torch

import mt
from mt.cli.hydra_task import choose_experiment
from mt.fastpath import decode_precision, training_precision
from mt.fastpath.cpu_process import cpu_model, native_bf16
from mt.host import cpu_cores, cpu_quota, usable_cores

# The distributions whose versions a report names: those results and speed depend on, then the optional ones.
PACKAGES = ("torch", "sentencepiece", "sacrebleu", "hydra-core", "datasets", "tensorboard", "numpy")
OPTIONAL = {"ctranslate2": "mt-export and --engine ctranslate2", "fastapi": "mt-serve", "uvicorn": "mt-serve"}


def version_of(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def system_report() -> dict:
    """The machine as a run here would use it (JSON-ready)."""
    cuda = torch.cuda.is_available()
    gpus = []
    for index in range(torch.cuda.device_count() if cuda else 0):
        props = torch.cuda.get_device_properties(index)
        gpus.append(
            {
                "name": props.name,
                "memory_gib": round(props.total_memory / 2**30, 1),
                "compute_capability": f"{props.major}.{props.minor}",
                "bf16": props.major >= 8,
            }
        )
    bf16, cores = native_bf16(), cpu_cores()
    overrides, why = choose_experiment([], cuda, bf16)
    device = torch.device("cuda" if cuda else "cpu")
    return {
        "mt": mt.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": {name: version_of(name) for name in (*PACKAGES, *OPTIONAL)},
        "cpu": {
            "model": cpu_model(),
            "cores_in_affinity": len(usable_cores()),
            "cpu_quota": cpu_quota(),
            "cores_used": cores,
            "torch_threads": min(torch.get_num_threads(), cores),
            "native_bf16": bf16,
            "capability": torch.backends.cpu.get_cpu_capability(),
        },
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "make_train": {"preset": overrides[0].split("=", 1)[1], "why": why},
        "bf16_training_runs_in": training_precision(device, "bf16"),
        "bf16_model_decodes_in": decode_precision(device, "bf16"),
    }


def as_text(report: dict) -> str:
    packages = report["packages"]
    present = ", ".join(f"{name} {packages[name]}" for name in PACKAGES if packages[name])
    missing = [name for name in PACKAGES if not packages[name]]
    optional = [
        f"{name} {packages[name]}" if packages[name] else f"{name}: not installed ({use})"
        for name, use in OPTIONAL.items()
    ]
    cpu = report["cpu"]
    quota = "no CPU quota" if cpu["cpu_quota"] is None else f"its CPU time capped at {plural(cpu['cpu_quota'], 'CPU')}"
    bf16 = "bf16 in hardware" if cpu["native_bf16"] else "no native bf16 (bf16 training runs in fp32)"
    if report["gpus"]:
        gpus = [f"{g['name']}, {g['memory_gib']} GiB, compute {g['compute_capability']}" for g in report["gpus"]]
        gpu_line = f"{len(gpus)} CUDA: " + "; ".join(gpus) + f" (CUDA {report['cuda']})"
    else:
        gpu_line = "none" + ("" if report["cuda"] else " (this torch is built without CUDA)")
    lines = [
        f"mt {report['mt']}, Python {report['python']}, {report['platform']}",
        f"packages    {present}" + (f"; missing: {', '.join(missing)}" if missing else ""),
        f"optional    {'; '.join(optional)}",
        f"CPU         {cpu['model'] or 'unknown'}: {plural(cpu['cores_in_affinity'], 'core')} usable, {quota}; "
        f"runs use {plural(cpu['torch_threads'], 'thread')}; {bf16} ({cpu['capability']})",
        f"GPU         {gpu_line}",
        f"precision   train.precision=bf16 trains in {report['bf16_training_runs_in']} here; a model trained in bf16 "
        f"decodes in {report['bf16_model_decodes_in']} unless told",
        f"make train  {report['make_train']['why']}",
    ]
    return "\n".join(lines)


def plural(count: float, noun: str) -> str:
    return f"{count:g} {noun}" + ("" if count == 1 else "s")


def run(args) -> None:
    report = system_report()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(as_text(report))
