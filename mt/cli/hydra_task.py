"""What the two Hydra commands (mt-train, mt-tokenizer) share: their start, the run directory Hydra
chose, and a user error as one line from inside a Hydra task (where it must reach Hydra's log too)."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from mt.config.schema import check_overrides, register_configs, run_dir_of
from mt.errors import Interrupted, MTError, debug_enabled, take_debug_flag

log = logging.getLogger(__name__)


def start(hydra_main) -> None:
    """Take --debug, register the schema, refuse a bad override in one line, refuse a run directory that holds
    another run before Hydra writes its own files there, then run the Hydra task."""
    take_debug_flag(sys.argv)
    register_configs()
    cfg = check_overrides(sys.argv[1:])
    directory = run_dir_of(sys.argv[1:]) if cfg is not None else None
    if directory is not None:
        from mt.data.prepare import refuse_another_run  # here: it imports torch, --help does not come here

        refuse_another_run(cfg, Path(directory))
    hydra_main()


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
