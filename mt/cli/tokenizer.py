"""mt-tokenizer (`make tokenizer`): load and check a run's corpora and train (or reuse) its sentencepiece
model, the first step of every training run, alone."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from mt.cli.hydra_task import exit_on_user_error, run_dir, setup_run, start
from mt.config.schema import CONFIG_DIR
from mt.data.prepare import prepare
from mt.errors import report_errors
from mt.training.run_lock import RunDirLock


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
@exit_on_user_error
def hydra_main(cfg: DictConfig) -> None:
    """Train (or reuse) the tokenizer of a run, nothing else."""
    setup_run(cfg)
    with RunDirLock(run_dir()):
        prepare(cfg, run_dir())


@report_errors
def main() -> None:
    """mt-tokenizer (through mt.cli.commands, which answers --help first)."""
    start(hydra_main)


if __name__ == "__main__":
    main()
