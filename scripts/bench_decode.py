"""Decoding speed and quality of a checkpoint: sentences/s, target tokens/s and BLEU for greedy and beam
search in fp32 and bf16, batched by tokens, plus `translate` start-up time on one sentence. On CUDA each
also with decode.cuda_graphs (search in fixed slots, replayed steps), with the share of lines identical
to the search without it.

    .venv/bin/python scripts/bench_decode.py --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt \\
        --src data/multi30k/test2016.de --ref data/multi30k/test2016.en
Prints one JSON object per measurement, then a table. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch

from mt.data.sources import read_lines
from mt.decoding.translator import DecodeSettings, Translator
from mt.fastpath import tune_process
from mt.inference import load_for_inference
from mt.metrics import score


def startup_seconds(checkpoint: str, sentence: str, device: str) -> float:
    """Wall time of a whole `translate` process on one sentence."""
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from mt.cli.commands import translate; translate()",
            "-c",
            checkpoint,
            "--beam",
            "1",
            "-q",
            "--device",
            device,
        ],
        input=sentence + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref")
    p.add_argument("--beams", nargs="+", type=int, default=[1, 5])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--batch-tokens", type=int, default=0, help="default: the checkpoint's decode.batch_tokens")
    p.add_argument("--repeats", type=int, default=3, help="best of N runs (timings on shared machines are noisy)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--cuda-graphs",
        choices=["off", "on", "both"],
        help="decode.cuda_graphs: off, on, or each search both ways (default: both on CUDA, off on a CPU)",
    )
    p.add_argument("--json", action="store_true", help="JSON lines only, no table")
    args = p.parse_args()
    graphs_choice = args.cuda_graphs or ("both" if args.device == "cuda" else "off")
    graphs = {"off": [False], "on": [True], "both": [False, True]}[graphs_choice]

    tune_process(torch.device(args.device), training=False)  # as translate does
    model, tokenizer, cfg = load_for_inference([args.checkpoint])
    sources = read_lines(args.src)
    references = read_lines(args.ref) if args.ref else None
    batch_tokens = args.batch_tokens or cfg.decode.batch_tokens
    env = {
        "bench": "env",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "sentences": len(sources),
        "batch_tokens": batch_tokens,
    }
    print(json.dumps(env), flush=True)
    rows = []
    for precision in args.precisions:
        warm_up = DecodeSettings.from_config(
            cfg.decode, beam=max(args.beams), batch_tokens=batch_tokens, precision=precision
        )
        Translator(model, tokenizer, warm_up, args.device).translate_nbest(sources[:64])
        for beam in args.beams:
            plain = None  # the translations without cuda_graphs, to compare with
            for cuda_graphs in graphs:
                settings = DecodeSettings.from_config(
                    cfg.decode, beam=beam, batch_tokens=batch_tokens, precision=precision, cuda_graphs=cuda_graphs
                )
                translator = Translator(model, tokenizer, settings, args.device)
                translator.translate_nbest(sources[:64])  # capture this setting's first shapes before timing
                best = float("inf")
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    results = translator.translate_nbest(sources)
                    best = min(best, time.perf_counter() - start)
                hyps = [r[0].text for r in results]
                tgt_tokens = sum(len(r[0].tgt_pieces) for r in results)
                row = {
                    "bench": "decode",
                    "precision": precision,
                    "beam": beam,
                    "cuda_graphs": cuda_graphs,
                    "sentences_per_s": round(len(sources) / best, 1),
                    "tgt_tokens_per_s": round(tgt_tokens / best),
                    "seconds": round(best, 2),
                }
                if references:
                    row["bleu"] = score(hyps, references).bleu
                if plain is None:
                    plain = hyps
                else:
                    row["same_lines"] = round(sum(a == b for a, b in zip(hyps, plain)) / len(hyps), 4)
                rows.append(row)
                print(json.dumps(row), flush=True)
    startup = startup_seconds(args.checkpoint, sources[0], args.device)
    print(json.dumps({"bench": "startup", "seconds": round(startup, 2)}), flush=True)
    if args.json:
        return

    print_table(
        rows,
        startup,
        f"decoding {len(sources)} sentences on {args.device}, batches of {batch_tokens} tokens, "
        f"{env['threads']} threads",
    )


def print_table(rows: list[dict], startup: float, title: str) -> None:
    """The decode rows as a table (also used by bench.py)."""
    print(f"\n{title}")
    print(f"{'precision':9} {'beam':>4} {'graphs':>6} {'sent/s':>8} {'tgt tok/s':>10} {'BLEU':>6} {'same':>6}")
    for r in rows:
        print(
            f"{r['precision']:9} {r['beam']:>4} {'on' if r.get('cuda_graphs') else 'off':>6} "
            f"{r['sentences_per_s']:>8} {r['tgt_tokens_per_s']:>10} {r.get('bleu', '-'):>6} "
            f"{r.get('same_lines', '-'):>6}"
        )
    print(f"translate start-up on one sentence: {startup:.2f} s")


if __name__ == "__main__":
    main()
