"""`translate` with PyTorch (fp32, bf16) beside its CTranslate2 export (fp32, int8): BLEU and sentences/s,
greedy and beam 5, decoding alone (in this process, best of --repeats) and whole `translate` runs
(start-up included, one run each).

    .venv/bin/python scripts/bench_export.py --checkpoint runs/multi30k.de-en/multi30k_cpu/checkpoints/final.pt \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en

It writes the fp32 and int8 exports under --workdir (default /tmp/bench_export).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from mt.data.lines import read_lines
from mt.decoding.ctranslate2_translator import CTranslate2Translator, load_export
from mt.decoding.translator import DecodeSettings, Translator
from mt.export import export
from mt.fastpath import tune_process
from mt.inference import load_for_inference
from mt.metrics import score

BIN = Path(sys.executable).parent


def decode_seconds(args, engine: str, dtype: str, beam: int, folder: str) -> tuple[float, list[str]]:
    """Best-of-repeats seconds to translate args.src, and the translations. Run in a process of its own:
    an engine that ran before in the same process (torch's OpenMP threads spin after their work) would
    slow the next one down."""
    import torch

    tune_process(torch.device("cpu"), training=False)
    sources = read_lines(args.src)
    if engine == "torch":
        model, tokenizer, cfg = load_for_inference([args.checkpoint])
        translator = Translator(model, tokenizer, DecodeSettings.from_config(cfg.decode, beam=beam, precision=dtype))
    else:  # no torch model in this process: building one slowed CTranslate2 2.5x here (both OpenMP pools)
        settings = DecodeSettings.from_config(load_export(folder)[1]["decode"], beam=beam)
        translator = CTranslate2Translator(folder, settings, compute_type=dtype)
    translator.translate_nbest(sources[:50])  # warm-up
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        hyps = [r[0].text for r in translator.translate_nbest(sources)]
        best = min(best, time.perf_counter() - start)
    return best, hyps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--workdir", default="/tmp/bench_export")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--one", nargs=4, metavar=("ENGINE", "DTYPE", "BEAM", "FOLDER"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        engine, dtype, beam, folder = args.one
        seconds, hyps = decode_seconds(args, engine, dtype, int(beam), folder)
        print(json.dumps({"seconds": seconds, "bleu": score(hyps, read_lines(args.ref)).bleu}))
        return

    work = Path(args.workdir)
    exports = {q: export([args.checkpoint], work / q, q, force=True) for q in ("none", "int8")}
    lines = len(read_lines(args.src))
    rows = []
    for engine, dtype in [("torch", "fp32"), ("torch", "bf16"), ("ctranslate2", "fp32"), ("ctranslate2", "int8")]:
        folder = str(exports["int8" if dtype == "int8" else "none"])
        cli = ["-c", args.checkpoint] if engine == "torch" else ["--engine", "ctranslate2", "-c", folder]
        for beam in (1, 5):
            one = [sys.executable, __file__, "--checkpoint", args.checkpoint, "--src", args.src, "--ref", args.ref,
                   "--repeats", str(args.repeats), "--one", engine, dtype, str(beam), folder]  # fmt: skip
            alone = json.loads(subprocess.run(one, check=True, capture_output=True, text=True).stdout)
            start = time.perf_counter()
            subprocess.run([str(BIN / "translate"), *cli, "--dtype", dtype, "--beam", str(beam), "-q", "-i", args.src,
                            "-o", "/dev/null"], check=True)  # fmt: skip
            whole = time.perf_counter() - start
            row = {"engine": engine, "dtype": dtype, "beam": beam, "bleu": alone["bleu"]}
            row["sent_per_s"] = round(lines / alone["seconds"], 1)
            row["sent_per_s_with_startup"] = round(lines / whole, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'engine':12} {'dtype':5} {'beam':>4} {'BLEU':>6} {'sent/s':>8} {'incl. start-up':>15}")
    for r in rows:
        print(f"{r['engine']:12} {r['dtype']:5} {r['beam']:>4} {r['bleu']:>6} {r['sent_per_s']:>8} "
              f"{r['sent_per_s_with_startup']:>15}")  # fmt: skip


if __name__ == "__main__":
    main()
