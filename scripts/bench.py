"""`make bench`: the figures people compare toolkits by, on the machine it runs on.

Training target tokens/s and peak memory for the smoke (transformer_small) and base presets in fp32
and bf16, decoder step latency, and, given a trained checkpoint, decoding sentences/s and BLEU for
greedy and beam 5 on Multi30k test2016, and scoring its references (mt-score). Each training figure
comes from its own process, so its peak RSS is its own. Prints one JSON object per line as it goes,
then a table; reports, never asserts.

    .venv/bin/python scripts/bench.py [--checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt]
    .venv/bin/python scripts/bench.py --device cuda [--compile]   # on a GPU (make bench ARGS="--device cuda")

On a GPU the training figures are the base model's in bf16 at a WMT-like and a Multi30k batch, beside a
plain nn.Transformer of the same size in the same process (see bench_model.py), with MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch
from bench_decode import print_scoring_table  # scripts/ is on sys.path
from bench_decode import print_table as print_decode_table
from bench_model import print_training_table

HERE = Path(__file__).resolve().parent
PRESET_NAMES = {"small": "smoke (transformer_small)", "base": "base (transformer_base)"}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_json(args: list[str]) -> list[dict]:
    """Run one of the bench scripts; echo and collect its JSON lines (stderr passes through)."""
    result = subprocess.run([sys.executable, *args], stdout=subprocess.PIPE, text=True, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    for row in rows:
        if row.get("bench") != "env":
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--checkpoint",
        default="runs/multi30k.de-en/smoke/checkpoints/final.pt",
        help="a trained checkpoint for the decoding figures (skipped if missing)",
    )
    p.add_argument("--data", default="data/multi30k", help="folder with test2016.de / test2016.en")
    p.add_argument("--presets", nargs="+", default=["small", "base"], choices=list(PRESET_NAMES))
    p.add_argument(
        "--steps", type=int, default=0, help="timed training steps per configuration (default 5 CPU, 20 GPU)"
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--compile", action="store_true", help="GPU: also time the training step under torch.compile")
    args = p.parse_args()
    gpu = args.device == "cuda"

    name = f"cuda: {torch.cuda.get_device_name()}" if gpu else f"cpu: {cpu_name()}"
    env = {
        "bench": "env",
        "device": name,
        "capability": None if gpu else torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    print(json.dumps(env), flush=True)

    model_bench = [str(HERE / "bench_model.py"), "--device", args.device, "--json"]
    model_bench += ["--steps", str(args.steps)] if args.steps else []
    train = []
    if gpu:  # one process: ours and nn.Transformer's side by side
        train = [
            r
            for r in run_json([*model_bench, "--no-decode", *(["--compile"] if args.compile else [])])
            if r["bench"] == "train"
        ]
    else:  # one process per figure, so that each peak RSS is its own
        for preset in args.presets:
            for precision in ("fp32", "bf16"):
                train += [
                    r
                    for r in run_json([*model_bench, "--presets", preset, "--precisions", precision, "--no-decode"])
                    if r["bench"] == "train"
                ]
    steps = [r for r in run_json([*model_bench, "--no-train"]) if r["bench"] == "decode_step"]
    src, ref = Path(args.data) / "test2016.de", Path(args.data) / "test2016.en"
    decode = []
    if Path(args.checkpoint).exists() and src.is_file():
        decode = run_json(
            [
                str(HERE / "bench_decode.py"),
                "--checkpoint",
                args.checkpoint,
                "--src",
                str(src),
                "--ref",
                str(ref),
                "--device",
                args.device,
                "--json",
            ]
        )
    else:
        print(f"# decoding skipped: needs {args.checkpoint} and {src} (train experiment=smoke, see README)", flush=True)

    print(f"\n{env['device']} ({env['capability']}), {env['threads']} threads, torch {env['torch']}")
    if gpu:
        print(
            "\ntraining: forward + backward + Adam; wmt = 780 x 32 tokens, vocab 37k; multi30k = 300 x 28/27, vocab 10k"
        )
        print_training_table(train)
    else:
        print(
            f"\ntraining: forward + backward + Adam, {train[0]['tgt_tokens_per_step']} target tokens/step, vocab 8000"
        )
        print(f"{'preset':26} {'precision':9} {'tgt tok/s':>10} {'ms/step':>9} {'peak RSS MiB':>13}")
        for r in train:
            print(
                f"{PRESET_NAMES[r['preset']]:26} {r['precision']:9} {r['tgt_tokens_per_s']:>10} "
                f"{r['ms_per_step']:>9} {r['peak_rss_mib']:>13}"
            )
    print(f"\ndecoder step, {steps[0]['preset']} preset, batch 32, fp32: with the KV cache vs re-running the prefix")
    print(f"{'prefix':>6} {'cached ms':>10} {'re-run ms':>10}")
    for r in steps:
        print(f"{r['prefix']:>6} {r['cached_ms']:>10} {r['full_rerun_ms']:>10}")
    runs = [r for r in decode if r["bench"] == "decode"]
    if runs:
        startup = next(r["seconds"] for r in decode if r["bench"] == "startup")
        print_decode_table(runs, startup, f"decoding test2016 ({args.checkpoint}), batches by tokens")
        print_scoring_table([r for r in decode if r["bench"] == "score"])


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    main()
