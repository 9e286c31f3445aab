"""The tokenizer step: load and check the corpora, train (or reuse) sentencepiece in the run directory.

Runs alone as `make tokenizer ARGS=...` (mt-tokenizer), and as the first step of training.
"""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from mt.config.schema import CONFIG_DIR, check_overrides, register_configs, validate
from mt.data.sources import ParallelCorpus, load_split
from mt.data.tokenizer import Tokenizer, build_tokenizer
from mt.errors import Interrupted, MTError, debug_enabled, report_errors, take_debug_flag
from mt.training.run_lock import RunDirLock

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    train: ParallelCorpus | None  # None once encoded (train.py lets the text go)
    valid: ParallelCorpus
    test: ParallelCorpus | None
    tokenizer: Tokenizer


def run_dir() -> Path:
    """Hydra's output directory for this run (hydra.run.dir)."""
    return Path(HydraConfig.get().runtime.output_dir)


def prepare(cfg: DictConfig, out_dir: Path, write_config: bool = True) -> Prepared:
    """Load every split (failing early on bad data) and build the tokenizer."""
    validate(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    if write_config:
        (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
    d = cfg.data
    train = load_split(d, d.train_split)
    valid = load_split(d, d.valid_split)
    test = load_split(d, d.test_split) if d.test_split else None
    log.info(
        "data: train %d, valid %d, test %s pairs (%s -> %s, from %s)",
        len(train),
        len(valid),
        len(test) if test else "-",
        d.src_lang,
        d.tgt_lang,
        train.origin,
    )
    tokenizer = build_tokenizer(cfg.tokenizer, train, out_dir / "tokenizer")
    return Prepared(train, valid, test, tokenizer)


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


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
@exit_on_user_error
def hydra_main(cfg: DictConfig) -> None:
    """Train (or reuse) the tokenizer of a run, nothing else."""
    with RunDirLock(run_dir()):
        prepare(cfg, run_dir())


@report_errors
def main() -> None:
    """mt-tokenizer (through mt.cli.commands, which answers --help first) and `python -m mt.data.prepare`."""
    take_debug_flag(sys.argv)
    register_configs()
    check_overrides(sys.argv[1:])
    hydra_main()


if __name__ == "__main__":
    main()
