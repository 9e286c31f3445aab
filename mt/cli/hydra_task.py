"""What the two Hydra commands (mt-train, mt-tokenizer) share: their start, the run directory Hydra
chose, and a user error as one line from inside a Hydra task (where it must reach Hydra's log too)."""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from mt.cli.parallel_sweep import SWEEP_RUN, run_parallel, take_jobs_flag, visible_gpus
from mt.cli.sweep import MULTIRUN_FLAGS, Sweep
from mt.config.model import with_defaults
from mt.config.schema import check_overrides, fine_tune, register_configs, run_dir_of
from mt.decoding.settings import check_decode_section
from mt.errors import Interrupted, MTError, debug_enabled, take_debug_flag

log = logging.getLogger(__name__)


# Said in the run's first log lines when the preset was chosen for the machine (no experiment= given).
CHOSEN: list[str] = []

GPU_PRESET, CPU_PRESET, FP32_CPU_PRESET = "multi30k_base", "multi30k_cpu", "multi30k_cpu_fp32"


# The CPU presets' forms for a CPU without native bf16, where a bf16 preset would train in fp32 at a sixth of
# its tokens per second: sized for fp32 (the smoke form keeps smoke's name, so its run directory too).
FP32_FORMS = {"smoke": "smoke_fp32", CPU_PRESET: FP32_CPU_PRESET}


def choose_experiment(argv: list[str], cuda: bool, native_bf16: bool = True) -> tuple[list[str], str | None]:
    """With no experiment= among the overrides: the paper's base model where there is a CUDA GPU (and
    train.device is not cpu), else a CPU preset that ends by itself within the hour on 2 cores: the bf16
    one where the CPU multiplies bf16 natively, else its fp32 form, sized for the fewer updates fp32 makes.
    A bf16 CPU preset named on such a CPU becomes its fp32 form too, unless train.precision is given.
    Returns the overrides to use and what to tell the user (None: the user chose)."""
    on_gpu = cuda and "train.device=cpu" not in argv
    if any(a.startswith("-") for a in argv):
        return argv, None
    if any(arg.lstrip("+~").split("=")[0] == "experiment" for arg in argv):
        if on_gpu or native_bf16 or any(arg.startswith("train.precision=") for arg in argv):
            return argv, None
        return fp32_form(argv)
    if on_gpu:
        preset, other = GPU_PRESET, CPU_PRESET if native_bf16 else FP32_CPU_PRESET
        why = "a CUDA GPU is here: the paper's 6+6 base model, under 3 min on an H100"
    elif native_bf16:
        preset, other = CPU_PRESET, GPU_PRESET
        why = (
            "no CUDA GPU here: the CPU preset (a 3+3 Transformer, d_model 256, bf16), which ends by itself "
            "after ~57 min on a 2-core CPU with test2016 ~43 BLEU"
        )
    else:
        preset, other = FP32_CPU_PRESET, GPU_PRESET
        why = (
            "no CUDA GPU and no native bf16 on this CPU: the CPU preset in fp32 (a 3+3 Transformer, d_model 192), "
            "which ends by itself after ~62 min on a 2-core CPU with test2016 ~42 BLEU"
        )
    return [f"experiment={preset}", *argv], (
        f'experiment={preset} ({why}); for the other, add experiment={other} (make train ARGS="experiment={other}")'
    )


def fp32_form(argv: list[str]) -> tuple[list[str], str | None]:
    """argv with experiment=X replaced by X's fp32 form if it has one (each of a sweep's X,Y too), and the
    line that says so."""
    named = next((arg.split("=", 1)[1] for arg in argv if arg.startswith("experiment=")), None)
    forms = [FP32_FORMS.get(name, name) for name in (named or "").split(",")]
    if named is None or forms == named.split(","):
        return argv, None
    form = ",".join(forms)
    used = [f"experiment={form}" if arg == f"experiment={named}" else arg for arg in argv]
    whose, what = ("their", "fp32 forms where they have one") if len(forms) > 1 else (f"{named}'s", "fp32 form")
    return used, (
        f"experiment={named}: this CPU has no native bf16 (AVX512-BF16, AMX), where bf16 runs many times slower "
        f"than fp32, so it trains {whose} {what}, experiment={form} (a narrower model, smaller batches); "
        f"to train {named} itself in fp32, add train.precision=fp32"
    )


def refuse_unwritable(directory: Path) -> None:
    """One line now if the run directory cannot be made, rather than a traceback when Hydra makes it."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise MTError(f"run directory {directory}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK):
        raise MTError(f"run directory {directory}: {existing} is not writable")


def start(hydra_main, after_sweep=None, module: str | None = None) -> None:
    """Take --debug, register the schema, choose the preset for the machine when none is given, refuse a bad
    override in one line, refuse a run directory that holds another run before Hydra writes its own files
    there, then run the Hydra task. With -m, a sweep (mt/cli/sweep.py), each of its runs checked so first;
    after_sweep(folder, config of its first run) then reports on it. With --jobs N as well (module: the
    task's, as `python -m` runs it), N of its runs at a time, each in a process of its own
    (mt/cli/parallel_sweep.py)."""
    take_debug_flag(sys.argv)
    register_configs()
    import torch  # here: --help answers without it

    from mt.fastpath.cpu_process import native_bf16

    if SWEEP_RUN in os.environ:  # one run of a sweep whose runs train side by side, checked by its parent
        chosen = os.environ.pop(SWEEP_RUN)
        CHOSEN[:] = [chosen] if chosen else []
        hydra_main()
        return
    argv = sys.argv[1:]
    sweeping = any(arg in MULTIRUN_FLAGS for arg in argv)
    if sweeping:
        argv = [arg for arg in argv if arg not in MULTIRUN_FLAGS]
    argv, jobs = take_jobs_flag(argv)
    if jobs > 1:
        refuse_jobs(sweeping, module)
    argv, message = choose_experiment(argv, torch.cuda.is_available(), native_bf16())
    CHOSEN[:] = [message] if message else []
    if not sweeping or any(arg.startswith("-") for arg in argv):  # a plain run, or Hydra's own flags besides -m
        sys.argv[1:] = ["--multirun", *argv] if sweeping else argv
        check_run(argv)
        hydra_main()
        return
    sweep = Sweep.parse(argv)
    sweep_dir = run_dir_of(list(sweep.shared), sweep=True)
    if sweep_dir is None:
        raise MTError("mt-train -m: the sweep's folder cannot be told from these overrides; give hydra.sweep.dir=PATH")
    sweep_dir = Path(sweep_dir)
    checked = [check_run(job, str(sweep_dir / sweep.run_name(job))) for job in sweep.jobs()]
    failed = []
    if jobs > 1:
        runs = [(sweep.run_name(job), job) for job in sweep.jobs()]
        gpus = visible_gpus() if torch.cuda.is_available() and checked[0].train.device != "cpu" else None
        failed = run_parallel(module, runs, sweep_dir, jobs, gpus, message or "")
    else:
        sys.argv[1:] = ["--multirun", *argv, sweep.naming_override()]
        hydra_main()
        from mt.training.distributed import leave_group  # here: it imports torch.distributed

        leave_group()
    if after_sweep is not None and int(os.environ.get("RANK", "0")) == 0:  # under torchrun: rank 0 speaks
        after_sweep(sweep_dir, checked[0])
    if failed:
        raise MTError(f"{len(failed)} of the sweep's {len(checked)} runs failed: {', '.join(failed)} (see above)")


def refuse_jobs(sweeping: bool, module: str | None) -> None:
    """--jobs N: for mt-train's sweeps, in one process (several processes that train one run are torchrun's)."""
    if not sweeping:
        raise MTError("--jobs N trains a sweep's runs N at a time: give -m (a sweep) too")
    if module is None:
        raise MTError("--jobs: only mt-train's sweeps train their runs side by side")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise MTError("--jobs: not under torchrun, where every process trains a share of one run")


def check_run(argv: list[str], directory: str | None = None) -> DictConfig | None:
    """One line now for a bad override, or a run directory (default: the one Hydra will use) that cannot be
    made or holds another run. Returns the config these overrides compose (None: Hydra's flags are given)."""
    cfg = check_overrides(argv)
    if cfg is None:
        return None
    check_decoding(cfg)
    if fine_tune(cfg):
        from mt.training.finetune import inherit_parent

        inherit_parent(cfg, argv)
    directory = directory or run_dir_of(argv)
    if directory is not None:
        from mt.data.prepare import refuse_another_run  # here: it imports torch, --help does not come here

        refuse_unwritable(Path(directory))
        refuse_another_run(cfg, Path(directory))
    return cfg


def check_decoding(cfg: DictConfig) -> None:
    """The decode section as translate and mt-serve will read it from final.pt, and the BLEU tokenization
    validation will score with, checked before the run trains."""
    from mt.metrics import check_bleu_tokenize  # here: sacreBLEU is not needed for --help

    check_decode_section(cfg.decode)
    check_bleu_tokenize(cfg.decode.bleu_tokenize)


def setup_run(cfg: DictConfig) -> None:
    """First thing inside a Hydra task: say which preset was chosen for the machine, take a fine-tune's
    model and tokenizer settings from its parent (train.init_from), and write out the model's defaults."""
    for message in CHOSEN:
        log.info("%s", message)
    check_decoding(cfg)  # check_run did, unless Hydra's own flags were given (it checks nothing then)
    if fine_tune(cfg):
        from mt.training.finetune import inherit_parent

        inherit_parent(cfg, list(HydraConfig.get().overrides.task))
    for key, value in with_defaults(cfg.model).items():
        cfg.model[key] = value


def in_sweep() -> bool:
    """Inside a Hydra task: whether it is one run of a sweep (-m)."""
    from hydra.types import RunMode

    return HydraConfig.get().mode == RunMode.MULTIRUN


def ended_as_configured(cfg: DictConfig, out_dir: Path) -> bool:
    """In a sweep: whether this run has ended (checkpoints/final.pt) with just this config, so that running
    the sweep again has nothing to do for it (a plain run, run again, tests its model again)."""
    if not in_sweep() or not (out_dir / "checkpoints" / "final.pt").is_file():
        return False
    saved = out_dir / "config.yaml"
    return saved.is_file() and saved.read_text(encoding="utf-8") == OmegaConf.to_yaml(cfg, resolve=True)


def run_dir() -> Path:
    """Hydra's output directory for this run (hydra.run.dir)."""
    return Path(HydraConfig.get().runtime.output_dir)


def exit_on_user_error(task):
    """Inside a Hydra task: an MTError becomes one line on stderr and exit status 2."""

    @functools.wraps(task)  # keeps the task's module: Hydra names the job (and its log file) after it
    def wrapper(cfg: DictConfig):
        try:
            return task(cfg)
        except Interrupted as stop:
            log.warning("%s", stop)
            raise SystemExit(130) from None
        except MTError as err:
            if debug_enabled():
                raise
            log.error("error: %s", err)
            raise SystemExit(2) from None

    return wrapper
