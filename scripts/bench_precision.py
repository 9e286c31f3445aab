"""bf16 against fp32 (or any two of FORMS) in the real trainer, update by update in one process.

On a shared CPU the speed of identical runs drifts by up to 10% within minutes, so the ratio of two
separate training runs is mostly noise. Here two Trainers (same config, same initial weights, same
batches) alternate updates, so both see the same drift; the order within each pair alternates too.
With --valid, both are validated at the end (loss and BLEU after the same updates); --valid-every N
validates them every N updates as well, so one run shows how the BLEU gap evolves (validation is not timed).

    make bench-precision ARGS="train.max_tokens=2600"
    .venv/bin/python scripts/bench_precision.py --steps 400 --valid experiment=smoke data=files ...
    .venv/bin/python scripts/bench_precision.py --forms bf16w bf16 --steps 150 experiment=multi30k_cpu

Prints one JSON object per line (every --every updates, then the totals). Reports, never asserts.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from mt.config.model import build_model
from mt.config.schema import CONFIG_DIR, register_configs
from mt.data.prepare import encode_splits, prepare
from mt.fastpath import tune_process
from mt.training.trainer import Trainer

FORMS = {  # name: the train settings it trains with
    "bf16": {"precision": "bf16"},
    "fp32": {"precision": "fp32"},
    "bf16w": {"precision": "bf16", "bf16_weights": True},  # forward and backward on a bf16 copy of the weights
}
VALID_KEYS = ("step", "valid_loss", "valid_ppl", "valid_bleu", "valid_chrf")


def make_trainers(overrides: list[str], run: Path, forms: list[str]) -> dict[str, Trainer]:
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    data = prepare(cfg, run)
    train, valid = encode_splits(cfg, data)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, data.tokenizer)
    trainers = {}
    for form in forms:
        pcfg = copy.deepcopy(cfg)
        with open_dict(pcfg):
            pcfg.train.update(FORMS[form])
        trainers[form] = Trainer(
            pcfg, copy.deepcopy(model), data.tokenizer, train, valid, data.valid, run / form, torch.device("cpu")
        )
    return trainers


def validate_both(trainers: dict[str, Trainer]) -> None:
    """One line per form, then the gap: validation loss and BLEU after the same updates."""
    records = {}
    for form, trainer in trainers.items():
        records[form] = trainer.validate(writer=None)
        print(
            json.dumps({"bench": "precision_valid", "precision": form, **{k: records[form][k] for k in VALID_KEYS}}),
            flush=True,
        )
    a, b = trainers
    gap = {k: round(records[a][k] - records[b][k], 4) for k in ("valid_loss", "valid_bleu", "valid_chrf")}
    print(json.dumps({"bench": f"precision_valid_gap_{a}_minus_{b}", "step": records[a]["step"], **gap}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--forms", nargs=2, choices=sorted(FORMS), default=["bf16", "fp32"], help="the two forms timed")
    p.add_argument("--steps", type=int, default=60, help="updates per form")
    p.add_argument("--warmup", type=int, default=5, help="first updates left out of the timing")
    p.add_argument("--every", type=int, default=50, help="print running figures every N updates")
    p.add_argument("--valid", action="store_true", help="validate both models at the end (loss, BLEU)")
    p.add_argument("--valid-every", type=int, default=0, help="also validate both every N updates (0: never)")
    p.add_argument("--run", default="runs/bench_precision", help="folder for the tokenizer and scratch files")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for mt-train")
    args = p.parse_args()
    tune_process(torch.device("cpu"), training=True)
    trainers = make_trainers(args.overrides, Path(args.run), args.forms)
    forms = list(trainers)
    seconds = dict.fromkeys(forms, 0.0)
    tokens = 0
    for update in range(args.steps):
        order = forms if update % 2 == 0 else forms[::-1]
        for form in order:
            start = time.perf_counter()
            stats = trainers[form].train_step()
            if update >= args.warmup:
                seconds[form] += time.perf_counter() - start
        if update >= args.warmup:
            tokens += stats["tgt_tokens"]  # the same batches for both
        done, last = update + 1, update + 1 == args.steps
        if done % args.every == 0 or last:
            row = {"bench": "precision", "updates": done, "timed_tgt_tokens": tokens}
            for form in forms:
                row[f"{form}_tok_per_s"] = round(tokens / max(seconds[form], 1e-9))
            row[f"{forms[0]}_over_{forms[1]}"] = round(seconds[forms[1]] / max(seconds[forms[0]], 1e-9), 3)
            print(json.dumps(row), flush=True)
        if (args.valid and last) or (args.valid_every and done % args.valid_every == 0):
            validate_both(trainers)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"bench": "precision_peak_rss_mib_both_models", "value": round(peak)}), flush=True)


if __name__ == "__main__":
    main()
