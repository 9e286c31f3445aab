"""Where decoding spends its time, fp32 beside bf16: torch.profiler over greedy search of a checkpoint
(how the cause of slow bf16 decoding under autocast on a GPU was found: docs/benchmarks.md, GPU decoding).

    python scripts/profile_decode.py --checkpoint CKPT --src test2016.de --device cuda --lines 200
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from mt.data.lines import read_lines
from mt.decoding.translator import DecodeSettings, Translator
from mt.inference import load_for_inference


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--rows", type=int, default=20, help="ops shown per table")
    args = p.parse_args()
    model, tokenizer, cfg = load_for_inference([args.checkpoint])
    sources = read_lines(args.src)[: args.lines]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    for precision in ("fp32", "bf16"):
        settings = DecodeSettings.from_config(cfg.decode, beam=args.beam, precision=precision)
        translator = Translator(model, tokenizer, settings, args.device)
        translator.translate_nbest(sources[:20])  # warm-up
        with profile(activities=activities) as prof:
            translator.translate_nbest(sources)
        key = "cuda_time_total" if args.device == "cuda" else "cpu_time_total"
        print(f"\n==== {precision}, beam {args.beam}, {len(sources)} lines on {args.device}: by {key}")
        print(prof.key_averages().table(sort_by=key, row_limit=args.rows))
        print(f"==== {precision}: by self CPU time")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
