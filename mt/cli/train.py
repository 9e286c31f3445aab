"""mt-train (`make train`): data -> tokenizer -> model -> training -> test-set BLEU, all in one run directory.

    mt-train experiment=smoke                          # or: make train ARGS="experiment=smoke"

Rerunning the same command on the same run directory resumes where it stopped. Under torchrun
(`python -m mt.cli.train`), every process trains its share of each update.
"""

from __future__ import annotations

import contextlib
import logging

import hydra
import torch
from omegaconf import DictConfig

from mt.cli.hydra_task import ended_as_configured, exit_on_user_error, in_sweep, run_dir, setup_run, start
from mt.cli.sweep import report_sweep
from mt.config.schema import CONFIG_DIR
from mt.errors import MTError, report_errors
from mt.fastpath import training_precision, tune_process
from mt.training.distributed import init_from_env, shutdown
from mt.training.run import pick_device, train_and_score
from mt.training.run_lock import RunDirLock

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
@exit_on_user_error
def hydra_main(cfg: DictConfig) -> None:
    """Train a model as configured; rerunning on the same run directory resumes.
    Under torchrun, every process trains on its share of each update; rank 0 writes the files."""
    setup_run(cfg)
    out_dir = run_dir()
    dist = init_from_env(use_cuda=cfg.train.device != "cpu" and torch.cuda.is_available())
    if not dist.is_main:
        logging.getLogger().setLevel(logging.WARNING)  # one voice: rank 0's
    device = pick_device(cfg.train.device, dist)
    if cfg.train.precision == "fp16" and device.type != "cuda":
        raise MTError("train.precision=fp16 needs CUDA; on CPU use bf16 or fp32")
    precision = training_precision(device, cfg.train.precision)
    if precision != cfg.train.precision:
        log.warning(
            "train.precision=%s: this CPU has no native bf16 (AVX512-BF16, AMX), where bf16 runs many times "
            "slower than fp32: training in %s",
            cfg.train.precision,
            precision,
        )
        cfg.train.precision = precision
    if ended_as_configured(cfg, out_dir):
        log.info("%s: this run has ended as configured (checkpoints/final.pt): nothing to redo", out_dir)
        shutdown(dist, True, keep=in_sweep())
        return
    tune_process(device, training=True)
    if cfg.train.threads:  # the run's own choice, over the default tune_process leaves
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    finished = False
    try:
        with RunDirLock(out_dir) if dist.is_main else contextlib.nullcontext():  # one process per run directory
            train_and_score(cfg, out_dir, dist, device)
        finished = True
    finally:
        shutdown(dist, finished, keep=in_sweep())


@report_errors
def main() -> None:
    """mt-train (through mt.cli.commands, which answers --help first) and `python -m mt.cli.train` (torchrun)."""
    start(hydra_main, after_sweep=report_sweep, module="mt.cli.train")


if __name__ == "__main__":
    main()
