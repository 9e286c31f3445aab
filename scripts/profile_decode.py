"""Where decoding spends its time: torch.profiler over the search of a checkpoint, per precision, with and
without fixed slots (decode.cuda_graphs). Each form prints its wall time beside the time its ops took on the
host and on the device (a device busy for less than the wall time waits for the host), then its op table.
How the cause of slow bf16 decoding under autocast on a GPU was found (docs/benchmarks.md, GPU decoding).

    python scripts/profile_decode.py --checkpoint CKPT --src test2016.de --device cuda --lines 1000 --beam 5
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from mt.data.lines import read_lines
from mt.decoding.translator import DecodeSettings, Translator
from mt.fastpath import tune_process
from mt.inference import load_for_inference


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--cuda-graphs", choices=["off", "on", "both"], default="off", help="decode.cuda_graphs")
    p.add_argument("--rows", type=int, default=20, help="ops shown per table")
    args = p.parse_args()
    device = torch.device(args.device)
    tune_process(device, training=False)  # as translate does
    model, tokenizer, cfg = load_for_inference([args.checkpoint])
    sources = read_lines(args.src)[: args.lines]
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for precision in args.precisions:
        for graphs in {"off": [False], "on": [True], "both": [False, True]}[args.cuda_graphs]:
            settings = DecodeSettings.from_config(cfg.decode, beam=args.beam, precision=precision, cuda_graphs=graphs)
            translator = Translator(model, tokenizer, settings, device)
            translator.translate_nbest(sources)  # warm-up: every batch shape met (and captured) once
            sync()
            start = time.perf_counter()
            translator.translate_nbest(sources)
            sync()
            wall = time.perf_counter() - start
            with profile(activities=activities) as prof:
                translator.translate_nbest(sources)
                sync()
            ops = prof.key_averages()
            host = sum(op.self_cpu_time_total for op in ops) / 1e3
            busy = sum(op.self_device_time_total for op in ops) / 1e3 if cuda else float("nan")
            form = f"{precision}, beam {args.beam}, fixed slots {'on' if graphs else 'off'}"
            print(f"\n==== {form}, {len(sources)} lines on {device}: {wall * 1e3:.0f} ms wall unprofiled; "
                  f"ops {host:.0f} ms on the host, {busy:.0f} ms on the device (profiled)")  # fmt: skip
            key = "self_device_time_total" if cuda else "self_cpu_time_total"
            print(ops.table(sort_by=key, row_limit=args.rows, max_name_column_width=70))


if __name__ == "__main__":
    main()
