"""The console scripts' entry points. They parse their arguments (parsers.py) before importing torch or
the model, so that `--help` (and a usage error) answers at once; the work lives in the modules beside this
one (translate, evaluate, score, train, tokenizer, serve, info) and in mt.export.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from mt.cli.parsers import evaluate_parser, export_parser, info_parser, score_parser, serve_parser, translate_parser
from mt.errors import MTError, enable_debug, report_errors, take_debug_flag, warnings_as_lines
from mt.hub import local_model

# Hydra's flags that print and exit before any task runs (help, the composed config, search path).
HYDRA_INFO_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve", "-p", "--package")


def parsed(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments; --debug turns tracebacks on for the rest of the command (report_errors reads it). A
    model named on the Hub (hf:OWNER/NAME) is downloaded, or found in the cache, and named by its folder."""
    args = parser.parse_args(argv)
    if args.debug:
        enable_debug()
    args.hub_names = {}  # a Hub model's folder -> its name, for what a command shows of it
    if getattr(args, "checkpoint", None):
        args.checkpoint = [hub_resolved(name, args.hub_names) for name in args.checkpoint]
    if getattr(args, "export", None):
        args.export = hub_resolved(args.export, args.hub_names)
    return args


def hub_resolved(name: str, hub_names: dict) -> str:
    """local_model(name), its Hub name kept in hub_names where it had one."""
    folder = local_model(name)
    if folder != name:
        hub_names[folder] = name
    return folder


@report_errors
def serve(argv: list[str] | None = None) -> None:
    """mt-serve (mt.cli.serve)."""
    args = parsed(serve_parser(), argv)
    from mt.cli.serve import run

    run(args)


@report_errors
def export(argv: list[str] | None = None) -> None:
    args = parsed(export_parser(), argv)
    warnings_as_lines()
    from mt.export import export as write_export

    out = write_export(args.checkpoint, args.output, args.quantization, args.force)
    print(f"exported to {out} (CTranslate2, {args.quantization}); translate --engine ctranslate2 --checkpoint {out}")


@report_errors
def translate(argv: list[str] | None = None) -> None:
    args = parsed(translate_parser(), argv)
    warnings_as_lines()
    from mt.cli.translate import run

    run(args)


@report_errors
def evaluate(argv: list[str] | None = None) -> None:
    args = parsed(evaluate_parser(), argv)
    warnings_as_lines()
    from mt.cli.evaluate import run

    run(args)


@report_errors
def score(argv: list[str] | None = None) -> None:
    """mt-score (mt.cli.score)."""
    args = parsed(score_parser(), argv)
    warnings_as_lines()
    from mt.cli.score import run

    run(args)


@report_errors
def info(argv: list[str] | None = None) -> None:
    """mt-info (mt.cli.info; with --card, mt.cli.model_card; with --system, mt.cli.system_report)."""
    args = parsed(info_parser(), argv)
    warnings_as_lines()
    if args.system == bool(args.checkpoint):
        raise MTError(
            "mt-info: give checkpoints to describe, or --system (this machine), not both"
            if args.system
            else "mt-info: give a checkpoint, run, export or sweep directory to describe (or --system)"
        )
    if args.system:
        from mt.cli import system_report

        return system_report.run(args)
    from mt.cli import info as described
    from mt.cli import model_card

    (model_card if args.card else described).run(args)


@report_errors
def train() -> None:
    """mt-train: Hydra overrides in, a trained model out (mt.cli.train)."""
    _hydra_command("mt.cli.train")


@report_errors
def tokenizer() -> None:
    """mt-tokenizer: train (or check) the run's sentencepiece model alone, and report on its corpora
    (mt.cli.tokenizer)."""
    _hydra_command("mt.cli.tokenizer")


def _hydra_command(module: str) -> None:
    """Hydra's info flags answered from the configs alone; anything else runs module.main()."""
    take_debug_flag(sys.argv)
    if any(arg in HYDRA_INFO_FLAGS for arg in sys.argv[1:]):
        _hydra_info(module)
    else:
        importlib.import_module(module).main()


def _hydra_info(module: str) -> None:
    """Hydra prints and exits before the task runs."""
    import hydra

    from mt.config.schema import CONFIG_DIR, register_configs

    register_configs()

    def task(cfg) -> None:  # not reached: each info flag exits first
        raise SystemExit(0)

    task.__module__ = module  # Hydra names the app after the task's module
    hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")(task)()
