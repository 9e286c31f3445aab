"""mt-tokenizer (`make tokenizer`): load and check a run's corpora and train (or reuse) its sentencepiece
model, the first step of every training run, alone; then say what the corpora hold, as the model will read
them (mt/data/statistics.py: printed, and written to RUN/data_statistics.json)."""

from __future__ import annotations

import json
import logging

import hydra
from omegaconf import DictConfig

from mt.cli.hydra_task import exit_on_user_error, run_dir, setup_run, start
from mt.config.schema import CONFIG_DIR
from mt.data.prepare import prepare
from mt.data.statistics import advice, corpus_statistics, table
from mt.data.text_files import write_atomically
from mt.errors import report_errors
from mt.training.run_lock import RunDirLock

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
@exit_on_user_error
def hydra_main(cfg: DictConfig) -> None:
    """Train (or reuse) the tokenizer of a run, and report on its corpora; nothing else."""
    setup_run(cfg)
    with RunDirLock(run_dir()):
        prepared = prepare(cfg, run_dir())
        found = corpus_statistics(prepared, cfg.data)
        write_atomically(run_dir() / "data_statistics.json", json.dumps(found, indent=1) + "\n")
    log.info(
        "data statistics (sentencepiece pieces a sentence; ratio: the longer side over the shorter; filters: "
        "an empty side, data.max_len=%d, data.max_len_ratio=%g, which drop training pairs only):\n%s\n(also in %s)",
        cfg.data.max_len,
        cfg.data.max_len_ratio,
        table(found),
        run_dir() / "data_statistics.json",
    )
    for line in advice(found, cfg.data):
        log.info("%s", line)


@report_errors
def main() -> None:
    """mt-tokenizer (through mt.cli.commands, which answers --help first)."""
    start(hydra_main)


if __name__ == "__main__":
    main()
